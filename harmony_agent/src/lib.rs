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
mod error;
pub mod exec;
pub mod identity;
pub mod probe;
pub mod providers;

pub use config::{
    Config, DEFAULT_BACKOFF_BASE_MS, DEFAULT_BACKOFF_MAX_MS, DEFAULT_NAMESPACE, MAX_FRAME_LIMIT,
    MIN_FRAME_BYTES, ProviderSettings,
};

use clap::Parser;

pub use connection::run;
pub use error::AgentError;

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
