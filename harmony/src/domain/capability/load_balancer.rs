//! The load-balancer capability: TCP frontends forwarding to health-checked backend pools.

use async_trait::async_trait;
use serde::Serialize;

use harmony_types::{HostName, IpAddress};

use super::CapabilityError;
use crate::domain::outcome::ObjectChange;

/// How a backend server is checked before traffic is sent to it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(tag = "kind", rename_all = "kebab-case")]
pub enum HealthCheck {
    /// A TCP connection to the backend port succeeds.
    Tcp,
    /// An HTTPS GET of `path` on `port` answers 200 (e.g. `/readyz` on 6443), certificate not verified.
    Https {
        /// Request path.
        path: String,
        /// Port to check.
        port: u16,
    },
    /// An HTTP GET of `path` on `port` answers 200 (e.g. `/healthz/ready` on 1936).
    Http {
        /// Request path.
        path: String,
        /// Port to check.
        port: u16,
    },
}

/// One server in a backend pool.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct BackendServer {
    /// Its host name (used as the server name in the pool).
    pub name: HostName,
    /// Its address.
    pub ip: IpAddress,
    /// Its port.
    pub port: u16,
}

/// A TCP service: one frontend port, one backend pool.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct LoadBalancerService {
    /// Short name, e.g. `api`, `machine-config`, `ingress-https`.
    pub name: String,
    /// Address the frontend listens on.
    pub listen_ip: IpAddress,
    /// Port the frontend listens on.
    pub port: u16,
    /// The pool; must not be empty.
    pub backends: Vec<BackendServer>,
    /// How pool members are checked.
    pub health_check: HealthCheck,
}

/// A TCP load balancer.
#[async_trait]
#[diagnostic::on_unimplemented(
    message = "topology `{Self}` has no load balancer (`LoadBalancer`)",
    label = "this Score needs a topology that implements `LoadBalancer` (it configures TCP services and their backends)",
    note = "use a bare-metal topology that offers a load balancer: HAClusterTopology (`harmony::infra::okd::HAClusterTopology`, backed by HAProxy); Kubernetes and render topologies (RenderTopology, K8sTopology, DefaultTopology) have none; or implement `LoadBalancer` for `{Self}`"
)]
pub trait LoadBalancer: Send + Sync {
    /// Ensures exactly these services are served (services not listed are removed).
    async fn ensure_services(
        &self,
        services: &[LoadBalancerService],
    ) -> Result<Vec<ObjectChange>, CapabilityError>;
}
