//! The agent's cluster, shared by the ops ([`crate::exec`]) and the built-in service providers
//! ([`crate::providers`]). It lives apart from both so that neither imports the other's module
//! for it: exec uses providers, providers never use exec.

use harmony::domain::capability::CapabilityError;
use harmony::domain::{RunContext, Topology, WaitPolicy};
use harmony::infra::kube::{K8sTopology, KubeTarget};
use std::collections::HashMap;
use std::sync::Arc;
use tokio::sync::Mutex as AsyncMutex;

/// The field manager of every apply the agent makes.
pub const FIELD_MANAGER: &str = "harmony-agent";

/// The agent's cluster: one ready `K8sTopology` per (dry run, prune) mode, shared by the ops
/// and the built-in service providers so they reuse one connection.
pub struct Cluster {
    target: KubeTarget,
    name: String,
    topologies: AsyncMutex<HashMap<(bool, bool), Arc<K8sTopology>>>,
}

impl Cluster {
    /// The cluster at `target`, named `name` in messages; nothing is contacted yet.
    pub fn new(name: String, target: KubeTarget) -> Self {
        Self {
            target,
            name,
            topologies: AsyncMutex::new(HashMap::new()),
        }
    }

    /// A ready topology for the mode; a failed preparation is not cached.
    pub async fn topology(
        &self,
        dry_run: bool,
        prune: bool,
    ) -> Result<Arc<K8sTopology>, CapabilityError> {
        let mut map = self.topologies.lock().await;
        if let Some(t) = map.get(&(dry_run, prune)) {
            return Ok(t.clone());
        }
        // Each apply_manifests request carries its own wait policy (`apply_with_wait`); the
        // agent's other applies (project presence, providers) do their own waiting.
        let ctx = RunContext {
            plan: dry_run,
            prune,
            wait: WaitPolicy::disabled(),
            ..RunContext::default()
        };
        let topology = K8sTopology::new(self.name.clone(), self.target.clone(), &ctx)
            .with_field_manager(FIELD_MANAGER);
        topology
            .ensure_ready()
            .await
            .map_err(|e| CapabilityError::Unreachable {
                server: format!("the Kubernetes API of {}", self.name),
                reason: e.reason,
            })?;
        let topology = Arc::new(topology);
        map.insert((dry_run, prune), topology.clone());
        Ok(topology)
    }
}
