//! The `example-service-instance` program's real entry point, built inside this package so the
//! end-to-end tests (the bad-input battery) can start it as a process
//! (`CARGO_BIN_EXE_e2e-example-service-instance`) with a binary cargo keeps fresh.

use std::process::ExitCode;

#[tokio::main]
async fn main() -> ExitCode {
    example_service_instance::cli_main().await
}
