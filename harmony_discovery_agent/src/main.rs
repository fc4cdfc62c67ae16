//! `harmony-discovery-agent URL`: reports this host's hardware to Harmony's discovery endpoint.
//! `--cmdline` reads the URL from the kernel command line (`harmony.discovery=URL`), as the
//! discovery image boots it; `--print` only shows the report.
//!
//! Exit codes: 0 reported, 1 reading the facts or posting failed, 2 usage error.

use std::process::ExitCode;
use std::time::Duration;

use clap::Parser;
use harmony_discovery_agent::{Facts, post};
use harmony_types::Url;

/// Reports this host's hardware (MACs, CPUs, memory, disks, DMI serial and UUID) to Harmony's
/// discovery endpoint.
#[derive(Debug, Parser)]
#[command(name = "harmony-discovery-agent", version)]
struct Args {
    /// The discovery endpoint, e.g. http://SERVICES:8080/discovery.
    #[arg(value_name = "URL", conflicts_with_all = ["cmdline", "print"], required_unless_present_any = ["cmdline", "print"])]
    url: Option<String>,
    /// Read the endpoint from the kernel command line (harmony.discovery=URL in /proc/cmdline).
    #[arg(long, conflicts_with = "print")]
    cmdline: bool,
    /// Only print the report as JSON; post nothing.
    #[arg(long)]
    print: bool,
    /// Seconds to wait for the endpoint to answer.
    #[arg(long, value_name = "SECONDS", default_value_t = 10, value_parser = clap::value_parser!(u64).range(1..=3600))]
    timeout: u64,
}

fn main() -> ExitCode {
    let args = Args::parse();
    let facts = Facts::system();
    let url = if args.print {
        None
    } else if args.cmdline {
        match facts.cmdline_url() {
            Ok(u) => Some(u),
            Err(e) => {
                eprintln!("error: {e}");
                return ExitCode::from(2);
            }
        }
    } else {
        match Url::parse(args.url.as_deref().unwrap_or_default()) {
            Ok(u) => Some(u),
            Err(e) => {
                eprintln!("error: URL: {e}");
                return ExitCode::from(2);
            }
        }
    };
    let report = match facts.discovery_report() {
        Ok(r) => r,
        Err(e) => {
            eprintln!("error: {e}");
            return ExitCode::from(1);
        }
    };
    let Some(url) = url else {
        println!(
            "{}",
            serde_json::to_string_pretty(&report).unwrap_or_default()
        );
        return ExitCode::SUCCESS;
    };
    eprintln!("{}", report.summary());
    match post(&url, &report, Duration::from_secs(args.timeout)) {
        Ok(()) => {
            eprintln!(
                "reported host {} ({} NIC(s)) to {url}",
                report.host.id,
                report.host.macs.len()
            );
            ExitCode::SUCCESS
        }
        Err(e) => {
            eprintln!("error: {e}");
            ExitCode::from(1)
        }
    }
}
