//! The `example-okd-workers` program's real entry point, built inside this package so the
//! end-to-end tests (the bad-input battery) can start it as a process
//! (`CARGO_BIN_EXE_e2e-example-okd-workers`) with a binary cargo keeps fresh.

use std::process::ExitCode;

#[tokio::main]
async fn main() -> ExitCode {
    example_okd_workers::cli_main().await
}
