//! `example-tenants [--control-plane URL --admin-token-file FILE [--ca-file FILE]]
//! [--regions eu-west[,us-east]] [--plan | --yes] [--output json]` declares tenant `acme` and its
//! projects `shop` and `analytics` on the control plane; without a control plane it prints the
//! declaration and sends nothing. See `example_tenants::cli_main`.

use std::process::ExitCode;

#[tokio::main]
async fn main() -> ExitCode {
    example_tenants::cli_main().await
}
