//! `harmony-control-plane`: see `--help`.

#[tokio::main]
async fn main() {
    harmony_control_plane_cli::cli_main().await;
}
