// The same rollout on the site paired with the control plane's admin client compiles.
use harmony::domain::{Inventory, Maestro, RunContext};
use harmony::infra::control_plane::{ControlPlaneClient, SecretString};
use harmony::infra::kube::{K8sTopology, KubeTarget};
use harmony::infra::region_site::RegionSiteTopology;
use harmony_modules::region::RegionAgentRolloutScore;
use harmony_types::{RegionId, ZoneId};

fn main() {
    let site = K8sTopology::new("eu-west", KubeTarget::InCluster, &RunContext::default());
    let cp = ControlPlaneClient::new("https://cp.example.com", SecretString::new("admin"), None)
        .unwrap();
    let score = RegionAgentRolloutScore::new(
        RegionId::parse("eu-west").unwrap(),
        ZoneId::parse("paris-1").unwrap(),
        "registry.example.com/harmony-agent:0.1.0",
    );
    let mut maestro = Maestro::new(Inventory::empty(), RegionSiteTopology::new(site, cp));
    maestro.register(vec![Box::new(score)]);
}
