//! The `harmony-operator` program: `crds` prints the CRDs, `run` reconciles the resources, with
//! leader election among replicas by default. In the library so test harnesses can build the
//! same program as their own binary.

use clap::{ArgAction, Parser, Subcommand};
use std::path::PathBuf;
use std::process::ExitCode;
use std::time::Duration;

use kube::config::{KubeConfigOptions, Kubeconfig};

use crate::leader::{LeaderElection, run_elected};
use crate::{OperatorConfig, crds_yaml, run};

/// Harmony's operator: PostgreSQL Scores as custom resources.
#[derive(Debug, Parser)]
#[command(name = "harmony-operator", about, long_about = None)]
pub struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Debug, Subcommand)]
enum Command {
    /// Print the CRDs (MultisitePostgreSQL, PostgreSQL, RegionAgent, Site, Tenant) as YAML.
    Crds,
    /// Watch and reconcile the resources on the control plane's API server.
    Run(RunArgs),
}

/// The flags of `harmony-operator run`.
#[derive(Debug, clap::Args)]
struct RunArgs {
    /// Kubeconfig of the control plane's API server (default: KUBECONFIG, ~/.kube/config, in-cluster).
    #[arg(long, value_name = "FILE")]
    kubeconfig: Option<PathBuf>,
    /// Reconcile every Ready resource again after this many seconds.
    #[arg(long, default_value_t = 300)]
    resync_seconds: u64,
    /// Reconcile only while holding the Lease, so several replicas can run (one reconciles, the
    /// others wait to take over). `--leader-election=false` for a single instance without RBAC
    /// on Leases.
    #[arg(long, default_value_t = true, action = ArgAction::Set, value_name = "BOOL")]
    leader_election: bool,
    /// The Lease's name.
    #[arg(long, default_value = "harmony-operator")]
    lease_name: String,
    /// The Lease's namespace (it must exist).
    #[arg(long, default_value = "harmony-system")]
    lease_namespace: String,
    /// How long the lease stays valid after the leader's last renewal: a killed leader is
    /// replaced within about this long.
    #[arg(long, default_value_t = 15, value_name = "SECONDS")]
    lease_duration_s: u64,
}

use harmony::infra::kube::describe_error;

async fn client(kubeconfig: Option<&PathBuf>) -> Result<kube::Client, String> {
    let config = match kubeconfig {
        Some(path) => {
            let kc = Kubeconfig::read_from(path)
                .map_err(|e| format!("kubeconfig {}: {}", path.display(), describe_error(&e)))?;
            kube::Config::from_custom_kubeconfig(kc, &KubeConfigOptions::default())
                .await
                .map_err(|e| format!("kubeconfig {}: {}", path.display(), describe_error(&e)))?
        }
        None => kube::Config::infer()
            .await
            .map_err(|e| format!("no kubeconfig given and none found: {}", describe_error(&e)))?,
    };
    kube::Client::try_from(config).map_err(|e| describe_error(&e))
}

/// SIGTERM or Ctrl-C, logged.
async fn shutdown_signal() {
    harmony_agent_protocol::signal::shutdown_signal().await;
    log::info!("shutting down on signal");
}

/// The program: parses the command line, logs to stderr (`RUST_LOG`, `info` by default).
pub async fn cli_main() -> ExitCode {
    env_logger::Builder::from_env(env_logger::Env::default().default_filter_or("info")).init();
    match Cli::parse().command {
        Command::Crds => match crds_yaml() {
            Ok(y) => {
                print!("{y}");
                ExitCode::SUCCESS
            }
            Err(e) => {
                eprintln!("error: {e}");
                ExitCode::FAILURE
            }
        },
        Command::Run(args) => run_command(args).await,
    }
}

async fn run_command(args: RunArgs) -> ExitCode {
    let election = args.leader_election.then(|| LeaderElection {
        lease_name: args.lease_name.clone(),
        lease_namespace: args.lease_namespace.clone(),
        lease_duration: Duration::from_secs(args.lease_duration_s),
        ..LeaderElection::default()
    });
    // Bad flags are refused before anything is contacted.
    if let Some(Err(e)) = election.as_ref().map(LeaderElection::validate) {
        eprintln!("error: {e}");
        return ExitCode::from(2);
    }
    let client = match client(args.kubeconfig.as_ref()).await {
        Ok(c) => c,
        Err(e) => {
            eprintln!("error: cannot reach the control plane's API server: {e}");
            return ExitCode::from(2);
        }
    };
    let config = OperatorConfig {
        resync: Duration::from_secs(args.resync_seconds.max(1)),
        ..OperatorConfig::default()
    };
    match election {
        None => {
            log::info!("reconciling as the only instance (--leader-election=false)");
            tokio::select! {
                () = run(client, config) => {}
                () = shutdown_signal() => {}
            }
            ExitCode::SUCCESS
        }
        Some(election) => match run_elected(client, config, election, shutdown_signal()).await {
            Ok(()) => ExitCode::SUCCESS,
            Err(e) => {
                log::error!("{e}");
                eprintln!("error: {e}");
                ExitCode::from(2)
            }
        },
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn leader_election_is_on_by_default_and_can_be_turned_off() {
        let parse = |args: &[&str]| match Cli::try_parse_from(args).unwrap().command {
            Command::Run(r) => r,
            Command::Crds => unreachable!(),
        };
        let r = parse(&["harmony-operator", "run"]);
        assert!(r.leader_election);
        assert_eq!(
            (
                r.lease_name.as_str(),
                r.lease_namespace.as_str(),
                r.lease_duration_s
            ),
            ("harmony-operator", "harmony-system", 15)
        );
        let r = parse(&[
            "harmony-operator",
            "run",
            "--leader-election=false",
            "--lease-duration-s",
            "4",
        ]);
        assert!(!r.leader_election);
        assert_eq!(r.lease_duration_s, 4);
    }
}
