//! The agent's real entry point, built inside this package so the end-to-end tests can start it
//! as a process (`CARGO_BIN_EXE_e2e-agent`) with a binary cargo keeps fresh.

#[tokio::main]
async fn main() {
    harmony_agent::cli_main().await;
}
