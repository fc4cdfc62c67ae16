// The same Score on the control plane's admin client as a topology compiles, and so does it on
// a site paired with that client.
use harmony::domain::capability::ProjectQuota;
use harmony::domain::{Inventory, Maestro, RunContext};
use harmony::infra::control_plane::{ControlPlaneClient, SecretString};
use harmony::infra::kube::{K8sTopology, KubeTarget};
use harmony::infra::region_site::RegionSiteTopology;
use harmony::infra::tenant_admin_topology::TenantAdminTopology;
use harmony_modules::tenant::{TenantProjectSpec, TenantScore};

fn main() {
    let cp = || {
        ControlPlaneClient::new("https://cp.example.com", SecretString::new("admin"), None)
            .unwrap()
    };
    let score = TenantScore::new("acme")
        .with_cap("eu-west", ProjectQuota { cpu: Some("8".into()), ..Default::default() })
        .with_project(TenantProjectSpec { name: "web".into(), ..Default::default() });
    let mut maestro = Maestro::new(Inventory::empty(), TenantAdminTopology::new(cp()));
    maestro.register(vec![Box::new(score.clone())]);
    let site = K8sTopology::new("eu-west", KubeTarget::InCluster, &RunContext::default());
    let mut maestro = Maestro::new(Inventory::empty(), RegionSiteTopology::new(site, cp()));
    maestro.register(vec![Box::new(score)]);
}
