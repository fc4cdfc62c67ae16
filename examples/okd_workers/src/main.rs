//! Renders the OKD workers bring-up (default) into `harmony-out/okd/`, or applies it to this
//! machine's dnsmasq, haproxy and HTTP boot server with `--apply --ignition-dir DIR`
//! (`--services-dir DIR`, default `/var/lib/harmony/okd`, is the folder Harmony owns there).

#[tokio::main]
async fn main() -> std::process::ExitCode {
    example_okd_workers::cli_main().await
}
