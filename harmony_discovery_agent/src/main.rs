//! `harmony-discovery-agent URL`: reports this host's hardware to Harmony's discovery endpoint.
//!
//! Exit codes: 0 reported, 1 reading the facts or posting failed, 2 usage error.

use std::process::ExitCode;
use std::time::Duration;

use harmony_discovery_agent::{Facts, post};
use harmony_types::Url;

fn main() -> ExitCode {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let (url, dry_run) = match args.as_slice() {
        [flag] if flag == "--print" => (None, true),
        [url] => (Some(url.clone()), false),
        _ => {
            eprintln!(
                "usage: harmony-discovery-agent http://SERVICES:8080/discovery   (or --print to only show the report)"
            );
            return ExitCode::from(2);
        }
    };
    let report = match Facts::system().report() {
        Ok(r) => r,
        Err(e) => {
            eprintln!("error: {e}");
            return ExitCode::from(1);
        }
    };
    if dry_run {
        println!(
            "{}",
            serde_json::to_string_pretty(&report).unwrap_or_default()
        );
        return ExitCode::SUCCESS;
    }
    let url = match Url::parse(url.as_deref().unwrap_or_default()) {
        Ok(u) => u,
        Err(e) => {
            eprintln!("error: {e}");
            return ExitCode::from(2);
        }
    };
    match post(&url, &report, Duration::from_secs(10)) {
        Ok(()) => {
            eprintln!(
                "reported host {} ({} NIC(s)) to {url}",
                report.id,
                report.macs.len()
            );
            ExitCode::SUCCESS
        }
        Err(e) => {
            eprintln!("error: {e}");
            ExitCode::from(1)
        }
    }
}
