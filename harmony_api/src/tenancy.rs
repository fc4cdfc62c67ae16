//! Tenants, their tokens and projects, per-region tenant caps and project quotas: the bodies of
//! the `/v1/admin/tenants...` and `/v1/projects` routes, and the tenant's view of a region.

use harmony_agent_protocol::SecretString;
pub use harmony_agent_protocol::tenancy::ProjectQuota;
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;
use std::fmt;

use crate::Health;

/// Prefix of every tenant token (`htt_<id>_<secret>`).
pub const TENANT_TOKEN_PREFIX: &str = "htt_";

/// `POST /v1/admin/tenants`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct CreateTenant {
    /// The tenant's name (a DNS-1123 label).
    pub tenant: String,
}

/// A tenant.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Tenant {
    /// Its name.
    pub tenant: String,
    /// Creation time, ms since the Unix epoch.
    #[serde(default)]
    pub created_at: i64,
    /// Its per-region caps: the most all its projects' quotas in that region may add up to.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub caps: BTreeMap<String, ProjectQuota>,
}

/// `GET /v1/admin/tenants`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct TenantList {
    /// Every tenant, by name.
    pub tenants: Vec<Tenant>,
}

/// `PUT /v1/admin/tenants/{tenant}/caps/{region}` answers the tenant's caps.
pub type TenantCaps = BTreeMap<String, ProjectQuota>;

/// `POST /v1/admin/tenants/{tenant}/tokens`.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct CreateTenantToken {
    /// Lifetime in seconds; the token never expires when absent.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub ttl_s: Option<f64>,
}

/// A tenant token, shown once: the control plane keeps only its hash.
#[derive(Clone, Serialize, Deserialize)]
pub struct TenantToken {
    /// The tenant it acts for.
    pub tenant: String,
    /// Its id (revoke it with `DELETE /v1/admin/tenants/{tenant}/tokens/{id}`).
    pub id: String,
    /// The token (`htt_<id>_<secret>`): give it to the tenant, never print it.
    pub token: SecretString,
    /// When it expires, ms since the Unix epoch (`None`: never).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub expires_at: Option<i64>,
}

impl fmt::Debug for TenantToken {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("TenantToken")
            .field("tenant", &self.tenant)
            .field("id", &self.id)
            .field("token", &"<redacted>")
            .field("expires_at", &self.expires_at)
            .finish()
    }
}

/// `DELETE /v1/admin/tenants/{tenant}/tokens/{id}`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct TokenRevoked {
    /// The token id.
    pub id: String,
    /// Always `true` in a success answer.
    pub revoked: bool,
}

/// `POST /v1/admin/tenants/{tenant}/projects`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct CreateProject {
    /// The project's name (a DNS-1123 label), unique within its tenant.
    pub project: String,
    /// Its namespace in every region (a DNS-1123 label, at most 63 characters, unique across
    /// tenants); `<tenant>-<project>` when absent.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub namespace: Option<String>,
}

/// A project: one namespace in every region it deploys to, with a quota per region.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Project {
    /// Its tenant.
    pub tenant: String,
    /// Its name.
    pub project: String,
    /// Its namespace in every region.
    pub namespace: String,
    /// Its quota in each region (a project deploys only where it has one).
    #[serde(default)]
    pub quotas: BTreeMap<String, ProjectQuota>,
    /// Creation time, ms since the Unix epoch.
    #[serde(default)]
    pub created_at: i64,
}

/// `GET /v1/projects`: the caller's tenant's projects (every tenant's for the admin).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ProjectList {
    /// The projects, by tenant then name.
    pub projects: Vec<Project>,
}

/// One zone as a tenant sees it: its name and health.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct TenantZoneView {
    /// The zone.
    pub zone: String,
    /// Its health.
    pub health: Health,
}

/// A region as a tenant sees it: name, zones and health, nothing about agents or capacity.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct TenantRegionView {
    /// The region.
    pub region: String,
    /// Its first zone.
    pub zone: String,
    /// Its zones with their health.
    pub zones: Vec<TenantZoneView>,
    /// The region's health.
    pub health: Health,
}

/// `GET /v1/regions` for a tenant.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct TenantRegionList {
    /// Every region, by name.
    pub regions: Vec<TenantRegionView>,
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::RegionView;

    #[test]
    fn a_tenant_sees_region_zones_and_health_only_and_tokens_stay_out_of_debug() {
        let admin: RegionView = serde_json::from_value(serde_json::json!({
            "region": "eu", "zone": "z1", "health": "healthy",
            "zones": [{"zone": "z1", "health": "unhealthy", "agent_version": "1.2.3",
                "pending_requests": 3, "replica": "cp-1", "last_heartbeat": 5}],
            "health_reason": "heartbeats on time", "connected": true, "agent_version": "1.2.3",
            "ops": ["get_inventory"], "pending_requests": 3, "replica": "cp-1",
            "last_heartbeat": 5, "max_frame_bytes": 4096
        }))
        .unwrap();
        let json = serde_json::to_value(admin.for_tenant()).unwrap();
        assert_eq!(
            json,
            serde_json::json!({"region": "eu", "zone": "z1", "health": "healthy",
                "zones": [{"zone": "z1", "health": "unhealthy"}]})
        );
        let t: TenantToken =
            serde_json::from_str(r#"{"tenant":"acme","id":"ab12","token":"htt_ab12_secretvalue"}"#)
                .unwrap();
        assert!(!format!("{t:?}").contains("secretvalue"));
        assert_eq!(t.token.expose(), "htt_ab12_secretvalue");
    }

    #[test]
    fn project_and_submit_fields_are_optional_on_the_wire() {
        let p: CreateProject = serde_json::from_str(r#"{"project":"web"}"#).unwrap();
        assert_eq!(p.namespace, None);
        let r: crate::SubmitRequest =
            serde_json::from_str(r#"{"op":"get_objects","project":"web"}"#).unwrap();
        assert_eq!(
            (r.project.as_deref(), r.tenant.as_deref()),
            (Some("web"), None)
        );
        let plain = serde_json::to_string(&crate::SubmitRequest { project: None, ..r }).unwrap();
        assert!(
            !plain.contains("project") && !plain.contains("tenant"),
            "{plain}"
        );
    }
}
