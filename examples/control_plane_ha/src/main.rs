//! Renders the highly available control plane (default) or applies it with `--kubeconfig FILE`
//! / `--context NAME`: a CloudNativePG database first, then three control-plane replicas on it.

use std::process::ExitCode;

use example_control_plane_ha::ControlPlaneHa;
use harmony::domain::Inventory;
use harmony::infra::default_topology::DefaultTopology;

#[tokio::main]
async fn main() -> ExitCode {
    let ha = match ControlPlaneHa::example() {
        Ok(ha) => ha,
        Err(e) => {
            eprintln!("error: {e}");
            return ExitCode::from(2);
        }
    };
    let topology = |ctx: &_| Ok::<_, std::convert::Infallible>(DefaultTopology::from_context(ctx));
    harmony_cli::run(Inventory::empty(), topology, ha.scores()).await
}
