//! `harmony-operator crds` prints the CRDs; `harmony-operator run` reconciles the resources
//! (see [`harmony_operator::cli`]).

#[tokio::main]
async fn main() -> std::process::ExitCode {
    harmony_operator::cli::cli_main().await
}
