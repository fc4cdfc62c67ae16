//! The `MultisitePostgreSQL` resource's spec types (the Score's input, and the CRD the operator
//! serves) with their defaults; the Score and its resolution are in `multisite.rs`.

use kube::{CustomResource, KubeSchema};
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;

use super::super::spec::ClusterSpec;
use super::super::status::ResourceStatus;

/// The first major version whose libpq can open TLS directly (`sslnegotiation=direct`), which
/// an SNI-routed passthrough Route needs.
pub const MIN_MAJOR_FOR_PASSTHROUGH: u32 = 17;

/// The primary's site and the host name replicas reach it by.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct PrimarySite {
    /// The site's name in the topology.
    #[schemars(length(max = 63))]
    pub site: String,
    /// The Route (or load balancer) host. When absent, a Route's host is
    /// `<name>-<namespace>.<appsDomain>`, or without `appsDomain` the same under the site's
    /// OpenShift ingress domain (`ingresses.config.openshift.io/cluster`), read at run time.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(length(max = 253))]
    pub host: Option<String>,
    /// The site's OpenShift apps domain; the Route host is then `<name>-<namespace>.<appsDomain>`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub apps_domain: Option<String>,
}

/// A site that runs a replica cluster.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct ReplicaSite {
    /// The site's name in the topology.
    #[schemars(length(max = 63))]
    pub site: String,
}

/// Which site runs the primary and which run replicas.
#[derive(KubeSchema, Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[x_kube(validation = Rule::new("self.replicas.all(r, r.site != self.primary.site)").message("a replica site must not be the primary's site"))]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct SitesSpec {
    /// The primary's site.
    pub primary: PrimarySite,
    /// One or more replica sites.
    #[schemars(length(min = 1, max = 16))]
    pub replicas: Vec<ReplicaSite>,
    /// Replica site to its own Route (or load balancer) host: such a replica is exposed like
    /// the primary, and status reads measure its streaming and lag through it.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub replica_hosts: BTreeMap<String, String>,
}

/// How replicas on other sites reach the primary.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub enum Exposure {
    /// An OpenShift Route with TLS passthrough on 443 (PostgreSQL 17+).
    #[default]
    Route,
    /// A Service of type LoadBalancer on 5432 (any version); `topology.primary.host` names it.
    LoadBalancer,
}

/// What a multi-site PostgreSQL cluster should be: the spec of the `MultisitePostgreSQL`
/// custom resource and of [`MultisitePostgreSQLScore`], one definition for both.
#[derive(CustomResource, KubeSchema, Debug, Clone, PartialEq, Serialize, Deserialize)]
#[kube(
    group = "harmony.io",
    version = "v1alpha1",
    kind = "MultisitePostgreSQL",
    namespaced,
    status = "ResourceStatus",
    shortname = "mpg",
    doc = "A PostgreSQL cluster with its primary on one site and streaming replicas on others (CloudNativePG)",
    printcolumn = r#"{"name":"Version","type":"string","jsonPath":".spec.version"}"#,
    printcolumn = r#"{"name":"Primary","type":"string","jsonPath":".spec.topology.primary.site"}"#,
    printcolumn = r#"{"name":"Ready","type":"string","jsonPath":".status.conditions[?(@.type==\"Ready\")].status"}"#,
    printcolumn = r#"{"name":"Reason","type":"string","jsonPath":".status.conditions[?(@.type==\"Ready\")].reason"}"#
)]
#[x_kube(validation = Rule::new(
    "(has(self.exposure) && self.exposure == 'loadBalancer') || self.version.matches('^(1[7-9]|[2-9][0-9])([.][0-9]+)?$')"
).message(
    "PostgreSQL before 17 cannot replicate through an OpenShift passthrough Route (the router routes by TLS SNI, which a classic SSLRequest does not carry): use version 17 or newer, or exposure loadBalancer"
))]
#[serde(rename_all = "camelCase")]
pub struct MultisitePostgreSQLSpec {
    /// Version, size and resources, the same on every site.
    #[serde(flatten)]
    pub cluster: ClusterSpec,
    /// Primary and replica sites.
    pub topology: SitesSpec,
    /// How the primary is exposed to the replicas.
    #[serde(default)]
    pub exposure: Exposure,
    /// WAL the primary keeps for replicas, which stream without a replication slot.
    #[serde(default = "default_wal_keep_size")]
    pub wal_keep_size: String,
    /// A server certificate of your own; refused, since the operator must add the Route host
    /// to the certificate it issues.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub server_tls_secret: Option<String>,
    /// How long to wait for the operator to create the replication secrets on the primary.
    #[serde(default = "default_credentials_timeout")]
    pub credentials_timeout_seconds: u64,
    /// Whether an apply waits until every replica streams within `maxReplicaLagBytes`.
    #[serde(default = "default_true")]
    pub wait_for_streaming: bool,
    /// How long an apply waits for the replicas to stream.
    #[serde(default = "default_streaming_timeout")]
    pub streaming_timeout_seconds: u64,
    /// The most WAL (bytes) a streaming replica may lag behind the primary and count as within
    /// the threshold (the apply's wait; the operator's Ready).
    #[serde(default = "default_max_replica_lag_bytes")]
    pub max_replica_lag_bytes: u64,
}

pub(super) fn default_wal_keep_size() -> String {
    "2GB".into()
}

pub(super) fn default_credentials_timeout() -> u64 {
    300
}

pub(super) fn default_true() -> bool {
    true
}

pub(super) fn default_streaming_timeout() -> u64 {
    600
}

/// One WAL segment (16 MiB).
pub(super) fn default_max_replica_lag_bytes() -> u64 {
    16 * 1024 * 1024
}
