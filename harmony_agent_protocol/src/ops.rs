//! The v1 ops, their parameters and results.

use serde::{Deserialize, Serialize};
use serde_json::Value;
use std::fmt;

/// An op the control plane can ask an agent to execute.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Op {
    /// Server-side apply of manifests (idempotent).
    ApplyManifests,
    /// Delete objects.
    DeleteManifests,
    /// Read objects.
    GetObjects,
    /// Node count and capacity.
    GetInventory,
    /// Create (or converge) a service instance through the type's provider.
    ServiceCreate,
    /// Delete a service instance.
    ServiceDelete,
    /// Read a service instance's status.
    ServiceStatus,
}

impl Op {
    /// Every v1 op.
    pub const ALL: [Op; 7] = [
        Op::ApplyManifests,
        Op::DeleteManifests,
        Op::GetObjects,
        Op::GetInventory,
        Op::ServiceCreate,
        Op::ServiceDelete,
        Op::ServiceStatus,
    ];

    /// The wire name.
    pub fn as_str(self) -> &'static str {
        match self {
            Op::ApplyManifests => "apply_manifests",
            Op::DeleteManifests => "delete_manifests",
            Op::GetObjects => "get_objects",
            Op::GetInventory => "get_inventory",
            Op::ServiceCreate => "service_create",
            Op::ServiceDelete => "service_delete",
            Op::ServiceStatus => "service_status",
        }
    }

    /// Parses a wire name; `None` for an op v1 does not define.
    pub fn parse(name: &str) -> Option<Op> {
        Op::ALL.into_iter().find(|o| o.as_str() == name)
    }
}

impl fmt::Display for Op {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// Identity of a Kubernetes object on the wire.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct WireObjectRef {
    /// `v1`, `apps/v1`.
    pub api_version: String,
    /// `ConfigMap`.
    pub kind: String,
    /// Absent for cluster-scoped objects.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub namespace: Option<String>,
    /// `metadata.name`.
    pub name: String,
}

/// One changed field of an object (secret values already redacted by the agent).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct WireFieldChange {
    /// Dotted path.
    pub path: String,
    /// Old value as JSON text.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub old: Option<String>,
    /// New value as JSON text.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub new: Option<String>,
}

/// What happened to one object.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct WireChange {
    /// `apps/v1 Deployment shop/web`.
    pub object: String,
    /// `create`, `update`, `unchanged` or `delete`.
    pub action: String,
    /// Where it went (the agent's API server).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub location: Option<String>,
    /// Field-level diff.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub diff: Vec<WireFieldChange>,
    /// The object's status when the apply's wait ended (absent when nothing waited).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub status: Option<WireStatus>,
}

/// An applied object's status after the agent waited for it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct WireStatus {
    /// `current`, `in_progress`, `failed` or `not_found`.
    pub state: String,
    /// The controller's reason (`ProgressDeadlineExceeded`, `CrashLoopBackOff`, ...).
    pub reason: String,
    /// One line, in the controller's words where it gave some.
    pub message: String,
    /// Milliseconds from the start of the wait until the object was first current.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub time_to_current_ms: Option<u64>,
}

/// `apply_manifests` params.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct ApplyManifestsParams {
    /// Full manifests.
    pub manifests: Vec<Value>,
    /// Take over fields other managers own.
    #[serde(default)]
    pub force_conflicts: bool,
    /// The owner (Score) for ownership labels and prune.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub owner: Option<String>,
    /// Server-side dry run (plan mode).
    #[serde(default)]
    pub dry_run: bool,
    /// Delete owned objects no longer declared.
    #[serde(default)]
    pub prune: bool,
    /// Wait up to this many seconds for the applied objects to be current (rolled out, bound,
    /// complete), reporting status transitions as progress; absent: do not wait.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub wait_timeout_s: Option<u64>,
}

/// `apply_manifests` and `delete_manifests` result.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct ChangesResult {
    /// One change per object.
    pub changes: Vec<WireChange>,
}

/// `delete_manifests` params.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct DeleteManifestsParams {
    /// The objects to delete.
    pub objects: Vec<WireObjectRef>,
    /// Server-side dry run (plan mode).
    #[serde(default)]
    pub dry_run: bool,
}

/// `get_objects` params.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct GetObjectsParams {
    /// The objects to read.
    pub objects: Vec<WireObjectRef>,
}

/// `get_objects` result: one entry per requested object, `null` when absent.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct GetObjectsResult {
    /// The objects, in request order.
    pub objects: Vec<Option<Value>>,
}

/// `get_inventory` result.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct InventoryResult {
    /// Number of nodes.
    pub nodes: u32,
    /// Number of nodes whose Ready condition is True.
    pub ready_nodes: u32,
    /// Summed capacity.
    pub capacity: Capacity,
    /// Summed allocatable.
    pub allocatable: Capacity,
    /// The API server's version.
    pub kubernetes_version: String,
}

/// Summed node resources.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Capacity {
    /// CPU in millicores.
    pub cpu_millis: u64,
    /// Memory in bytes.
    pub memory_bytes: u64,
    /// Pods.
    pub pods: u64,
}
