//! Renders the widget platform into `harmony-out/control-plane/` and `harmony-out/data-plane/`
//! (render mode only; see `example_split_plane::cli_main`).

#[tokio::main]
async fn main() -> std::process::ExitCode {
    example_split_plane::cli_main().await
}
