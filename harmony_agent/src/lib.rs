//! The Harmony region agent.
//!
//! It dials out to the control plane over WSS (the control plane never holds cluster
//! credentials), presents its bootstrap token once and stores the identity it receives, sends
//! heartbeats saying whether its Kubernetes API answers, and executes v1 ops on its cluster
//! with the same `K8sTopology` Harmony uses directly. It reconnects with exponential backoff and
//! full jitter, and stops gracefully on SIGTERM.

pub mod backoff;
pub mod connection;
pub mod exec;
pub mod identity;
pub mod probe;

use clap::Parser;
use harmony::infra::kube::KubeTarget;
use std::path::PathBuf;
use std::time::Duration;

/// Command-line configuration of the agent (every flag also reads an environment variable).
#[derive(Debug, Clone, Parser)]
#[command(
    name = "harmony-agent",
    version,
    about = "Harmony region agent: dials out to the control plane and executes ops on its cluster"
)]
pub struct Config {
    /// Control-plane URL, e.g. `wss://cp.example.com` (https:// is accepted too).
    #[arg(long, env = "HARMONY_CONTROL_PLANE_URL")]
    pub control_plane: String,
    /// The region this agent serves.
    #[arg(long, env = "HARMONY_REGION")]
    pub region: String,
    /// The zone (this cluster).
    #[arg(long, env = "HARMONY_ZONE")]
    pub zone: String,
    /// PEM bundle of CAs that sign the control plane's certificate; the system roots otherwise.
    #[arg(long, env = "HARMONY_CA_BUNDLE")]
    pub ca_bundle: Option<PathBuf>,
    /// File holding the one-time bootstrap token (used only while no identity is stored).
    #[arg(long, env = "HARMONY_BOOTSTRAP_TOKEN_FILE")]
    pub bootstrap_token_file: Option<PathBuf>,
    /// File to keep the identity in (created with mode 0600).
    #[arg(
        long,
        env = "HARMONY_IDENTITY_FILE",
        conflicts_with = "identity_secret"
    )]
    pub identity_file: Option<PathBuf>,
    /// In-cluster: keep the identity in this Secret of the agent's namespace.
    #[arg(long, env = "HARMONY_IDENTITY_SECRET")]
    pub identity_secret: Option<String>,
    /// Namespace of the identity Secret (default: the pod's namespace).
    #[arg(long, env = "HARMONY_NAMESPACE")]
    pub namespace: Option<String>,
    /// Kubeconfig of the cluster to operate; in-cluster service account when absent.
    #[arg(long, env = "HARMONY_KUBECONFIG")]
    pub kubeconfig: Option<PathBuf>,
    /// First reconnect delay ceiling, in milliseconds.
    #[arg(long, default_value_t = 1000)]
    pub backoff_base_ms: u64,
    /// Largest reconnect delay ceiling, in milliseconds.
    #[arg(long, default_value_t = 60_000)]
    pub backoff_max_ms: u64,
    /// How many request ids the dedupe window remembers.
    #[arg(long, default_value_t = 4096)]
    pub dedupe_capacity: usize,
    /// How long a finished request stays in the dedupe window, in seconds.
    #[arg(long, default_value_t = 3600)]
    pub dedupe_ttl_s: u64,
    /// Address for `/healthz` and `/readyz` (plain HTTP, for kubelet probes); off when absent.
    #[arg(long, env = "HARMONY_HEALTH_LISTEN")]
    pub health_listen: Option<std::net::SocketAddr>,
    /// More log output (-v debug, -vv trace); RUST_LOG overrides.
    #[arg(short, long, action = clap::ArgAction::Count)]
    pub verbose: u8,
}

impl Config {
    /// Where the cluster's credentials come from.
    pub fn kube_target(&self) -> KubeTarget {
        match &self.kubeconfig {
            Some(p) => KubeTarget::Kubeconfig {
                path: Some(p.clone()),
                context: None,
            },
            None => KubeTarget::InCluster,
        }
    }

    /// The reconnect backoff.
    pub fn backoff(&self) -> backoff::Backoff {
        backoff::Backoff::new(
            Duration::from_millis(self.backoff_base_ms),
            Duration::from_millis(self.backoff_max_ms),
        )
    }
}

/// Why the agent stopped or could not start.
#[derive(Debug, thiserror::Error)]
pub enum AgentError {
    /// A flag is wrong.
    #[error("{field}: {problem}")]
    Config {
        /// The flag.
        field: &'static str,
        /// What is wrong and the fix.
        problem: String,
    },
    /// The identity could not be read or stored.
    #[error("{store}: {reason}")]
    Identity {
        /// The file or Secret.
        store: String,
        /// Why.
        reason: String,
    },
    /// The control plane refused the agent for good (revoked, used or expired token...).
    #[error("the control plane refused this agent (close code {code}): {reason}")]
    Refused {
        /// The WebSocket close code.
        code: u16,
        /// The control plane's reason.
        reason: String,
    },
}

impl AgentError {
    /// The process exit code: 3 when refused by the control plane, 2 otherwise.
    pub fn exit_code(&self) -> i32 {
        match self {
            AgentError::Refused { .. } => 3,
            _ => 2,
        }
    }
}

pub use connection::run;

/// The `harmony-agent` program: parse flags, log, run until SIGTERM/Ctrl-C (exit 0) or a
/// refusal by the control plane (exit 3); configuration errors exit 2.
pub async fn cli_main() {
    let config = Config::parse();
    harmony_agent_protocol::logging::init(config.verbose);
    let (tx, rx) = tokio::sync::watch::channel(false);
    tokio::spawn(async move {
        shutdown_signal().await;
        log::info!("signal received: finishing in-flight requests, then stopping");
        let _ = tx.send(true);
    });
    if let Err(e) = run(config, rx).await {
        log::error!("{e}");
        eprintln!("error: {e}");
        std::process::exit(e.exit_code());
    }
}

async fn shutdown_signal() {
    #[cfg(unix)]
    {
        use tokio::signal::unix::{SignalKind, signal};
        if let Ok(mut term) = signal(SignalKind::terminate()) {
            tokio::select! {
                _ = term.recv() => {}
                _ = tokio::signal::ctrl_c() => {}
            }
            return;
        }
    }
    let _ = tokio::signal::ctrl_c().await;
}
