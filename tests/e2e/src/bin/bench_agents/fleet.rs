//! More simulated agents than one process can hold (its open-file limit): the agents are
//! spread over child processes of this program (`bench_agents fleet-child SPEC`), each running
//! its share exactly as the parent runs them alone, and reporting how many were welcomed,
//! welcomed again after a reconnect, or failed, and how many are connected now, as
//! `FLEET <welcomed> <reconnects> <failures> <connected>` lines; the parent adds them up.

use std::io::BufRead;
use std::net::SocketAddr;
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Duration;

use super::{BenchResult, Sim, storm};

/// Agents one simulator process takes at most (under its 20,000-descriptor limit, with room).
pub(crate) const PER_PROCESS: usize = 18_000;

/// What one child runs.
struct Spec {
    ca_pem: String,
    addrs: Vec<SocketAddr>,
    sources: usize,
    heartbeat_s: u64,
    ws_buffer: usize,
    connect_concurrency: usize,
    /// The index of its first agent among all (for the source address and target spread).
    first: usize,
    /// Region and bootstrap token of each of its agents.
    agents: Vec<(String, String)>,
}

impl Spec {
    fn to_json(&self) -> serde_json::Value {
        serde_json::json!({
            "ca_pem": self.ca_pem,
            "addrs": self.addrs.iter().map(|a| a.to_string()).collect::<Vec<_>>(),
            "sources": self.sources,
            "heartbeat_s": self.heartbeat_s,
            "ws_buffer": self.ws_buffer,
            "connect_concurrency": self.connect_concurrency,
            "first": self.first,
            "agents": self.agents,
        })
    }

    fn from_json(v: &serde_json::Value) -> Option<Self> {
        let n = |k: &str| v[k].as_u64();
        Some(Self {
            ca_pem: v["ca_pem"].as_str()?.to_string(),
            addrs: v["addrs"]
                .as_array()?
                .iter()
                .filter_map(|a| a.as_str()?.parse().ok())
                .collect(),
            sources: n("sources")? as usize,
            heartbeat_s: n("heartbeat_s")?,
            ws_buffer: n("ws_buffer")? as usize,
            connect_concurrency: n("connect_concurrency")? as usize,
            first: n("first")? as usize,
            agents: v["agents"]
                .as_array()?
                .iter()
                .filter_map(|p| Some((p[0].as_str()?.to_string(), p[1].as_str()?.to_string())))
                .collect(),
        })
    }
}

/// The children, and the totals they report.
pub(crate) struct Fleet {
    children: Vec<std::process::Child>,
    _dir: tempfile::TempDir,
}

/// Settings every child shares.
pub(crate) struct Shared<'a> {
    pub(crate) ca_pem: &'a str,
    pub(crate) addrs: Vec<SocketAddr>,
    pub(crate) sources: usize,
    pub(crate) heartbeat_s: u64,
    pub(crate) ws_buffer: usize,
    pub(crate) connect_concurrency: usize,
}

/// Counters the children's reports are added to.
pub(crate) struct Totals {
    pub(crate) welcomed: Arc<AtomicUsize>,
    pub(crate) reconnects: Arc<AtomicUsize>,
    /// Connections welcomed and not yet dropped (a gauge: each child's latest).
    pub(crate) connected: Arc<AtomicUsize>,
    pub(crate) failures: Arc<AtomicUsize>,
    pub(crate) arrivals: Arc<storm::Arrivals>,
}

impl Fleet {
    /// Starts `processes` children sharing `tokens` out in order.
    pub(crate) fn spawn(
        processes: usize,
        tokens: Vec<(String, String)>,
        shared: &Shared<'_>,
        totals: &Totals,
    ) -> BenchResult<Self> {
        let dir = tempfile::Builder::new()
            .prefix("bench-agents-fleet-")
            .tempdir()
            .map_err(|e| e.to_string())?;
        let exe = std::env::current_exe().map_err(|e| e.to_string())?;
        let per = tokens.len().div_ceil(processes.max(1));
        let mut children = Vec::new();
        let mut rest = tokens;
        let mut first = 0;
        while !rest.is_empty() {
            let tail = rest.split_off(per.min(rest.len()));
            let agents = std::mem::replace(&mut rest, tail);
            let n = agents.len();
            let spec = Spec {
                ca_pem: shared.ca_pem.to_string(),
                addrs: shared.addrs.clone(),
                sources: shared.sources,
                heartbeat_s: shared.heartbeat_s,
                ws_buffer: shared.ws_buffer,
                connect_concurrency: shared.connect_concurrency,
                first,
                agents,
            };
            let path = dir.path().join(format!("fleet-{}.json", children.len()));
            let json = serde_json::to_vec(&spec.to_json()).map_err(|e| e.to_string())?;
            std::fs::write(&path, json).map_err(|e| e.to_string())?;
            let mut child = std::process::Command::new(&exe)
                .arg("fleet-child")
                .arg(&path)
                .stdin(std::process::Stdio::null())
                .stdout(std::process::Stdio::piped())
                .spawn()
                .map_err(|e| format!("cannot start a simulator process: {e}"))?;
            let out = child.stdout.take().ok_or("no simulator stdout")?;
            let counters = Counters::of(totals);
            std::thread::spawn(move || follow(out, counters));
            children.push(child);
            first += n;
        }
        Ok(Self {
            children,
            _dir: dir,
        })
    }

    /// The children's process ids.
    pub(crate) fn pids(&self) -> Vec<u32> {
        self.children.iter().map(std::process::Child::id).collect()
    }
}

impl Drop for Fleet {
    fn drop(&mut self) {
        for c in &mut self.children {
            let _ = c.kill();
            let _ = c.wait();
        }
    }
}

struct Counters {
    welcomed: Arc<AtomicUsize>,
    reconnects: Arc<AtomicUsize>,
    connected: Arc<AtomicUsize>,
    failures: Arc<AtomicUsize>,
    arrivals: Arc<storm::Arrivals>,
}

impl Counters {
    fn of(t: &Totals) -> Self {
        Self {
            welcomed: t.welcomed.clone(),
            reconnects: t.reconnects.clone(),
            connected: t.connected.clone(),
            failures: t.failures.clone(),
            arrivals: t.arrivals.clone(),
        }
    }
}

/// Adds one child's reports (cumulative counts) to the totals, as they change.
fn follow(out: std::process::ChildStdout, c: Counters) {
    let mut last = [0usize; 4];
    for line in std::io::BufReader::new(out).lines() {
        let Ok(line) = line else { return };
        let Some(counts) = line.strip_prefix("FLEET ") else {
            continue;
        };
        let now: Vec<usize> = counts
            .split_whitespace()
            .filter_map(|v| v.parse().ok())
            .collect();
        let [w, r, f, held] = now[..] else { continue };
        // The gauge first: when the reconnects reach the fleet's size, the gauge beside them
        // is this report's, not an older one.
        if held >= last[3] {
            c.connected.fetch_add(held - last[3], Ordering::Relaxed);
        } else {
            c.connected.fetch_sub(last[3] - held, Ordering::Relaxed);
        }
        c.welcomed
            .fetch_add(w.saturating_sub(last[0]), Ordering::Relaxed);
        let new_reconnects = r.saturating_sub(last[1]);
        c.reconnects.fetch_add(new_reconnects, Ordering::Relaxed);
        for _ in 0..new_reconnects {
            c.arrivals.record();
        }
        c.failures
            .fetch_add(f.saturating_sub(last[2]), Ordering::Relaxed);
        last = [w, r, f, held];
    }
}

/// The child's side: runs its agents and reports every 250 ms until it is killed.
pub(crate) async fn child(spec_path: &str) -> BenchResult<()> {
    super::raise_fd_limit();
    let bytes = std::fs::read(spec_path).map_err(|e| format!("{spec_path}: {e}"))?;
    let json: serde_json::Value =
        serde_json::from_slice(&bytes).map_err(|e| format!("{spec_path}: {e}"))?;
    let spec = Spec::from_json(&json).ok_or(format!("{spec_path}: not a simulator spec"))?;
    let welcomed = Arc::new(AtomicUsize::new(0));
    let reconnects = Arc::new(AtomicUsize::new(0));
    let connected = Arc::new(AtomicUsize::new(0));
    let failures = Arc::new(AtomicUsize::new(0));
    let sim = Sim {
        tls: harmony_e2e::ha::tls_connector(&spec.ca_pem)?,
        heartbeat: Duration::from_secs(spec.heartbeat_s),
        ws_buffer: spec.ws_buffer,
        welcomed: welcomed.clone(),
        reconnects: reconnects.clone(),
        connected: connected.clone(),
        arrivals: Arc::new(storm::Arrivals::new()),
    };
    let report = {
        let (w, r, f, c) = (
            welcomed.clone(),
            reconnects.clone(),
            failures.clone(),
            connected.clone(),
        );
        tokio::spawn(async move {
            loop {
                println!(
                    "FLEET {} {} {} {}",
                    w.load(Ordering::Relaxed),
                    r.load(Ordering::Relaxed),
                    f.load(Ordering::Relaxed),
                    c.load(Ordering::Relaxed)
                );
                tokio::time::sleep(Duration::from_millis(250)).await;
            }
        })
    };
    let gate = Arc::new(tokio::sync::Semaphore::new(spec.connect_concurrency.max(1)));
    super::spawn_agents(
        &sim,
        spec.agents,
        spec.first,
        spec.sources,
        &spec.addrs,
        &gate,
        &failures,
    )
    .await?;
    // Runs until the parent kills it.
    let _ = report.await;
    Ok(())
}
