//! `harmony-operator crds` prints the CRDs; `harmony-operator run` reconciles the resources.

use clap::{Parser, Subcommand};
use std::path::PathBuf;
use std::process::ExitCode;
use std::time::Duration;

use harmony_operator::{OperatorConfig, crds_yaml, run};
use kube::config::{KubeConfigOptions, Kubeconfig};

/// Harmony's operator: PostgreSQL Scores as custom resources.
#[derive(Parser)]
#[command(about, long_about = None)]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Subcommand)]
enum Command {
    /// Print the CRDs (MultisitePostgreSQL, PostgreSQL, Site) as YAML.
    Crds,
    /// Watch and reconcile the resources on the control plane's API server.
    Run {
        /// Kubeconfig of the control plane's API server (default: KUBECONFIG, ~/.kube/config, in-cluster).
        #[arg(long, value_name = "FILE")]
        kubeconfig: Option<PathBuf>,
        /// Reconcile every Ready resource again after this many seconds.
        #[arg(long, default_value_t = 300)]
        resync_seconds: u64,
    },
}

#[tokio::main]
async fn main() -> ExitCode {
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
        Command::Run {
            kubeconfig,
            resync_seconds,
        } => {
            let config = match &kubeconfig {
                Some(path) => match Kubeconfig::read_from(path) {
                    Ok(kc) => {
                        kube::Config::from_custom_kubeconfig(kc, &KubeConfigOptions::default())
                            .await
                            .map_err(|e| e.to_string())
                    }
                    Err(e) => Err(format!("kubeconfig {}: {e}", path.display())),
                },
                None => kube::Config::infer().await.map_err(|e| e.to_string()),
            };
            let client =
                match config.and_then(|c| kube::Client::try_from(c).map_err(|e| e.to_string())) {
                    Ok(c) => c,
                    Err(e) => {
                        eprintln!("error: cannot reach the control plane's API server: {e}");
                        return ExitCode::from(2);
                    }
                };
            let config = OperatorConfig {
                resync: Duration::from_secs(resync_seconds.max(1)),
                ..OperatorConfig::default()
            };
            run(client, config).await;
            ExitCode::SUCCESS
        }
    }
}
