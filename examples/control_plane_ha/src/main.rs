//! Renders the highly available control plane (default) or applies it with `--kubeconfig FILE`
//! / `--context NAME`: a CloudNativePG database first, then three control-plane replicas on it.

#[tokio::main]
async fn main() -> std::process::ExitCode {
    example_control_plane_ha::cli_main().await
}
