//! N control-plane replicas on one PostgreSQL 18, behind a real haproxy in TCP mode, all on
//! loopback and stopped on drop.
//!
//! haproxy passes TLS through (the replicas terminate it with the test CA's certificate, whose
//! SAN is `127.0.0.1`), balances by least connections (agents hold theirs for hours) and checks
//! every replica twice a second: a killed replica is out after two failed checks, and a
//! connection attempt that meets a dead replica before that is redispatched to another one.
//! Agents dial [`Replicas::agent_url`]; clients talk to each replica directly
//! ([`Replicas::client`]), as an operator's tools would through per-replica addresses.

use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::Arc;
use std::time::Duration;

use harmony::infra::control_plane::ControlPlaneClient;
use tokio_tungstenite::tungstenite::client::IntoClientRequest;
use tokio_tungstenite::tungstenite::protocol::WebSocketConfig;

use crate::multi_region::{ControlPlane, ControlPlaneOptions, Pki, free_port, random_text};
use crate::postgres::PgServer;

/// How long haproxy may take to listen.
const HAPROXY_START_TIMEOUT: Duration = Duration::from_secs(30);

/// Raises this process's open-file limit to its hard maximum (children inherit it) and returns
/// the new soft limit: every agent or hostile connection is one descriptor on each side.
pub fn raise_fd_limit() -> u64 {
    let mut limit = libc::rlimit {
        rlim_cur: 0,
        rlim_max: 0,
    };
    // SAFETY: getrlimit/setrlimit only read and write the struct passed by pointer.
    unsafe {
        if libc::getrlimit(libc::RLIMIT_NOFILE, &mut limit) == 0 {
            limit.rlim_cur = limit.rlim_max;
            libc::setrlimit(libc::RLIMIT_NOFILE, &limit);
        }
    }
    limit.rlim_cur
}

/// How many client connections one haproxy can hold under this process's open-file limit (which
/// it inherits): each takes two descriptors, the client's and the replica's. Past that, start
/// another haproxy with the same backends (as two load balancers in front of one pool would be).
pub fn haproxy_capacity() -> usize {
    let mut limit = libc::rlimit {
        rlim_cur: 0,
        rlim_max: 0,
    };
    // SAFETY: getrlimit only writes the struct passed by pointer.
    let soft = match unsafe { libc::getrlimit(libc::RLIMIT_NOFILE, &mut limit) } {
        0 => limit.rlim_cur,
        _ => 1024,
    };
    (soft.saturating_sub(256) / 2).max(16) as usize
}

/// A raw agent WebSocket over TLS, as [`ws_connect`] opens it.
pub type Ws =
    tokio_tungstenite::WebSocketStream<tokio_rustls::client::TlsStream<tokio::net::TcpStream>>;

/// A TLS client (ring provider) trusting only the PEM CAs in `ca_pem`.
pub fn tls_connector(ca_pem: &str) -> Result<tokio_rustls::TlsConnector, String> {
    let mut roots = rustls::RootCertStore::empty();
    for c in rustls::pki_types::pem::PemObject::pem_slice_iter(ca_pem.as_bytes()) {
        roots
            .add(c.map_err(|e| format!("CA PEM: {e}"))?)
            .map_err(|e| format!("CA certificate: {e}"))?;
    }
    let config = rustls::ClientConfig::builder_with_provider(Arc::new(
        rustls::crypto::ring::default_provider(),
    ))
    .with_safe_default_protocol_versions()
    .map_err(|e| e.to_string())?
    .with_root_certificates(roots)
    .with_no_client_auth();
    Ok(tokio_rustls::TlsConnector::from(Arc::new(config)))
}

/// Opens the agents' WebSocket (`wss://<addr>/v1/agent`, server name `127.0.0.1`) presenting
/// `bearer` (a bootstrap token or an identity; none: no `Authorization` header), as an agent
/// would before its `hello`.
pub async fn ws_connect(
    addr: SocketAddr,
    tls: &tokio_rustls::TlsConnector,
    bearer: Option<&str>,
    config: Option<WebSocketConfig>,
) -> Result<Ws, String> {
    let tcp = tokio::net::TcpStream::connect(addr)
        .await
        .map_err(|e| format!("connect {addr}: {e}"))?;
    let _ = tcp.set_nodelay(true);
    let name = rustls::pki_types::ServerName::try_from("127.0.0.1").map_err(|e| e.to_string())?;
    let stream = tls
        .connect(name, tcp)
        .await
        .map_err(|e| format!("TLS with {addr}: {e}"))?;
    let mut request = format!("wss://{addr}{}", harmony_agent_protocol::AGENT_PATH)
        .into_client_request()
        .map_err(|e| e.to_string())?;
    if let Some(bearer) = bearer {
        let value = format!("Bearer {bearer}")
            .parse()
            .map_err(|_| "the bearer token is not a valid header value".to_string())?;
        request.headers_mut().insert("authorization", value);
    }
    let (ws, _) = tokio_tungstenite::client_async_with_config(request, stream, config)
        .await
        .map_err(|e| format!("WebSocket upgrade at {addr}: {e}"))?;
    Ok(ws)
}

/// `name` in PATH, or in the sbin folders a non-root PATH often lacks (haproxy lives there).
fn find_program(name: &str) -> Option<PathBuf> {
    let path = std::env::var_os("PATH").unwrap_or_default();
    std::env::split_paths(&path)
        .chain(["/usr/local/sbin", "/usr/sbin", "/sbin"].map(PathBuf::from))
        .map(|d| d.join(name))
        .find(|p| p.is_file())
}

/// The loopback address the next haproxy connects to the replicas from: each its own
/// (127.0.1.1, .2, ...), as separate load balancers have separate addresses.
///
/// Linux picks a connection's local port among those free for its (source address,
/// destination) pair, trying the even half of the range first, then the odd half: past about
/// 14,000 connections from one address to one replica (the default range 32768-60999 has
/// 14,116 even ports) every connect scans the full even half first. Measured here (kernel
/// 6.18): 19 µs per connect up to 13,500 open, 0.70-0.80 ms from 14,500. With 100,000 agents on
/// 6 replicas every haproxy shared 127.0.0.1, so each replica had about 16,700 connections from
/// it and every reconnect and health check paid that in haproxy's CPU.
fn next_source_addr() -> std::net::Ipv4Addr {
    static NEXT: std::sync::atomic::AtomicU32 = std::sync::atomic::AtomicU32::new(0);
    let n = NEXT.fetch_add(1, std::sync::atomic::Ordering::Relaxed) % 250;
    std::net::Ipv4Addr::new(127, 0, 1, 1 + n as u8)
}

/// A haproxy in TCP mode on a free loopback port, balancing over `backends` (connecting from
/// its own loopback address, [`next_source_addr`]); stopped on drop.
pub struct Haproxy {
    child: Option<Child>,
    dir: tempfile::TempDir,
    port: u16,
}

impl Haproxy {
    /// Starts haproxy in front of `backends` (named `cp-0`, `cp-1`, ... in its log), accepting
    /// up to `max_connections` client connections at once, at most [`haproxy_capacity`].
    pub fn start(backends: &[SocketAddr], max_connections: usize) -> Result<Self, String> {
        let max_connections = max_connections.clamp(16, haproxy_capacity());
        let haproxy = find_program("haproxy").ok_or(
            "haproxy not found in PATH or /usr/sbin; install it with `bash tests/setup.sh` (tests/run.sh runs it)",
        )?;
        let dir = tempfile::Builder::new()
            .prefix("harmony-haproxy-")
            .tempdir()
            .map_err(|e| format!("temp dir: {e}"))?;
        let port = free_port()?;
        let source = next_source_addr();
        let servers: String = backends
            .iter()
            .enumerate()
            .map(|(i, a)| format!("    server cp-{i} {a}\n"))
            .collect();
        // Long client/server timeouts: an agent's connection lives for hours and its heartbeats
        // are its only traffic. `redispatch 1` + `retries`: a connection that meets a replica
        // killed since the last check goes to another one instead of failing.
        let cfg = format!(
            "global\n\
             \x20   maxconn {max}\n\
             \x20   log stderr format raw local0 notice\n\
             defaults\n\
             \x20   mode tcp\n\
             \x20   log global\n\
             \x20   option tcplog\n\
             \x20   option dontlognull\n\
             \x20   timeout connect 2s\n\
             \x20   timeout client 1h\n\
             \x20   timeout server 1h\n\
             \x20   retries 3\n\
             \x20   option redispatch 1\n\
             frontend agents\n\
             \x20   bind 127.0.0.1:{port}\n\
             \x20   maxconn {max}\n\
             \x20   default_backend replicas\n\
             backend replicas\n\
             \x20   balance leastconn\n\
             \x20   source {source}\n\
             \x20   default-server check inter 500ms fall 2 rise 1\n\
             {servers}",
            max = max_connections,
        );
        let cfg_path = dir.path().join("haproxy.cfg");
        std::fs::write(&cfg_path, cfg).map_err(|e| format!("{}: {e}", cfg_path.display()))?;
        let log_path = dir.path().join("haproxy.log");
        let log = std::fs::File::create(&log_path).map_err(|e| e.to_string())?;
        let log_err = log.try_clone().map_err(|e| e.to_string())?;
        let child = Command::new(&haproxy)
            .arg("-db")
            .arg("-f")
            .arg(&cfg_path)
            .stdin(Stdio::null())
            .stdout(log)
            .stderr(log_err)
            .spawn()
            .map_err(|e| format!("cannot start {}: {e}", haproxy.display()))?;
        let mut proxy = Self {
            child: Some(child),
            dir,
            port,
        };
        let addr = SocketAddr::from(([127, 0, 0, 1], port));
        if let Some(child) = proxy.child.as_mut()
            && let Err(e) =
                crate::command::wait_listening(child, addr, "haproxy", HAPROXY_START_TIMEOUT)
        {
            return Err(format!("{e}:\n{}", proxy.logs()));
        }
        Ok(proxy)
    }

    /// haproxy's address.
    pub fn addr(&self) -> SocketAddr {
        SocketAddr::from(([127, 0, 0, 1], self.port))
    }

    /// The process id, while it runs.
    pub fn pid(&self) -> Option<u32> {
        self.child.as_ref().map(Child::id)
    }

    /// haproxy's log (connections, health-check transitions).
    pub fn logs(&self) -> String {
        std::fs::read_to_string(self.dir.path().join("haproxy.log")).unwrap_or_default()
    }
}

impl Drop for Haproxy {
    fn drop(&mut self) {
        if let Some(mut c) = self.child.take() {
            let _ = c.kill();
            let _ = c.wait();
        }
    }
}

/// N control-plane replicas sharing one PostgreSQL database and one admin token, with haproxy
/// in front for the agents.
pub struct Replicas {
    /// The replicas, named `cp-0`, `cp-1`, ... (`--replica-id`).
    pub replicas: Vec<ControlPlane>,
    /// haproxy, where agents connect.
    pub haproxy: Haproxy,
    /// The test CA and the replicas' certificate.
    pub pki: Pki,
    /// The shared admin token.
    pub admin_token: String,
    /// The database server (dropped last: the replicas stop before it).
    pub pg: PgServer,
}

impl Replicas {
    /// Starts PostgreSQL, then `n` replicas of `binary` with `options` (database URL, replica
    /// id and admin token filled in), then haproxy accepting up to `max_agents` connections.
    pub fn start(
        binary: &Path,
        n: usize,
        options: ControlPlaneOptions,
        max_agents: usize,
    ) -> Result<Self, String> {
        let pg = PgServer::start()?;
        pg.create_database("harmony")?;
        let url = pg.url("harmony");
        let pki = Pki::new()?;
        let admin_token = random_text("admin-");
        let mut replicas = Vec::with_capacity(n);
        for i in 0..n {
            let o = ControlPlaneOptions {
                database_url: Some(url.clone()),
                replica_id: Some(format!("cp-{i}")),
                admin_token: Some(admin_token.clone()),
                ..options.clone()
            };
            replicas.push(ControlPlane::start(binary, &pki, o)?);
        }
        let backends: Vec<SocketAddr> = replicas.iter().map(|r| r.addr).collect();
        let haproxy = Haproxy::start(&backends, max_agents)?;
        Ok(Self {
            replicas,
            haproxy,
            pki,
            admin_token,
            pg,
        })
    }

    /// The replicas' addresses, in order (haproxy's backends).
    pub fn backends(&self) -> Vec<SocketAddr> {
        self.replicas.iter().map(|r| r.addr).collect()
    }

    /// The URL agents dial: haproxy.
    pub fn agent_url(&self) -> String {
        format!("https://{}", self.haproxy.addr())
    }

    /// An admin client of replica `i`.
    pub fn client(&self, i: usize) -> ControlPlaneClient {
        self.replicas[i].client()
    }

    /// The index of the replica named `id` (`cp-<i>`).
    pub fn index_of(&self, id: &str) -> Option<usize> {
        self.replicas
            .iter()
            .position(|r| r.replica_id() == Some(id))
    }

    /// Which replica holds `region`'s agent connection now, asking replica `ask`.
    pub async fn holder(&self, ask: usize, region: &str) -> Result<Option<usize>, String> {
        let view = self
            .client(ask)
            .region(region)
            .await
            .map_err(|e| e.to_string())?
            .ok_or(format!("region {region} unknown"))?;
        Ok(match (view.connected, view.replica) {
            (true, Some(id)) => self.index_of(&id),
            _ => None,
        })
    }

    /// Every replica's logs and haproxy's, headed by their names, for failure messages.
    pub fn logs(&self) -> String {
        let mut all = String::new();
        for r in &self.replicas {
            all.push_str(&format!(
                "----- {} log\n{}\n",
                r.replica_id().unwrap_or("replica"),
                r.logs()
            ));
        }
        all.push_str(&format!("----- haproxy log\n{}\n", self.haproxy.logs()));
        all
    }
}
