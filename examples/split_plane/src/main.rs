//! Renders the widget platform into `harmony-out/control-plane/` and `harmony-out/data-plane/`.
//!
//! Render mode only: applying to two live API servers needs two clusters, which the command line
//! names one of; build `SplitPlaneTopology::new` with two `K8sTopology` values in your own program
//! (see docs/split-plane.md).

use std::process::ExitCode;

use example_split_plane::{EXAMPLE_KUBECONFIG, KUBECONFIG_SECRET, NAMESPACE, scores};
use harmony::domain::{Inventory, RunContext};
use harmony::infra::render::RenderTopology;
use harmony::infra::split_plane::SplitPlaneTopology;

fn topology(ctx: &RunContext) -> Result<SplitPlaneTopology<RenderTopology>, String> {
    if ctx.kubeconfig.is_some() || ctx.context.is_some() {
        return Err(
            "this example only renders (a split plane needs two clusters and the flags \
                    name one); drop --kubeconfig/--context, or build SplitPlaneTopology::new with \
                    two K8sTopology values as docs/split-plane.md shows"
                .into(),
        );
    }
    Ok(
        SplitPlaneTopology::rendered("split-plane", ctx).with_data_plane_kubeconfig(
            NAMESPACE,
            KUBECONFIG_SECRET,
            EXAMPLE_KUBECONFIG,
        ),
    )
}

#[tokio::main]
async fn main() -> ExitCode {
    harmony_cli::run(Inventory::empty(), topology, scores()).await
}
