//! The `example-split-plane` program's real entry point, built inside this package so the
//! end-to-end tests (the bad-input battery) can start it as a process
//! (`CARGO_BIN_EXE_e2e-example-split-plane`) with a binary cargo keeps fresh.

use std::process::ExitCode;

#[tokio::main]
async fn main() -> ExitCode {
    example_split_plane::cli_main().await
}
