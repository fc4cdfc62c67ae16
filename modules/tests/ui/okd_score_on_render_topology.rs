// RenderTopology renders Kubernetes objects; it has none of the bare-metal capabilities an OKD
// bring-up needs (DHCP, TFTP, DNS, HTTP boot, load balancer, host inventory, HA cluster layout):
// registering an OKD Score on it must not compile.
use harmony::domain::{Inventory, Maestro, RunContext};
use harmony::infra::render::RenderTopology;
use harmony_modules::okd::OkdSanityCheckScore;

fn main() {
    let topology = RenderTopology::from_context(&RunContext::default());
    let mut maestro = Maestro::new(Inventory::empty(), topology);
    maestro.register(vec![Box::new(OkdSanityCheckScore)]);
}
