//! The project a request runs for. The control plane attaches a [`ProjectScope`] to every
//! request it delivers on a project's behalf; the agent makes sure the project is present in its
//! cluster (namespace, ResourceQuota, LimitRange, its own RoleBinding) before running the op, and
//! keeps the op inside that namespace.

use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;

/// Label every namespace Harmony manages carries (`app.kubernetes.io/managed-by: harmony`).
pub const MANAGED_BY_LABEL: &str = "app.kubernetes.io/managed-by";
/// The value of [`MANAGED_BY_LABEL`] on namespaces Harmony manages.
pub const MANAGED_BY_VALUE: &str = "harmony";
/// Label naming the tenant owning a project namespace.
pub const TENANT_LABEL: &str = "harmony.io/tenant";
/// Label naming the project a namespace materialises.
pub const PROJECT_LABEL: &str = "harmony.io/project";
/// Label (on any object) naming the region the object belongs to; see containment.
pub const REGION_LABEL: &str = "harmony.io/region";
/// Label (on any object) naming the zone the object belongs to.
pub const ZONE_LABEL: &str = "harmony.io/zone";
/// Name of the ResourceQuota the agent keeps in a project namespace.
pub const QUOTA_NAME: &str = "harmony-project-quota";
/// Name of the LimitRange the agent keeps in a project namespace.
pub const LIMIT_RANGE_NAME: &str = "harmony-project-limits";

/// The ClusterRole holding the agent's rights inside a project namespace, bound there by the
/// agent's own RoleBinding [`AGENT_ROLE_BINDING`] (the rollout creates the ClusterRole).
pub const AGENT_MANAGED_CLUSTER_ROLE: &str = "harmony-agent-managed";
/// Name of the RoleBinding the agent keeps in a project namespace (to its ServiceAccount).
pub const AGENT_ROLE_BINDING: &str = "harmony-agent";

/// Per-region quota of a project: what its namespace may hold in one region. Absent fields are
/// not limited.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ProjectQuota {
    /// Total CPU requests (a Kubernetes quantity: `"4"`, `"500m"`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cpu: Option<String>,
    /// Total memory requests (a Kubernetes quantity: `"8Gi"`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub memory: Option<String>,
    /// Total storage requested by PersistentVolumeClaims (`"100Gi"`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub storage: Option<String>,
    /// Object counts by resource (`"configmaps": 50`, `"secrets": 20`, `"pods": 100`), mapped to
    /// the quota's `count/<resource>` entries.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub objects: BTreeMap<String, u64>,
}

/// Who a request runs for, as the agent needs it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ProjectScope {
    /// The tenant (a DNS-1123 label).
    pub tenant: String,
    /// The project (a DNS-1123 label).
    pub project: String,
    /// The project's namespace in every region (a DNS-1123 label).
    pub namespace: String,
    /// The project's quota in this region.
    #[serde(default)]
    pub quota: ProjectQuota,
}
