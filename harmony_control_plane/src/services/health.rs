//! A region's three-state health, computed from its session row in the store, so any replica
//! answers the same whichever one holds the agent's connection.

use harmony_agent_protocol::{AgentStatus, Services};
use harmony_api::Health;
use std::time::Duration;

use crate::store::SessionRecord;

/// Heartbeat interval and health thresholds.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct HealthPolicy {
    /// Interval the agents are told to heartbeat at.
    pub heartbeat: Duration,
    /// A heartbeat older than this makes a region unhealthy.
    pub unhealthy_after: Duration,
    /// A heartbeat older than this makes it unavailable.
    pub unavailable_after: Duration,
}

impl HealthPolicy {
    /// How often this replica writes buffered heartbeats to the store. Well under the gap
    /// between the heartbeat interval and the unhealthy threshold, so batching never makes a
    /// region look late to another replica; at most 500 ms so thousands of agents cost a few
    /// writes a second, not thousands.
    pub fn flush_interval(&self) -> Duration {
        let slack = self.unhealthy_after.saturating_sub(self.heartbeat) / 4;
        slack.clamp(Duration::from_millis(20), Duration::from_millis(500))
    }
}

/// What health is computed from: the session row's liveness fields.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct Liveness {
    /// Whether a connection is open now.
    pub connected: bool,
    /// Last heartbeat (or welcome) of the current or last connection, ms since epoch.
    pub last_heartbeat_ms: Option<i64>,
    /// Whether the agent reported its Kubernetes API reachable in its last heartbeat.
    pub k8s_reachable: bool,
    /// Whether the current connection has sent a heartbeat yet (it reports reachability).
    pub pinged: bool,
}

/// Computes health at `now_ms` and the reason, for people.
pub fn health(now_ms: i64, live: &Liveness, policy: &HealthPolicy) -> (Health, String) {
    let Some(last) = live.last_heartbeat_ms else {
        return (Health::Unavailable, "no agent has connected yet".into());
    };
    let age = Duration::from_millis(now_ms.saturating_sub(last).max(0) as u64);
    let ms = age.as_millis();
    if age > policy.unavailable_after {
        let why = if live.connected {
            "connected but silent"
        } else {
            "disconnected"
        };
        return (
            Health::Unavailable,
            format!(
                "{why}: no heartbeat for {ms} ms (threshold {} ms)",
                policy.unavailable_after.as_millis()
            ),
        );
    }
    if !live.connected {
        return (
            Health::Unhealthy,
            format!(
                "disconnected, last heartbeat {ms} ms ago; unavailable after {} ms",
                policy.unavailable_after.as_millis()
            ),
        );
    }
    if age > policy.unhealthy_after {
        return (
            Health::Unhealthy,
            format!(
                "heartbeat late: {ms} ms (threshold {} ms)",
                policy.unhealthy_after.as_millis()
            ),
        );
    }
    if !live.pinged {
        return (
            Health::Unhealthy,
            "connected; waiting for the agent's first heartbeat, which reports whether it reaches its cluster".into(),
        );
    }
    if !live.k8s_reachable {
        return (
            Health::Unhealthy,
            "the agent cannot reach its Kubernetes API server".into(),
        );
    }
    (Health::Healthy, "heartbeats on time".into())
}

/// What a session row says about liveness.
pub fn liveness(session: &SessionRecord) -> Liveness {
    let status = status_of(session);
    Liveness {
        connected: session.connected,
        last_heartbeat_ms: Some(session.last_heartbeat_at),
        k8s_reachable: status.as_ref().is_some_and(|s| s.k8s_reachable),
        pinged: status.is_some(),
    }
}

/// The last status a session row's agent reported, if readable.
pub fn status_of(session: &SessionRecord) -> Option<AgentStatus> {
    session
        .status_json
        .as_deref()
        .and_then(|s| serde_json::from_str(s).ok())
}

/// The services a session row's agent holds (none when unreadable or not yet sent).
pub fn session_services(session: &SessionRecord) -> Services {
    session
        .services_json
        .as_deref()
        .and_then(|s| serde_json::from_str(s).ok())
        .unwrap_or_default()
}

/// A zone's health now and the services its agent holds (empty when never connected).
pub fn health_of(
    session: Option<&SessionRecord>,
    now: i64,
    policy: &HealthPolicy,
) -> (Health, String, Services) {
    match session {
        None => (
            Health::Unavailable,
            "no agent has connected yet".into(),
            Services::default(),
        ),
        Some(s) => {
            let (h, why) = health(now, &liveness(s), policy);
            (h, why, session_services(s))
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn policy() -> HealthPolicy {
        HealthPolicy {
            heartbeat: Duration::from_millis(200),
            unhealthy_after: Duration::from_millis(600),
            unavailable_after: Duration::from_millis(1500),
        }
    }

    fn live(connected: bool, last: Option<i64>, reachable: bool) -> Liveness {
        Liveness {
            connected,
            last_heartbeat_ms: last,
            k8s_reachable: reachable,
            pinged: true,
        }
    }

    #[test]
    fn health_has_three_states_with_the_configured_thresholds() {
        let p = policy();
        let h = |now, l: Liveness| health(now, &l, &p).0;
        assert_eq!(h(0, live(true, None, true)), Health::Unavailable);
        assert_eq!(h(100, live(true, Some(0), true)), Health::Healthy);
        assert_eq!(h(100, live(true, Some(0), false)), Health::Unhealthy);
        assert_eq!(h(700, live(true, Some(0), true)), Health::Unhealthy);
        assert_eq!(h(100, live(false, Some(0), true)), Health::Unhealthy);
        assert_eq!(h(1600, live(false, Some(0), true)), Health::Unavailable);
        assert_eq!(h(1600, live(true, Some(0), true)), Health::Unavailable);
        // Connected, before the first heartbeat: unhealthy, saying what it waits for.
        let fresh = Liveness {
            pinged: false,
            ..live(true, Some(0), false)
        };
        let (state, why) = health(10, &fresh, &p);
        assert_eq!(state, Health::Unhealthy);
        assert!(why.contains("first heartbeat"), "{why}");
        // A clock a little behind another replica's never yields a negative age.
        assert_eq!(h(-50, live(true, Some(0), true)), Health::Healthy);
    }

    #[test]
    fn heartbeats_are_flushed_well_within_the_unhealthy_slack() {
        let p = policy();
        assert_eq!(p.flush_interval(), Duration::from_millis(100));
        let default = HealthPolicy {
            heartbeat: Duration::from_secs(5),
            unhealthy_after: Duration::from_secs(15),
            unavailable_after: Duration::from_secs(30),
        };
        assert_eq!(default.flush_interval(), Duration::from_millis(500));
    }
}
