// A direct Kubernetes topology has K8sClient but not RegionAdmin: registering the region agent
// rollout on it must not compile (the Score creates the region on the control plane).
use harmony::domain::{Inventory, Maestro, RunContext};
use harmony::infra::kube::{K8sTopology, KubeTarget};
use harmony_modules::region::RegionAgentRolloutScore;
use harmony_types::{RegionId, ZoneId};

fn main() {
    let site = K8sTopology::new("eu-west", KubeTarget::InCluster, &RunContext::default());
    let score = RegionAgentRolloutScore::new(
        RegionId::parse("eu-west").unwrap(),
        ZoneId::parse("paris-1").unwrap(),
        "registry.example.com/harmony-agent:0.1.0",
    );
    let mut maestro = Maestro::new(Inventory::empty(), site);
    maestro.register(vec![Box::new(score)]);
}
