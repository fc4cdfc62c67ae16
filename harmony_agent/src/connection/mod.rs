//! The agent's connection loop: dial, hello, welcome (storing a new identity), then heartbeats,
//! requests and results until the connection drops; reconnect with backoff; stop on shutdown.
//!
//! By concern: [`dial`] (TLS and the WebSocket upgrade), `session` (one connection's frames),
//! [`renewal`] (when to ask for a fresh identity).

pub mod dial;
pub mod renewal;
mod session;

pub use dial::{agent_url, tls_config, ws_config};

use harmony::types::{RegionId, ZoneId};
use harmony_agent_protocol::AgentStatus;
use harmony_agent_protocol::quota_use::QuotaReport;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};
use tokio::sync::{mpsc, watch};
use tokio_tungstenite::WebSocketStream;

use crate::Config;
use crate::cluster::Cluster;
use crate::error::AgentError;
use crate::exec::quota_use;
use crate::exec::record_store::RecordStore;
use crate::exec::{DedupeWindow, Executor};
use crate::identity::{IdentityStore, StoredIdentity};
use crate::probe::Readiness;
use crate::providers::api::ApiState;
use crate::providers::registry::Registry;

const CONNECT_TIMEOUT: Duration = Duration::from_secs(10);
const DRAIN_TIMEOUT: Duration = Duration::from_secs(20);
/// Pod namespace file of the service account mount.
pub const NAMESPACE_FILE: &str = "/var/run/secrets/kubernetes.io/serviceaccount/namespace";

type Ws = WebSocketStream<tokio_rustls::client::TlsStream<tokio::net::TcpStream>>;

/// How a session ended without a fatal refusal.
enum End {
    Shutdown,
    Lost { reason: String, welcomed: bool },
}

/// The credential to go back to when the control plane refuses a new identity the agent has
/// never connected with (it stays usable until then).
enum Fallback {
    /// The bootstrap token: the identity came from the bootstrap exchange.
    Bootstrap,
    /// The identity the renewal replaced (valid for the control plane's overlap window).
    Identity(StoredIdentity),
}

struct Agent {
    config: Config,
    url: url::Url,
    tls: tokio_rustls::TlsConnector,
    executor: Arc<Executor>,
    registry: Arc<Registry>,
    store: IdentityStore,
    identity: Option<StoredIdentity>,
    /// Whether a welcome arrived on a connection that presented `identity`.
    confirmed: bool,
    fallback: Option<Fallback>,
    status: Arc<Mutex<AgentStatus>>,
    heartbeat_ms: Arc<AtomicU64>,
    readiness: Arc<Readiness>,
}

/// Runs the agent until `shutdown` turns true or the control plane refuses it for good.
pub async fn run(config: Config, mut shutdown: watch::Receiver<bool>) -> Result<(), AgentError> {
    RegionId::parse(&config.region).map_err(|e| AgentError::Config {
        field: "--region",
        problem: e.to_string(),
    })?;
    ZoneId::parse(&config.zone).map_err(|e| AgentError::Config {
        field: "--zone",
        problem: e.to_string(),
    })?;
    config.check()?;
    let url = agent_url(&config.control_plane)?;
    let tls = tokio_rustls::TlsConnector::from(tls_config(config.ca_bundle.as_deref())?);
    let settings = config.provider_settings()?;
    let (outbox_tx, mut outbox) = mpsc::unbounded_channel();
    let cluster = Arc::new(Cluster::new(
        format!("region {}", config.region),
        config.kube_target(),
    ));
    let http = crate::providers::external::http_client().map_err(|problem| AgentError::Config {
        field: "--provider-listen",
        problem,
    })?;
    let registry = Registry::new(settings.registry, cluster.clone(), http, outbox_tx.clone())
        .map_err(|problem| AgentError::Config {
            field: "--providers-file",
            problem,
        })?;
    let ttl = Duration::from_secs(config.dedupe_ttl_s);
    let records = Arc::new(RecordStore::new(cluster.clone(), config.namespace(), ttl));
    records.start_pruning();
    let executor = Arc::new(
        Executor::new(
            cluster,
            registry.clone(),
            DedupeWindow::new(config.dedupe_capacity, ttl),
            records,
            outbox_tx,
        )
        .with_presence(crate::exec::presence::Presence::new(
            config.service_account(),
        )),
    );
    if let Some(addr) = settings.listen {
        let state = Arc::new(ApiState {
            registry: registry.clone(),
            token: settings.token,
        });
        crate::providers::api::start(addr, state)
            .await
            .map_err(|e| AgentError::Config {
                field: "--provider-listen",
                problem: format!("cannot listen on {addr}: {e}"),
            })?;
    }
    registry.start();
    let readiness = Arc::new(Readiness::default());
    if let Some(addr) = config.health_listen {
        let r = readiness.clone();
        tokio::spawn(async move {
            if let Err(e) = crate::probe::serve(addr, r).await {
                log::error!("health probes on {addr}: {e}");
            }
        });
    }
    let store = identity_store(&config, &executor, &mut shutdown).await?;
    let identity = store.load().await?;
    if identity.is_none() && config.bootstrap_token_file.is_none() {
        return Err(AgentError::Config {
            field: "--bootstrap-token-file",
            problem: "no identity is stored yet and no bootstrap token was given; pass the token from POST /v1/admin/regions".into(),
        });
    }
    let status = Arc::new(Mutex::new(AgentStatus::default()));
    let heartbeat_ms = Arc::new(AtomicU64::new(5000));
    spawn_probe(executor.clone(), status.clone(), heartbeat_ms.clone());
    let mut agent = Agent {
        url,
        tls,
        executor,
        registry,
        store,
        identity,
        confirmed: false,
        fallback: None,
        status,
        heartbeat_ms,
        readiness,
        config,
    };
    let mut backoff = agent.config.backoff();
    log::info!(
        "agent {} for region {} zone {} dialling {}",
        env!("CARGO_PKG_VERSION"),
        agent.config.region,
        agent.config.zone,
        agent.url
    );
    loop {
        let end = agent.session(&mut outbox, &mut shutdown).await?;
        agent.readiness.set(false);
        match end {
            End::Shutdown => {
                log::info!("agent stopped");
                return Ok(());
            }
            End::Lost { reason, welcomed } => {
                if welcomed {
                    backoff.reset();
                }
                let delay = backoff.next_delay();
                log::warn!(
                    "connection to the control plane lost: {reason}; reconnecting in {} ms",
                    delay.as_millis()
                );
                tokio::select! {
                    _ = tokio::time::sleep(delay) => {}
                    _ = shutdown.wait_for(|s| *s) => {
                        log::info!("agent stopped");
                        return Ok(());
                    }
                }
            }
        }
    }
}

async fn identity_store(
    config: &Config,
    executor: &Arc<Executor>,
    shutdown: &mut watch::Receiver<bool>,
) -> Result<IdentityStore, AgentError> {
    if let Some(path) = &config.identity_file {
        return Ok(IdentityStore::File(path.clone()));
    }
    let Some(name) = &config.identity_secret else {
        return Err(AgentError::Config {
            field: "--identity-file",
            problem: "say where to keep the identity: --identity-file PATH, or in-cluster --identity-secret NAME".into(),
        });
    };
    let namespace = config.namespace();
    let mut backoff = config.backoff();
    loop {
        match executor.topology(false, false).await {
            Ok(k8s) => {
                return Ok(IdentityStore::Secret {
                    namespace,
                    name: name.clone(),
                    k8s,
                });
            }
            Err(e) => {
                let delay = backoff.next_delay();
                log::warn!(
                    "cannot reach the cluster to read the identity Secret: {e}; retrying in {} ms",
                    delay.as_millis()
                );
                tokio::select! {
                    _ = tokio::time::sleep(delay) => {}
                    _ = shutdown.wait_for(|s| *s) => {
                        return Err(AgentError::Identity { store: format!("Secret {namespace}/{name}"), reason: "stopped before the cluster answered".into() });
                    }
                }
            }
        }
    }
}

fn spawn_probe(executor: Arc<Executor>, status: Arc<Mutex<AgentStatus>>, every: Arc<AtomicU64>) {
    tokio::spawn(async move {
        let mut last_ok: Option<bool> = None;
        // The project namespaces' quota use, read every `REPORT_EVERY` (the last one is kept,
        // saying why, while the cluster cannot be reached).
        let mut quotas: Option<QuotaReport> = None;
        let mut quotas_read: Option<Instant> = None;
        loop {
            let result = executor.probe().await;
            let ok = result.is_ok();
            // Node count and capacity for the control plane's admin view; a cluster whose nodes
            // this agent may not list reports none.
            let nodes = if ok {
                executor.node_summary().await
            } else {
                None
            };
            if !ok {
                quotas = quotas.take().map(|q| {
                    quota_use::failed(Some(q), "the Kubernetes API server is unreachable".into())
                });
            } else if quotas_read.is_none_or(|t| t.elapsed() >= quota_use::REPORT_EVERY) {
                quotas = Some(
                    executor
                        .quota_report(quotas.take(), renewal::now_ms())
                        .await,
                );
                quotas_read = Some(Instant::now());
            }
            if last_ok != Some(ok) {
                match &result {
                    Ok(v) => log::info!("Kubernetes API reachable (version {v})"),
                    Err(e) => log::warn!("Kubernetes API not reachable: {e}"),
                }
                last_ok = Some(ok);
            }
            if let Ok(mut s) = status.lock() {
                s.k8s_reachable = ok;
                s.detail = Some(result.unwrap_or_else(|e| e));
                s.node_count = nodes.as_ref().map(|n| n.0);
                s.allocatable = nodes.map(|n| n.1);
                s.quotas.clone_from(&quotas);
            }
            tokio::time::sleep(Duration::from_millis(every.load(Ordering::Relaxed).max(50))).await;
        }
    });
}
