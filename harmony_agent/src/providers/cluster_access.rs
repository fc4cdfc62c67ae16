//! What the built-in providers share: the agent's cluster, reached through its `K8sTopology`,
//! with every cluster error attributed to the provider that met it.

use harmony::domain::capability::{CapabilityError, K8sClient, K8sObject, ObjectRef};
use harmony::infra::kube::K8sTopology;
use harmony_agent_protocol::{InstanceState, InstanceStatus};
use serde_json::Value;
use std::sync::Arc;

use super::ProviderError;
use crate::cluster::Cluster;

/// A namespaced object of the agent's cluster.
pub fn object_ref(api_version: &str, kind: &str, namespace: &str, name: &str) -> ObjectRef {
    ObjectRef {
        api_version: api_version.into(),
        kind: kind.into(),
        namespace: Some(namespace.into()),
        name: name.into(),
    }
}

/// A built-in provider's handle on the agent's cluster.
#[derive(derive_new::new)]
pub struct ClusterAccess {
    /// The agent's cluster.
    cluster: Arc<Cluster>,
    /// The built-in provider's name, which its errors carry.
    provider: &'static str,
}

impl ClusterAccess {
    /// Attributes a cluster error to this provider.
    pub fn err(&self, error: CapabilityError) -> ProviderError {
        ProviderError::Cluster {
            provider: self.provider.into(),
            error,
        }
    }

    /// The agent's topology (apply mode).
    pub async fn topology(&self) -> Result<Arc<K8sTopology>, ProviderError> {
        self.cluster
            .topology(false, false)
            .await
            .map_err(|e| self.err(e))
    }

    /// Applies `manifests` server-side with the agent's field manager.
    pub async fn apply(&self, manifests: Vec<Value>) -> Result<(), ProviderError> {
        let objects = manifests
            .into_iter()
            .map(K8sObject::new)
            .collect::<Result<Vec<_>, _>>()
            .map_err(|e| self.err(e))?;
        self.topology()
            .await?
            .apply(&objects, &Default::default())
            .await
            .map_err(|f| self.err(f.error))?;
        Ok(())
    }

    /// Reads `object`; `None` when it does not exist.
    pub async fn get(&self, object: &ObjectRef) -> Result<Option<Value>, ProviderError> {
        let found = self
            .topology()
            .await?
            .get(object)
            .await
            .map_err(|e| self.err(e))?;
        Ok(found.map(|o| o.value().clone()))
    }

    /// Deletes `objects` in order (absent ones are fine), then reports the status `read` gives
    /// for `primary`: `deleting` until it is gone.
    pub async fn delete_all(
        &self,
        objects: &[ObjectRef],
        primary: &ObjectRef,
        read: impl Fn(Option<&Value>) -> InstanceStatus,
    ) -> Result<InstanceStatus, ProviderError> {
        let t = self.topology().await?;
        for o in objects {
            t.delete(o).await.map_err(|e| self.err(e))?;
        }
        let mut s = read(self.get(primary).await?.as_ref());
        if s.state != InstanceState::Deleted {
            s.state = InstanceState::Deleting;
        }
        Ok(s)
    }
}
