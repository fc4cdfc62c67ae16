//! `harmony-agent`: see `--help`.

#[tokio::main]
async fn main() {
    harmony_agent::cli_main().await;
}
