//! Benchmark: many simulated region agents against the control plane on loopback.
//!
//! With `--replicas N` (N >= 2, default 3) it starts PostgreSQL 18, N control-plane replicas on
//! it and haproxy in front of them (`harmony_e2e::ha`); with `--replicas 1`, one control plane
//! on SQLite that agents reach directly. It creates `--agents` regions through the admin API,
//! then connects as many simulated agents from this one process (spread over `--source-addrs`
//! loopback addresses): each presents its bootstrap token, keeps the identity it receives,
//! heartbeats every `--heartbeat-s` seconds, answers every request at once, and reconnects
//! with the real agent's backoff (`harmony_agent::backoff`, its default 1 s doubling to 60 s,
//! at most 4 s for the first minute after a working connection, full jitter) when its
//! connection drops. It prints the memory per connection of each replica
//! (RSS delta / its agents), the CPU of the replicas, haproxy and the simulator while the agents
//! heartbeat, the p50/p99 of concurrent requests submitted to a replica that does not hold the
//! region's agent, and then: with one replica, the reconnect storm after the control plane is
//! killed and started again on the same address and database (time until every agent is back
//! and healthy, and the arrivals per second); with replicas, how long until every agent is
//! healthy again after the replica holding the most agents is killed. `--heap-profile 1` runs
//! the control plane under heaptrack instead and prints its live heap per agent by component.
//! More agents than the open-file hard limit allows are cut to what fits, and the figure says
//! so. Every figure is checked before it is printed (every region healthy, every request
//! `ok`). It ends with one `BENCH {json}` line on stdout (the figures `--figures` names)
//! against the goals of issue 18, for `bench all`. See docs/benchmarks.md; CI runs it at a tiny
//! size (tests/control_plane_ha.rs, tests/benchmarks_tiny.rs).
//!
//! ```text
//! cargo build --release -p harmony_e2e --bin bench_agents --bin e2e-control-plane
//! target/release/bench_agents [--replicas 3] [--agents 10000] [--heartbeat-s 5] [--requests 1000] [--window-s 30]
//!     [--source-addrs N] [--restart 0|1] [--heap-profile 0|1] [--simulators N] [--figures memory,held,restart,failover,requests,outage]
//! ```

use futures::stream::{self, StreamExt};
use futures::{SinkExt, future};
use std::net::SocketAddr;
use std::path::PathBuf;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::time::{Duration, Instant};

use harmony::infra::control_plane::{ControlPlaneClient, RegionStatus};
use harmony::types::{RegionId, ZoneId};
use harmony_agent::backoff::Backoff;
use harmony_agent_protocol::{
    AgentStatus, Frame, Hello, MAX_FRAME_BYTES, Op, PROTOCOL_VERSION, Ping, Res, close, decode,
    encode,
};
use harmony_e2e::bench::{BenchResult, cpu_ticks, ticks_per_second};
use harmony_e2e::ha::{self, Haproxy, Replicas, haproxy_capacity, raise_fd_limit};
use harmony_e2e::multi_region::{ControlPlane, ControlPlaneOptions, Pki};
use tokio_tungstenite::tungstenite::Message;
use tokio_tungstenite::tungstenite::protocol::WebSocketConfig;

#[path = "bench_agents/burst.rs"]
mod burst;
#[path = "bench_agents/fleet.rs"]
mod fleet;
#[path = "bench_agents/heap.rs"]
mod heap;
#[path = "bench_agents/storm.rs"]
mod storm;

/// Set once the figures are printed: agents then stop quietly with the control plane.
static DONE: AtomicBool = AtomicBool::new(false);
/// Longest wait for listing every region: at 100,000 regions on a loaded machine a listing
/// took longer than the client's default 30 s.
const LIST_WAIT: Duration = Duration::from_secs(180);
/// How long after every replica was killed the outage figure waits for the agents.
const OUTAGE_WAIT: Duration = Duration::from_secs(600);
/// Connection attempts before a simulated agent that was never welcomed gives up (the real
/// agent never does): with the real backoff, about 3 minutes of trying. At 5 attempts (about
/// 30 s), one agent of 100,000 gave up while the others bootstrapped.
const FIRST_ATTEMPTS: u32 = 8;

struct Options {
    replicas: usize,
    agents: usize,
    heartbeat_s: u64,
    requests: usize,
    window_s: u64,
    ws_buffer: usize,
    connect_concurrency: usize,
    /// Loopback source addresses the simulated agents spread over (127.0.0.1, .2, ...); 0 picks
    /// one per 20,000 agents so ephemeral ports never run out.
    source_addrs: usize,
    /// With one replica: restart it once every agent is in and time the reconnect storm.
    restart: bool,
    /// Run the control plane under heaptrack and print where its memory per agent goes.
    heap_profile: bool,
    /// Simulator processes (0: as many as the agents need, one per 18,000).
    simulators: usize,
    /// Which figures the `BENCH` line carries (`memory`, `held`, `restart`, `failover`,
    /// `requests`, `outage`; `outage` also kills and restarts every replica at the end).
    figures: Vec<String>,
}

const USAGE: &str = "usage: bench_agents [--replicas N] [--agents N] [--heartbeat-s S] [--requests N] [--window-s S] [--ws-buffer-bytes B] [--connect-concurrency N] [--source-addrs N] [--restart 0|1] [--heap-profile 0|1] [--simulators N] [--figures memory,held,restart,failover,requests,outage]";

fn parse_args() -> BenchResult<Options> {
    let mut o = Options {
        replicas: 3,
        agents: 10_000,
        heartbeat_s: 5,
        requests: 1000,
        window_s: 30,
        ws_buffer: 1024,
        connect_concurrency: 128,
        source_addrs: 0,
        restart: true,
        heap_profile: false,
        simulators: 0,
        figures: [
            "memory", "held", "restart", "failover", "requests", "outage",
        ]
        .map(String::from)
        .to_vec(),
    };
    let mut args = std::env::args().skip(1);
    while let Some(flag) = args.next() {
        let text = args
            .next()
            .ok_or(format!("{flag} needs a value; {USAGE}"))?;
        if flag == "--figures" {
            o.figures = text.split(',').map(|f| f.trim().to_string()).collect();
            if let Some(bad) = o.figures.iter().find(|f| {
                ![
                    "memory", "held", "restart", "failover", "requests", "outage",
                ]
                .contains(&f.as_str())
            }) {
                return Err(format!(
                    "--figures: unknown figure {bad}; give some of memory,held,restart,failover,requests,outage"
                ));
            }
            continue;
        }
        let value = text
            .parse::<usize>()
            .map_err(|e| format!("{flag}: {text}: {e}; {USAGE}"))?;
        match flag.as_str() {
            "--replicas" => o.replicas = value.max(1),
            "--agents" => o.agents = value.max(1),
            "--heartbeat-s" => o.heartbeat_s = value.max(1) as u64,
            "--requests" => o.requests = value.max(1),
            "--window-s" => o.window_s = value.max(1) as u64,
            // The control plane refuses a smaller one (`--ws-buffer-bytes`), so say so here.
            "--ws-buffer-bytes" if value < 1024 => {
                return Err(format!(
                    "--ws-buffer-bytes: {value} is below 1024, the control plane's least; give 1024 or more"
                ));
            }
            "--ws-buffer-bytes" => o.ws_buffer = value,
            "--connect-concurrency" => o.connect_concurrency = value.max(1),
            "--source-addrs" => o.source_addrs = value.min(250),
            "--restart" => o.restart = value != 0,
            "--heap-profile" => o.heap_profile = value != 0,
            "--simulators" => o.simulators = value,
            other => return Err(format!("unknown flag {other}; {USAGE}")),
        }
    }
    o.requests = o.requests.min(o.agents);
    Ok(o)
}

/// Descriptors each process keeps besides one per agent: the admin API's connections (one per
/// concurrent request at most), the database, the listener, logs.
fn descriptors_besides_agents(o: &Options) -> usize {
    o.requests + 512
}

fn rss_kib(pid: u32) -> BenchResult<u64> {
    let status =
        std::fs::read_to_string(format!("/proc/{pid}/status")).map_err(|e| e.to_string())?;
    status
        .lines()
        .find_map(|l| l.strip_prefix("VmRSS:"))
        .and_then(|v| v.trim().trim_end_matches("kB").trim().parse().ok())
        .ok_or("no VmRSS".into())
}

fn binary(name: &str) -> BenchResult<PathBuf> {
    let exe = std::env::current_exe().map_err(|e| e.to_string())?;
    let path = exe.parent().ok_or("no exe folder")?.join(name);
    if path.is_file() {
        Ok(path)
    } else {
        Err(format!(
            "{} not found; build it with `cargo build --release -p harmony_e2e --bins`",
            path.display()
        ))
    }
}

/// What the control plane runs as: one process on SQLite, or replicas on PostgreSQL behind
/// haproxy (plus more haproxies when one cannot hold every agent under the open-file limit).
enum Deployment {
    Single(ControlPlane, Pki),
    Replicated(Replicas, Vec<Haproxy>),
}

impl Deployment {
    fn ca_pem(&self) -> &str {
        match self {
            Deployment::Single(_, pki) => &pki.ca_pem,
            Deployment::Replicated(r, _) => &r.pki.ca_pem,
        }
    }

    /// Where agents connect (agent `i` to the `i % len`-th).
    fn agent_addrs(&self) -> Vec<SocketAddr> {
        match self {
            Deployment::Single(cp, _) => vec![cp.addr],
            Deployment::Replicated(r, more) => std::iter::once(r.haproxy.addr())
                .chain(more.iter().map(Haproxy::addr))
                .collect(),
        }
    }

    /// The haproxy processes.
    fn proxy_pids(&self) -> Vec<u32> {
        match self {
            Deployment::Single(..) => Vec::new(),
            Deployment::Replicated(r, more) => std::iter::once(&r.haproxy)
                .chain(more)
                .filter_map(Haproxy::pid)
                .collect(),
        }
    }

    fn clients(&self) -> Vec<ControlPlaneClient> {
        match self {
            Deployment::Single(cp, _) => vec![cp.client()],
            Deployment::Replicated(r, _) => (0..r.replicas.len()).map(|i| r.client(i)).collect(),
        }
    }

    fn pids(&self) -> BenchResult<Vec<u32>> {
        let cps: Vec<&ControlPlane> = match self {
            Deployment::Single(cp, _) => vec![cp],
            Deployment::Replicated(r, _) => r.replicas.iter().collect(),
        };
        cps.iter()
            .map(|c| c.pid().ok_or("a control plane is not running".to_string()))
            .collect()
    }

    /// The replica index holding a region's agent, from its view.
    fn holder(&self, view: &RegionStatus) -> Option<usize> {
        match self {
            Deployment::Single(..) => view.connected.then_some(0),
            Deployment::Replicated(r, _) => view.replica.as_deref().and_then(|id| r.index_of(id)),
        }
    }
}

/// What every simulated agent shares.
#[derive(Clone)]
struct Sim {
    tls: tokio_rustls::TlsConnector,
    heartbeat: Duration,
    ws_buffer: usize,
    welcomed: Arc<AtomicUsize>,
    reconnects: Arc<AtomicUsize>,
    /// Connections welcomed and not yet dropped: every agent is back when it reaches the
    /// fleet's size (the reconnect count alone counts an agent dropped after its welcome twice).
    connected: Arc<AtomicUsize>,
    /// When reconnects are welcomed, by second since the restart (the storm's histogram).
    arrivals: Arc<storm::Arrivals>,
}

/// Counts a welcomed connection in [`Sim::connected`] while it lasts.
struct Held<'a>(&'a AtomicUsize);

impl<'a> Held<'a> {
    fn new(count: &'a AtomicUsize) -> Self {
        count.fetch_add(1, Ordering::Relaxed);
        Self(count)
    }
}

impl Drop for Held<'_> {
    fn drop(&mut self) {
        self.0.fetch_sub(1, Ordering::Relaxed);
    }
}

/// Every one of `n` agents is back after a restart: as many reconnects since `before` as
/// agents, and every agent connected at once (an agent dropped after its welcome reconnects and
/// counts twice in the first; the two come from the same reports, so the gauge is as fresh as
/// the count).
fn all_back(reconnects: &AtomicUsize, before: usize, connected: &AtomicUsize, n: usize) -> bool {
    reconnects.load(Ordering::Relaxed) - before >= n && connected.load(Ordering::Relaxed) >= n
}

/// What the outage (every replica killed at once, then started again) measured.
struct Outage {
    /// From the kill until every replica listened again.
    down: Duration,
    /// From the kill until every agent was welcomed again, if within the bound.
    welcomed_again: Option<Duration>,
    /// Agents welcomed again by the end of the wait.
    reconnected: usize,
    /// From the kill until every region was healthy and connected, if within the bound.
    healthy_again: Option<Duration>,
    /// Regions healthy and connected at the last listing.
    healthy: usize,
    /// Reconnects welcomed per second since the kill.
    counts: Vec<usize>,
    /// Where the CPU went while restarting and while reconnecting ([`burst::phase`]).
    cpu: String,
}

/// One simulated agent: bootstrap, then heartbeat and answer requests; reconnect with its
/// identity and full jitter whenever the connection drops, until the benchmark ends.
async fn agent(
    sim: Sim,
    link: Link,
    region: String,
    token: String,
    mut permit: Option<tokio::sync::OwnedSemaphorePermit>,
) -> BenchResult<()> {
    let mut bearer = token;
    let mut ever_welcomed = false;
    let mut failed_in_row = 0u32;
    // The real agent's reconnect backoff (harmony_agent), with its defaults: full jitter from
    // 1 s doubling to 60 s (at most 4 s for a minute after a working connection), reset once
    // welcomed.
    let mut backoff = Backoff::new(
        Duration::from_millis(harmony_agent::DEFAULT_BACKOFF_BASE_MS),
        Duration::from_millis(harmony_agent::DEFAULT_BACKOFF_MAX_MS),
    );
    loop {
        let welcomed =
            match session(&sim, link, &region, &mut bearer, &mut permit, ever_welcomed).await {
                Err(Fatal(e)) if !DONE.load(Ordering::Relaxed) => return Err(e),
                Err(_) => return Ok(()),
                Ok(w) => w,
            };
        if DONE.load(Ordering::Relaxed) {
            return Ok(());
        }
        ever_welcomed |= welcomed;
        failed_in_row = if welcomed { 0 } else { failed_in_row + 1 };
        if !ever_welcomed && failed_in_row >= FIRST_ATTEMPTS {
            return Err(format!(
                "{region}: never welcomed after {failed_in_row} attempts"
            ));
        }
        if welcomed {
            backoff.reset();
        }
        tokio::time::sleep(backoff.next_delay()).await;
    }
}

/// Starts agents `first..` (region and bootstrap token each), each from its loopback source
/// address to its target (spread by index), taking a `gate` permit each until welcomed; those
/// that stop for good are counted in `failures`.
async fn spawn_agents(
    sim: &Sim,
    agents: Vec<(String, String)>,
    first: usize,
    sources: usize,
    addrs: &[SocketAddr],
    gate: &Arc<tokio::sync::Semaphore>,
    failures: &Arc<AtomicUsize>,
) -> BenchResult<()> {
    for (k, (region, token)) in agents.into_iter().enumerate() {
        let i = first + k;
        let permit = gate
            .clone()
            .acquire_owned()
            .await
            .map_err(|e| e.to_string())?;
        let source = 1 + (i % sources.max(1)) as u8;
        let link = Link {
            from: std::net::IpAddr::V4(std::net::Ipv4Addr::new(127, 0, 0, source)),
            to: addrs[i % addrs.len()],
        };
        let (sim, failures) = (sim.clone(), failures.clone());
        tokio::spawn(async move {
            if let Err(e) = agent(sim, link, region, token, Some(permit)).await {
                failures.fetch_add(1, Ordering::Relaxed);
                eprintln!("agent stopped: {e}");
            }
        });
    }
    Ok(())
}

/// Where a simulated agent connects from and to.
#[derive(Clone, Copy)]
struct Link {
    /// A loopback source address (127.0.0.x): each has its own ephemeral ports.
    from: std::net::IpAddr,
    to: SocketAddr,
}

/// [`ha::ws_connect`] from a chosen loopback source address.
async fn ws_connect_from(
    link: Link,
    tls: &tokio_rustls::TlsConnector,
    bearer: &str,
    config: WebSocketConfig,
) -> BenchResult<ha::Ws> {
    use tokio_tungstenite::tungstenite::client::IntoClientRequest;
    let socket = tokio::net::TcpSocket::new_v4().map_err(|e| e.to_string())?;
    // The port is picked at connect, against the full address pair: a port picked at bind
    // could pair with the control plane's TIME_WAIT socket of a connection just closed (after
    // a restart, thousands are), and the SYN would go unanswered until retransmitted.
    let on: libc::c_int = 1;
    // SAFETY: setsockopt reads `on` (a c_int, its size given) on a socket this function owns.
    let set = unsafe {
        libc::setsockopt(
            std::os::fd::AsRawFd::as_raw_fd(&socket),
            libc::IPPROTO_IP,
            libc::IP_BIND_ADDRESS_NO_PORT,
            (&on as *const libc::c_int).cast(),
            std::mem::size_of::<libc::c_int>() as libc::socklen_t,
        )
    };
    if set != 0 {
        return Err(format!(
            "IP_BIND_ADDRESS_NO_PORT: {}",
            std::io::Error::last_os_error()
        ));
    }
    socket
        .bind(SocketAddr::new(link.from, 0))
        .map_err(|e| format!("bind {}: {e}", link.from))?;
    let tcp = socket
        .connect(link.to)
        .await
        .map_err(|e| format!("connect {}: {e}", link.to))?;
    let _ = tcp.set_nodelay(true);
    let name = rustls::pki_types::ServerName::try_from("127.0.0.1").map_err(|e| e.to_string())?;
    let stream = tls
        .connect(name, tcp)
        .await
        .map_err(|e| format!("TLS with {}: {e}", link.to))?;
    let mut request = format!("wss://{}{}", link.to, harmony_agent_protocol::AGENT_PATH)
        .into_client_request()
        .map_err(|e| e.to_string())?;
    let value = format!("Bearer {bearer}")
        .parse()
        .map_err(|_| "the bearer token is not a valid header value".to_string())?;
    request.headers_mut().insert("authorization", value);
    let (ws, _) = tokio_tungstenite::client_async_with_config(request, stream, Some(config))
        .await
        .map_err(|e| format!("WebSocket upgrade at {}: {e}", link.to))?;
    Ok(ws)
}

/// A reason to stop reconnecting (the control plane refused the credential for good).
struct Fatal(String);

/// One connection of a simulated agent, until it drops; whether it was welcomed.
async fn session(
    sim: &Sim,
    link: Link,
    region: &str,
    bearer: &mut String,
    permit: &mut Option<tokio::sync::OwnedSemaphorePermit>,
    welcomed_before: bool,
) -> Result<bool, Fatal> {
    let config = WebSocketConfig::default()
        .read_buffer_size(sim.ws_buffer)
        .write_buffer_size(0);
    let Ok(mut ws) = ws_connect_from(link, &sim.tls, bearer, config).await else {
        return Ok(false);
    };
    let hello = Frame::Hello(Hello {
        agent_version: "bench".into(),
        region: region.into(),
        zone: "z".into(),
        ops: Op::ALL.iter().map(|o| o.as_str().to_string()).collect(),
        protocol: PROTOCOL_VERSION,
        max_frame_bytes: MAX_FRAME_BYTES as u64,
        cluster_scoped: Vec::new(),
    });
    if ws.send(Message::text(encode(&hello))).await.is_err() {
        return Ok(false);
    }
    match ws.next().await {
        Some(Ok(Message::Text(t))) => match decode(t.as_str()) {
            Ok(Frame::Welcome(w)) => {
                if let Some(identity) = w.identity {
                    *bearer = identity.expose().to_string();
                }
            }
            other => return Err(Fatal(format!("{region}: no welcome: {other:?}"))),
        },
        Some(Ok(Message::Close(Some(f)))) if close::is_fatal(u16::from(f.code)) => {
            return Err(Fatal(format!("{region}: refused: {} {}", f.code, f.reason)));
        }
        _ => return Ok(false),
    }
    if welcomed_before {
        sim.reconnects.fetch_add(1, Ordering::Relaxed);
        sim.arrivals.record();
    } else {
        sim.welcomed.fetch_add(1, Ordering::Relaxed);
    }
    let _held = Held::new(&sim.connected);
    // Welcomed: let the next agent start its handshake.
    permit.take();
    // Random phase so heartbeats are spread like real agents'.
    let hb = sim.heartbeat;
    // The real agent's first tick fires at once; first sessions keep a random phase so the
    // simulator's own start (128 at a time) does not bunch the heartbeats.
    let phase = if welcomed_before {
        Duration::ZERO
    } else {
        Duration::from_millis(u64::from(rand_u32()) % hb.as_millis().max(1) as u64)
    };
    let mut ticker = tokio::time::interval_at(tokio::time::Instant::now() + phase, hb);
    let mut seq = 0;
    loop {
        tokio::select! {
            _ = ticker.tick() => {
                seq += 1;
                let status = AgentStatus { k8s_reachable: true, ..Default::default() };
                let ping = Frame::Ping(Ping { seq, status });
                if ws.send(Message::text(encode(&ping))).await.is_err() {
                    return Ok(true);
                }
            }
            incoming = ws.next() => match incoming {
                Some(Ok(Message::Text(t))) => {
                    if let Ok(Frame::Req(req)) = decode(t.as_str()) {
                        let res = Frame::Res(Res::ok(req.id, serde_json::json!({"nodes": 3})));
                        if ws.send(Message::text(encode(&res))).await.is_err() {
                            return Ok(true);
                        }
                    }
                }
                Some(Ok(_)) => {}
                _ => return Ok(true),
            }
        }
    }
}

fn rand_u32() -> u32 {
    let mut b = [0u8; 4];
    use std::io::Read;
    if let Ok(mut f) = std::fs::File::open("/dev/urandom") {
        let _ = f.read_exact(&mut b);
    }
    u32::from_le_bytes(b)
}

fn percentile(sorted: &[Duration], p: f64) -> Duration {
    let i = ((sorted.len() as f64 - 1.0) * p).round() as usize;
    sorted[i.min(sorted.len() - 1)]
}

fn ms(d: Duration) -> f64 {
    d.as_secs_f64() * 1000.0
}

#[tokio::main]
async fn main() {
    let mut args = std::env::args().skip(1);
    if args.next().as_deref() == Some("fleet-child") {
        let spec = args.next().unwrap_or_default();
        if let Err(e) = fleet::child(&spec).await {
            eprintln!("error: {e}");
            std::process::exit(1);
        }
        return;
    }
    if let Err(e) = bench().await {
        eprintln!("error: {e}");
        std::process::exit(1);
    }
}

/// `n` requests at once (`label` names their ids), region `r<i>` sent to replica `target[i]`;
/// the sorted round trips.
async fn requests(
    clients: &[ControlPlaneClient],
    target: &[usize],
    ids: impl Iterator<Item = usize>,
    label: &str,
) -> BenchResult<Vec<Duration>> {
    let results: Vec<BenchResult<Duration>> = future::join_all(ids.map(|i| {
        let admin = clients[target[i]].clone();
        async move {
            let t = Instant::now();
            let res = admin
                .request(
                    &format!("r{i}"),
                    &format!("bench-{label}-{i}"),
                    "get_inventory",
                    serde_json::json!({}),
                    Duration::from_secs(60),
                )
                .await
                .map_err(|e| e.to_string())?;
            if !res.ok {
                return Err(format!("{:?}", res.error));
            }
            Ok(t.elapsed())
        }
    }))
    .await;
    let mut times = results.into_iter().collect::<BenchResult<Vec<_>>>()?;
    times.sort();
    Ok(times)
}

async fn bench() -> BenchResult<()> {
    let mut o = parse_args()?;
    let fd_limit = raise_fd_limit();
    // One descriptor per agent in the control plane and in this simulator, plus the rest: past
    // the hard limit (which only CAP_SYS_RESOURCE may raise) the run is cut to what fits, and
    // the figure says so.
    let asked = o.agents;
    let fits = (fd_limit as usize).saturating_sub(descriptors_besides_agents(&o));
    // Each replica holds its share of the agents under its own open-file limit.
    if o.replicas > 1 && o.agents > fits * o.replicas {
        o.agents = fits * o.replicas;
        o.requests = o.requests.min(o.agents);
        println!(
            "{asked} agents asked, but {} replicas hold at most {fits} each under the open-file hard limit {fd_limit}: running {} agents (give more --replicas)",
            o.replicas, o.agents
        );
    }
    if o.replicas <= 1 && o.agents > fits {
        o.agents = fits.max(1);
        o.requests = o.requests.min(o.agents);
        println!(
            "{asked} agents asked, but the open-file hard limit is {fd_limit} (this process and the control plane it starts need one descriptor per agent plus {}; raising the hard limit needs CAP_SYS_RESOURCE, which this machine does not give): running {} agents",
            descriptors_besides_agents(&o),
            o.agents
        );
    }
    let sources = if o.source_addrs == 0 {
        o.agents.div_ceil(20_000).max(1)
    } else {
        o.source_addrs
    };
    println!(
        "replicas {}, agents {}, heartbeat {} s, requests {}, CPU window {} s, WebSocket read buffer {} B, open files limit {fd_limit}, agent source addresses 127.0.0.1-{sources}",
        o.replicas, o.agents, o.heartbeat_s, o.requests, o.window_s, o.ws_buffer
    );
    let options = ControlPlaneOptions {
        heartbeat_ms: o.heartbeat_s * 1000,
        unhealthy_after_ms: o.heartbeat_s * 3000,
        unavailable_after_ms: o.heartbeat_s * 6000,
        extra_args: vec![
            "--ws-buffer-bytes".into(),
            o.ws_buffer.to_string(),
            "--max-connections".into(),
            (o.agents + descriptors_besides_agents(&o)).to_string(),
        ],
        // `BENCH_CP_LOG` (a RUST_LOG value) to see what the control plane does during a run.
        rust_log: Some(std::env::var("BENCH_CP_LOG").unwrap_or_else(|_| "warn".into())),
        ..ControlPlaneOptions::default()
    };
    let real_cp_bin = binary("e2e-control-plane")?;
    let profile_dir = tempfile::Builder::new()
        .prefix("bench-agents-heap-")
        .tempdir()
        .map_err(|e| e.to_string())?;
    let cp_bin = if o.heap_profile {
        if o.replicas > 1 {
            return Err("--heap-profile profiles one control plane: give --replicas 1".into());
        }
        heap::wrapper(profile_dir.path(), &real_cp_bin)?
    } else {
        real_cp_bin.clone()
    };
    let mut deployment = if o.replicas <= 1 {
        let pki = Pki::new()?;
        Deployment::Single(ControlPlane::start(&cp_bin, &pki, options)?, pki)
    } else {
        let r = Replicas::start(&cp_bin, o.replicas, options, o.agents + 256)?;
        let per = haproxy_capacity();
        let more = (1..o.agents.div_ceil(per))
            .map(|_| Haproxy::start(&r.backends(), per))
            .collect::<BenchResult<Vec<_>>>()?;
        Deployment::Replicated(r, more)
    };
    let clients = deployment.clients();
    let n_cp = clients.len();

    // Regions first, through the admin API (64 at a time, spread over the replicas).
    let started = Instant::now();
    let results: Vec<BenchResult<(String, String)>> = stream::iter(0..o.agents)
        .map(|i| {
            let admin = clients[i % n_cp].clone();
            async move {
                let name = format!("r{i}");
                let region = RegionId::parse(&name).map_err(|e| e.to_string())?;
                let zone = ZoneId::parse("z").map_err(|e| e.to_string())?;
                let created = admin
                    .create_region(&region, &zone)
                    .await
                    .map_err(|e| e.to_string())?
                    .ok_or("region exists")?;
                Ok((name, created.bootstrap_token.expose().to_string()))
            }
        })
        .buffer_unordered(64)
        .collect()
        .await;
    let tokens = results.into_iter().collect::<BenchResult<Vec<_>>>()?;
    let create_s = started.elapsed().as_secs_f64();
    println!("created {} regions in {create_s:.1} s", tokens.len());
    tokio::time::sleep(Duration::from_secs(3)).await;
    let mut pids = deployment.pids()?;
    if o.heap_profile
        && let Deployment::Single(cp, _) = &deployment
    {
        // The process to measure is heaptrack's child, not the wrapper.
        pids = vec![
            heap::real_pid(&real_cp_bin, &cp.addr.to_string())
                .ok_or("the control plane under heaptrack was not found")?,
        ];
    }
    let rss_before = pids
        .iter()
        .map(|p| rss_kib(*p))
        .collect::<BenchResult<Vec<_>>>()?;

    // Agents: bootstrap exchange, then heartbeats.
    let welcomed = Arc::new(AtomicUsize::new(0));
    let reconnects = Arc::new(AtomicUsize::new(0));
    let connected = Arc::new(AtomicUsize::new(0));
    let failures = Arc::new(AtomicUsize::new(0));
    let heartbeat = Duration::from_secs(o.heartbeat_s);
    let gate = Arc::new(tokio::sync::Semaphore::new(o.connect_concurrency));
    let addrs = deployment.agent_addrs();
    let arrivals = Arc::new(storm::Arrivals::new());
    let sim = Sim {
        tls: ha::tls_connector(deployment.ca_pem())?,
        heartbeat,
        ws_buffer: o.ws_buffer,
        welcomed: welcomed.clone(),
        reconnects: reconnects.clone(),
        connected: connected.clone(),
        arrivals: arrivals.clone(),
    };
    let started = Instant::now();
    // More agents than one process holds: child simulator processes (with replicas, whose
    // haproxies hold the agents' connections; one control plane holds all of them itself).
    let simulators = match o.simulators {
        0 if o.replicas > 1 => o.agents.div_ceil(fleet::PER_PROCESS),
        0 => 1,
        n => n,
    };
    let mut fleet = None;
    let mut local = tokens;
    if simulators > 1 {
        let shared = fleet::Shared {
            ca_pem: deployment.ca_pem(),
            addrs: addrs.clone(),
            sources,
            heartbeat_s: o.heartbeat_s,
            ws_buffer: o.ws_buffer,
            connect_concurrency: o.connect_concurrency.div_ceil(simulators),
        };
        let totals = fleet::Totals {
            welcomed: welcomed.clone(),
            reconnects: reconnects.clone(),
            connected: connected.clone(),
            failures: failures.clone(),
            arrivals: arrivals.clone(),
        };
        fleet = Some(fleet::Fleet::spawn(
            simulators,
            std::mem::take(&mut local),
            &shared,
            &totals,
        )?);
        println!("{simulators} simulator processes");
    }
    spawn_agents(&sim, local, 0, sources, &addrs, &gate, &failures).await?;
    let deadline = Instant::now() + Duration::from_secs(600);
    // When the agents are not all in by the bound: an error, unless the run measures how many
    // are held (the scale run), which then goes on with those in and says so in its figure.
    let mut not_all_in = None;
    while welcomed.load(Ordering::Relaxed) + failures.load(Ordering::Relaxed) < o.agents {
        if Instant::now() > deadline {
            let why = format!(
                "{} welcomed and {} gave up of {} when the 10-minute connect bound passed (load average {})",
                welcomed.load(Ordering::Relaxed),
                failures.load(Ordering::Relaxed),
                o.agents,
                load_average()
            );
            if !o.figures.iter().any(|f| f == "held") {
                return Err(format!("agents did not all connect: {why}"));
            }
            println!("not every agent is in: {why}; measuring those that are");
            not_all_in = Some(why);
            break;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    let connect_s = started.elapsed().as_secs_f64();
    let n = welcomed.load(Ordering::Relaxed);
    println!(
        "{n} agents connected ({} failed) in {connect_s:.1} s",
        failures.load(Ordering::Relaxed)
    );
    // Let every agent heartbeat at least twice before measuring.
    tokio::time::sleep(heartbeat * 2 + Duration::from_secs(2)).await;
    let rss_after = pids
        .iter()
        .map(|p| rss_kib(*p))
        .collect::<BenchResult<Vec<_>>>()?;
    if o.heap_profile {
        let delta = rss_after[0].saturating_sub(rss_before[0]) as f64 / n.max(1) as f64;
        let lines =
            tokio::task::block_in_place(|| heap::breakdown(profile_dir.path(), pids[0], n))?;
        DONE.store(true, Ordering::Relaxed);
        println!();
        for line in lines {
            println!("{line}");
        }
        println!(
            "| RSS delta per agent under heaptrack (its bookkeeping included) | {delta:.1} KiB |"
        );
        drop(deployment);
        return Ok(());
    }

    // CPU share while the agents heartbeat: replicas, haproxy, this simulator.
    let proxies = deployment.proxy_pids();
    let mut watched: Vec<String> = pids.iter().chain(&proxies).map(u32::to_string).collect();
    watched.push("self".into());
    // The simulator is this process and its children, if any.
    let children: Vec<String> = fleet
        .as_ref()
        .map(|f| f.pids().iter().map(u32::to_string).collect())
        .unwrap_or_default();
    watched.extend(children.iter().cloned());
    let db_writes = || match &deployment {
        Deployment::Replicated(r, _) => r.pg.writes("harmony").ok(),
        Deployment::Single(..) => None,
    };
    let writes_before = tokio::task::block_in_place(db_writes);
    let t0 = Instant::now();
    let before = watched
        .iter()
        .map(|p| cpu_ticks(p, false))
        .collect::<BenchResult<Vec<_>>>()?;
    tokio::time::sleep(Duration::from_secs(o.window_s)).await;
    let writes_after = tokio::task::block_in_place(db_writes);
    let after = watched
        .iter()
        .map(|p| cpu_ticks(p, false))
        .collect::<BenchResult<Vec<_>>>()?;
    let window = t0.elapsed().as_secs_f64();
    let hz = ticks_per_second();
    let cpu: Vec<f64> = before
        .iter()
        .zip(&after)
        .map(|(b, a)| (a - b) as f64 / hz / window * 100.0)
        .collect();
    let cp_cpu: f64 = cpu[..pids.len()].iter().sum();
    // PostgreSQL's statistics lag by up to a second: a rate over the whole window.
    let db_load = match (writes_before, writes_after) {
        (Some((c0, w0)), Some((c1, w1))) => Some(format!(
            "{:.0} commits/s, {:.0} rows written/s",
            (c1 - c0) as f64 / window,
            (w1 - w0) as f64 / window
        )),
        _ => None,
    };

    // Who holds which agent; each request goes to a replica that does not.
    // Listing 100,000 regions while agents that are not in yet keep retrying passed the
    // client's default 30 s in two runs: this listing may take 3 minutes, and is tried again.
    let lister = clients[0].clone().with_admin_timeout(LIST_WAIT);
    let mut attempt = 0;
    let regions = loop {
        attempt += 1;
        let asked = Instant::now();
        match lister.regions().await {
            Ok(regions) => {
                println!(
                    "listed {} regions in {:.1} s",
                    regions.len(),
                    asked.elapsed().as_secs_f64()
                );
                break regions;
            }
            Err(e) if attempt < 5 => {
                println!("listing the regions failed ({e}); attempt {attempt} of 5, again in 5 s");
                tokio::time::sleep(Duration::from_secs(5)).await;
            }
            Err(e) => return Err(e.to_string()),
        }
    };
    let healthy = regions.iter().filter(|r| r.is_healthy()).count();
    let mut holder = vec![0usize; o.agents];
    let mut held = vec![0usize; n_cp];
    for view in &regions {
        if let (Some(i), Some(h)) = (
            view.region
                .strip_prefix('r')
                .and_then(|i| i.parse::<usize>().ok()),
            deployment.holder(view),
        ) && i < o.agents
        {
            holder[i] = h;
            held[h] += 1;
        }
    }
    let target: Vec<usize> = holder.iter().map(|h| (h + 1) % n_cp).collect();

    // The same N concurrent requests twice: the first round also opens the HTTPS connections,
    // the second measures round trips on warm ones; then 100 one at a time.
    let cold = requests(&clients, &target, 0..o.requests, "cold").await?;
    let simulators: Vec<u32> = fleet.as_ref().map(|f| f.pids()).unwrap_or_default();
    let parties = burst::Parties::new(&pids, &proxies, &simulators);
    let burst_before = parties.sample();
    let warm = requests(&clients, &target, 0..o.requests, "warm").await?;
    let cores = std::thread::available_parallelism().map_or(1, usize::from);
    let (burst_cpu, _floor_ms) = burst::report(&burst_before, &parties.sample(), o.requests, cores);
    let mut sequential = Vec::new();
    for i in 0..100.min(o.requests) {
        sequential.extend(requests(&clients, &target, i..i + 1, "seq").await?);
    }
    sequential.sort();

    // One control plane: kill it and start it again on the same address and database; the
    // agents come back with their jittered backoff. Time until every one is welcomed again and
    // until every region is healthy, with when they arrived.
    let mut storm = None;
    if o.restart
        && let Deployment::Single(cp, _) = &mut deployment
    {
        let before = reconnects.load(Ordering::Relaxed);
        arrivals.start();
        let killed = Instant::now();
        tokio::task::block_in_place(|| cp.restart())?;
        let listening = killed.elapsed();
        let admin = cp.client().with_admin_timeout(LIST_WAIT);
        let deadline = killed + Duration::from_secs(600);
        while !all_back(&reconnects, before, &connected, n) {
            if Instant::now() > deadline {
                return Err(format!(
                    "{} of {n} agents back 10 minutes after the restart",
                    reconnects.load(Ordering::Relaxed) - before
                ));
            }
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
        let welcomed_again = killed.elapsed();
        let healthy_again = loop {
            let views = admin.regions().await.map_err(|e| e.to_string())?;
            if views.iter().filter(|v| v.is_healthy()).count() >= n {
                break killed.elapsed();
            }
            if Instant::now() > deadline {
                return Err("regions not all healthy 10 minutes after the restart".into());
            }
            tokio::time::sleep(Duration::from_millis(250)).await;
        };
        storm = Some((listening, welcomed_again, healthy_again, arrivals.counts()));
    }

    // Kill the replica holding the most agents; time until every agent is healthy elsewhere.
    // Only when its figure is asked for: at 100,000 agents the listing that times it competes
    // with the moved agents' reconnections for the cores.
    let mut recovery = None;
    if o.figures.iter().any(|f| f == "failover")
        && let Deployment::Replicated(r, _) = &mut deployment
    {
        let victim = (0..n_cp).max_by_key(|i| held[*i]).unwrap_or(0);
        let survivor = r.client((victim + 1) % n_cp).with_admin_timeout(LIST_WAIT);
        let victim_id = format!("cp-{victim}");
        let killed = Instant::now();
        r.replicas[victim].kill9();
        let deadline = killed + Duration::from_secs(600);
        loop {
            let views = survivor.regions().await.map_err(|e| e.to_string())?;
            let back = views.iter().filter(|v| {
                v.is_healthy() && v.connected && v.replica.as_deref() != Some(&victim_id)
            });
            if back.count() == o.agents {
                break;
            }
            if Instant::now() > deadline {
                return Err("agents not all healthy 10 minutes after the kill".into());
            }
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
        recovery = Some((victim_id, held[victim], killed.elapsed()));
    }

    // Every replica killed at once (an outage of the whole control plane), then started again:
    // time until every agent is healthy, with their backoff running all along.
    let mut outage = None;
    if o.figures.iter().any(|f| f == "outage")
        && not_all_in.is_none()
        && let Deployment::Replicated(r, _) = &mut deployment
    {
        let before = reconnects.load(Ordering::Relaxed);
        arrivals.start();
        // CPU from the kill: the replicas' new processes count from their start.
        let at_kill = burst::Parties::new(&[], &proxies, &simulators).sample();
        let killed = Instant::now();
        for replica in r.replicas.iter_mut() {
            replica.kill9();
        }
        // All started again at once, as after a power cut (one after the other, the outage
        // lasted six starts in a row, and the first replica back was alone for most of it).
        tokio::task::block_in_place(|| {
            std::thread::scope(|s| {
                let starts: Vec<_> = r
                    .replicas
                    .iter_mut()
                    .map(|replica| s.spawn(move || replica.start_again()))
                    .collect();
                starts.into_iter().try_for_each(|t| {
                    t.join()
                        .map_err(|_| "a replica's start panicked".to_string())?
                })
            })
        })?;
        let down = killed.elapsed();
        let restarted: Vec<u32> = r.replicas.iter().filter_map(|c| c.pid()).collect();
        let parties = burst::Parties::new(&restarted, &proxies, &simulators);
        let at_back = parties.sample();
        let back_reconnects = reconnects.load(Ordering::Relaxed) - before;
        println!(
            "outage: every replica killed and started again; all listening after {:.1} s",
            down.as_secs_f64()
        );
        let admin = r.client(0).with_admin_timeout(LIST_WAIT);
        let deadline = killed + OUTAGE_WAIT;
        // Every agent welcomed again (counted by the simulators: cheap), then every region
        // healthy (listing them all costs the control plane: once a second at most). Progress
        // every 10 s, so a storm that does not end says how far it got.
        let mut progress = Instant::now();
        let again = || reconnects.load(Ordering::Relaxed) - before;
        let now_connected = || connected.load(Ordering::Relaxed);
        let back = || all_back(&reconnects, before, &connected, n);
        while !back() && Instant::now() < deadline {
            tokio::time::sleep(Duration::from_millis(50)).await;
            if progress.elapsed() >= Duration::from_secs(10) {
                progress = Instant::now();
                println!(
                    "outage: {:.0} s after the kill, {} reconnects welcomed, {} of {n} agents connected",
                    killed.elapsed().as_secs_f64(),
                    again(),
                    now_connected()
                );
            }
        }
        let reconnected = again();
        let welcomed_again = back().then(|| killed.elapsed());
        let at_welcomed = parties.sample();
        let poll = if n > 10_000 { 1000 } else { 100 };
        let mut healthy = 0;
        let healthy_again = loop {
            // A replica just started may not answer yet: ask again.
            let asked = Instant::now();
            if let Ok(views) = admin.regions().await {
                healthy = views
                    .iter()
                    .filter(|v| v.is_healthy() && v.connected)
                    .count();
                if healthy == o.agents {
                    break Some(killed.elapsed());
                }
                if progress.elapsed() >= Duration::from_secs(10) {
                    progress = Instant::now();
                    println!(
                        "outage: {:.0} s after the kill, {healthy} of {n} regions healthy (listing took {:.1} s); the others: {}",
                        killed.elapsed().as_secs_f64(),
                        asked.elapsed().as_secs_f64(),
                        storm::why_not_healthy(&views)
                    );
                }
            }
            if Instant::now() > deadline {
                break None;
            }
            tokio::time::sleep(Duration::from_millis(poll)).await;
        };
        let cpu = format!(
            "{}; {}",
            burst::phase(
                "restarting (kill to all listening)",
                &at_kill,
                &at_back,
                0,
                cores
            ),
            burst::phase(
                if welcomed_again.is_some() {
                    "reconnecting (all listening to all welcomed)"
                } else {
                    "reconnecting (all listening to the bound)"
                },
                &at_back,
                &at_welcomed,
                reconnected.saturating_sub(back_reconnects),
                cores
            ),
        );
        println!("outage CPU: {cpu}");
        outage = Some(Outage {
            down,
            welcomed_again,
            reconnected,
            healthy_again,
            healthy,
            counts: arrivals.counts(),
            cpu,
        });
    }

    let delta: Vec<u64> = rss_before
        .iter()
        .zip(&rss_after)
        .map(|(b, a)| a.saturating_sub(*b))
        .collect();
    let per_conn = delta.iter().sum::<u64>() as f64 / n.max(1) as f64;
    let mib = |k: &u64| format!("{:.1}", *k as f64 / 1024.0);
    let list = |v: &[String]| v.join(" / ");
    println!();
    println!("| figure | value |");
    println!("| --- | ---: |");
    println!("| agents connected / healthy | {n} / {healthy} |");
    let store = if n_cp > 1 {
        "PostgreSQL, agents through haproxy"
    } else {
        "SQLite"
    };
    let spread: Vec<String> = held.iter().map(usize::to_string).collect();
    println!(
        "| replicas ({store}): agents each | {n_cp}: {} |",
        list(&spread)
    );
    println!("| bootstrap + connect time | {connect_s:.1} s |");
    println!(
        "| RSS per replica, before agents; with agents | {}; {} MiB |",
        list(&rss_before.iter().map(mib).collect::<Vec<_>>()),
        list(&rss_after.iter().map(mib).collect::<Vec<_>>())
    );
    let per_replica: Vec<String> = delta
        .iter()
        .zip(&held)
        .map(|(d, h)| format!("{:.1}", *d as f64 / (*h).max(1) as f64))
        .collect();
    println!(
        "| memory per connection (RSS delta / agents): all, per replica | {per_conn:.1} KiB; {} KiB |",
        list(&per_replica)
    );
    println!(
        "| control plane CPU while heartbeating ({:.0} heartbeats/s), all replicas | {cp_cpu:.1} % of one core |",
        n as f64 / o.heartbeat_s as f64
    );
    if let Some(load) = &db_load {
        println!("| PostgreSQL load while heartbeating | {load} |");
    }
    if !proxies.is_empty() {
        let haproxy_cpu: f64 = cpu[pids.len()..pids.len() + proxies.len()].iter().sum();
        println!(
            "| haproxy CPU ({} process{}) | {haproxy_cpu:.1} % of one core |",
            proxies.len(),
            if proxies.len() == 1 { "" } else { "es" }
        );
    }
    let simulator_cpu: f64 = cpu[pids.len() + proxies.len()..].iter().sum();
    println!(
        "| simulator CPU (all {n} agents, {} process{}) | {simulator_cpu:.1} % of one core |",
        1 + children.len(),
        if children.is_empty() { "" } else { "es" }
    );
    let to = if n_cp > 1 {
        " to a replica not holding the agent"
    } else {
        ""
    };
    for (label, times) in [("cold (new HTTPS connections)", &cold), ("warm", &warm)] {
        println!(
            "| {} concurrent requests{to}, {label}: p50 / p99 / max | {:.1} / {:.1} / {:.1} ms |",
            times.len(),
            ms(percentile(times, 0.50)),
            ms(percentile(times, 0.99)),
            ms(times.last().copied().unwrap_or_default())
        );
    }
    println!("| CPU of the warm burst | {burst_cpu} |");
    println!(
        "| {} sequential requests{to}: p50 / p99 | {:.2} / {:.2} ms |",
        sequential.len(),
        ms(percentile(&sequential, 0.50)),
        ms(percentile(&sequential, 0.99))
    );
    if let Some((victim, agents, took)) = &recovery {
        println!(
            "| all agents healthy again after killing {victim} (holding {agents} agents) | {:.1} s ({} reconnects) |",
            took.as_secs_f64(),
            reconnects.load(Ordering::Relaxed)
        );
    }
    if let Some((listening, welcomed_again, healthy_again, _)) = &storm {
        println!(
            "| control plane restarted (kill -9, same address and database): listening again after | {} |",
            storm::secs(*listening)
        );
        println!(
            "| **all {n} agents welcomed again** / every region healthy again | **{}** / {} |",
            storm::secs(*welcomed_again),
            storm::secs(*healthy_again)
        );
    }
    if let Some((.., counts)) = &storm {
        println!();
        println!(
            "Reconnects welcomed per second after the kill (the agents' own backoff: full jitter, 1 s doubling to 60 s, at most 4 s in the first minute):"
        );
        print!("{}", storm::histogram(counts));
    }
    // One machine-readable line for `bench all`, with the goals of issue 18.
    let most = held.iter().copied().max().unwrap_or(0);
    let cut = if asked > o.agents {
        format!(
            "; {asked} asked, cut to what the open-file hard limit {fd_limit} allows (raising it needs CAP_SYS_RESOURCE)"
        )
    } else {
        String::new()
    };
    let mut figures = vec![
        serde_json::json!({
            "key": "memory",
            "figure": format!("memory per agent connection at {n} agents"),
            "peer": "Go + gorilla/websocket ≈ 41 KiB",
            // Issue 32's goal (issue 18 asked for 16 KiB).
            "goal": "≤ 12 KiB",
            "measured": format!("{per_conn:.1} KiB (resident memory added per connection)"),
            "met": per_conn <= 12.0 && n >= 10_000,
        }),
        if n_cp > 1 {
            // Across replicas: every agent held and healthy, with the replicas' memory per
            // connection, CPU and the database's load while they heartbeat.
            serde_json::json!({
                "key": "held",
                "figure": format!("agents held, all replicas ({n_cp} replicas on PostgreSQL, {n} agents, heartbeat {} s)", o.heartbeat_s),
                "peer": "Rancher ≈ 2,000 clusters per server; ACM hub 3,500",
                "goal": "100,000",
                "measured": format!(
                    "{healthy} healthy of {n} ({} per replica){}; {per_conn:.1} KiB per connection; control plane CPU {cp_cpu:.1} % of one core for {:.0} heartbeats/s; PostgreSQL {}{cut}",
                    held.iter().map(usize::to_string).collect::<Vec<_>>().join(" / "),
                    not_all_in.as_ref().map(|why| format!(": {why}")).unwrap_or_default(),
                    n as f64 / o.heartbeat_s as f64,
                    db_load.as_deref().unwrap_or("not measured")
                ),
                "met": healthy >= 100_000 && healthy == n && not_all_in.is_none(),
            })
        } else {
            serde_json::json!({
                "key": "held",
                "figure": format!("agents held by one control-plane process ({n} agents)"),
                "peer": "Rancher ≈ 2,000 clusters per server; ACM hub 3,500",
                "goal": "100,000",
                "measured": format!("{most} (healthy {healthy} of {n}; {per_conn:.1} KiB each{cut})"),
                "met": most >= 100_000 && healthy == n,
            })
        },
    ];
    let warm_p99 = ms(percentile(&warm, 0.99));
    figures.push(serde_json::json!({
        "key": "requests",
        "figure": format!("{} concurrent requests, {n_cp} replica(s){}, to a replica not holding the agent: p99, warm", o.requests, if n_cp > 1 { " on PostgreSQL" } else { "" }),
        "peer": "-",
        "goal": "≤ 50 ms",
        "measured": format!("{warm_p99:.0} ms (p50 {:.0} ms); {burst_cpu}", ms(percentile(&warm, 0.50))),
        "met": warm_p99 <= 50.0 && o.requests >= 1000 && n_cp >= 3,
    }));
    if let Some((_, welcomed_again, healthy_again, counts)) = &storm {
        let per_second: Vec<String> = counts.iter().map(usize::to_string).collect();
        figures.push(serde_json::json!({
            "key": "restart",
            "figure": format!("all agents healthy again after a control-plane restart ({n} agents, one process)"),
            "peer": "Rancher reported hours at 3,300 clusters",
            "goal": "10,000 agents ≤ 60 s",
            "measured": format!(
                "{} healthy ({} all welcomed); per second: {}",
                storm::secs(*healthy_again),
                storm::secs(*welcomed_again),
                per_second.join(" ")
            ),
            "met": healthy_again.as_secs_f64() <= 60.0 && n >= 10_000,
        }));
    }
    if let Some((victim, agents, took)) = &recovery {
        figures.push(serde_json::json!({
            "key": "failover",
            "figure": format!("all agents healthy again after killing {victim} ({agents} of {n} agents moved)"),
            "peer": "Rancher reported hours at 3,300 clusters",
            "goal": "every moved agent healthy ≤ 60 s",
            "measured": format!("{:.1} s ({} reconnects)", took.as_secs_f64(), reconnects.load(Ordering::Relaxed)),
            // Killing one replica moves its share of the agents; the figure says how many, and
            // the goal is about how fast they are all back (the restart row covers 10,000).
            "met": took.as_secs_f64() <= 60.0,
        }));
    }
    if let Some(o) = &outage {
        // The issue's goals: 15 s for a few agents, 60 s for a storm of 100,000.
        let goal_s = if n > 1_000 { 60.0 } else { 15.0 };
        let per_second: Vec<String> = o.counts.iter().map(usize::to_string).collect();
        let down = o.down.as_secs_f64();
        let reached = match (o.healthy_again, o.welcomed_again) {
            (Some(h), Some(w)) => format!(
                "{:.1} s after the kill (all welcomed again at {:.1} s); replicas listening again after {down:.1} s, so {:.1} s after they were back",
                h.as_secs_f64(),
                w.as_secs_f64(),
                h.as_secs_f64() - down,
            ),
            (None, Some(w)) => format!(
                "{} of {n} healthy {} s after the kill (all welcomed again at {:.1} s); replicas listening again after {down:.1} s",
                o.healthy,
                OUTAGE_WAIT.as_secs(),
                w.as_secs_f64(),
            ),
            (_, None) => format!(
                "{} of {n} welcomed again, {} healthy, {} s after the kill; replicas listening again after {down:.1} s",
                o.reconnected,
                o.healthy,
                OUTAGE_WAIT.as_secs(),
            ),
        };
        figures.push(serde_json::json!({
            "key": "outage",
            "figure": format!("all agents healthy after every replica was killed at once ({n_cp} replicas, {n} agents)"),
            "peer": "-",
            "goal": format!("≤ {goal_s:.0} s after the control plane is back"),
            "measured": format!("{reached}; welcomed per second: {}; {}", per_second.join(" "), o.cpu),
            "met": o.healthy_again.is_some_and(|h| h.as_secs_f64() - down <= goal_s),
        }));
    }
    if let (None, Some(why)) = (&outage, &not_all_in) {
        figures.push(serde_json::json!({
            "key": "outage",
            "figure": format!("all agents healthy after every replica was killed at once ({n_cp} replicas, {} agents)", o.agents),
            "peer": "-",
            "goal": "≤ 60 s after the control plane is back",
            "measured": format!("not measured: {why}"),
            "met": false,
        }));
    }
    figures.retain(|f| o.figures.iter().any(|k| f["key"] == k.as_str()));
    println!(
        "BENCH {}",
        serde_json::json!({"bench": "agents", "figures": figures})
    );
    DONE.store(true, Ordering::Relaxed);
    drop(deployment);
    Ok(())
}

/// The machine's 1-minute load average, as `/proc/loadavg` says it (`unknown` when unreadable).
fn load_average() -> String {
    std::fs::read_to_string("/proc/loadavg")
        .ok()
        .and_then(|s| s.split_whitespace().next().map(str::to_string))
        .unwrap_or_else(|| "unknown".into())
}
