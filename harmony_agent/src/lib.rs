//! The Harmony region agent.
//!
//! It dials out to the control plane over WSS (the control plane never holds cluster
//! credentials), presents its bootstrap token once and stores the identity it receives, sends
//! heartbeats saying whether its Kubernetes API answers, and executes v1 ops on its cluster
//! with the same `K8sTopology` Harmony uses directly. It reconnects with exponential backoff and
//! full jitter, and stops gracefully on SIGTERM.

pub mod backoff;
pub mod cluster;
pub mod config;
pub mod connection;
pub mod exec;
pub mod identity;
pub mod probe;
pub mod providers;

pub use config::{
    Config, DEFAULT_BACKOFF_BASE_MS, DEFAULT_BACKOFF_MAX_MS, DEFAULT_NAMESPACE, MAX_FRAME_LIMIT,
    MIN_FRAME_BYTES, ProviderSettings,
};

use clap::Parser;

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
        harmony_agent_protocol::signal::shutdown_signal().await;
        log::info!("signal received: finishing in-flight requests, then stopping");
        let _ = tx.send(true);
    });
    if let Err(e) = run(config, rx).await {
        log::error!("{e}");
        eprintln!("error: {e}");
        std::process::exit(e.exit_code());
    }
}
