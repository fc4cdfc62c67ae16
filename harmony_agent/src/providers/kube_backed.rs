//! The skeleton every built-in provider shares: an instance is Kubernetes objects on the
//! agent's cluster, one of which (the primary: a Deployment, a CloudNativePG Cluster, a
//! VirtualMachine) gives its state. A provider says what its objects are and how to converge
//! them; creating, reading, deleting and the [`Provider`] plumbing are written once here.

use async_trait::async_trait;
use harmony::domain::capability::ObjectRef;
use harmony_agent_protocol::InstanceStatus;
use serde_json::Value;

use super::cluster_access::ClusterAccess;
use super::{Provider, ProviderError, namespace_of};

/// A provider whose instances are Kubernetes objects on the agent's cluster.
#[async_trait]
pub(crate) trait KubeBacked: Send + Sync + 'static {
    /// The provider's name.
    const NAME: &'static str;
    /// The one service type it serves.
    const SERVICE_TYPE: &'static str;

    /// Its access to the agent's cluster.
    fn cluster(&self) -> &ClusterAccess;

    /// The object whose state is the instance's.
    fn primary(namespace: &str, id: &str) -> ObjectRef;

    /// Everything a delete removes, the primary among them.
    fn owned(namespace: &str, id: &str) -> Vec<ObjectRef>;

    /// The instance's status from its primary object (`None`: it is gone).
    fn status_of(id: &str, namespace: &str, primary: Option<&Value>) -> InstanceStatus;

    /// Creates or converges instance `id`'s objects from `spec`; returns their namespace.
    async fn converge(&self, id: &str, spec: &Value) -> Result<String, ProviderError>;
}

async fn read<K: KubeBacked>(
    k: &K,
    id: &str,
    namespace: &str,
) -> Result<InstanceStatus, ProviderError> {
    let primary = k.cluster().get(&K::primary(namespace, id)).await?;
    Ok(K::status_of(id, namespace, primary.as_ref()))
}

#[async_trait]
impl<K: KubeBacked> Provider for K {
    fn name(&self) -> &str {
        K::NAME
    }

    fn service_types(&self) -> Vec<String> {
        vec![K::SERVICE_TYPE.into()]
    }

    async fn create(
        &self,
        id: &str,
        _service_type: &str,
        spec: &Value,
    ) -> Result<InstanceStatus, ProviderError> {
        let namespace = self.converge(id, spec).await?;
        read(self, id, &namespace).await
    }

    async fn delete(
        &self,
        id: &str,
        _service_type: &str,
        spec: &Value,
    ) -> Result<InstanceStatus, ProviderError> {
        let ns = namespace_of(spec);
        self.cluster()
            .delete_all(&K::owned(&ns, id), &K::primary(&ns, id), |p| {
                K::status_of(id, &ns, p)
            })
            .await
    }

    async fn status(
        &self,
        id: &str,
        _service_type: &str,
        spec: &Value,
    ) -> Result<InstanceStatus, ProviderError> {
        read(self, id, &namespace_of(spec)).await
    }
}
