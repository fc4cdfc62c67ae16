//! The operator's real entry point (the `harmony-operator` program), built inside this package
//! so the end-to-end tests can start several replicas as processes
//! (`CARGO_BIN_EXE_e2e-operator`) with a binary cargo keeps fresh.

#[tokio::main]
async fn main() -> std::process::ExitCode {
    harmony_operator::cli::cli_main().await
}
