use futures::StreamExt;
use http_body_util::{BodyExt, Full, Limited, StreamBody, combinators::UnsyncBoxBody};
use hyper::body::{Bytes, Frame, Incoming};
use hyper::server::conn::http1;
use hyper::service::service_fn;
use hyper::{Method, Request, Response, StatusCode};
use hyper_util::rt::TokioIo;
use std::io::Write;
use std::net::{IpAddr, SocketAddr};
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};
use tokio::io::AsyncReadExt;
use tokio::sync::watch;

use super::scripts::{ScriptCache, ScriptTable, script_name};
use crate::domain::capability::{BootPhase, HttpAccess};
use harmony_types::{DiscoveryReport, MacAddress};

/// What became of a discovery report the sink took.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ReportOutcome {
    /// Recorded in the inventory (answered 201).
    Recorded,
    /// Kept for the operator instead of applied, for the reason given (answered 202).
    Held(String),
}

/// Why the sink refused a report.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ReportRefused {
    /// The sender is not who the report says (answered 403): e.g. its address holds no DHCP
    /// lease for any of the reported MACs.
    Forbidden(String),
    /// The report cannot be recorded (answered 400).
    Invalid(String),
}

/// Receives the hardware report of a host being discovered, with the address it came from,
/// once it passed [`DiscoveryReport::validate`].
pub type DiscoverySink =
    Arc<dyn Fn(IpAddr, DiscoveryReport) -> Result<ReportOutcome, ReportRefused> + Send + Sync>;

/// A boot file a host fetched (answered 200 to a GET): what it says of the host's boot.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct BootFetch {
    /// The address it came from.
    pub client: IpAddr,
    /// The host's MAC when the path names it (`/ipxe/<mac>.ipxe`, its own script).
    pub mac: Option<MacAddress>,
    /// The boot phase the fetch shows: an iPXE script, a kernel, an initrd or an ignition.
    pub phase: BootPhase,
}

impl BootFetch {
    /// The fetch of `path` by `client`, when it is a boot file: `*.ipxe` scripts, kernels
    /// (`vmlinuz*`, `*kernel*`), initrds (`initrd*`, `*initramfs*`) and `*.ign` ignitions.
    pub fn of(client: IpAddr, path: &str) -> Option<Self> {
        let name = path.rsplit('/').next().unwrap_or_default();
        let mac = path
            .strip_prefix("/ipxe/")
            .and_then(|f| f.strip_suffix(".ipxe"))
            .and_then(|m| MacAddress::parse(m).ok());
        let phase = if name.ends_with(".ipxe") {
            BootPhase::ScriptFetched
        } else if name.ends_with(".ign") {
            BootPhase::IgnitionFetched
        } else if name.starts_with("vmlinuz") || name.contains("kernel") {
            BootPhase::KernelFetched
        } else if name.starts_with("initrd") || name.contains("initramfs") {
            BootPhase::InitrdFetched
        } else {
            return None;
        };
        Some(Self { client, mac, phase })
    }
}

/// Told of each boot file fetched ([`BootFetch`]): per-MAC scripts are the evidence that a
/// requested reboot happened; every fetch is a step of the host's boot timeline.
pub type BootSink = Arc<dyn Fn(BootFetch) + Send + Sync>;

type Body = UnsyncBoxBody<Bytes, std::io::Error>;

const MAX_REPORT: usize = 1 << 20;

/// A running server; stops when dropped.
pub struct HttpBootServer {
    addr: SocketAddr,
    accesses: Arc<Mutex<Vec<HttpAccess>>>,
    stop: watch::Sender<bool>,
}

impl std::fmt::Debug for HttpBootServer {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("HttpBootServer")
            .field("addr", &self.addr)
            .finish()
    }
}

struct Shared {
    root: PathBuf,
    log_file: Option<Mutex<std::fs::File>>,
    accesses: Arc<Mutex<Vec<HttpAccess>>>,
    discovery: Option<DiscoverySink>,
    boots: Option<BootSink>,
    /// The discovery image's folder, served as `/discovery/<file>`.
    discovery_image: Option<PathBuf>,
    /// The per-host scripts, served as `/ipxe/<name>.ipxe`.
    scripts: Option<ScriptCache>,
}

/// What a [`HttpBootServer`] serves and whom it tells.
#[derive(Default)]
pub struct BootServerConfig {
    /// The folder served (`/<path>`).
    pub root: PathBuf,
    /// Where one line per request is appended, if anywhere.
    pub access_log: Option<PathBuf>,
    /// Takes the hardware reports of hosts being discovered (`POST /discovery`).
    pub discovery: Option<DiscoverySink>,
    /// Told of each per-MAC script fetched.
    pub boots: Option<BootSink>,
    /// The discovery image's folder (the discovery kernel and initramfs), served as
    /// `/discovery/<file>`.
    pub discovery_image: Option<PathBuf>,
    /// The per-host scripts table, served as `/ipxe/<name>.ipxe` (see [`super::ScriptTable`]).
    pub scripts: Option<ScriptTable>,
}

impl HttpBootServer {
    /// Serves `config.root` (and the rest of `config`) on `listener`. Needs a Tokio runtime.
    pub fn start(
        listener: std::net::TcpListener,
        config: BootServerConfig,
    ) -> std::io::Result<Self> {
        let BootServerConfig {
            root,
            access_log,
            discovery,
            boots,
            discovery_image,
            scripts,
        } = config;
        listener.set_nonblocking(true)?;
        let addr = listener.local_addr()?;
        let listener = tokio::net::TcpListener::from_std(listener)?;
        let log_file = match access_log {
            Some(path) => {
                if let Some(dir) = path.parent() {
                    std::fs::create_dir_all(dir)?;
                }
                Some(Mutex::new(
                    std::fs::OpenOptions::new()
                        .create(true)
                        .append(true)
                        .open(path)?,
                ))
            }
            None => None,
        };
        let accesses = Arc::new(Mutex::new(Vec::new()));
        let shared = Arc::new(Shared {
            root,
            log_file,
            accesses: accesses.clone(),
            discovery,
            boots,
            discovery_image,
            scripts: scripts.map(ScriptCache::new),
        });
        let (stop, mut stopped) = watch::channel(false);
        tokio::spawn(async move {
            loop {
                let accepted = tokio::select! {
                    a = listener.accept() => a,
                    _ = stopped.changed() => break,
                };
                let Ok((stream, client)) = accepted else {
                    continue;
                };
                let shared = shared.clone();
                let mut conn_stop = stopped.clone();
                tokio::spawn(async move {
                    let service = service_fn(move |req| {
                        let shared = shared.clone();
                        async move {
                            Ok::<_, std::convert::Infallible>(handle(&shared, client, req).await)
                        }
                    });
                    let conn =
                        http1::Builder::new().serve_connection(TokioIo::new(stream), service);
                    tokio::select! {
                        _ = conn => {},
                        _ = conn_stop.changed() => {},
                    }
                });
            }
        });
        Ok(Self {
            addr,
            accesses,
            stop,
        })
    }

    /// The address it listens on.
    pub fn local_addr(&self) -> SocketAddr {
        self.addr
    }

    /// Requests answered so far, oldest first.
    pub fn accesses(&self) -> Vec<HttpAccess> {
        self.accesses.lock().map(|a| a.clone()).unwrap_or_default()
    }
}

impl Drop for HttpBootServer {
    fn drop(&mut self) {
        let _ = self.stop.send(true);
    }
}

/// Parses one access-log line (`CLIENT METHOD PATH STATUS [AT_MS]`; the time, in milliseconds
/// since the Unix epoch, is written since the boot timeline and read by whoever needs it).
pub fn parse_access_line(line: &str) -> Option<HttpAccess> {
    let mut parts = line.split_whitespace();
    Some(HttpAccess {
        client: parts.next()?.to_string(),
        method: parts.next()?.to_string(),
        path: parts.next()?.to_string(),
        status: parts.next()?.parse().ok()?,
    })
}

fn text(status: StatusCode, body: impl Into<String>) -> Response<Body> {
    let mut r = Response::new(
        Full::new(Bytes::from(body.into()))
            .map_err(|never| match never {})
            .boxed_unsync(),
    );
    *r.status_mut() = status;
    r
}

async fn handle(shared: &Shared, client: SocketAddr, req: Request<Incoming>) -> Response<Body> {
    let method = req.method().clone();
    let path = req.uri().path().to_string();
    let response = match (&method, path.as_str()) {
        (&Method::POST, "/discovery") => discovery(shared, client.ip(), req).await,
        (&Method::GET | &Method::HEAD, image) if image.starts_with(IMAGE_PREFIX) => {
            discovery_image(shared, image, method == Method::HEAD).await
        }
        (&Method::GET | &Method::HEAD, _) => match (&shared.scripts, script_of(&path)) {
            (Some(scripts), Some(name)) => match scripts.get(name) {
                Some(script) => bytes(script, method == Method::HEAD),
                None => text(StatusCode::NOT_FOUND, "not found\n"),
            },
            _ => file(&shared.root, &path, method == Method::HEAD).await,
        },
        _ => text(
            StatusCode::METHOD_NOT_ALLOWED,
            "GET, HEAD or POST /discovery\n",
        ),
    };
    let access = HttpAccess {
        client: client.ip().to_string(),
        method: method.to_string(),
        path,
        status: response.status().as_u16(),
    };
    log::info!(
        "http boot: {} {} {} {}",
        access.client,
        access.method,
        access.path,
        access.status
    );
    if let Some(file) = &shared.log_file
        && let Ok(mut f) = file.lock()
    {
        let _ = writeln!(
            f,
            "{} {} {} {} {}",
            access.client,
            access.method,
            access.path,
            access.status,
            now_ms()
        );
        let _ = f.flush();
    }
    note_boot_fetch(shared, client.ip(), &access);
    if let Ok(mut a) = shared.accesses.lock() {
        a.push(access);
    }
    response
}

/// A boot file fetched: tell the boot sink.
fn note_boot_fetch(shared: &Shared, client: IpAddr, access: &HttpAccess) {
    let Some(sink) = &shared.boots else { return };
    if access.method != "GET" || access.status != 200 {
        return;
    }
    if let Some(fetch) = BootFetch::of(client, &access.path) {
        sink(fetch);
    }
}

use crate::domain::capability::timeline::now_ms;

/// The scripts-table entry a request path names, if it names one.
fn script_of(path: &str) -> Option<&str> {
    path.strip_prefix('/').and_then(script_name)
}

/// A 200 with `body` (or only its length, for HEAD).
fn bytes(body: Bytes, head: bool) -> Response<Body> {
    let len = body.len();
    let body = if head { Bytes::new() } else { body };
    let mut r = Response::new(
        Full::new(body)
            .map_err(|never| match never {})
            .boxed_unsync(),
    );
    r.headers_mut().insert(
        hyper::header::CONTENT_LENGTH,
        hyper::header::HeaderValue::from(len),
    );
    r
}

fn resolve(root: &Path, path: &str) -> Option<PathBuf> {
    let rel = path.strip_prefix('/')?;
    let ok = !rel.is_empty()
        && rel.split('/').all(|s| {
            !s.is_empty()
                && s != "."
                && s != ".."
                && s.chars()
                    .all(|c| c.is_ascii_alphanumeric() || matches!(c, '.' | '-' | '_'))
        });
    ok.then(|| root.join(rel))
}

async fn file(root: &Path, path: &str, head: bool) -> Response<Body> {
    let Some(full) = resolve(root, path) else {
        return text(StatusCode::NOT_FOUND, "not found\n");
    };
    let Ok(f) = tokio::fs::File::open(&full).await else {
        return text(StatusCode::NOT_FOUND, "not found\n");
    };
    let len = match f.metadata().await {
        Ok(m) if m.is_file() => m.len(),
        _ => return text(StatusCode::NOT_FOUND, "not found\n"),
    };
    let body: Body = if head {
        Full::new(Bytes::new())
            .map_err(|never| match never {})
            .boxed_unsync()
    } else {
        let stream = futures::stream::unfold(Some(f), |state| async move {
            let mut f = state?;
            let mut buf = vec![0u8; 64 * 1024];
            match f.read(&mut buf).await {
                Ok(0) => None,
                Ok(n) => {
                    buf.truncate(n);
                    Some((Ok(Frame::data(Bytes::from(buf))), Some(f)))
                }
                Err(e) => Some((Err(e), None)),
            }
        });
        BodyExt::boxed_unsync(StreamBody::new(stream.boxed()))
    };
    let mut r = Response::new(body);
    if let Ok(v) = hyper::header::HeaderValue::from_str(&len.to_string()) {
        r.headers_mut().insert(hyper::header::CONTENT_LENGTH, v);
    }
    r
}

/// Where the discovery image's files are served.
pub const IMAGE_PREFIX: &str = "/discovery/";

async fn discovery_image(shared: &Shared, path: &str, head: bool) -> Response<Body> {
    match &shared.discovery_image {
        Some(dir) => file(dir, &path[IMAGE_PREFIX.len() - 1..], head).await,
        None => text(
            StatusCode::NOT_FOUND,
            "no discovery image is served: build one with discovery-image/build.sh DIR and pass --discovery-image DIR\n",
        ),
    }
}

/// A parse error shortened to 300 characters: it may quote the (escaped) reported value,
/// which can be up to the whole body long.
fn clip(e: &str) -> String {
    match e.char_indices().nth(300) {
        Some((i, _)) => format!("{}…", &e[..i]),
        None => e.to_string(),
    }
}

async fn discovery(shared: &Shared, client: IpAddr, req: Request<Incoming>) -> Response<Body> {
    let Some(sink) = &shared.discovery else {
        return text(
            StatusCode::NOT_FOUND,
            "discovery is not enabled on this server\n",
        );
    };
    let bytes = match Limited::new(req.into_body(), MAX_REPORT).collect().await {
        Ok(b) => b.to_bytes(),
        Err(e) => {
            return text(
                StatusCode::BAD_REQUEST,
                format!("cannot read the report: {e}\n"),
            );
        }
    };
    // The provisioning network is hostile: the report is parsed into validated types and every
    // field is checked against what hardware can report before anything is stored or logged.
    let report: DiscoveryReport = match serde_json::from_slice(&bytes) {
        Ok(r) => r,
        Err(e) => {
            let e = clip(&e.to_string());
            log::warn!("discovery: refused a report that is not a host description: {e}");
            return text(
                StatusCode::BAD_REQUEST,
                format!("the report is not a host description: {e}\n"),
            );
        }
    };
    if let Err(e) = report.validate() {
        log::warn!(
            "discovery: refused the report of host {}: {e}",
            report.host.id
        );
        return text(
            StatusCode::BAD_REQUEST,
            format!("the report is refused: {e}\n"),
        );
    }
    // The log line carries the serial and UUID so an operator can match the report to the
    // machine's label; reported text is escaped so that it cannot forge a log line.
    let summary = report.summary();
    match sink(client, report) {
        Ok(ReportOutcome::Recorded) => {
            log::info!("discovery: {summary} (from {client})");
            text(StatusCode::CREATED, "recorded\n")
        }
        Ok(ReportOutcome::Held(why)) => {
            log::warn!("discovery: held for the operator: {summary} (from {client}): {why}");
            text(
                StatusCode::ACCEPTED,
                format!("held for the operator, not applied: {why}\n"),
            )
        }
        Err(ReportRefused::Forbidden(why)) => {
            log::warn!("discovery: refused {summary} from {client}: {why}");
            text(
                StatusCode::FORBIDDEN,
                format!("the report is refused: {why}\n"),
            )
        }
        Err(ReportRefused::Invalid(why)) => text(StatusCode::BAD_REQUEST, format!("{why}\n")),
    }
}
