//! The Harmony control plane: regions and their agents.
//!
//! One TLS port serves both the agents' WebSocket (`/v1/agent`) and the HTTP API (admin and
//! requests). The control plane holds no cluster credentials: it only relays ops to the agent
//! that dialled out from each region. State lives behind one [`store::Store`]: SQLite by default
//! (one replica), PostgreSQL for N replicas behind one address.
//!
//! Layers run one way: [`http`] (routes and handlers) and [`session`] (agent connections) call
//! [`services`], which call [`store`] and this replica's [`hub`]. The `harmony-control-plane`
//! program (package `harmony_control_plane_cli`) adds flags for the embedded operator.

pub mod config;
mod error;
pub mod http;
pub mod hub;
pub mod services;
pub mod session;
pub mod store;
pub mod tls;
pub mod tokens;

pub use config::Config;
pub use error::CpError;

use harmony_agent_protocol::SecretString;
use std::net::SocketAddr;
use std::sync::Arc;
use tokio::net::TcpListener;

use crate::http::listener::{self, Limits};
use crate::services::ControlPlane;

/// Reads the admin token: the first line of `path`, at least 16 characters.
pub fn read_admin_token(path: &std::path::Path) -> Result<SecretString, CpError> {
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

/// A control plane with its store open and its port bound, not yet serving.
pub struct Server {
    /// The bound address.
    pub addr: SocketAddr,
    /// The services (store, hub, settings).
    pub cp: Arc<ControlPlane>,
    listener: TcpListener,
    tls: tokio_rustls::TlsAcceptor,
    app: axum::Router,
    limits: Limits,
}

/// Connections the kernel queues for `accept` (capped by `net.core.somaxconn`). Larger than
/// tokio's 1,024: when thousands of agents reconnect at once, a full queue drops their SYNs
/// and the kernel retries them only after 1, 3, 7, 15, 31 s..., which the reconnect storm
/// benchmark showed as bursts at those offsets.
const LISTEN_BACKLOG: u32 = 16_384;

/// A listening socket on `addr` with [`LISTEN_BACKLOG`].
fn bind(addr: SocketAddr) -> std::io::Result<TcpListener> {
    let socket = if addr.is_ipv4() {
        tokio::net::TcpSocket::new_v4()?
    } else {
        tokio::net::TcpSocket::new_v6()?
    };
    socket.set_reuseaddr(true)?;
    socket.bind(addr)?;
    socket.listen(LISTEN_BACKLOG)
}

impl Server {
    /// Opens the store, starts the background tasks and binds the port.
    pub async fn bind(config: &Config) -> Result<Self, CpError> {
        let settings = config.settings()?;
        let wanted = config.limits();
        let nofile = listener::open_file_limit();
        let limits = nofile.map_or(wanted, |n| wanted.fit_to_open_files(n));
        if limits.max_connections < wanted.max_connections {
            log::warn!(
                "--max-connections {} lowered to {}: the open-file limit is {} and {} descriptors are kept for the database and files (raise `ulimit -n` to hold more)",
                wanted.max_connections,
                limits.max_connections,
                nofile.unwrap_or_default(),
                listener::RESERVED_FDS
            );
        }
        let tls = tls::server_config(&config.tls_cert, &config.tls_key)?;
        let admin = read_admin_token(&config.admin_token_file)?;
        let store = store::open(&config.store()).await?;
        let listener = bind(config.listen).map_err(|source| CpError::Listen {
            addr: config.listen,
            source,
        })?;
        let addr = listener.local_addr().map_err(|source| CpError::Listen {
            addr: config.listen,
            source,
        })?;
        log::info!(
            "control plane replica {} on {} state; heartbeat {} ms, unhealthy after {} ms, unavailable after {} ms",
            settings.replica_id,
            store.backend(),
            settings.policy.heartbeat.as_millis(),
            settings.policy.unhealthy_after.as_millis(),
            settings.policy.unavailable_after.as_millis(),
        );
        let cp = ControlPlane::new(store, settings);
        services::start(cp.clone()).await?;
        let app = http::router(http::AppState {
            cp: cp.clone(),
            admin_hash: tokens::hash(admin.expose()),
            ws_buffer_bytes: config.ws_buffer_bytes,
        });
        Ok(Self {
            addr,
            cp,
            listener,
            tls: tokio_rustls::TlsAcceptor::from(tls),
            app,
            limits,
        })
    }

    /// Serves until the process ends.
    pub async fn run(self) {
        log::info!(
            "control plane listening on https://{} (agents: wss://{}{})",
            self.addr,
            self.addr,
            harmony_agent_protocol::AGENT_PATH
        );
        listener::serve(self.listener, self.tls, self.app, self.limits).await;
    }
}

/// Opens everything, binds the port and serves until the process ends.
pub async fn serve(config: &Config) -> Result<(), CpError> {
    Server::bind(config).await?.run().await;
    Ok(())
}

pub use harmony_agent_protocol::signal::shutdown_signal;
