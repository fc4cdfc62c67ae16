//! Where the CPU of a burst of requests goes: the whole machine's busy time (`/proc/stat`)
//! and each party's (the replicas, PostgreSQL's processes, haproxy, this program: the callers
//! and the simulated agents), so a latency figure comes with the floor the cores put under it.

use std::time::Instant;

use harmony_e2e::bench::{MachineTicks, cpu_ticks, ticks_per_second};

/// CPU ticks of the machine and of each party, at one instant.
pub(crate) struct Sample {
    at: Instant,
    machine: u64,
    parties: Vec<u64>,
    net: Net,
}

/// The kernel's TCP counters that tell a storm's wasted attempts: connections opened by a
/// client (`Tcp: ActiveOpens`, the simulators' and haproxy's), connections that failed
/// (`AttemptFails`), and SYNs dropped because a listen queue was full (`TcpExt:
/// ListenOverflows`).
#[derive(Clone, Copy, Default)]
struct Net {
    active_opens: u64,
    attempt_fails: u64,
    listen_overflows: u64,
}

impl Net {
    fn now() -> Self {
        let field = |file: &str, group: &str, name: &str| -> u64 {
            let text = std::fs::read_to_string(file).unwrap_or_default();
            let mut lines = text.lines().filter(|l| l.starts_with(group));
            let (Some(names), Some(values)) = (lines.next(), lines.next()) else {
                return 0;
            };
            names
                .split_whitespace()
                .zip(values.split_whitespace())
                .find(|(n, _)| *n == name)
                .and_then(|(_, v)| v.parse().ok())
                .unwrap_or(0)
        };
        Self {
            active_opens: field("/proc/net/snmp", "Tcp:", "ActiveOpens"),
            attempt_fails: field("/proc/net/snmp", "Tcp:", "AttemptFails"),
            listen_overflows: field("/proc/net/netstat", "TcpExt:", "ListenOverflows"),
        }
    }
}

/// The parties measured: the replicas' and haproxy's pids, then `postgres` (every process so
/// named), then this program and its simulator children.
pub(crate) struct Parties {
    replicas: Vec<String>,
    proxies: Vec<String>,
    simulators: Vec<String>,
}

impl Parties {
    /// `simulators`: the simulator children's pids (this program is always counted with them).
    pub(crate) fn new(replicas: &[u32], proxies: &[u32], simulators: &[u32]) -> Self {
        let pids = |v: &[u32]| v.iter().map(u32::to_string).collect();
        Self {
            replicas: pids(replicas),
            proxies: pids(proxies),
            simulators: pids(simulators),
        }
    }

    pub(crate) fn sample(&self) -> Sample {
        let sum = |pids: &[String]| pids.iter().filter_map(|p| cpu_ticks(p, false).ok()).sum();
        Sample {
            at: Instant::now(),
            machine: MachineTicks::now().busy,
            parties: vec![
                sum(&self.replicas),
                named("postgres"),
                sum(&self.proxies),
                cpu_ticks("self", false).unwrap_or(0) + sum(&self.simulators),
            ],
            net: Net::now(),
        }
    }
}

/// CPU ticks of every process whose command is `comm`.
fn named(comm: &str) -> u64 {
    let Ok(dir) = std::fs::read_dir("/proc") else {
        return 0;
    };
    dir.filter_map(Result::ok)
        .filter_map(|e| e.file_name().to_str().map(str::to_string))
        .filter(|p| p.bytes().all(|b| b.is_ascii_digit()))
        .filter(|p| {
            std::fs::read_to_string(format!("/proc/{p}/comm")).is_ok_and(|c| c.trim() == comm)
        })
        .filter_map(|p| cpu_ticks(&p, false).ok())
        .sum()
}

/// Between two samples: the wall time, the machine's busy CPU and each party's CPU, in seconds.
fn between(before: &Sample, after: &Sample) -> (f64, f64, Vec<f64>) {
    let hz = ticks_per_second();
    let secs = |a: u64, b: u64| b.saturating_sub(a) as f64 / hz;
    let part = before
        .parties
        .iter()
        .zip(&after.parties)
        .map(|(a, b)| secs(*a, *b))
        .collect();
    (
        (after.at - before.at).as_secs_f64(),
        secs(before.machine, after.machine),
        part,
    )
}

/// Where the CPU of one phase of a storm went (`what` names the phase, `n` reconnects in it):
/// the machine's busy share, each party's CPU (per reconnect when `n` > 0), the TCP
/// connections opened and dropped, and the floor the cores put under `n` reconnects at that
/// cost.
pub(crate) fn phase(what: &str, before: &Sample, after: &Sample, n: usize, cores: usize) -> String {
    let (wall, busy, part) = between(before, after);
    let net = format!(
        "{} TCP connections opened, {} failed, {} SYNs dropped on full listen queues",
        after
            .net
            .active_opens
            .saturating_sub(before.net.active_opens),
        after
            .net
            .attempt_fails
            .saturating_sub(before.net.attempt_fails),
        after
            .net
            .listen_overflows
            .saturating_sub(before.net.listen_overflows),
    );
    let busy_pct = busy / (wall * cores.max(1) as f64) * 100.0;
    if n == 0 {
        return format!(
            "{what} {wall:.1} s, cores {busy_pct:.0} % busy: CPU replicas {:.1}, PostgreSQL {:.1}, haproxy {:.1}, simulated agents {:.1} s; {net}",
            part[0], part[1], part[2], part[3],
        );
    }
    let per = |s: f64| s * 1000.0 / n as f64;
    format!(
        "{what} {wall:.1} s, cores {busy_pct:.0} % busy: CPU per reconnect {:.2} ms (replicas {:.2}, PostgreSQL {:.2}, haproxy {:.2}, simulated agents {:.2}; the heartbeats of the agents already back included), so {n} reconnects cannot end before {:.1} s on {cores} cores; {net}",
        per(busy),
        per(part[0]),
        per(part[1]),
        per(part[2]),
        per(part[3]),
        busy / cores.max(1) as f64,
    )
}

/// The CPU a burst of `n` requests cost between two samples, and the floor it puts under the
/// burst's duration on `cores` cores (all parties', then the harness's alone).
pub(crate) fn report(before: &Sample, after: &Sample, n: usize, cores: usize) -> (String, f64) {
    let (wall, busy, part) = between(before, after);
    let floor_ms = busy / cores.max(1) as f64 * 1000.0;
    let text = format!(
        "burst {:.0} ms; CPU {:.0} ms on {cores} cores ({:.0} % busy): replicas {:.0}, PostgreSQL {:.0}, haproxy {:.0}, callers and simulated agents {:.0} ms; {:.2} ms of CPU per request, so the burst cannot end before {:.0} ms on this machine, and the harness's share alone (haproxy, callers and simulated agents, on the same cores) not before {:.0} ms, even with a control plane that cost nothing",
        wall * 1000.0,
        busy * 1000.0,
        busy / (wall * cores.max(1) as f64) * 100.0,
        part[0] * 1000.0,
        part[1] * 1000.0,
        part[2] * 1000.0,
        part[3] * 1000.0,
        busy * 1000.0 / n.max(1) as f64,
        floor_ms,
        (part[2] + part[3]) / cores.max(1) as f64 * 1000.0,
    );
    (text, floor_ms)
}
