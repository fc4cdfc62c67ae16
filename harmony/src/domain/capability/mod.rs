//! Capabilities: traits a Topology implements and Scores require as bounds.

pub mod cluster_nodes;
pub mod dhcp;
pub mod dns;
pub mod ha_cluster;
pub mod host_inventory;
pub mod http;
pub mod k8s;
pub mod k8s_status;
pub mod load_balancer;
pub mod postgresql;
pub mod postgresql_distributed;
pub mod power;
pub mod region_admin;
pub mod role_rule;
pub mod root_device;
pub mod sites;
pub mod tenant_admin;
pub mod tftp;
pub mod timeline;

pub use k8s::{
    ApplyFailure, ApplyOptions, K8sClient, K8sObject, ObjectRef, WaitCondition, WaitOutcome,
};
pub use k8s_status::{
    ObjectStatus, Readiness, object_status, pod_failure, selector_matches, selects_pods,
};
pub use postgresql::{
    CNPG_HEALTHY_PHASE, ClusterStatus, ComputeResources, CredentialsLookup, Lsn, PostgreSQL,
    PostgresCluster, PrimaryExposure, Reading, ReplicationCredentials, ReplicationReport,
    ReplicationSource, SecretBytes, SiteHealth, SiteObservation, SiteRole, SqlReading, StatusProbe,
    Streaming,
};
pub use postgresql_distributed::{
    DistributedCluster, DistributedPostgreSQL, Member, MemberRole, MemberState, ReplicaShape,
    member_name,
};
pub use power::{BootOverride, HostBmc, PowerChange, PowerControl, PowerState, PowerTimeouts};
pub use region_admin::{BootstrapGrant, RegionAdmin, RegionHealth, RegionState, ZoneState};
pub use sites::MultiSite;
pub use tenant_admin::{ProjectQuota, ProjectState, TenantAdmin, TenantState};

pub use cluster_nodes::{ClusterNodes, NodeReadiness, NodeStatus, PendingCsr};
pub use dhcp::{DhcpHostBinding, DhcpLease, DhcpServer, PxeBootOptions};
pub use dns::{DnsRecord, DnsServer};
pub use ha_cluster::{
    CONTROL_PLANE_HOSTS, ClusterLayout, DeclaredRole, HaCluster, HostSelector, LogicalHost,
};
pub use host_inventory::{BootEvent, HeldReport, HostBinding, HostInventory};
pub use http::{HttpAccess, HttpFile, HttpServer};
pub use load_balancer::{BackendServer, HealthCheck, LoadBalancer, LoadBalancerService};
pub use role_rule::{HostMatch, RoleRule};
pub use root_device::{
    OKD_MIN_INSTALL_DISK_BYTES, RootDeviceHints, RootDeviceRule, RootDeviceTarget,
};
pub use tftp::{TftpFile, TftpServer};
pub use timeline::{BootPhase, BootTimeline, HostTimeline, PhaseAt};

use std::time::Duration;

/// A capability could not do what was asked. Messages never carry secret values.
#[derive(Debug, thiserror::Error)]
pub enum CapabilityError {
    /// The object itself is malformed (missing apiVersion, kind or name, wrong shape).
    #[error("invalid object {object}: {problem}")]
    InvalidObject {
        /// The object as far as it could be identified.
        object: String,
        /// What is wrong, naming the field.
        problem: String,
    },
    /// The backend refused the object (schema violation, admission, quota...).
    #[error("{object} rejected by {server}: {message}")]
    Rejected {
        /// The object.
        object: String,
        /// The server, file or service that refused it.
        server: String,
        /// The backend's own message (field paths included).
        message: String,
    },
    /// The backend does not serve this kind (its CRD or API is not installed).
    #[error(
        "{server} has no kind {kind} in {api_version}; install its CustomResourceDefinition first or fix apiVersion/kind"
    )]
    UnknownKind {
        /// The kind (`Route`).
        kind: String,
        /// The apiVersion asked for (`route.openshift.io/v1`).
        api_version: String,
        /// The server that was asked.
        server: String,
    },
    /// Another field manager owns fields this apply would change.
    #[error(
        "{object}: fields owned by \"{manager}\" would change ({fields}); re-run with --force-conflicts to take ownership"
    )]
    Conflict {
        /// The object.
        object: String,
        /// The other field manager.
        manager: String,
        /// The contested fields.
        fields: String,
    },
    /// The backend could not be reached.
    #[error("cannot reach {server}: {reason}")]
    Unreachable {
        /// The server address.
        server: String,
        /// The underlying cause.
        reason: String,
    },
    /// A wait ran out of time.
    #[error(
        "timed out after {} waiting for {waited_for} (last seen: {last_seen})",
        seconds(after)
    )]
    Timeout {
        /// What was awaited, e.g. "condition Available=True on apps/v1 Deployment shop/web".
        waited_for: String,
        /// The timeout.
        after: Duration,
        /// The last observed state.
        last_seen: String,
    },
    /// Applied objects did not become current: one failed (a hopeless state, reported at
    /// once) or the wait ran out of time. Names every object that is not current.
    #[error("{}", not_current_message(objects, *timed_out))]
    NotCurrent {
        /// Each object that is not current (`apps/v1 Deployment shop/web`) and its status.
        objects: Vec<(String, ObjectStatus)>,
        /// `Some(timeout)` when the wait ran out of time, `None` when it stopped at a failure.
        timed_out: Option<Duration>,
    },
    /// Reading or writing a local file failed.
    #[error("{path}: {source}")]
    Io {
        /// The file or folder.
        path: String,
        /// The OS error.
        #[source]
        source: std::io::Error,
    },
    /// The credentials for a device could not be read, or the device refused them (a BMC's
    /// HTTP 401). The message names where the credentials come from, never their value.
    #[error("{object}: {server}: {message}")]
    Credentials {
        /// The host or object the call was for.
        object: String,
        /// The device (`BMC redfish://10.0.0.5/redfish/v1/Systems/1`).
        server: String,
        /// What was refused or unreadable, and how to fix it.
        message: String,
    },
    /// The backend denied the caller the permission this call needs (HTTP 401/403, RBAC).
    #[error(
        "{object}: forbidden by {server}: {message}; grant the identity it runs as the permission (on Kubernetes: a Role or ClusterRole and its binding), or use credentials that have it"
    )]
    Forbidden {
        /// The object or operation refused.
        object: String,
        /// The server that refused it.
        server: String,
        /// The backend's own message (names the verb, resource and user).
        message: String,
    },
    /// A quota refused the object: on Kubernetes a ResourceQuota of its namespace (a Harmony
    /// project's quota in a region) has no room left for it.
    #[error(
        "{object}: exceeded ResourceQuota {quota} on {server}: {resource}; delete objects the quota counts, or have the quota raised (a Harmony project's: PUT /v1/admin/tenants/{{tenant}}/projects/{{project}}/quotas/{{region}})"
    )]
    QuotaExceeded {
        /// The object refused.
        object: String,
        /// The quota, `namespace/name`.
        quota: String,
        /// The server that refused it.
        server: String,
        /// The resource(s) with their figures: `count/configmaps requested 1, used 2, limited 2`.
        resource: String,
    },
    /// The object, or something it needs (its namespace, its parent), does not exist.
    #[error(
        "{object}: not found on {server}: {message}; create what is missing first (often the namespace) or fix the name"
    )]
    NotFound {
        /// The object asked for.
        object: String,
        /// The server that was asked.
        server: String,
        /// The backend's own message (names what is missing).
        message: String,
    },
    /// A request or its result exceeds a size limit of the path it travels.
    #[error("{what} is too large: {limit}; {fix}")]
    TooLarge {
        /// What was too large (`request apply_manifests to region east`).
        what: String,
        /// The limit, with the size when known.
        limit: String,
        /// How to stay under it.
        fix: String,
    },
    /// The request is not supported by this backend or mode.
    #[error("{what} is not supported by {backend}: {reason}")]
    Unsupported {
        /// The operation.
        what: String,
        /// The backend.
        backend: String,
        /// Why, and what to use instead.
        reason: String,
    },
}

/// A duration as a person reads it in a message: `30s`, `1.5s`.
pub(crate) fn seconds(d: &Duration) -> String {
    if d.subsec_millis() == 0 {
        format!("{}s", d.as_secs())
    } else {
        format!("{:.1}s", d.as_secs_f64())
    }
}

fn not_current_message(objects: &[(String, ObjectStatus)], timed_out: Option<Duration>) -> String {
    let why = match timed_out {
        Some(after) => format!("not current after {}", seconds(&after)),
        None => "not current (a failure no wait can fix)".to_string(),
    };
    let each: Vec<String> = objects
        .iter()
        .map(|(object, s)| format!("{object}: {} ({}): {}", s.state, s.reason, s.message))
        .collect();
    format!("{} object(s) {why}: {}", objects.len(), each.join("; "))
}
