//! Renders the web shop example (default) or applies it with `--kubeconfig FILE` / `--context NAME`.

use std::process::ExitCode;

use example_webapp::WebShop;
use harmony::domain::Inventory;
use harmony::infra::default_topology::DefaultTopology;

#[tokio::main]
async fn main() -> ExitCode {
    let shop = match WebShop::example() {
        Ok(s) => s,
        Err(e) => {
            eprintln!("error: {e}");
            return ExitCode::from(2);
        }
    };
    let topology = |ctx: &_| Ok::<_, std::convert::Infallible>(DefaultTopology::from_context(ctx));
    harmony_cli::run(Inventory::empty(), topology, shop.scores()).await
}
