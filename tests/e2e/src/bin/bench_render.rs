//! Benchmark: render a bare-metal OKD site of `--hosts` workers (default 10,000) with the real
//! `HAClusterTopology` in render mode: DHCP bindings, one iPXE script per MAC and the haproxy
//! backends, from the same Scores as `examples/okd_workers`.
//!
//! Timed end to end (topology creation, preparation, every Score) and per phase; each run
//! renders into a fresh folder, and its output is checked (one dhcp-host line and one iPXE
//! script per MAC, every worker in the ingress backends) before a figure is printed.
//!
//! ```text
//! cargo run --release -p harmony_e2e --bin bench_render -- [--hosts 10000] [--runs 3]
//! ```
//!
//! Besides the human output it prints one `BENCH {json}` line on stdout for `bench all`.

use std::collections::{HashMap, HashSet};
use std::path::Path;
use std::time::{Duration, Instant};

use harmony::domain::capability::{ClusterLayout, LogicalHost};
use harmony::domain::inventory::{Disk, HostRole, PhysicalHost, RoleAssignment};
use harmony::domain::operator::{OperatorHandle, Unattended};
use harmony::domain::{Inventory, Maestro, RunContext, RunOptions, ScoreStatus};
use harmony::infra::http_boot::ScriptTable;
use harmony::infra::okd::{BareMetalServices, HAClusterTopology};
use harmony::types::{Dns1123Label, HostName, Id, IpAddress, Ipv4Cidr, MacAddress};
use harmony_e2e::bench::stats;
use harmony_modules::okd::OkdInstallation;

type BenchResult<T> = Result<T, String>;

/// The issue's goal for 10,000 hosts, in seconds.
const GOAL_S: f64 = 0.5;
/// Workers are numbered from this offset in the /16, past the gateway, services and masters.
const FIRST_WORKER: usize = 256;

/// Renders N bare-metal hosts with the real HAClusterTopology and checks the files.
#[derive(clap::Parser)]
struct Options {
    /// Worker hosts to render.
    #[arg(long, default_value_t = 10_000, value_parser = harmony_e2e::positive_count)]
    hosts: usize,
    /// Runs; the median is reported.
    #[arg(long, default_value_t = 3, value_parser = harmony_e2e::positive_count)]
    runs: usize,
    /// Render here (kept) instead of a temporary folder.
    #[arg(long, value_name = "DIR")]
    out: Option<std::path::PathBuf>,
}

fn parse_args() -> BenchResult<Options> {
    let o = <Options as clap::Parser>::parse();
    // 10.20.0.0/16 holds 65,534 addresses; the first 256 are kept for the services.
    if o.hosts > 60_000 {
        return Err(format!(
            "--hosts: {} does not fit in the benchmark's /16; use at most 60000",
            o.hosts
        ));
    }
    Ok(o)
}

fn worker_ip(i: usize) -> String {
    let n = FIRST_WORKER + i;
    format!("10.20.{}.{}", n / 256, n % 256)
}

/// Locally administered, unique for every index below 2^24.
fn worker_mac(i: usize) -> String {
    format!(
        "02:42:00:{:02x}:{:02x}:{:02x}",
        (i >> 16) & 0xff,
        (i >> 8) & 0xff,
        i & 0xff
    )
}

fn layout(hosts: usize) -> BenchResult<ClusterLayout> {
    let host = |name: &str, ip: &str| -> BenchResult<LogicalHost> {
        Ok(LogicalHost::new(
            HostName::parse(name).map_err(|e| e.to_string())?,
            IpAddress::parse(ip).map_err(|e| e.to_string())?,
        ))
    };
    let ip = |s: &str| IpAddress::parse(s).map_err(|e| e.to_string());
    Ok(ClusterLayout {
        cluster_name: Dns1123Label::parse("bench").map_err(|e| e.to_string())?,
        base_domain: HostName::parse("example.com").map_err(|e| e.to_string())?,
        network: Ipv4Cidr::parse("10.20.0.0/16").map_err(|e| e.to_string())?,
        gateway: ip("10.20.0.1")?,
        load_balancer: ip("10.20.0.2")?,
        services: ip("10.20.0.2")?,
        bootstrap: host("bootstrap", "10.20.0.10")?,
        control_plane: vec![
            host("cp0", "10.20.0.11")?,
            host("cp1", "10.20.0.12")?,
            host("cp2", "10.20.0.13")?,
        ],
        workers: (0..hosts)
            .map(|i| host(&format!("worker{i}"), &worker_ip(i)))
            .collect::<BenchResult<_>>()?,
    })
}

/// The worker machines, declared as in `examples/okd_workers`, each with the Worker role.
fn inventory(hosts: usize) -> BenchResult<Inventory> {
    let machines = (0..hosts)
        .map(|i| {
            Ok(PhysicalHost {
                id: Id::parse(&format!("rack{}-u{}", i / 40, i % 40)).map_err(|e| e.to_string())?,
                hostname: None,
                serial: None,
                macs: vec![MacAddress::parse(&worker_mac(i)).map_err(|e| e.to_string())?],
                cpu_count: 16,
                memory_bytes: 64 << 30,
                disks: vec![Disk {
                    name: "nvme0n1".into(),
                    size_bytes: 960 << 30,
                    rotational: false,
                    ..Default::default()
                }],
            })
        })
        .collect::<BenchResult<Vec<_>>>()?;
    let assignments = machines
        .iter()
        .map(|h| RoleAssignment {
            host: h.id.clone(),
            role: HostRole::Worker,
        })
        .collect();
    Ok(Inventory {
        location: Some("bench".into()),
        hosts: machines,
        assignments,
    })
}

struct Timing {
    total: Duration,
    topology: Duration,
    /// Each Score's name and wall time, as its report gives it.
    scores: Vec<(String, Duration)>,
}

/// One render into `out`: topology creation and every Score, timed; inputs are built first,
/// outside the timing, since a program declares them in code.
async fn render_once(hosts: usize, out: &Path) -> BenchResult<Timing> {
    let layout = layout(hosts)?;
    let inventory = inventory(hosts)?;
    let install = OkdInstallation::default();
    let ctx = RunContext {
        out_dir: out.to_path_buf(),
        operator: OperatorHandle::new(Unattended { assume_yes: true }),
        ..RunContext::default()
    };
    let started = Instant::now();
    let topology = HAClusterTopology::from_context(layout, BareMetalServices::default(), &ctx)
        .map_err(|e| format!("topology: {e}"))?;
    let topology_time = started.elapsed();
    let mut maestro = Maestro::new(inventory, topology);
    maestro.register(example_okd_workers::scores::<HAClusterTopology>(&install));
    let all: Vec<usize> = (0..maestro.scores().len()).collect();
    let invalid = maestro.validate(&all);
    if let Some((score, e)) = invalid.first() {
        return Err(format!(
            "{score}: {}: {}; fix: {}",
            e.field, e.problem, e.fix
        ));
    }
    let reports = maestro
        .run_all(RunOptions::default())
        .await
        .map_err(|e| format!("preparing the topology: {}", e.reason))?;
    let total = started.elapsed();
    for r in &reports {
        if !matches!(r.status, ScoreStatus::Success | ScoreStatus::Noop) {
            return Err(format!("{} did not succeed: {}", r.name, r.message));
        }
    }
    Ok(Timing {
        total,
        topology: topology_time,
        scores: reports
            .iter()
            .map(|r| (r.name.clone(), Duration::from_millis(r.duration_ms)))
            .collect(),
    })
}

fn files_under(dir: &Path, out: &mut Vec<std::path::PathBuf>) -> BenchResult<()> {
    for entry in std::fs::read_dir(dir).map_err(|e| format!("{}: {e}", dir.display()))? {
        let path = entry.map_err(|e| e.to_string())?.path();
        if path.is_dir() {
            files_under(&path, out)?;
        } else {
            out.push(path);
        }
    }
    Ok(())
}

fn read(path: &Path) -> BenchResult<String> {
    std::fs::read_to_string(path).map_err(|e| format!("{}: {e}", path.display()))
}

/// The rendered files hold every host and only them: `dnsmasq/dhcp-hosts` has one line per
/// MAC with its address, the scripts table `http/ipxe-scripts.json` one script per MAC, and the haproxy configuration
/// names every worker's address in its backends.
fn verify(root: &Path, hosts: usize) -> BenchResult<String> {
    let mut files = Vec::new();
    files_under(root, &mut files)?;
    let want: HashMap<String, String> = (0..hosts).map(|i| (worker_mac(i), worker_ip(i))).collect();
    let dhcp = read(&root.join("dnsmasq/dhcp-hosts"))?;
    let ips: HashSet<&str> = want.values().map(String::as_str).collect();
    let (mut bound, mut leased) = (HashSet::new(), HashSet::new());
    // Which worker gets which address is the topology's choice (its own host order); each
    // declared MAC and each worker address must appear exactly once.
    for line in dhcp.lines().filter(|l| !l.trim().is_empty()) {
        let mut fields = line.split(',');
        let (mac, ip) = (fields.next().unwrap_or(""), fields.next().unwrap_or(""));
        if !want.contains_key(mac)
            || !ips.contains(ip)
            || !bound.insert(mac.to_string())
            || !leased.insert(ip.to_string())
        {
            return Err(format!(
                "dnsmasq/dhcp-hosts: unexpected or repeated line {line:?}"
            ));
        }
    }
    let table = ScriptTable::in_dir(&root.join("http"));
    let mut scripts = HashSet::new();
    for name in table
        .read()
        .map_err(|e| format!("{}: {e}", table.path().display()))?
        .keys()
    {
        let mac = name.trim_end_matches(".ipxe").replace('-', ":");
        if !want.contains_key(&mac) {
            return Err(format!(
                "{}: a script for an unknown MAC: {name}",
                table.path().display()
            ));
        }
        scripts.insert(mac);
    }
    let haproxy = read(&root.join("haproxy/haproxy.cfg"))?;
    let servers: HashSet<&str> = haproxy
        .lines()
        .filter_map(|l| l.trim().strip_prefix("server "))
        .filter_map(|l| l.split_whitespace().nth(1))
        .filter_map(|addr| addr.rsplit_once(':').map(|(ip, _)| ip))
        .collect();
    let in_haproxy = want
        .values()
        .filter(|ip| servers.contains(ip.as_str()))
        .count();
    let summary = format!(
        "{} files; {} dhcp-host lines; {} iPXE scripts; {in_haproxy} of {hosts} workers in haproxy backends",
        files.len(),
        bound.len(),
        scripts.len()
    );
    if bound.len() != hosts || scripts.len() != hosts || in_haproxy != hosts {
        return Err(format!(
            "rendered output is incomplete: {summary} (want {hosts} of each)"
        ));
    }
    Ok(summary)
}

async fn run(o: Options) -> BenchResult<()> {
    eprintln!(
        "bench_render: {} workers (+ bootstrap and 3 control-plane hosts), {} run(s)",
        o.hosts, o.runs
    );
    let mut timings = Vec::new();
    for run in 1..=o.runs {
        let work = tempfile::Builder::new()
            .prefix("harmony-bench-render-")
            .tempdir()
            .map_err(|e| format!("temp dir: {e}"))?;
        let out = o.out.as_deref().unwrap_or(work.path());
        if o.out.is_some() {
            // A kept folder from an earlier run would let stale files pass the checks.
            let _ = std::fs::remove_dir_all(out.join("bench"));
        }
        let t = render_once(o.hosts, out).await?;
        let summary = verify(&out.join("bench"), o.hosts)?;
        eprintln!("  run {run}: {:.3} s; ok: {summary}", t.total.as_secs_f64());
        timings.push(t);
    }
    let (med, min, max) = stats(timings.iter().map(|t| t.total.as_secs_f64()).collect());
    println!();
    println!(
        "render {} bare-metal hosts, median of {} run(s) (min / max)",
        o.hosts, o.runs
    );
    println!("{:<40} {:>10}", "phase", "seconds");
    let (topo, ..) = stats(timings.iter().map(|t| t.topology.as_secs_f64()).collect());
    println!("{:<40} {topo:>10.3}", "topology creation");
    for (i, (name, _)) in timings[0].scores.iter().enumerate() {
        let (s, ..) = stats(
            timings
                .iter()
                .map(|t| t.scores.get(i).map_or(0.0, |(_, d)| d.as_secs_f64()))
                .collect(),
        );
        println!("{name:<40} {s:>10.3}");
    }
    println!("{:<40} {med:>10.3}   ({min:.3} / {max:.3})", "total");
    let met = med <= GOAL_S;
    println!(
        "goal: ≤ {GOAL_S} s for 10,000 hosts; {} ({med:.3} s at {} hosts)",
        if met { "met" } else { "not met" },
        o.hosts
    );
    println!(
        "BENCH {}",
        serde_json::json!({
            "bench": "render",
            "figures": [{
                "figure": format!("render {} bare-metal hosts (DHCP, per-MAC iPXE, haproxy)", o.hosts),
                "peer": "-",
                "goal": format!("≤ {GOAL_S} s"),
                "measured": format!("{med:.3} s (median of {} run(s), min {min:.3}, max {max:.3})", o.runs),
                "met": met,
            }]
        })
    );
    Ok(())
}

#[tokio::main]
async fn main() {
    let result = match parse_args() {
        Ok(o) => run(o).await,
        Err(e) => Err(e),
    };
    if let Err(e) = result {
        eprintln!("bench_render: {e}");
        std::process::exit(1);
    }
}
