//! The DNS capability: address records for hosts and wildcard domains.

use async_trait::async_trait;
use serde::Serialize;
use std::fmt;

use harmony_types::{HostName, IpAddress};

use super::CapabilityError;
use crate::domain::outcome::ObjectChange;

/// A DNS answer the server gives.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize)]
#[serde(tag = "kind", rename_all = "lowercase")]
pub enum DnsRecord {
    /// `name` resolves to `ip` (and `ip` back to `name`).
    A {
        /// Fully qualified name, e.g. `api.okd.example.com`.
        name: HostName,
        /// Its address.
        ip: IpAddress,
    },
    /// `domain` and every name under it (`*.apps.okd.example.com`) resolve to `ip`.
    Wildcard {
        /// The domain, e.g. `apps.okd.example.com`.
        domain: HostName,
        /// The address.
        ip: IpAddress,
    },
}

impl fmt::Display for DnsRecord {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            DnsRecord::A { name, ip } => write!(f, "A {name} -> {ip}"),
            DnsRecord::Wildcard { domain, ip } => write!(f, "A *.{domain} -> {ip}"),
        }
    }
}

/// A DNS server for the cluster's names.
#[async_trait]
#[diagnostic::on_unimplemented(
    message = "topology `{Self}` has no DNS server (`DnsServer`)",
    label = "this Score needs a topology that implements `DnsServer` (it serves the cluster's names)",
    note = "use a bare-metal topology that offers DNS: HAClusterTopology (`harmony::infra::okd::HAClusterTopology`, backed by dnsmasq); Kubernetes and render topologies (RenderTopology, K8sTopology, DefaultTopology) have none; or implement `DnsServer` for `{Self}`"
)]
pub trait DnsServer: Send + Sync {
    /// Ensures each record is served; records of other names are kept. Fails, touching
    /// nothing, when a name would resolve to two addresses.
    async fn ensure_records(
        &self,
        records: &[DnsRecord],
    ) -> Result<Vec<ObjectChange>, CapabilityError>;

    /// The records currently served, sorted.
    async fn records(&self) -> Result<Vec<DnsRecord>, CapabilityError>;
}
