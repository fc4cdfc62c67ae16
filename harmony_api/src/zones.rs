//! Zones: a region's clusters, each with its own agent.

use serde::{Deserialize, Serialize};

use crate::{Capacity, Health};

/// `POST /v1/admin/regions/{region}/zones`: adds a zone (a cluster with its own agent) to a
/// region; answered with the zone agent's bootstrap token.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct AddZone {
    /// The zone's name (a DNS-1123 label), unique within the region.
    pub zone: String,
    /// A bootstrap token lifetime shorter than the server's `--bootstrap-ttl-s`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub bootstrap_ttl_s: Option<f64>,
}

/// The optional body of `POST /v1/admin/regions/{region}/bootstrap-token`.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct NewBootstrap {
    /// The zone whose agent the token is for; the region's first zone when absent.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub zone: Option<String>,
}

/// One zone of a region (a cluster with its own agent) as `GET /v1/regions` reports it. Every
/// caller sees `zone` and `health`; the other fields are for admins and absent from the JSON
/// when not given.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ZoneView {
    /// The zone.
    pub zone: String,
    /// Its health.
    pub health: Health,
    /// Why.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub health_reason: Option<String>,
    /// Whether its agent is connected now.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub connected: Option<bool>,
    /// Its agent's last heartbeat, ms since the Unix epoch.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub last_heartbeat: Option<i64>,
    /// Its agent's version.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub agent_version: Option<String>,
    /// The ops its agent advertised.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub ops: Option<Vec<String>>,
    /// Nodes in its cluster, as its agent last reported.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub node_count: Option<u32>,
    /// Its cluster's allocatable capacity, as its agent last reported.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub capacity: Option<Capacity>,
    /// Requests placed in this zone and not yet answered.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub pending_requests: Option<usize>,
    /// The control-plane replica holding its agent's connection.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub replica: Option<String>,
    /// Whether the zone was decommissioned.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub decommissioned: Option<bool>,
    /// When it was decommissioned (its region's date when the whole region was), ms since the
    /// Unix epoch.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub decommissioned_at: Option<i64>,
    /// When it took the health it has now (its stored state transition; its decommission for a
    /// decommissioned zone), ms since the Unix epoch.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub health_since: Option<i64>,
    /// The last error its agent reported (why it cannot reach its cluster), scrubbed of
    /// credentials and at most a few hundred characters; absent while it reaches it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub agent_error: Option<String>,
    /// Whether its agent exchanged its bootstrap token for an identity (not revoked since): a
    /// new bootstrap token for this zone is refused (409) while it holds one.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub bootstrapped: Option<bool>,
}

impl ZoneView {
    /// The same zone without its admin fields (what a tenant sees).
    pub fn public(&self) -> Self {
        Self {
            zone: self.zone.clone(),
            health: self.health,
            health_reason: None,
            connected: None,
            last_heartbeat: None,
            agent_version: None,
            ops: None,
            node_count: None,
            capacity: None,
            pending_requests: None,
            replica: None,
            decommissioned: None,
            decommissioned_at: None,
            health_since: None,
            agent_error: None,
            bootstrapped: None,
        }
    }
}

/// A region's health from its zones' (decommissioned zones left out by the caller): healthy
/// when any zone is healthy, else unhealthy when any is unhealthy, else unavailable.
pub fn region_health(zones: impl IntoIterator<Item = Health>) -> Health {
    let mut best = Health::Unavailable;
    for h in zones {
        match h {
            Health::Healthy => return Health::Healthy,
            Health::Unhealthy => best = Health::Unhealthy,
            Health::Unavailable => {}
        }
    }
    best
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_region_is_as_healthy_as_its_healthiest_zone() {
        use Health::*;
        assert_eq!(region_health([Unavailable, Healthy, Unhealthy]), Healthy);
        assert_eq!(region_health([Unavailable, Unhealthy]), Unhealthy);
        assert_eq!(region_health([Unavailable, Unavailable]), Unavailable);
        assert_eq!(region_health([]), Unavailable);
    }

    #[test]
    fn a_public_zone_view_has_no_admin_fields_in_its_json() {
        let admin = ZoneView {
            zone: "a".into(),
            health: Health::Healthy,
            health_reason: Some("heartbeats on time".into()),
            connected: Some(true),
            last_heartbeat: Some(5),
            agent_version: Some("1.0".into()),
            ops: Some(vec!["get_inventory".into()]),
            node_count: Some(3),
            capacity: Some(Capacity::default()),
            pending_requests: Some(0),
            replica: Some("r1".into()),
            decommissioned: Some(false),
            decommissioned_at: None,
            health_since: Some(4),
            agent_error: Some("dial tcp: i/o timeout".into()),
            bootstrapped: Some(true),
        };
        let shown = serde_json::to_value(admin.public()).unwrap();
        assert_eq!(shown, serde_json::json!({"zone": "a", "health": "healthy"}));
        let full = serde_json::to_value(&admin).unwrap();
        assert_eq!(full["node_count"], 3);
        let back: ZoneView = serde_json::from_value(full).unwrap();
        assert_eq!(back, admin);
    }
}
