//! The reconnect storm: when each agent is welcomed again after the control plane restarts,
//! counted per second since the kill, and the histogram printed from those counts.

use std::sync::Mutex;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::{Duration, Instant};

/// Seconds of arrivals kept; later ones land in the last bucket (the wait for recovery is
/// bounded well below this).
const BUCKETS: usize = 600;

/// Reconnects welcomed per second since [`Arrivals::start`].
pub(crate) struct Arrivals {
    since: Mutex<Option<Instant>>,
    buckets: Vec<AtomicUsize>,
}

impl Arrivals {
    /// No start yet: nothing is recorded until [`Arrivals::start`].
    pub(crate) fn new() -> Self {
        Self {
            since: Mutex::new(None),
            buckets: (0..BUCKETS).map(|_| AtomicUsize::new(0)).collect(),
        }
    }

    /// Counts arrivals from now (the instant of the kill).
    pub(crate) fn start(&self) {
        if let Ok(mut since) = self.since.lock() {
            *since = Some(Instant::now());
        }
    }

    /// One agent welcomed again, now.
    pub(crate) fn record(&self) {
        let Some(since) = self.since.lock().ok().and_then(|s| *s) else {
            return;
        };
        let i = (since.elapsed().as_secs() as usize).min(BUCKETS - 1);
        self.buckets[i].fetch_add(1, Ordering::Relaxed);
    }

    /// The counts per second, up to the last non-empty second.
    pub(crate) fn counts(&self) -> Vec<usize> {
        let mut v: Vec<usize> = self
            .buckets
            .iter()
            .map(|b| b.load(Ordering::Relaxed))
            .collect();
        while v.last() == Some(&0) {
            v.pop();
        }
        v
    }
}

/// One line per second: `  3 s |#######            | 1234 (total 5678)`.
pub(crate) fn histogram(counts: &[usize]) -> String {
    let max = counts.iter().copied().max().unwrap_or(0).max(1);
    let mut total = 0;
    let mut out = String::new();
    for (s, n) in counts.iter().enumerate() {
        total += n;
        let bar = "#".repeat((n * 40).div_ceil(max).min(40));
        out.push_str(&format!(
            "{:>4}-{:<4} s |{bar:<40}| {n:>6} (total {total})\n",
            s,
            s + 1
        ));
    }
    out
}

/// Seconds as `12.3 s`.
pub(crate) fn secs(d: Duration) -> String {
    format!("{:.1} s", d.as_secs_f64())
}

/// Why the regions not yet healthy are not: their reasons with the figures taken out (so
/// "heartbeat 31 s late" and "heartbeat 40 s late" count as one), the three most frequent first,
/// with how many each: `142 × disconnected, last heartbeat … ago; …`.
pub(crate) fn why_not_healthy(views: &[harmony::infra::control_plane::RegionStatus]) -> String {
    let mut reasons: std::collections::BTreeMap<String, usize> = Default::default();
    for v in views.iter().filter(|v| !(v.is_healthy() && v.connected)) {
        let mut why: String = v
            .health_reason
            .chars()
            .map(|c| if c.is_ascii_digit() { '#' } else { c })
            .collect();
        if !v.connected {
            why.insert_str(0, "[not connected] ");
        }
        *reasons.entry(why).or_default() += 1;
    }
    let mut by_count: Vec<(String, usize)> = reasons.into_iter().collect();
    by_count.sort_by_key(|r| std::cmp::Reverse(r.1));
    let shown: Vec<String> = by_count
        .iter()
        .take(3)
        .map(|(why, n)| format!("{n} × {why}"))
        .collect();
    if shown.is_empty() {
        "none".into()
    } else {
        shown.join("; ")
    }
}
