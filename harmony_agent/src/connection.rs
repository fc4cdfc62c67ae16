//! The agent's connection loop: dial, hello, welcome (storing a new identity), then heartbeats,
//! requests and results until the connection drops; reconnect with backoff; stop on shutdown.

use futures::{SinkExt, StreamExt};
use harmony::types::{RegionId, ZoneId};
use harmony_agent_protocol::{
    AgentStatus, ErrorFrame, Frame, Hello, MAX_FRAME_BYTES, Op, PROTOCOL_VERSION, Ping,
    SecretString, close, decode, encode,
};
use rustls::pki_types::pem::PemObject;
use rustls::pki_types::{CertificateDer, ServerName};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};
use tokio::sync::{mpsc, watch};
use tokio_tungstenite::WebSocketStream;
use tokio_tungstenite::tungstenite::Message;
use tokio_tungstenite::tungstenite::client::IntoClientRequest;
use tokio_tungstenite::tungstenite::http::HeaderValue;
use tokio_tungstenite::tungstenite::protocol::WebSocketConfig;

use crate::exec::{Cluster, DedupeWindow, Executor};
use crate::identity::IdentityStore;
use crate::probe::Readiness;
use crate::providers::api::ApiState;
use crate::providers::registry::Registry;
use crate::{AgentError, Config};

const CONNECT_TIMEOUT: Duration = Duration::from_secs(10);
const DRAIN_TIMEOUT: Duration = Duration::from_secs(20);
/// Pod namespace file of the service account mount.
const NAMESPACE_FILE: &str = "/var/run/secrets/kubernetes.io/serviceaccount/namespace";

type Ws = WebSocketStream<tokio_rustls::client::TlsStream<tokio::net::TcpStream>>;

/// How a session ended without a fatal refusal.
enum End {
    Shutdown,
    Lost { reason: String, welcomed: bool },
}

/// Builds a rustls client config trusting `ca_bundle`, or the system roots.
pub fn tls_config(
    ca_bundle: Option<&std::path::Path>,
) -> Result<Arc<rustls::ClientConfig>, AgentError> {
    let mut roots = rustls::RootCertStore::empty();
    match ca_bundle {
        Some(path) => {
            let bad = |problem: String| AgentError::Config {
                field: "--ca-bundle",
                problem: format!("{}: {problem}", path.display()),
            };
            let certs: Vec<CertificateDer<'static>> = CertificateDer::pem_file_iter(path)
                .map_err(|e| bad(e.to_string()))?
                .collect::<Result<_, _>>()
                .map_err(|e| bad(format!("malformed PEM: {e}")))?;
            if certs.is_empty() {
                return Err(bad(
                    "no CERTIFICATE block; give the CA that signed the control plane's certificate"
                        .into(),
                ));
            }
            for c in certs {
                roots.add(c).map_err(|e| bad(e.to_string()))?;
            }
        }
        None => {
            let found = rustls_native_certs::load_native_certs();
            for c in found.certs {
                let _ = roots.add(c);
            }
        }
    }
    let provider = Arc::new(rustls::crypto::ring::default_provider());
    let config = rustls::ClientConfig::builder_with_provider(provider)
        .with_safe_default_protocol_versions()
        .map_err(|e| AgentError::Config {
            field: "--ca-bundle",
            problem: e.to_string(),
        })?
        .with_root_certificates(roots)
        .with_no_client_auth();
    Ok(Arc::new(config))
}

/// The agent endpoint for a control-plane URL given as `wss://`/`https://` host[:port].
pub fn agent_url(base: &str) -> Result<url::Url, AgentError> {
    let bad = |problem: String| AgentError::Config {
        field: "--control-plane",
        problem,
    };
    let mut u = url::Url::parse(base).map_err(|e| bad(format!("{base:?}: {e}")))?;
    match u.scheme() {
        "wss" => {}
        "https" => {
            let _ = u.set_scheme("wss");
        }
        other => {
            return Err(bad(format!(
                "scheme {other:?} is not supported; the agent only dials TLS (wss:// or https://)"
            )));
        }
    }
    if u.host_str().is_none() {
        return Err(bad(format!("{base:?} has no host")));
    }
    u.set_path(harmony_agent_protocol::AGENT_PATH);
    Ok(u)
}

struct Agent {
    config: Config,
    url: url::Url,
    tls: tokio_rustls::TlsConnector,
    executor: Arc<Executor>,
    registry: Arc<Registry>,
    store: IdentityStore,
    identity: Option<SecretString>,
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
    let executor = Arc::new(Executor::new(
        cluster,
        registry.clone(),
        DedupeWindow::new(
            config.dedupe_capacity,
            Duration::from_secs(config.dedupe_ttl_s),
        ),
        outbox_tx,
    ));
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
    let namespace = match &config.namespace {
        Some(n) => n.clone(),
        None => std::fs::read_to_string(NAMESPACE_FILE)
            .map(|s| s.trim().to_string())
            .map_err(|e| AgentError::Config {
                field: "--namespace",
                problem: format!(
                    "not given and {NAMESPACE_FILE} is unreadable ({e}); pass --namespace"
                ),
            })?,
    };
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
        loop {
            let result = executor.probe().await;
            let ok = result.is_ok();
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
            }
            tokio::time::sleep(Duration::from_millis(every.load(Ordering::Relaxed).max(50))).await;
        }
    });
}

fn ws_config() -> WebSocketConfig {
    WebSocketConfig::default()
        .read_buffer_size(16 * 1024)
        .write_buffer_size(0)
        .max_message_size(Some(MAX_FRAME_BYTES))
        .max_frame_size(Some(MAX_FRAME_BYTES))
}

impl Agent {
    fn credential(&self) -> Result<(SecretString, bool), AgentError> {
        if let Some(id) = &self.identity {
            return Ok((id.clone(), false));
        }
        let path = self
            .config
            .bootstrap_token_file
            .as_ref()
            .ok_or(AgentError::Config {
                field: "--bootstrap-token-file",
                problem: "no identity is stored and no bootstrap token was given".into(),
            })?;
        let text = std::fs::read_to_string(path).map_err(|e| AgentError::Config {
            field: "--bootstrap-token-file",
            problem: format!("{}: {e}", path.display()),
        })?;
        Ok((SecretString::new(text.trim()), true))
    }

    async fn dial(&self, credential: &SecretString) -> Result<Ws, String> {
        let host = self
            .url
            .host_str()
            .unwrap_or_default()
            .trim_matches(['[', ']'])
            .to_string();
        let port = self.url.port_or_known_default().unwrap_or(443);
        let tcp = tokio::time::timeout(
            CONNECT_TIMEOUT,
            tokio::net::TcpStream::connect((host.as_str(), port)),
        )
        .await
        .map_err(|_| format!("TCP connect to {host}:{port} timed out"))?
        .map_err(|e| format!("TCP connect to {host}:{port}: {e}"))?;
        let _ = tcp.set_nodelay(true);
        let name =
            ServerName::try_from(host.clone()).map_err(|e| format!("server name {host:?}: {e}"))?;
        let tls = tokio::time::timeout(CONNECT_TIMEOUT, self.tls.connect(name, tcp))
            .await
            .map_err(|_| "TLS handshake timed out".to_string())?
            .map_err(|e| format!("TLS handshake with {host}:{port}: {e}"))?;
        let mut request = self
            .url
            .as_str()
            .into_client_request()
            .map_err(|e| format!("building the upgrade request: {e}"))?;
        let auth = HeaderValue::from_str(&format!("Bearer {}", credential.expose()))
            .map_err(|_| "the token contains characters not allowed in a header".to_string())?;
        request.headers_mut().insert("authorization", auth);
        let (ws, _) = tokio::time::timeout(
            CONNECT_TIMEOUT,
            tokio_tungstenite::client_async_with_config(request, tls, Some(ws_config())),
        )
        .await
        .map_err(|_| "WebSocket upgrade timed out".to_string())?
        .map_err(|e| format!("WebSocket upgrade: {e}"))?;
        Ok(ws)
    }

    fn hello(&self) -> Frame {
        Frame::Hello(Hello {
            agent_version: env!("CARGO_PKG_VERSION").into(),
            region: self.config.region.clone(),
            zone: self.config.zone.clone(),
            ops: Op::ALL.iter().map(|o| o.as_str().to_string()).collect(),
            protocol: PROTOCOL_VERSION,
        })
    }

    async fn session(
        &mut self,
        outbox: &mut mpsc::UnboundedReceiver<Frame>,
        shutdown: &mut watch::Receiver<bool>,
    ) -> Result<End, AgentError> {
        let lost = |reason: String| {
            Ok(End::Lost {
                reason,
                welcomed: false,
            })
        };
        let (credential, bootstrapping) = self.credential()?;
        let mut ws = tokio::select! {
            dialled = self.dial(&credential) => match dialled {
                Ok(ws) => ws,
                Err(reason) => return lost(reason),
            },
            _ = shutdown.wait_for(|s| *s) => return Ok(End::Shutdown),
        };
        if ws.send(Message::text(encode(&self.hello()))).await.is_err() {
            return lost("connection closed while sending hello".into());
        }
        let welcome = match tokio::time::timeout(CONNECT_TIMEOUT, ws.next()).await {
            Err(_) => return lost("no welcome within 10s".into()),
            Ok(None) => return lost("closed before welcome".into()),
            Ok(Some(Err(e))) => return lost(format!("reading welcome: {e}")),
            Ok(Some(Ok(Message::Close(frame)))) => {
                let (code, reason) = frame
                    .map(|f| (u16::from(f.code), f.reason.to_string()))
                    .unwrap_or((1005, "no reason given".into()));
                if close::is_fatal(code) {
                    return Err(AgentError::Refused { code, reason });
                }
                return lost(format!("closed before welcome ({code}): {reason}"));
            }
            Ok(Some(Ok(Message::Text(t)))) => match decode(t.as_str()) {
                Ok(Frame::Welcome(w)) => w,
                Ok(_) => return lost("expected welcome".into()),
                Err(e) => return lost(format!("invalid welcome: {e}")),
            },
            Ok(Some(Ok(_))) => return lost("expected a text welcome".into()),
        };
        if let Some(identity) = welcome.identity {
            match self.store.save(&identity).await {
                Ok(()) => log::info!("bootstrap complete: identity stored"),
                // Keep it in memory: the bootstrap token is spent, and this connection works.
                Err(e) => {
                    log::error!("identity received but not stored, it will be lost on restart: {e}")
                }
            }
            self.identity = Some(identity);
        } else if bootstrapping {
            log::warn!(
                "the control plane accepted the bootstrap token without issuing an identity"
            );
        }
        let heartbeat = Duration::from_secs_f64(welcome.heartbeat_s.clamp(0.05, 3600.0));
        self.heartbeat_ms
            .store(heartbeat.as_millis() as u64, Ordering::Relaxed);
        self.readiness.set(true);
        log::info!(
            "connected to the control plane; heartbeat every {} ms",
            heartbeat.as_millis()
        );
        // The control plane forgets a region's offers on each connection until this arrives.
        let mut snapshot = vec![Frame::Services(self.registry.services())];
        snapshot.extend(self.registry.instance_frames());
        for frame in snapshot {
            if ws.send(Message::text(encode(&frame))).await.is_err() {
                return Ok(End::Lost {
                    reason: "sending the services frame failed".into(),
                    welcomed: true,
                });
            }
        }
        let mut ticker = tokio::time::interval(heartbeat);
        ticker.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
        let silence_limit = heartbeat * 3 + Duration::from_secs(5);
        let mut last_heard = Instant::now();
        let mut seq = 0u64;
        let lost = |reason: String| {
            Ok(End::Lost {
                reason,
                welcomed: true,
            })
        };
        loop {
            tokio::select! {
                _ = shutdown.wait_for(|s| *s) => {
                    self.drain(&mut ws, outbox).await;
                    return Ok(End::Shutdown);
                }
                _ = ticker.tick() => {
                    if last_heard.elapsed() > silence_limit {
                        return lost(format!("nothing heard from the control plane for {} ms", last_heard.elapsed().as_millis()));
                    }
                    seq += 1;
                    let mut status = self.status.lock().map(|s| s.clone()).unwrap_or_default();
                    status.in_flight = self.executor.in_flight() as u32;
                    let ping = Frame::Ping(Ping { seq, status });
                    if ws.send(Message::text(encode(&ping))).await.is_err()
                        || ws.send(Message::Ping(Default::default())).await.is_err()
                    {
                        return lost("sending a heartbeat failed".into());
                    }
                }
                incoming = ws.next() => {
                    last_heard = Instant::now();
                    match incoming {
                        None => return lost("connection closed".into()),
                        Some(Err(e)) => return lost(e.to_string()),
                        Some(Ok(Message::Close(frame))) => {
                            let (code, reason) = frame
                                .map(|f| (u16::from(f.code), f.reason.to_string()))
                                .unwrap_or((1005, "no reason given".into()));
                            if close::is_fatal(code) {
                                return Err(AgentError::Refused { code, reason });
                            }
                            return lost(format!("closed by the control plane ({code}): {reason}"));
                        }
                        Some(Ok(Message::Text(text))) => {
                            if let Some(answer) = self.handle(text.as_str())
                                && ws.send(Message::text(encode(&answer))).await.is_err()
                            {
                                return lost("sending failed".into());
                            }
                        }
                        Some(Ok(_)) => {}
                    }
                }
                out = outbox.recv() => {
                    // A services frame queued while disconnected may be stale: send the current one.
                    let out = match out {
                        Some(Frame::Services(_)) => Some(Frame::Services(self.registry.services())),
                        other => other,
                    };
                    if let Some(frame) = out
                        && ws.send(Message::text(encode(&frame))).await.is_err()
                    {
                        return lost("sending a result failed; it is re-sent after the redelivery".into());
                    }
                }
            }
        }
    }

    fn handle(&self, text: &str) -> Option<Frame> {
        match decode(text) {
            Ok(Frame::Req(req)) => {
                self.executor.submit(req);
                None
            }
            Ok(Frame::Error(e)) => {
                log::warn!("the control plane reported {}: {}", e.code, e.message);
                None
            }
            Ok(_) => Some(Frame::Error(ErrorFrame {
                code: harmony_agent_protocol::code::MALFORMED_FRAME.into(),
                message: "the agent only expects req and error frames after welcome".into(),
                id: None,
            })),
            Err(e) => {
                log::debug!("invalid frame from the control plane: {e}");
                Some(Frame::Error(ErrorFrame::from_decode(&e)))
            }
        }
    }

    /// Graceful stop: finish in-flight requests (bounded), send their results, then close.
    async fn drain(&self, ws: &mut Ws, outbox: &mut mpsc::UnboundedReceiver<Frame>) {
        log::info!(
            "shutting down: waiting for {} in-flight request(s)",
            self.executor.in_flight()
        );
        let deadline = Instant::now() + DRAIN_TIMEOUT;
        loop {
            while let Ok(frame) = outbox.try_recv() {
                let _ = ws.send(Message::text(encode(&frame))).await;
            }
            if self.executor.in_flight() == 0 || Instant::now() > deadline {
                break;
            }
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
        while let Ok(frame) = outbox.try_recv() {
            let _ = ws.send(Message::text(encode(&frame))).await;
        }
        let _ = ws
            .close(Some(tokio_tungstenite::tungstenite::protocol::CloseFrame {
                code: tokio_tungstenite::tungstenite::protocol::frame::coding::CloseCode::Away,
                reason: "agent shutting down".into(),
            }))
            .await;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn control_plane_urls_must_be_tls() {
        assert_eq!(
            agent_url("https://cp.example.com").unwrap().as_str(),
            "wss://cp.example.com/v1/agent"
        );
        assert_eq!(
            agent_url("wss://127.0.0.1:8443/").unwrap().as_str(),
            "wss://127.0.0.1:8443/v1/agent"
        );
        let e = agent_url("ws://cp").unwrap_err().to_string();
        assert!(e.starts_with("--control-plane") && e.contains("TLS"), "{e}");
    }
}
