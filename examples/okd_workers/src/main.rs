//! Renders the OKD workers bring-up (default) into `harmony-out/okd/`, or applies it to this
//! machine's dnsmasq, haproxy and HTTP boot server with `--apply` (ignition files from
//! `HARMONY_OKD_IGNITION_DIR`, files Harmony owns in `HARMONY_OKD_SERVICES_DIR`, default
//! `/var/lib/harmony/okd`).

use std::process::ExitCode;

use example_okd_workers::{inventory, layout, scores};
use harmony::infra::okd::{BareMetalServices, HAClusterTopology};
use harmony_modules::okd::OkdInstallation;

#[tokio::main]
async fn main() -> ExitCode {
    let (layout, inventory) = match (layout(), inventory()) {
        (Ok(l), Ok(i)) => (l, i),
        (Err(e), _) | (_, Err(e)) => {
            eprintln!("error: {e}");
            return ExitCode::from(2);
        }
    };
    let install = OkdInstallation {
        ignition_dir: std::env::var_os("HARMONY_OKD_IGNITION_DIR").map(Into::into),
        ..OkdInstallation::default()
    };
    let services = BareMetalServices {
        dir: std::env::var_os("HARMONY_OKD_SERVICES_DIR")
            .map(Into::into)
            .unwrap_or_else(|| "/var/lib/harmony/okd".into()),
        ..BareMetalServices::default()
    };
    let topology = move |ctx: &_| HAClusterTopology::from_context(layout, services, ctx);
    harmony_cli::run(inventory, topology, scores(&install)).await
}
