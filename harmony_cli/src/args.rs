use clap::{ArgAction, Parser, ValueEnum};
use std::path::PathBuf;

/// Command-line flags shared by every Harmony program.
#[derive(Debug, Clone, Parser)]
#[command(about = "Run Harmony Scores against a topology", long_about = None)]
pub struct Args {
    /// List the Scores and exit.
    #[arg(long)]
    pub list: bool,

    /// Run only Scores whose name contains NAME (case-insensitive); repeatable.
    #[arg(long = "filter", value_name = "NAME")]
    pub filters: Vec<String>,

    /// Show what would change, change nothing.
    #[arg(long)]
    pub plan: bool,

    /// Delete objects a Score owned before but no longer declares (shown as `delete` with --plan).
    #[arg(long)]
    pub prune: bool,

    /// Take ownership of fields another field manager owns instead of failing (as kubectl's flag).
    #[arg(long)]
    pub force_conflicts: bool,

    /// Apply to the cluster of this kubeconfig instead of rendering files.
    #[arg(long, value_name = "FILE")]
    pub kubeconfig: Option<PathBuf>,

    /// Apply to this kubeconfig context instead of rendering files.
    #[arg(long, value_name = "NAME")]
    pub context: Option<String>,

    /// Bare-metal topologies: change the live services (dnsmasq, haproxy, HTTP boot) instead of rendering files.
    #[arg(long)]
    pub apply: bool,

    /// Bare-metal topologies: the SQLite inventory file of discovered hosts.
    #[arg(long, value_name = "FILE")]
    pub inventory: Option<PathBuf>,

    /// Bare-metal topologies: a TOML file giving hosts their roles instead of asking.
    #[arg(long, value_name = "FILE")]
    pub roles: Option<PathBuf>,

    /// Bare-metal topologies: how long to wait for hosts to be discovered (seconds).
    #[arg(long, value_name = "SECONDS")]
    pub discovery_timeout: Option<u64>,

    /// Answer yes to every confirmation and never prompt (run all Scores unless filtered).
    #[arg(long, short = 'y')]
    pub yes: bool,

    /// Run the remaining Scores after one fails.
    #[arg(long)]
    pub keep_going: bool,

    /// Report format on standard output.
    #[arg(long, value_enum, default_value_t = OutputFormat::Text)]
    pub output: OutputFormat,

    /// Output folder for render mode.
    #[arg(long, value_name = "DIR", default_value = "harmony-out")]
    pub out: PathBuf,

    /// More log output (-v info, -vv debug, -vvv trace).
    #[arg(short, long, action = ArgAction::Count)]
    pub verbose: u8,

    /// Less output: no progress lines (-q), only errors in logs.
    #[arg(short, long, action = ArgAction::Count, conflicts_with = "verbose")]
    pub quiet: u8,
}

/// Report format.
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum OutputFormat {
    /// Human-readable text.
    Text,
    /// One JSON document (see docs/report-format.md).
    Json,
}

impl Args {
    pub(crate) fn log_level(&self) -> log::LevelFilter {
        match (self.quiet, self.verbose) {
            (q, _) if q > 0 => log::LevelFilter::Error,
            (_, 0) => log::LevelFilter::Warn,
            (_, 1) => log::LevelFilter::Info,
            (_, 2) => log::LevelFilter::Debug,
            _ => log::LevelFilter::Trace,
        }
    }
}
