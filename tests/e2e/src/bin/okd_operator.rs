//! The OKD prepare and workers phases on the end-to-end lab's layout (10.77.0.0/24), for the
//! prompt tests: run inside the lab's services namespace, in a terminal, with `--apply`.
//! `HARMONY_OKD_SERVICES_DIR` is the folder Harmony owns; the placeholder ignition files and
//! iPXE binaries are written beside it.

use std::path::PathBuf;
use std::process::ExitCode;

use harmony::domain::inventory::HostRole;
use harmony::domain::{Inventory, Score};
use harmony::infra::okd::{BareMetalServices, HAClusterTopology};
use harmony_e2e::okd_lab::{HTTP_PORT, fake_installation, layout};
use harmony_modules::okd::{OkdHostsScore, OkdPrepareScore};

#[tokio::main]
async fn main() -> ExitCode {
    let Some(dir) = std::env::var_os("HARMONY_OKD_SERVICES_DIR").map(PathBuf::from) else {
        eprintln!("error: set HARMONY_OKD_SERVICES_DIR to the folder Harmony may own");
        return ExitCode::from(2);
    };
    let (layout, install) = match (layout(), fake_installation(&dir.join("inputs"))) {
        (Ok(l), Ok(i)) => (l, i),
        (Err(e), _) | (_, Err(e)) => {
            eprintln!("error: {e}");
            return ExitCode::from(2);
        }
    };
    let services = BareMetalServices {
        dir: dir.join("services"),
        http_port: HTTP_PORT,
        ..BareMetalServices::default()
    };
    let scores: Vec<Box<dyn Score<HAClusterTopology>>> = vec![
        Box::new(OkdPrepareScore::new(install.clone())),
        Box::new(OkdHostsScore::new(HostRole::Worker, install)),
    ];
    let topology = move |ctx: &_| HAClusterTopology::from_context(layout, services, ctx);
    harmony_cli::run(Inventory::empty(), topology, scores).await
}
