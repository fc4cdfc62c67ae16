//! The cluster-nodes capability: the Nodes of an installed cluster and the certificate signing
//! requests (CSRs) its kubelets send while they join, so a bring-up can wait for its machines to
//! become Ready nodes and approve the CSRs of exactly those machines.

use async_trait::async_trait;
use serde::Serialize;
use std::fmt;

use super::CapabilityError;
use crate::domain::validation::ValidationError;

/// The requester of a node's first (client) CSR: the bootstrap identity the installer gives
/// every new machine.
pub const NODE_BOOTSTRAPPER: &str =
    "system:serviceaccount:openshift-machine-config-operator:node-bootstrapper";

/// The signer of a kubelet's client certificate (requested by the node-bootstrapper).
pub const KUBELET_CLIENT_SIGNER: &str = "kubernetes.io/kube-apiserver-client-kubelet";

/// The signer of a kubelet's serving certificate (requested by the node itself).
pub const KUBELET_SERVING_SIGNER: &str = "kubernetes.io/kubelet-serving";

/// The group every kubelet's certificate names as its organisation.
pub const NODES_GROUP: &str = "system:nodes";

/// The user name (and certificate common name) of the kubelet of node `hostname`.
pub fn node_user(hostname: &str) -> String {
    format!("system:node:{hostname}")
}

/// Whether a node's `Ready` condition is true.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "PascalCase")]
pub enum NodeReadiness {
    /// `Ready=True`.
    Ready,
    /// `Ready=False`, `Unknown`, or no `Ready` condition yet.
    NotReady,
}

impl fmt::Display for NodeReadiness {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            NodeReadiness::Ready => "Ready",
            NodeReadiness::NotReady => "NotReady",
        })
    }
}

/// A Node registered with the cluster.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct NodeStatus {
    /// The Node's name (the host name its kubelet registered with).
    pub name: String,
    /// Its `Ready` condition.
    pub readiness: NodeReadiness,
    /// The condition's reason (`KubeletReady`, `KubeletNotReady`), empty when there is none.
    pub reason: String,
}

/// A certificate signing request that is neither approved nor denied.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct PendingCsr {
    /// The CSR object's name (`csr-8x2kq`).
    pub name: String,
    /// Who created it (`spec.username`, set by the API server).
    pub requester: String,
    /// The common name of the subject in the PEM request; `None` when the request could not
    /// be read or names no common name.
    pub common_name: Option<String>,
    /// The organisations of the subject in the PEM request (the groups a client certificate
    /// carries: `system:nodes` for a kubelet).
    pub organizations: Vec<String>,
    /// The DNS names among the request's subject alternative names.
    pub dns_names: Vec<String>,
    /// The IP addresses among the request's subject alternative names.
    pub ip_addresses: Vec<String>,
    /// Its other subject alternative names (`email a@b`, `URI spiffe://x`, ...), and
    /// `unreadable subjectAltName` when the request's extensions could not be read: a kubelet
    /// asks for none of these.
    pub other_alt_names: Vec<String>,
    /// The signer asked for (`spec.signerName`).
    pub signer: String,
    /// The key usages asked for (`spec.usages`).
    pub usages: Vec<String>,
}

/// The Nodes of an installed cluster and its pending certificate signing requests.
#[async_trait]
#[diagnostic::on_unimplemented(
    message = "topology `{Self}` cannot read the nodes of an installed cluster (`ClusterNodes`)",
    label = "this Score needs a topology that implements `ClusterNodes` (it lists Nodes and pending CSRs and approves CSRs)",
    note = "use HAClusterTopology (`harmony::infra::okd::HAClusterTopology`), which reaches the installed cluster with the installer's admin kubeconfig; or implement `ClusterNodes` for `{Self}`"
)]
pub trait ClusterNodes: Send + Sync {
    /// Every Node, sorted by name.
    async fn nodes(&self) -> Result<Vec<NodeStatus>, CapabilityError>;

    /// Every CSR with neither an `Approved` nor a `Denied` condition, sorted by name.
    async fn pending_csrs(&self) -> Result<Vec<PendingCsr>, CapabilityError>;

    /// Approves the CSR `name`, recording `reason` in its `Approved` condition.
    async fn approve_csr(&self, name: &str, reason: &str) -> Result<(), CapabilityError>;

    /// Where the capability reaches the cluster, for messages (`the cluster of /x/auth/kubeconfig`).
    fn cluster_description(&self) -> String;

    /// Checks, before anything runs, that the cluster can be reached as configured (e.g. the
    /// kubeconfig was given and is a file). Contacts nothing.
    fn check_access(&self) -> Result<(), ValidationError> {
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn node_user_is_the_kubelet_identity() {
        assert_eq!(node_user("worker0"), "system:node:worker0");
        assert_eq!(NodeReadiness::NotReady.to_string(), "NotReady");
    }
}
