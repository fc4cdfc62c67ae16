//! Exponential backoff with full jitter: each delay is uniform in `[0, min(max, base * 2^n)]`,
//! so agents that lost the control plane at the same instant come back spread over time.

use std::time::Duration;

/// Backoff state for reconnecting.
#[derive(Debug, Clone)]
pub struct Backoff {
    base: Duration,
    max: Duration,
    attempt: u32,
}

impl Backoff {
    /// Backoff starting at `base` and capped at `max`.
    pub fn new(base: Duration, max: Duration) -> Self {
        Self {
            base: base.max(Duration::from_millis(1)),
            max: max.max(base),
            attempt: 0,
        }
    }

    /// The cap of the next delay (before jitter).
    pub fn ceiling(&self) -> Duration {
        let factor = 1u32.checked_shl(self.attempt.min(20)).unwrap_or(u32::MAX);
        self.base.saturating_mul(factor).min(self.max)
    }

    /// The next delay, drawn uniformly in `[0, ceiling]`, and one more attempt counted.
    pub fn next_delay(&mut self) -> Duration {
        let ceiling = self.ceiling();
        self.attempt = self.attempt.saturating_add(1);
        let r = getrandom::u64().unwrap_or(u64::MAX / 2);
        let fraction = (r >> 11) as f64 / (1u64 << 53) as f64;
        ceiling.mul_f64(fraction)
    }

    /// After a successful connection: start again from `base`.
    pub fn reset(&mut self) {
        self.attempt = 0;
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
}
