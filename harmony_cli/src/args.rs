use clap::{ArgAction, ArgMatches, Command, FromArgMatches, ValueEnum};
use std::path::PathBuf;

use harmony::domain::capability::{RoleRule, RootDeviceRule};
use harmony::domain::flags::FlagGroups;

/// The parsed `harmony_cli` flags: the common ones and the groups the program's topology
/// offers (a group it does not offer keeps its defaults, as it cannot be given).
#[derive(Debug, Clone, Default)]
pub struct Args {
    /// Flags every program accepts.
    pub common: CommonArgs,
    /// `--kubeconfig`, `--context`.
    pub cluster: ClusterArgs,
    /// `--prune`, `--force-conflicts`, `--no-wait`, `--wait-timeout`.
    pub ownership: OwnershipArgs,
    /// `--apply`, `--inventory`, `--roles`, `--discovery-timeout`, `--assign`, `--root-device`.
    pub bare_metal: BareMetalArgs,
}

/// Flags every Harmony program accepts.
#[derive(Debug, Clone, clap::Args)]
pub struct CommonArgs {
    /// List the Scores and exit.
    #[arg(long)]
    pub list: bool,

    /// Run only Scores whose name contains NAME (case-insensitive); repeatable.
    #[arg(long = "filter", value_name = "NAME")]
    pub filters: Vec<String>,

    /// Show what would change, change nothing.
    #[arg(long)]
    pub plan: bool,

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

impl Default for CommonArgs {
    fn default() -> Self {
        Self {
            list: false,
            filters: Vec::new(),
            plan: false,
            yes: false,
            keep_going: false,
            output: OutputFormat::Text,
            out: PathBuf::from("harmony-out"),
            verbose: 0,
            quiet: 0,
        }
    }
}

/// Flags of programs that can apply to a Kubernetes cluster.
#[derive(Debug, Clone, Default, clap::Args)]
#[command(next_help_heading = "Kubernetes")]
pub struct ClusterArgs {
    /// Apply to the cluster of this kubeconfig instead of rendering files.
    #[arg(long, value_name = "FILE")]
    pub kubeconfig: Option<PathBuf>,

    /// Apply to this kubeconfig context instead of rendering files.
    #[arg(long, value_name = "NAME")]
    pub context: Option<String>,
}

/// Flags of programs that apply objects they own to a live API.
#[derive(Debug, Clone, Default, clap::Args)]
#[command(next_help_heading = "Ownership")]
pub struct OwnershipArgs {
    /// Delete objects a Score owned before but no longer declares (shown as `delete` with --plan).
    #[arg(long)]
    pub prune: bool,

    /// Take ownership of fields another field manager owns instead of failing (as kubectl's flag).
    #[arg(long)]
    pub force_conflicts: bool,

    /// End each apply when the server accepted its objects, without waiting for them to be
    /// current (rolled out, bound, complete).
    #[arg(long)]
    pub no_wait: bool,

    /// Send every object's server-side apply, even one whose live object shows it unchanged
    /// (Harmony's managed fields are exactly what it declares, each with the declared value).
    #[arg(long)]
    pub no_skip: bool,

    /// How long an apply waits for its objects to be current before failing, naming each one
    /// that is not [default: 300].
    #[arg(long, value_name = "SECONDS", value_parser = clap::value_parser!(u64).range(1..=86_400), conflicts_with = "no_wait")]
    pub wait_timeout: Option<u64>,
}

impl OwnershipArgs {
    /// The wait policy these flags ask for.
    pub fn wait_policy(&self) -> harmony::domain::WaitPolicy {
        use harmony::domain::WaitPolicy;
        if self.no_wait {
            WaitPolicy::disabled()
        } else {
            WaitPolicy::within(
                self.wait_timeout
                    .map_or(WaitPolicy::DEFAULT_TIMEOUT, std::time::Duration::from_secs),
            )
        }
    }
}

/// Flags of bare-metal programs.
#[derive(Debug, Clone, Default, clap::Args)]
#[command(next_help_heading = "Bare metal")]
pub struct BareMetalArgs {
    /// Change the live services (dnsmasq, haproxy, HTTP boot) instead of rendering files.
    #[arg(long)]
    pub apply: bool,

    /// The SQLite inventory file of discovered hosts.
    #[arg(long, value_name = "FILE")]
    pub inventory: Option<PathBuf>,

    /// A TOML file giving hosts their roles instead of asking.
    #[arg(long, value_name = "FILE")]
    pub roles: Option<PathBuf>,

    /// How long to wait for hosts to be discovered (seconds).
    // allow_hyphen_values: `-1` reaches the value parser, whose error names the flag.
    #[arg(long, value_name = "SECONDS", allow_hyphen_values = true)]
    pub discovery_timeout: Option<u64>,

    /// Give discovered, unassigned hosts a role without a terminal: by MAC
    /// (worker=mac:52:54:00:00:00:21) or by minimum size (worker=min-memory:16GiB,min-disk:120GB;
    /// a size rule matching more hosts than the role needs stops and lists them); repeatable.
    #[arg(long = "assign", value_name = "ROLE=RULE", value_parser = parse_role_rule)]
    pub assign: Vec<RoleRule>,

    /// Which disk hosts install to, as Metal3's root-device hints: TARGET a role or host:ID,
    /// HINTS name:sdb, min-size:200GB, rotational:true|false, model:TEXT (substring),
    /// serial:TEXT, wwn:TEXT (e.g. worker=min-size:200GB,rotational:false); a host's own rule
    /// wins over its role's. Default: the smallest SSD of at least 100 GB, else the smallest
    /// HDD of at least 100 GB; a host with no such disk fails naming its disks. Repeatable.
    #[arg(long = "root-device", value_name = "TARGET=HINTS", value_parser = parse_root_device)]
    pub root_device: Vec<RootDeviceRule>,

    /// A host Harmony powers and PXE boots itself through its Redfish BMC, by boot MAC:
    /// MAC=ADDRESS,credentials=SOURCE (e.g. 52:54:00:00:00:21=redfish://10.0.0.5/redfish/v1/Systems/1,credentials=env:BMC_R14);
    /// SOURCE is env:VARIABLE or file:PATH holding USER:PASSWORD, never the password itself.
    /// Hosts without one are rebooted by the operator when asked. Repeatable.
    // Read as text and parsed in `run` (`HostBmc::parse`): clap's own error would echo the
    // whole value, password included when one was wrongly written into the address.
    #[arg(long = "bmc", value_name = "MAC=ADDRESS,credentials=SOURCE")]
    pub bmc: Vec<String>,

    /// The PEM CAs that sign the BMCs' certificates (default: the system's).
    #[arg(long = "bmc-ca-file", value_name = "FILE")]
    pub bmc_ca_file: Option<PathBuf>,

    /// Accept any BMC certificate (self-signed BMCs); logged as a warning. Prefer --bmc-ca-file.
    #[arg(long = "bmc-insecure")]
    pub bmc_insecure: bool,
}

fn parse_role_rule(s: &str) -> Result<RoleRule, String> {
    RoleRule::parse(s)
}

fn parse_root_device(s: &str) -> Result<RootDeviceRule, String> {
    RootDeviceRule::parse(s)
}

/// A program that has no flags of its own.
#[derive(Debug, Clone, Copy, Default, clap::Args)]
#[command(about = DEFAULT_ABOUT, long_about = None)]
pub struct NoFlags {}

/// The first line of `--help` unless the program's flags give their own.
const DEFAULT_ABOUT: &str = "Run Harmony Scores against a topology";

/// Report format.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, ValueEnum)]
pub enum OutputFormat {
    /// Human-readable text.
    #[default]
    Text,
    /// One JSON document (see docs/report-format.md).
    Json,
}

impl Args {
    /// The command line of a program named `name` whose topology offers `groups` and whose own
    /// flags are `X` (under "Program options"; `X`'s `#[command(about = ...)]`, or its doc
    /// comment, is the first line of `--help`).
    pub fn command<X: clap::Args>(name: &str, groups: FlagGroups) -> Command {
        let mut cmd = Command::new("harmony").bin_name(name.to_string());
        cmd = <CommonArgs as clap::Args>::augment_args(cmd);
        if groups.cluster {
            cmd = <ClusterArgs as clap::Args>::augment_args(cmd);
        }
        if groups.ownership {
            cmd = <OwnershipArgs as clap::Args>::augment_args(cmd);
        }
        if groups.bare_metal {
            cmd = <BareMetalArgs as clap::Args>::augment_args(cmd);
        }
        // Each group's doc comment became the command's about; the program's own flags (last)
        // may give theirs.
        cmd = cmd
            .about(DEFAULT_ABOUT)
            .long_about(None)
            .next_help_heading("Program options");
        X::augment_args(cmd)
    }

    /// Reads the flags out of matches of [`Args::command`] built with the same `groups`.
    pub fn from_matches(matches: &ArgMatches, groups: FlagGroups) -> Result<Self, clap::Error> {
        Ok(Self {
            common: CommonArgs::from_arg_matches(matches)?,
            cluster: if groups.cluster {
                ClusterArgs::from_arg_matches(matches)?
            } else {
                ClusterArgs::default()
            },
            ownership: if groups.ownership {
                OwnershipArgs::from_arg_matches(matches)?
            } else {
                OwnershipArgs::default()
            },
            bare_metal: if groups.bare_metal {
                BareMetalArgs::from_arg_matches(matches)?
            } else {
                BareMetalArgs::default()
            },
        })
    }

    pub(crate) fn log_level(&self) -> log::LevelFilter {
        match (self.common.quiet, self.common.verbose) {
            (q, _) if q > 0 => log::LevelFilter::Error,
            (_, 0) => log::LevelFilter::Warn,
            (_, 1) => log::LevelFilter::Info,
            (_, 2) => log::LevelFilter::Debug,
            _ => log::LevelFilter::Trace,
        }
    }
}
