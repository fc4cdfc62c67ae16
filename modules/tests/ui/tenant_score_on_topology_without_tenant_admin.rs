// A direct Kubernetes topology has K8sClient but not TenantAdmin: registering a TenantScore on
// it must not compile (the Score declares the tenant on the control plane).
use harmony::domain::{Inventory, Maestro, RunContext};
use harmony::infra::kube::{K8sTopology, KubeTarget};
use harmony_modules::tenant::TenantScore;

fn main() {
    let site = K8sTopology::new("eu-west", KubeTarget::InCluster, &RunContext::default());
    let score = TenantScore::new("acme");
    let mut maestro = Maestro::new(Inventory::empty(), site);
    maestro.register(vec![Box::new(score)]);
}
