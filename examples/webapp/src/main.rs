//! Renders the web shop example (default) or applies it with `--kubeconfig FILE` / `--context NAME`.

#[tokio::main]
async fn main() -> std::process::ExitCode {
    example_webapp::cli_main().await
}
