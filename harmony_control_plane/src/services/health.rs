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
    /// When the current or last connection opened, ms since epoch.
    pub connected_at: i64,
    /// When the last connection closed, ms since epoch (`None` while connected).
    pub disconnected_at: Option<i64>,
}

/// A zone's health at one moment, why, and since when.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Observed {
    /// The health.
    pub health: Health,
    /// Why, for people.
    pub reason: String,
    /// When it took this health, as far as the inputs tell (ms since epoch): when a threshold
    /// was crossed (the last heartbeat plus the threshold), the connection opened or closed,
    /// or, for what only a heartbeat reports (its cluster reachable or not), the last
    /// heartbeat. `None` when nothing tells (no agent ever connected).
    pub since: Option<i64>,
}

/// A duration for people: `850 ms`, `1.5 s`, `31 s`, `12 min`, `3 h 5 min`, `2 d 4 h`.
pub fn human_duration(d: Duration) -> String {
    let ms = d.as_millis();
    let s = d.as_secs();
    match s {
        _ if ms < 1000 => format!("{ms} ms"),
        0..10 if !ms.is_multiple_of(1000) => format!("{:.1} s", d.as_secs_f64()),
        0..60 => format!("{s} s"),
        60..3600 => format!("{} min", s / 60),
        3600..86_400 if (s % 3600) / 60 == 0 => format!("{} h", s / 3600),
        3600..86_400 => format!("{} h {} min", s / 3600, (s % 3600) / 60),
        _ if (s % 86_400) / 3600 == 0 => format!("{} d", s / 86_400),
        _ => format!("{} d {} h", s / 86_400, (s % 86_400) / 3600),
    }
}

/// Computes health at `now_ms` and the reason, for people.
pub fn health(now_ms: i64, live: &Liveness, policy: &HealthPolicy) -> (Health, String) {
    let o = observe(now_ms, live, policy);
    (o.health, o.reason)
}

/// Health at `now_ms`, the reason, and since when (see [`Observed::since`]).
pub fn observe(now_ms: i64, live: &Liveness, policy: &HealthPolicy) -> Observed {
    let at = |health, reason: String, since| Observed {
        health,
        reason,
        since,
    };
    let Some(last) = live.last_heartbeat_ms else {
        return at(
            Health::Unavailable,
            "no agent has connected yet".into(),
            None,
        );
    };
    let age = Duration::from_millis(now_ms.saturating_sub(last).max(0) as u64);
    let human = human_duration;
    let crossed = |limit: Duration| Some(last.saturating_add(limit.as_millis() as i64));
    if age > policy.unavailable_after {
        let why = if live.connected {
            "connected but silent"
        } else {
            "disconnected"
        };
        return at(
            Health::Unavailable,
            format!(
                "{why}: no heartbeat for {} (limit {})",
                human(age),
                human(policy.unavailable_after)
            ),
            crossed(policy.unavailable_after),
        );
    }
    if !live.connected {
        return at(
            Health::Unhealthy,
            format!(
                "disconnected, last heartbeat {} ago; unavailable after {}",
                human(age),
                human(policy.unavailable_after)
            ),
            Some(live.disconnected_at.unwrap_or(last)),
        );
    }
    if age > policy.unhealthy_after {
        return at(
            Health::Unhealthy,
            format!(
                "heartbeat {} late (limit {})",
                human(age),
                human(policy.unhealthy_after)
            ),
            crossed(policy.unhealthy_after),
        );
    }
    if !live.pinged {
        return at(
            Health::Unhealthy,
            "connected; waiting for the agent's first heartbeat, which reports whether it reaches its cluster".into(),
            Some(live.connected_at),
        );
    }
    if !live.k8s_reachable {
        return at(
            Health::Unhealthy,
            "the agent cannot reach its Kubernetes API server".into(),
            Some(last),
        );
    }
    at(Health::Healthy, "heartbeats on time".into(), Some(last))
}

/// What a session row says about liveness.
pub fn liveness(session: &SessionRecord) -> Liveness {
    let status = status_of(session);
    Liveness {
        connected: session.connected,
        last_heartbeat_ms: Some(session.last_heartbeat_at),
        k8s_reachable: status.as_ref().is_some_and(|s| s.k8s_reachable),
        pinged: status.is_some(),
        connected_at: session.connected_at,
        disconnected_at: session.disconnected_at,
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
            connected_at: 0,
            disconnected_at: None,
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
    fn reasons_give_durations_in_human_units() {
        let p = HealthPolicy {
            heartbeat: Duration::from_secs(2),
            unhealthy_after: Duration::from_secs(6),
            unavailable_after: Duration::from_secs(60),
        };
        let why = |now, l: Liveness| health(now, &l, &p).1;
        assert_eq!(
            why(31_036, live(true, Some(0), true)),
            "heartbeat 31 s late (limit 6 s)"
        );
        assert_eq!(
            why(3_000, live(false, Some(0), true)),
            "disconnected, last heartbeat 3 s ago; unavailable after 1 min"
        );
        assert_eq!(
            why(725_000, live(true, Some(0), true)),
            "connected but silent: no heartbeat for 12 min (limit 1 min)"
        );
        let cases = [
            (850, "850 ms"),
            (1_500, "1.5 s"),
            (6_000, "6 s"),
            (31_036, "31 s"),
            (720_500, "12 min"),
            (3 * 3_600_000, "3 h"),
            (3 * 3_600_000 + 300_000, "3 h 5 min"),
            (2 * 86_400_000, "2 d"),
            (2 * 86_400_000 + 4 * 3_600_000, "2 d 4 h"),
        ];
        for (ms, text) in cases {
            assert_eq!(human_duration(Duration::from_millis(ms)), text, "{ms} ms");
        }
    }

    #[test]
    fn each_health_starts_when_a_threshold_was_crossed_or_the_connection_changed() {
        let p = policy();
        let since = |now, l: Liveness| observe(now, &l, &p).since;
        // Late: since the heartbeat plus the threshold, not since it was noticed.
        assert_eq!(since(700, live(true, Some(50), true)), Some(650));
        assert_eq!(since(5_000, live(true, Some(50), true)), Some(1_550));
        // Disconnected: since the connection closed.
        let closed = Liveness {
            disconnected_at: Some(120),
            ..live(false, Some(100), true)
        };
        assert_eq!(observe(300, &closed, &p).health, Health::Unhealthy);
        assert_eq!(since(300, closed), Some(120));
        // Waiting for the first heartbeat: since the connection opened.
        let fresh = Liveness {
            pinged: false,
            connected_at: 90,
            ..live(true, Some(90), false)
        };
        assert_eq!(since(100, fresh), Some(90));
        // Never connected: nothing tells.
        assert_eq!(since(100, Liveness::default()), None);
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
