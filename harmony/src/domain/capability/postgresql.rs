//! The PostgreSQL capability: clusters, primary exposure and streaming replicas across sites.
//!
//! Scores are written against this trait; `harmony::infra::cnpg` implements it on every
//! Kubernetes topology with the CloudNativePG operator.

use async_trait::async_trait;
use serde::Serialize;
use std::fmt;
use std::time::Duration;

use harmony_types::{Dns1123Label, HostName, Quantity};

use super::{ApplyFailure, CapabilityError};
use crate::domain::outcome::ObjectChange;

mod health;
pub use health::{
    CNPG_HEALTHY_PHASE, ClusterStatus, Lsn, Reading, ReplicationReport, SiteHealth,
    SiteObservation, SiteRole, SqlReading, StatusProbe, Streaming,
};

/// CPU and memory of one PostgreSQL instance.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize)]
pub struct ComputeResources {
    /// CPU request (`500m`).
    pub cpu_request: Option<Quantity>,
    /// Memory request (`1Gi`).
    pub memory_request: Option<Quantity>,
    /// CPU limit.
    pub cpu_limit: Option<Quantity>,
    /// Memory limit.
    pub memory_limit: Option<Quantity>,
}

/// What one PostgreSQL cluster on one site should be.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct PostgresCluster {
    /// The cluster's name; the operator derives Services and Secrets from it.
    pub name: Dns1123Label,
    /// Its namespace.
    pub namespace: Dns1123Label,
    /// PostgreSQL major version (`17`).
    pub major_version: u32,
    /// The operand image; `None` uses the backend's default image for the major version.
    pub image: Option<String>,
    /// Number of instances (1 primary + standbys).
    pub instances: u32,
    /// Volume size per instance.
    pub storage: Quantity,
    /// Per-instance CPU and memory.
    pub resources: ComputeResources,
    /// Extra DNS names in the server certificate (a Route host, for `verify-full`).
    pub server_alt_dns_names: Vec<HostName>,
    /// WAL kept for replicas that stream without a slot (`wal_keep_size`, e.g. `2GB`).
    pub wal_keep_size: Option<String>,
}

/// How a primary is reached from other sites.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(tag = "type", rename_all = "snake_case")]
pub enum PrimaryExposure {
    /// An OpenShift Route with TLS passthrough on port 443, routed by SNI: needs PostgreSQL
    /// 17+ clients with `sslnegotiation=direct`.
    PassthroughRoute {
        /// The Route's host name.
        host: HostName,
    },
    /// A Service of type LoadBalancer on port 5432, reached at `host`.
    LoadBalancer {
        /// The DNS name replicas use (it must resolve to the load balancer's address).
        host: HostName,
    },
}

impl PrimaryExposure {
    /// The host name replicas connect to (and verify the server certificate against).
    pub fn host(&self) -> &HostName {
        match self {
            Self::PassthroughRoute { host } | Self::LoadBalancer { host } => host,
        }
    }

    /// The port replicas connect to.
    pub fn port(&self) -> u16 {
        match self {
            Self::PassthroughRoute { .. } => 443,
            Self::LoadBalancer { .. } => 5432,
        }
    }

    /// Whether clients must open TLS directly (no SSLRequest), so the router sees the SNI.
    pub fn needs_direct_tls(&self) -> bool {
        matches!(self, Self::PassthroughRoute { .. })
    }
}

/// Where a replica streams from.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct ReplicationSource {
    /// A name for the primary as seen from the replica (`finance-db-site-paris`).
    pub name: Dns1123Label,
    /// The primary cluster's name on its own site.
    pub primary: Dns1123Label,
    /// How the primary is exposed.
    pub exposure: PrimaryExposure,
}

/// PEM bytes that are secret: never printed, never serialized.
#[derive(Clone, PartialEq, Eq)]
pub struct SecretBytes(Vec<u8>);

impl SecretBytes {
    /// Wraps secret bytes.
    pub fn new(bytes: Vec<u8>) -> Self {
        Self(bytes)
    }

    /// The bytes, for writing them where they belong.
    pub fn expose(&self) -> &[u8] {
        &self.0
    }
}

impl fmt::Debug for SecretBytes {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("<redacted>")
    }
}

/// What a replica needs from the primary's operator: the `streaming_replica` client certificate
/// and key, and the CA certificate that signed the primary's server certificate. Never the CA key.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ReplicationCredentials {
    /// Client certificate (PEM) with CN `streaming_replica`.
    pub client_cert: Vec<u8>,
    /// Its private key (PEM).
    pub client_key: SecretBytes,
    /// The server CA certificate (PEM).
    pub ca_cert: Vec<u8>,
}

/// The result of looking for the replication credentials.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum CredentialsLookup {
    /// The operator has created them.
    Found(ReplicationCredentials),
    /// They cannot be observed in this mode (render, or plan before the primary exists); why.
    NotObservable(String),
}

/// PostgreSQL clusters on one site.
#[async_trait]
#[diagnostic::on_unimplemented(
    message = "topology `{Self}` cannot run PostgreSQL clusters (`PostgreSQL`)",
    label = "this Score needs a topology that implements `PostgreSQL` (it declares CloudNativePG clusters)",
    note = "every Kubernetes topology offers PostgreSQL through CloudNativePG (RenderTopology, K8sTopology, DefaultTopology, AgentTopology, SplitPlaneTopology, RegionSiteTopology): use one of them, or implement `K8sClient` or `PostgreSQL` for `{Self}`"
)]
pub trait PostgreSQL: Send + Sync {
    /// Creates or updates a standalone or primary cluster; objects are owned by `owner`.
    async fn apply_cluster(
        &self,
        cluster: &PostgresCluster,
        owner: &str,
    ) -> Result<Vec<ObjectChange>, ApplyFailure>;

    /// Fails before anything is applied when this site cannot expose a primary that way
    /// (e.g. no OpenShift Route API for a passthrough Route).
    async fn check_exposure(
        &self,
        cluster: &PostgresCluster,
        exposure: &PrimaryExposure,
    ) -> Result<(), CapabilityError>;

    /// The DNS domain this site's router serves Route hosts under (OpenShift's
    /// `ingresses.config.openshift.io/cluster` `.spec.domain`); `None` when the site has
    /// none (not OpenShift, render mode). The multi-site Score derives the Route host
    /// `<name>-<namespace>.<domain>` from it when neither host nor appsDomain is given.
    async fn ingress_domain(&self) -> Result<Option<String>, CapabilityError> {
        Ok(None)
    }

    /// Makes the primary of `cluster` reachable from other sites as `exposure` says.
    async fn expose_primary(
        &self,
        cluster: &PostgresCluster,
        exposure: &PrimaryExposure,
        owner: &str,
    ) -> Result<Vec<ObjectChange>, ApplyFailure>;

    /// Waits up to `timeout` for the operator-generated replication credentials of `cluster`;
    /// a timeout names the missing secret.
    async fn replication_credentials(
        &self,
        cluster: &PostgresCluster,
        timeout: Duration,
    ) -> Result<CredentialsLookup, CapabilityError>;

    /// Stores `credentials` on this site (re-syncing rotated certificates) and creates or
    /// updates a replica cluster streaming from `source`.
    async fn apply_replica(
        &self,
        cluster: &PostgresCluster,
        source: &ReplicationSource,
        credentials: Option<&ReplicationCredentials>,
        owner: &str,
    ) -> Result<Vec<ObjectChange>, ApplyFailure>;

    /// Reads what this site can tell about `cluster`'s replication: the operator's status
    /// through the Kubernetes API and, when `probe.endpoint` is set, SQL over that endpoint
    /// with the cluster's own `streaming_replica` client certificate (what is read is listed in
    /// [`SqlReading`]). What cannot be read comes back as [`Reading::NotRead`] with the reason,
    /// never as an error; render mode reads nothing.
    async fn replication_status(
        &self,
        cluster: &PostgresCluster,
        probe: &StatusProbe,
    ) -> SiteObservation;
}
