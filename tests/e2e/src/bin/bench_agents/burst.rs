//! Where the CPU of a burst of requests goes: the whole machine's busy time (`/proc/stat`)
//! and each party's (the replicas, PostgreSQL's processes, haproxy, this program: the callers
//! and the simulated agents), so a latency figure comes with the floor the cores put under it.

use std::time::Instant;

/// CPU ticks of the machine and of each party, at one instant.
pub(crate) struct Sample {
    at: Instant,
    machine: u64,
    parties: Vec<u64>,
}

/// The parties measured: the replicas' and haproxy's pids, then `postgres` (every process so
/// named), then this program.
pub(crate) struct Parties {
    replicas: Vec<String>,
    proxies: Vec<String>,
}

impl Parties {
    pub(crate) fn new(replicas: &[u32], proxies: &[u32]) -> Self {
        Self {
            replicas: replicas.iter().map(u32::to_string).collect(),
            proxies: proxies.iter().map(u32::to_string).collect(),
        }
    }

    pub(crate) fn sample(&self) -> Sample {
        let sum = |pids: &[String]| pids.iter().filter_map(|p| super::cpu_ticks(p).ok()).sum();
        Sample {
            at: Instant::now(),
            machine: machine_busy(),
            parties: vec![
                sum(&self.replicas),
                named("postgres"),
                sum(&self.proxies),
                super::cpu_ticks("self").unwrap_or(0),
            ],
        }
    }
}

/// Busy ticks of every core (all but idle and iowait), from `/proc/stat`.
fn machine_busy() -> u64 {
    let Ok(stat) = std::fs::read_to_string("/proc/stat") else {
        return 0;
    };
    let Some(cpu) = stat.lines().next() else {
        return 0;
    };
    let f: Vec<u64> = cpu
        .split_whitespace()
        .skip(1)
        .filter_map(|v| v.parse().ok())
        .collect();
    // user nice system idle iowait irq softirq steal
    f.iter().take(8).sum::<u64>() - f.get(3).copied().unwrap_or(0) - f.get(4).copied().unwrap_or(0)
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
        .filter_map(|p| super::cpu_ticks(&p).ok())
        .sum()
}

/// The CPU a burst of `n` requests cost between two samples, and the floor it puts under the
/// burst's duration on `cores` cores.
pub(crate) fn report(before: &Sample, after: &Sample, n: usize, cores: usize) -> (String, f64) {
    let hz = super::ticks_per_second();
    let secs = |a: u64, b: u64| b.saturating_sub(a) as f64 / hz;
    let wall = (after.at - before.at).as_secs_f64();
    let busy = secs(before.machine, after.machine);
    let part: Vec<f64> = before
        .parties
        .iter()
        .zip(&after.parties)
        .map(|(a, b)| secs(*a, *b))
        .collect();
    let floor_ms = busy / cores.max(1) as f64 * 1000.0;
    let text = format!(
        "burst {:.0} ms; CPU {:.0} ms on {cores} cores ({:.0} % busy): replicas {:.0}, PostgreSQL {:.0}, haproxy {:.0}, callers and simulated agents {:.0} ms; {:.2} ms of CPU per request, so the burst cannot end before {:.0} ms on this machine",
        wall * 1000.0,
        busy * 1000.0,
        busy / (wall * cores.max(1) as f64) * 100.0,
        part[0] * 1000.0,
        part[1] * 1000.0,
        part[2] * 1000.0,
        part[3] * 1000.0,
        busy * 1000.0 / n.max(1) as f64,
        floor_ms,
    );
    (text, floor_ms)
}
