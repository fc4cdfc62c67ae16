// RenderTopology implements K8sClient, so a Kubernetes Score can be registered on it.
use harmony::domain::{Inventory, Maestro, RunContext};
use harmony::infra::render::RenderTopology;
use harmony_modules::k8s::NamespaceScore;
use harmony_types::Dns1123Label;

fn main() {
    let topology = RenderTopology::from_context(&RunContext::default());
    let mut maestro = Maestro::new(Inventory::empty(), topology);
    maestro.register(vec![Box::new(NamespaceScore::new(Dns1123Label::parse("shop").unwrap()))]);
}
