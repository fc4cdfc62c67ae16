//! When the agent asks for a fresh identity: once 2/3 of the identity's lifetime has passed, or
//! `--renew-before-s` before it expires. The control plane keeps the old identity valid for an
//! overlap window after issuing the new one, so renewing early never leaves a gap.

use std::time::{Duration, SystemTime, UNIX_EPOCH};

/// How long to wait for the `identity` answer before sending `renew` again.
pub const RETRY: Duration = Duration::from_secs(60);

/// Now, in ms since the epoch.
pub fn now_ms() -> i64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map(|d| d.as_millis() as i64)
        .unwrap_or(0)
}

/// When (ms since the epoch) to send `renew` for an identity expiring at `expires_at` that the
/// agent received at `issued_at`: `renew_before` before the expiry when given, else at 2/3 of
/// its lifetime. When the issue time is unknown (an identity stored by an older agent) the
/// lifetime is counted from `now`, which renews early rather than late.
pub fn renew_at(
    now: i64,
    expires_at: i64,
    issued_at: Option<i64>,
    renew_before: Option<Duration>,
) -> i64 {
    if let Some(margin) = renew_before {
        return expires_at.saturating_sub(i64::try_from(margin.as_millis()).unwrap_or(i64::MAX));
    }
    let issued = issued_at
        .filter(|i| *i < expires_at)
        .unwrap_or(now.min(expires_at));
    issued + (expires_at - issued) * 2 / 3
}

/// How long from `now` until `at` (zero when it has passed).
pub fn delay_until(now: i64, at: i64) -> Duration {
    Duration::from_millis(u64::try_from(at.saturating_sub(now)).unwrap_or(0))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn renewal_comes_at_two_thirds_of_the_lifetime_or_at_the_margin() {
        // Issued at 0, expiring at 3000: renew at 2000 whatever the time now.
        assert_eq!(renew_at(500, 3000, Some(0), None), 2000);
        assert_eq!(renew_at(2500, 3000, Some(0), None), 2000);
        // A fixed margin wins.
        assert_eq!(
            renew_at(500, 3000, Some(0), Some(Duration::from_millis(100))),
            2900
        );
        // Unknown issue time: 2/3 of what is left from now.
        assert_eq!(renew_at(1200, 3000, None, None), 2400);
        // An issue time after the expiry is nonsense: counted from now.
        assert_eq!(renew_at(0, 3000, Some(5000), None), 2000);
        // Expired already: renew at once.
        assert_eq!(renew_at(4000, 3000, None, None), 3000);
        assert_eq!(delay_until(4000, 3000), Duration::ZERO);
        assert_eq!(delay_until(1000, 3000), Duration::from_secs(2));
    }
}
