//! Provider health: three states (healthy, unhealthy, unavailable) over the time since the
//! last successful check.

use harmony_agent_protocol::ProviderHealth;
use std::time::{Duration, Instant};

/// The thresholds of the health state machine.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct HealthPolicy {
    /// How often providers are checked.
    pub interval: Duration,
    /// Unhealthy once the last successful check is at least this old.
    pub unhealthy_after: Duration,
    /// Unavailable once the last successful check is older than this.
    pub unavailable_after: Duration,
}

impl HealthPolicy {
    /// How long one health check may take: min(interval, 5 s).
    pub fn check_timeout(&self) -> Duration {
        self.interval.min(Duration::from_secs(5))
    }
}

/// The health of a provider whose last successful check was at `last_ok` (never: `None`) and
/// that was registered (or the agent started) at `since`; `failure` says why checks fail.
pub fn health(
    now: Instant,
    last_ok: Option<Instant>,
    since: Instant,
    failure: &str,
    policy: &HealthPolicy,
) -> (ProviderHealth, String) {
    let why = if failure.is_empty() {
        String::new()
    } else {
        format!(": {failure}")
    };
    let Some(last) = last_ok else {
        let age = now.saturating_duration_since(since);
        if age > policy.unavailable_after {
            return (
                ProviderHealth::Unavailable,
                format!(
                    "no health check has succeeded in {} ms (unavailable after {} ms){why}",
                    age.as_millis(),
                    policy.unavailable_after.as_millis()
                ),
            );
        }
        return (
            ProviderHealth::Unhealthy,
            format!("no health check has succeeded yet{why}"),
        );
    };
    let age = now.saturating_duration_since(last);
    if age < policy.unhealthy_after {
        return (ProviderHealth::Healthy, "health checks succeed".into());
    }
    if age <= policy.unavailable_after {
        return (
            ProviderHealth::Unhealthy,
            format!(
                "last successful health check {} ms ago (unhealthy after {} ms, unavailable after {} ms){why}",
                age.as_millis(),
                policy.unhealthy_after.as_millis(),
                policy.unavailable_after.as_millis()
            ),
        );
    }
    (
        ProviderHealth::Unavailable,
        format!(
            "last successful health check {} ms ago (unavailable after {} ms){why}",
            age.as_millis(),
            policy.unavailable_after.as_millis()
        ),
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    fn policy() -> HealthPolicy {
        HealthPolicy {
            interval: Duration::from_millis(100),
            unhealthy_after: Duration::from_millis(300),
            unavailable_after: Duration::from_millis(600),
        }
    }

    #[test]
    fn health_has_three_states_over_the_thresholds() {
        let p = policy();
        let t0 = Instant::now();
        let at = |ms| t0 + Duration::from_millis(ms);
        let h = |now, last, since| health(now, last, since, "refused", &p).0;
        assert_eq!(h(at(0), Some(t0), t0), ProviderHealth::Healthy);
        assert_eq!(h(at(299), Some(t0), t0), ProviderHealth::Healthy);
        assert_eq!(h(at(300), Some(t0), t0), ProviderHealth::Unhealthy);
        assert_eq!(h(at(600), Some(t0), t0), ProviderHealth::Unhealthy);
        assert_eq!(h(at(601), Some(t0), t0), ProviderHealth::Unavailable);
        // A later success makes it healthy again.
        assert_eq!(h(at(900), Some(at(850)), t0), ProviderHealth::Healthy);
        // Never succeeded: unhealthy until registration age passes the unavailable threshold.
        assert_eq!(h(at(0), None, t0), ProviderHealth::Unhealthy);
        assert_eq!(h(at(600), None, t0), ProviderHealth::Unhealthy);
        assert_eq!(h(at(601), None, t0), ProviderHealth::Unavailable);
        let (_, why) = health(at(400), Some(t0), t0, "connection refused", &p);
        assert!(
            why.contains("400 ms") && why.contains("connection refused"),
            "{why}"
        );
    }
}
