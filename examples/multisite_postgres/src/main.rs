//! Renders the multi-site PostgreSQL example into `harmony-out/site-paris/` and
//! `harmony-out/site-newyork/`; with `--kubeconfig FILE` each site is the context named after it.
//! `--pg-version V` picks the PostgreSQL major (default 17).

#[tokio::main]
async fn main() -> std::process::ExitCode {
    example_multisite_postgres::cli_main().await
}
