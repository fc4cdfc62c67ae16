//! The Harmony control plane: regions and their agents.
//!
//! One TLS port serves both the agents' WebSocket (`/v1/agent`) and the HTTP API (admin and
//! requests). The control plane holds no cluster credentials: it only relays ops to the agent
//! that dialled out from each region. State (regions, token hashes, service instances) lives in
//! SQLite.

pub mod api;
pub mod hub;
pub mod services;
pub mod session;
pub mod store;
pub mod tls;
pub mod tokens;

use clap::Parser;
use harmony_agent_protocol::SecretString;
use std::net::SocketAddr;
use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;
use tokio::net::TcpListener;

pub use hub::{Health, HealthPolicy, Hub};
pub use store::Store;

/// Command-line configuration of the control plane.
#[derive(Debug, Clone, Parser)]
#[command(
    name = "harmony-control-plane",
    version,
    about = "Harmony control plane: regions, agents over WSS, request queues"
)]
pub struct Config {
    /// Address to listen on (agents and API share it).
    #[arg(long, env = "HARMONY_CP_LISTEN", default_value = "0.0.0.0:8443")]
    pub listen: SocketAddr,
    /// Server certificate chain (PEM).
    #[arg(long, env = "HARMONY_CP_TLS_CERT")]
    pub tls_cert: PathBuf,
    /// Server private key (PEM).
    #[arg(long, env = "HARMONY_CP_TLS_KEY")]
    pub tls_key: PathBuf,
    /// File holding the admin token (first line); the API requires it as a Bearer token.
    #[arg(long, env = "HARMONY_CP_ADMIN_TOKEN_FILE")]
    pub admin_token_file: PathBuf,
    /// SQLite state file.
    #[arg(
        long,
        env = "HARMONY_CP_DB",
        default_value = "harmony-control-plane.sqlite"
    )]
    pub db: PathBuf,
    /// Heartbeat interval agents are told to use, in milliseconds.
    #[arg(long, default_value_t = 5000)]
    pub heartbeat_ms: u64,
    /// A region whose last heartbeat is older than this is unhealthy (default 3 heartbeats).
    #[arg(long)]
    pub unhealthy_after_ms: Option<u64>,
    /// A region whose last heartbeat is older than this is unavailable (default 6 heartbeats).
    #[arg(long)]
    pub unavailable_after_ms: Option<u64>,
    /// How long a bootstrap token stays valid, in seconds.
    #[arg(long, default_value_t = 3600)]
    pub bootstrap_ttl_s: u64,
    /// Longest a request API call waits for a region's answer, in seconds.
    #[arg(long, default_value_t = 300)]
    pub max_request_wait_s: u64,
    /// WebSocket read and write buffer per connection, in bytes (tungstenite defaults to 128 KiB).
    #[arg(long, default_value_t = 4096)]
    pub ws_buffer_bytes: usize,
    /// Also run Harmony's operator (the PostgreSQL resources' controller) against the API
    /// server of this kubeconfig, where the resources live.
    #[arg(long, env = "HARMONY_CP_OPERATOR_KUBECONFIG", value_name = "FILE")]
    pub operator_kubeconfig: Option<PathBuf>,
    /// The CA bundle (PEM) the embedded operator trusts to reach this control plane for
    /// `Site`s reached through region agents; system roots when absent.
    #[arg(long, value_name = "FILE")]
    pub operator_ca: Option<PathBuf>,
    /// The operator reconciles every Ready resource again after this many seconds.
    #[arg(long, default_value_t = 300)]
    pub operator_resync_s: u64,
    /// More log output (-v debug, -vv trace); RUST_LOG overrides.
    #[arg(short, long, action = clap::ArgAction::Count)]
    pub verbose: u8,
}

impl Config {
    /// The health thresholds this configuration implies.
    pub fn policy(&self) -> HealthPolicy {
        let hb = Duration::from_millis(self.heartbeat_ms.max(50));
        HealthPolicy {
            heartbeat: hb,
            unhealthy_after: self
                .unhealthy_after_ms
                .map(Duration::from_millis)
                .unwrap_or(hb * 3),
            unavailable_after: self
                .unavailable_after_ms
                .map(Duration::from_millis)
                .unwrap_or(hb * 6),
        }
    }
}

/// Why the control plane could not start or stopped.
#[derive(Debug, thiserror::Error)]
pub enum CpError {
    /// TLS material is unusable.
    #[error("TLS {path}: {reason}")]
    Tls {
        /// The file at fault.
        path: String,
        /// What is wrong and what to give instead.
        reason: String,
    },
    /// The admin token file is unusable.
    #[error("admin token file {path}: {reason}")]
    AdminToken {
        /// The file.
        path: String,
        /// What is wrong.
        reason: String,
    },
    /// The state database failed.
    #[error(transparent)]
    Store(#[from] store::StoreError),
    /// The listen address is unusable.
    #[error("cannot listen on {addr}: {source}; pick a free address with --listen")]
    Listen {
        /// The address.
        addr: SocketAddr,
        /// The OS error.
        #[source]
        source: std::io::Error,
    },
    /// Thresholds contradict each other.
    #[error("{field}: {problem}")]
    Config {
        /// The flag.
        field: &'static str,
        /// What is wrong and the fix.
        problem: String,
    },
}

/// Everything a request handler or session needs.
pub struct App {
    /// Durable state.
    pub store: Store,
    /// Live state.
    pub hub: Hub,
    /// SHA-256 of the admin token.
    pub admin_hash: [u8; 32],
    /// Bootstrap token lifetime.
    pub bootstrap_ttl: Duration,
    /// Longest request wait.
    pub max_request_wait: Duration,
    /// WebSocket buffer size.
    pub ws_buffer_bytes: usize,
}

fn read_admin_token(path: &std::path::Path) -> Result<SecretString, CpError> {
    let bad = |reason: String| CpError::AdminToken {
        path: path.display().to_string(),
        reason,
    };
    let text = std::fs::read_to_string(path).map_err(|e| bad(e.to_string()))?;
    let token = text.lines().next().unwrap_or("").trim().to_string();
    if token.len() < 16 {
        return Err(bad(
            "the token is shorter than 16 characters; write a long random token (e.g. `openssl rand -hex 32`)".into(),
        ));
    }
    Ok(SecretString::new(token))
}

/// A running control plane's address and the task serving it.
pub struct Running {
    /// The bound address.
    pub addr: SocketAddr,
    /// Shared state.
    pub app: Arc<App>,
}

/// Loads configuration, opens the store, binds the port and serves until the process ends.
pub async fn serve(config: Config) -> Result<(), CpError> {
    let (running, listener, tls) = bind(&config).await?;
    log::info!(
        "control plane listening on https://{} (agents: wss://{}{}), heartbeat {} ms, unhealthy after {} ms, unavailable after {} ms",
        running.addr,
        running.addr,
        harmony_agent_protocol::AGENT_PATH,
        running.app.hub.policy().heartbeat.as_millis(),
        running.app.hub.policy().unhealthy_after.as_millis(),
        running.app.hub.policy().unavailable_after.as_millis(),
    );
    api::accept_loop(listener, tls, running.app).await;
    Ok(())
}

/// Opens everything and binds the listener without serving yet.
pub async fn bind(
    config: &Config,
) -> Result<(Running, TcpListener, tokio_rustls::TlsAcceptor), CpError> {
    let policy = config.policy();
    if policy.unhealthy_after >= policy.unavailable_after {
        return Err(CpError::Config {
            field: "--unhealthy-after-ms",
            problem: format!(
                "{} ms is not below --unavailable-after-ms {} ms; unhealthy must come first",
                policy.unhealthy_after.as_millis(),
                policy.unavailable_after.as_millis()
            ),
        });
    }
    let tls = tls::server_config(&config.tls_cert, &config.tls_key)?;
    let admin = read_admin_token(&config.admin_token_file)?;
    let store = Store::open(&config.db)?;
    let listener = TcpListener::bind(config.listen)
        .await
        .map_err(|source| CpError::Listen {
            addr: config.listen,
            source,
        })?;
    let addr = listener.local_addr().map_err(|source| CpError::Listen {
        addr: config.listen,
        source,
    })?;
    let app = Arc::new(App {
        store,
        hub: Hub::new(policy),
        admin_hash: tokens::hash(admin.expose()),
        bootstrap_ttl: Duration::from_secs(config.bootstrap_ttl_s.max(1)),
        max_request_wait: Duration::from_secs(config.max_request_wait_s.max(1)),
        ws_buffer_bytes: config.ws_buffer_bytes.max(1024),
    });
    services::recover(&app);
    tokio::spawn(services::run_dispatcher(app.clone()));
    Ok((
        Running { addr, app },
        listener,
        tokio_rustls::TlsAcceptor::from(tls),
    ))
}

/// The `harmony-control-plane` program: parse flags, log, serve until SIGTERM or Ctrl-C.
pub async fn cli_main() {
    let config = Config::parse();
    harmony_agent_protocol::logging::init(config.verbose);
    let operator = match &config.operator_kubeconfig {
        None => None,
        Some(path) => match operator_clients(path, &config).await {
            Ok(clients) => Some(clients),
            Err(e) => {
                log::error!("{e}");
                eprintln!("error: {e}");
                std::process::exit(2);
            }
        },
    };
    let resync = Duration::from_secs(config.operator_resync_s.max(1));
    let operator = async move {
        match operator {
            Some((client, control_plane)) => {
                log::info!("operator: reconciling PostgreSQL resources, resync every {resync:?}");
                let config = harmony_operator::OperatorConfig {
                    resync,
                    control_plane: Some(control_plane),
                    ..harmony_operator::OperatorConfig::default()
                };
                harmony_operator::run(client, config).await;
            }
            None => std::future::pending::<()>().await,
        }
    };
    tokio::select! {
        _ = operator => {
            log::error!("the operator stopped");
            std::process::exit(1);
        }
        result = serve(config) => {
            if let Err(e) = result {
                log::error!("{e}");
                eprintln!("error: {e}");
                std::process::exit(2);
            }
        }
        _ = shutdown_signal() => {
            log::info!("shutting down on signal");
        }
    }
}

/// The embedded operator's clients: the API server where its resources live, and this control
/// plane itself (over loopback, for `Site`s reached through region agents).
async fn operator_clients(
    path: &std::path::Path,
    config: &Config,
) -> Result<(kube::Client, harmony::infra::agent::ControlPlaneClient), String> {
    let client = operator_client(path).await?;
    let ca = match &config.operator_ca {
        Some(p) => {
            Some(std::fs::read(p).map_err(|e| format!("--operator-ca {}: {e}", p.display()))?)
        }
        None => None,
    };
    let admin = read_admin_token(&config.admin_token_file).map_err(|e| e.to_string())?;
    let ip = match config.listen.ip() {
        std::net::IpAddr::V4(v4) if v4.is_unspecified() => std::net::Ipv4Addr::LOCALHOST.into(),
        std::net::IpAddr::V6(v6) if v6.is_unspecified() => std::net::Ipv6Addr::LOCALHOST.into(),
        ip => ip,
    };
    let url = format!("https://{}", SocketAddr::new(ip, config.listen.port()));
    let control_plane = harmony::infra::agent::ControlPlaneClient::new(&url, admin, ca.as_deref())
        .map_err(|e| format!("the operator's client for {url}: {e}"))?;
    Ok((client, control_plane))
}

/// A client for the API server where the operator's resources live.
async fn operator_client(path: &std::path::Path) -> Result<kube::Client, String> {
    let kubeconfig = kube::config::Kubeconfig::read_from(path)
        .map_err(|e| format!("--operator-kubeconfig {}: {e}", path.display()))?;
    let config = kube::Config::from_custom_kubeconfig(kubeconfig, &Default::default())
        .await
        .map_err(|e| format!("--operator-kubeconfig {}: {e}", path.display()))?;
    kube::Client::try_from(config)
        .map_err(|e| format!("--operator-kubeconfig {}: {e}", path.display()))
}

/// Resolves on SIGTERM or Ctrl-C.
pub async fn shutdown_signal() {
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
