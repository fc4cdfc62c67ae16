//! The `example-tenants` program's real entry point, built inside this package so the
//! end-to-end tests can start it as a process (`CARGO_BIN_EXE_e2e-example-tenants`) with a
//! binary cargo keeps fresh, as `e2e-control-plane` does for the control plane.

use std::process::ExitCode;

#[tokio::main]
async fn main() -> ExitCode {
    example_tenants::cli_main().await
}
