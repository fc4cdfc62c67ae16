//! Renders the multi-site PostgreSQL example into `harmony-out/site-paris/` and
//! `harmony-out/site-newyork/`; with `--kubeconfig FILE` each site is the context named after it.
//! `--pg-version V` picks the PostgreSQL major (default 17).

use std::process::ExitCode;

use example_multisite_postgres::{SITES, finance_db, split_version_flag};
use harmony::domain::{Inventory, RunContext, Score};
use harmony::infra::default_topology::DefaultTopology;
use harmony::infra::multi_site::MultiSiteTopology;
use harmony_cli::Console;

#[tokio::main]
async fn main() -> ExitCode {
    let (version, args) = match split_version_flag(std::env::args().collect()) {
        Ok(split) => split,
        Err(e) => {
            eprintln!("error: {e}");
            return ExitCode::from(2);
        }
    };
    let topology = |ctx: &RunContext| MultiSiteTopology::from_context("finance", &SITES, ctx);
    let scores: Vec<Box<dyn Score<MultiSiteTopology<DefaultTopology>>>> =
        vec![Box::new(finance_db(&version))];
    let code =
        harmony_cli::run_with(args, Console::stdio(), Inventory::empty(), topology, scores).await;
    ExitCode::from(code)
}
