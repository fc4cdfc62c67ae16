//! Benchmark: many simulated region agents against one control-plane process on loopback.
//!
//! Starts the control plane (TLS, SQLite, a CA made with rcgen), creates N regions through the
//! admin API, then connects N simulated agents from this one process: each presents its
//! bootstrap token, receives an identity and heartbeats every `--heartbeat-s` seconds (random
//! phase). It prints the control plane's memory per connection (RSS delta / agents), its CPU
//! share while the agents heartbeat, and the p50/p99 round trip of concurrent requests through
//! the request API (each answered by a simulated agent). Not run in CI; see docs/benchmarks.md.
//!
//! ```text
//! cargo build --release -p harmony_e2e --bins
//! target/release/bench_agents [--agents 10000] [--heartbeat-s 5] [--requests 1000] [--window-s 30]
//! ```

use futures::stream::{self, StreamExt};
use futures::{SinkExt, future};
use std::path::PathBuf;
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::{Duration, Instant};

use harmony::types::{RegionId, ZoneId};
use harmony_agent_protocol::{
    AgentStatus, Frame, Hello, Op, PROTOCOL_VERSION, Ping, Res, decode, encode,
};
use harmony_e2e::multi_region::{ControlPlane, ControlPlaneOptions, Pki};
use tokio_tungstenite::tungstenite::Message;
use tokio_tungstenite::tungstenite::client::IntoClientRequest;
use tokio_tungstenite::tungstenite::protocol::WebSocketConfig;

type BenchResult<T> = Result<T, String>;

/// Set once the figures are printed: agents then stop quietly with the control plane.
static DONE: std::sync::atomic::AtomicBool = std::sync::atomic::AtomicBool::new(false);

struct Options {
    agents: usize,
    heartbeat_s: u64,
    requests: usize,
    window_s: u64,
    ws_buffer: usize,
    connect_concurrency: usize,
}

fn parse_args() -> BenchResult<Options> {
    let mut o = Options {
        agents: 10_000,
        heartbeat_s: 5,
        requests: 1000,
        window_s: 30,
        ws_buffer: 4096,
        connect_concurrency: 128,
    };
    let mut args = std::env::args().skip(1);
    while let Some(flag) = args.next() {
        let value = args
            .next()
            .ok_or(format!("{flag} needs a value"))?
            .parse::<usize>()
            .map_err(|e| format!("{flag}: {e}"))?;
        match flag.as_str() {
            "--agents" => o.agents = value.max(1),
            "--heartbeat-s" => o.heartbeat_s = value.max(1) as u64,
            "--requests" => o.requests = value.max(1),
            "--window-s" => o.window_s = value.max(1) as u64,
            "--ws-buffer-bytes" => o.ws_buffer = value.max(1024),
            "--connect-concurrency" => o.connect_concurrency = value.max(1),
            other => return Err(format!("unknown flag {other}")),
        }
    }
    o.requests = o.requests.min(o.agents);
    Ok(o)
}

/// Raises the open-file limit to its hard maximum; every agent is one socket on each side.
fn raise_fd_limit() -> u64 {
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

fn rss_kib(pid: u32) -> BenchResult<u64> {
    let status =
        std::fs::read_to_string(format!("/proc/{pid}/status")).map_err(|e| e.to_string())?;
    status
        .lines()
        .find_map(|l| l.strip_prefix("VmRSS:"))
        .and_then(|v| v.trim().trim_end_matches("kB").trim().parse().ok())
        .ok_or("no VmRSS".into())
}

/// utime + stime of a process, in clock ticks.
fn cpu_ticks(pid: &str) -> BenchResult<u64> {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).map_err(|e| e.to_string())?;
    let after = stat.rsplit_once(')').ok_or("bad stat")?.1;
    let fields: Vec<&str> = after.split_whitespace().collect();
    let utime: u64 = fields
        .get(11)
        .and_then(|v| v.parse().ok())
        .ok_or("bad utime")?;
    let stime: u64 = fields
        .get(12)
        .and_then(|v| v.parse().ok())
        .ok_or("bad stime")?;
    Ok(utime + stime)
}

fn ticks_per_second() -> f64 {
    // SAFETY: sysconf has no preconditions.
    let t = unsafe { libc::sysconf(libc::_SC_CLK_TCK) };
    if t > 0 { t as f64 } else { 100.0 }
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

/// What every simulated agent shares.
#[derive(Clone)]
struct Sim {
    addr: std::net::SocketAddr,
    tls: tokio_rustls::TlsConnector,
    heartbeat: Duration,
    ws_buffer: usize,
    connected: Arc<AtomicUsize>,
}

/// One simulated agent: bootstrap, then heartbeat and answer requests until the process ends.
async fn agent(
    sim: Sim,
    region: String,
    token: String,
    permit: tokio::sync::OwnedSemaphorePermit,
) -> BenchResult<()> {
    let Sim {
        addr,
        tls,
        heartbeat,
        ws_buffer,
        connected,
    } = sim;
    let tcp = tokio::net::TcpStream::connect(addr)
        .await
        .map_err(|e| e.to_string())?;
    let _ = tcp.set_nodelay(true);
    let name = rustls::pki_types::ServerName::try_from("127.0.0.1").map_err(|e| e.to_string())?;
    let stream = tls.connect(name, tcp).await.map_err(|e| e.to_string())?;
    let mut request = format!("wss://{addr}/v1/agent")
        .into_client_request()
        .map_err(|e| e.to_string())?;
    request.headers_mut().insert(
        "authorization",
        format!("Bearer {token}")
            .parse()
            .map_err(|_| "bad header")?,
    );
    let config = WebSocketConfig::default()
        .read_buffer_size(ws_buffer)
        .write_buffer_size(0);
    let (mut ws, _) = tokio_tungstenite::client_async_with_config(request, stream, Some(config))
        .await
        .map_err(|e| e.to_string())?;
    drop(token);
    let hello = Frame::Hello(Hello {
        agent_version: "bench".into(),
        region,
        zone: "z".into(),
        ops: Op::ALL.iter().map(|o| o.as_str().to_string()).collect(),
        protocol: PROTOCOL_VERSION,
    });
    ws.send(Message::text(encode(&hello)))
        .await
        .map_err(|e| e.to_string())?;
    match ws.next().await {
        Some(Ok(Message::Text(t))) if matches!(decode(t.as_str()), Ok(Frame::Welcome(_))) => {}
        other => return Err(format!("no welcome: {other:?}")),
    }
    connected.fetch_add(1, Ordering::Relaxed);
    // Welcomed: let the next agent start its handshake.
    drop(permit);
    // Random phase so heartbeats are spread like real agents'.
    let phase = Duration::from_millis(u64::from(rand_u32()) % heartbeat.as_millis().max(1) as u64);
    let mut ticker = tokio::time::interval_at(tokio::time::Instant::now() + phase, heartbeat);
    let mut seq = 0;
    loop {
        tokio::select! {
            _ = ticker.tick() => {
                seq += 1;
                let ping = Frame::Ping(Ping { seq, status: AgentStatus { k8s_reachable: true, detail: None, in_flight: 0 } });
                if ws.send(Message::text(encode(&ping))).await.is_err() {
                    return Err("heartbeat failed".into());
                }
            }
            incoming = ws.next() => match incoming {
                Some(Ok(Message::Text(t))) => {
                    if let Ok(Frame::Req(req)) = decode(t.as_str()) {
                        let res = Frame::Res(Res::ok(req.id, serde_json::json!({"nodes": 3})));
                        if ws.send(Message::text(encode(&res))).await.is_err() {
                            return Err("answer failed".into());
                        }
                    }
                }
                Some(Ok(_)) => {}
                _ => return Err("connection closed".into()),
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

#[tokio::main]
async fn main() {
    if let Err(e) = bench().await {
        eprintln!("error: {e}");
        std::process::exit(1);
    }
}

async fn bench() -> BenchResult<()> {
    let o = parse_args()?;
    let fd_limit = raise_fd_limit();
    println!(
        "agents {}, heartbeat {} s, requests {}, CPU window {} s, WebSocket read buffer {} B, open files limit {fd_limit}",
        o.agents, o.heartbeat_s, o.requests, o.window_s, o.ws_buffer
    );
    let pki = Pki::new()?;
    let cp = ControlPlane::start(
        &binary("e2e-control-plane")?,
        &pki,
        ControlPlaneOptions {
            heartbeat_ms: o.heartbeat_s * 1000,
            unhealthy_after_ms: o.heartbeat_s * 3000,
            unavailable_after_ms: o.heartbeat_s * 6000,
            extra_args: vec!["--ws-buffer-bytes".into(), o.ws_buffer.to_string()],
            rust_log: Some("warn".into()),
        },
    )?;
    let pid = cp.pid().ok_or("control plane not running")?;

    // Regions first, through the admin API (64 at a time).
    let started = Instant::now();
    let tokens: Vec<(String, String)> = {
        let admin = cp.client();
        let results: Vec<BenchResult<(String, String)>> = stream::iter(0..o.agents)
            .map(|i| {
                let admin = admin.clone();
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
        results.into_iter().collect::<BenchResult<_>>()?
    };
    println!(
        "created {} regions in {:.1} s",
        tokens.len(),
        started.elapsed().as_secs_f64()
    );
    tokio::time::sleep(Duration::from_secs(3)).await;
    let rss_before = rss_kib(pid)?;

    // Agents: bootstrap exchange, then heartbeats.
    let mut roots = rustls::RootCertStore::empty();
    for c in rustls::pki_types::pem::PemObject::pem_slice_iter(pki.ca_pem.as_bytes()) {
        roots
            .add(c.map_err(|e| e.to_string())?)
            .map_err(|e| e.to_string())?;
    }
    let tls = tokio_rustls::TlsConnector::from(Arc::new(
        rustls::ClientConfig::builder_with_provider(Arc::new(
            rustls::crypto::ring::default_provider(),
        ))
        .with_safe_default_protocol_versions()
        .map_err(|e| e.to_string())?
        .with_root_certificates(roots)
        .with_no_client_auth(),
    ));
    let connected = Arc::new(AtomicUsize::new(0));
    let failures = Arc::new(AtomicUsize::new(0));
    let started = Instant::now();
    let heartbeat = Duration::from_secs(o.heartbeat_s);
    let gate = Arc::new(tokio::sync::Semaphore::new(o.connect_concurrency));
    let sim = Sim {
        addr: cp.addr,
        tls,
        heartbeat,
        ws_buffer: o.ws_buffer,
        connected: connected.clone(),
    };
    for (region, token) in tokens {
        let permit = gate
            .clone()
            .acquire_owned()
            .await
            .map_err(|e| e.to_string())?;
        let (sim, failures) = (sim.clone(), failures.clone());
        tokio::spawn(async move {
            if let Err(e) = agent(sim, region, token, permit).await
                && !DONE.load(Ordering::Relaxed)
            {
                failures.fetch_add(1, Ordering::Relaxed);
                eprintln!("agent stopped: {e}");
            }
        });
    }
    let deadline = Instant::now() + Duration::from_secs(600);
    while connected.load(Ordering::Relaxed) + failures.load(Ordering::Relaxed) < o.agents {
        if Instant::now() > deadline {
            return Err("agents did not all connect within 10 minutes".into());
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    let connect_s = started.elapsed().as_secs_f64();
    let n = connected.load(Ordering::Relaxed);
    println!(
        "{n} agents connected ({} failed) in {connect_s:.1} s",
        failures.load(Ordering::Relaxed)
    );
    // Let every agent heartbeat at least twice before measuring.
    tokio::time::sleep(heartbeat * 2 + Duration::from_secs(2)).await;
    let rss_after = rss_kib(pid)?;

    // CPU share while the agents heartbeat.
    let (cp_pid, me) = (pid.to_string(), "self".to_string());
    let (cp0, me0, t0) = (cpu_ticks(&cp_pid)?, cpu_ticks(&me)?, Instant::now());
    tokio::time::sleep(Duration::from_secs(o.window_s)).await;
    let (cp1, me1, window) = (
        cpu_ticks(&cp_pid)?,
        cpu_ticks(&me)?,
        t0.elapsed().as_secs_f64(),
    );
    let hz = ticks_per_second();
    let cp_cpu = (cp1 - cp0) as f64 / hz / window * 100.0;
    let me_cpu = (me1 - me0) as f64 / hz / window * 100.0;

    let admin = cp.client();
    let regions = admin.regions().await.map_err(|e| e.to_string())?;
    let healthy = regions.iter().filter(|r| r.is_healthy()).count();

    // Requests: the same N concurrent requests twice; the first round also opens the HTTP
    // connections, the second measures round trips on warm connections.
    let mut rounds = Vec::new();
    for round in 0..2 {
        let results: Vec<BenchResult<Duration>> = future::join_all((0..o.requests).map(|i| {
            let admin = admin.clone();
            async move {
                let t = Instant::now();
                let res = admin
                    .request(
                        &format!("r{i}"),
                        &format!("bench-{round}-{i}"),
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
        rounds.push(times);
    }

    // One request at a time: the round trip without contention.
    let mut sequential = Vec::new();
    for i in 0..100.min(o.requests) {
        let t = Instant::now();
        let res = admin
            .request(
                &format!("r{i}"),
                &format!("seq-{i}"),
                "get_inventory",
                serde_json::json!({}),
                Duration::from_secs(60),
            )
            .await
            .map_err(|e| e.to_string())?;
        if !res.ok {
            return Err(format!("{:?}", res.error));
        }
        sequential.push(t.elapsed());
    }
    sequential.sort();

    let per_conn = (rss_after.saturating_sub(rss_before)) as f64 / n.max(1) as f64;
    println!();
    println!("| figure | value |");
    println!("| --- | ---: |");
    println!("| agents connected / healthy | {n} / {healthy} |");
    println!("| bootstrap + connect time | {connect_s:.1} s |");
    println!(
        "| control plane RSS before agents | {:.1} MiB |",
        rss_before as f64 / 1024.0
    );
    println!(
        "| control plane RSS with agents | {:.1} MiB |",
        rss_after as f64 / 1024.0
    );
    println!("| memory per connection (RSS delta / agents) | {per_conn:.1} KiB |");
    println!(
        "| control plane CPU while heartbeating ({:.0} heartbeats/s) | {cp_cpu:.1} % of one core |",
        n as f64 / o.heartbeat_s as f64
    );
    println!("| simulator CPU (all {n} agents) | {me_cpu:.1} % of one core |");
    for (label, times) in ["cold (new HTTP connections)", "warm"].iter().zip(&rounds) {
        println!(
            "| {} concurrent requests, {label}: p50 / p99 / max | {:.1} / {:.1} / {:.1} ms |",
            times.len(),
            percentile(times, 0.50).as_secs_f64() * 1000.0,
            percentile(times, 0.99).as_secs_f64() * 1000.0,
            times.last().copied().unwrap_or_default().as_secs_f64() * 1000.0
        );
    }
    println!(
        "| {} sequential requests: p50 / p99 | {:.2} / {:.2} ms |",
        sequential.len(),
        percentile(&sequential, 0.50).as_secs_f64() * 1000.0,
        percentile(&sequential, 0.99).as_secs_f64() * 1000.0
    );
    DONE.store(true, Ordering::Relaxed);
    drop(cp);
    Ok(())
}
