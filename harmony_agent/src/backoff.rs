//! Exponential backoff with full jitter: each delay is uniform in `[0, min(max, base * 2^n)]`,
//! so agents that lost the control plane at the same instant come back spread over time.
//!
//! For [`EARLY_WINDOW`] after a working connection ends, the ceiling stays at most
//! [`EARLY_CAP`]: a control plane restarted within seconds (every replica killed at once) sees
//! its agents back within seconds, not after a ceiling that grew while nothing answered. Past
//! the window the ceiling grows to `max`, sparing a control plane that stays down.

use std::time::{Duration, Instant};

/// The largest delay ceiling during [`EARLY_WINDOW`] after a working connection ended.
pub const EARLY_CAP: Duration = Duration::from_secs(4);
/// How long after a working connection ended the ceiling stays at most [`EARLY_CAP`].
pub const EARLY_WINDOW: Duration = Duration::from_secs(60);

/// Backoff state for reconnecting.
#[derive(Debug, Clone)]
pub struct Backoff {
    base: Duration,
    max: Duration,
    attempt: u32,
    /// When the last working connection ended ([`Self::reset`]); `None` before any.
    since_working: Option<Instant>,
}

impl Backoff {
    /// Backoff starting at `base` and capped at `max`.
    pub fn new(base: Duration, max: Duration) -> Self {
        Self {
            base: base.max(Duration::from_millis(1)),
            max: max.max(base),
            attempt: 0,
            since_working: None,
        }
    }

    /// The cap of the next delay (before jitter).
    pub fn ceiling(&self) -> Duration {
        let factor = 1u32.checked_shl(self.attempt.min(20)).unwrap_or(u32::MAX);
        let grown = self.base.saturating_mul(factor).min(self.max);
        match self.since_working {
            Some(t) if t.elapsed() < EARLY_WINDOW => grown.min(EARLY_CAP.max(self.base)),
            _ => grown,
        }
    }

    /// The next delay, drawn uniformly in `[0, ceiling]`, and one more attempt counted.
    pub fn next_delay(&mut self) -> Duration {
        let ceiling = self.ceiling();
        self.attempt = self.attempt.saturating_add(1);
        let r = getrandom::u64().unwrap_or(u64::MAX / 2);
        let fraction = (r >> 11) as f64 / (1u64 << 53) as f64;
        ceiling.mul_f64(fraction)
    }

    /// After a working connection ended: start again from `base`, with the early cap.
    pub fn reset(&mut self) {
        self.attempt = 0;
        self.since_working = Some(Instant::now());
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn delays_are_capped_jittered_and_grow() {
        let mut b = Backoff::new(Duration::from_millis(100), Duration::from_secs(2));
        let ceilings: Vec<u128> = (0..8)
            .map(|_| {
                let c = b.ceiling();
                let d = b.next_delay();
                assert!(d <= c);
                c.as_millis()
            })
            .collect();
        assert_eq!(ceilings, [100, 200, 400, 800, 1600, 2000, 2000, 2000]);
        let mut b = Backoff::new(Duration::from_secs(1), Duration::from_secs(1));
        let draws: Vec<Duration> = (0..50).map(|_| b.next_delay()).collect();
        let (lo, hi) = (draws.iter().min().unwrap(), draws.iter().max().unwrap());
        assert!(
            *hi - *lo > Duration::from_millis(300),
            "{lo:?}..{hi:?}: no jitter"
        );
        b.reset();
        assert_eq!(b.ceiling(), Duration::from_secs(1));
    }

    #[test]
    fn after_a_working_connection_the_ceiling_stays_early_then_grows() {
        let mut b = Backoff::new(Duration::from_secs(1), Duration::from_secs(60));
        // Before any working connection: plain growth.
        let before: Vec<u64> = (0..5)
            .map(|_| {
                let c = b.ceiling().as_secs();
                b.next_delay();
                c
            })
            .collect();
        assert_eq!(before, [1, 2, 4, 8, 16]);
        // A working connection just ended: at most EARLY_CAP for the window.
        b.reset();
        let early: Vec<u64> = (0..8)
            .map(|_| {
                let c = b.ceiling().as_secs();
                b.next_delay();
                c
            })
            .collect();
        assert_eq!(early, [1, 2, 4, 4, 4, 4, 4, 4]);
        // Past the window: the ceiling grows again.
        b.since_working = Instant::now().checked_sub(EARLY_WINDOW + Duration::from_secs(1));
        assert_eq!(b.ceiling(), Duration::from_secs(60));
    }
}
