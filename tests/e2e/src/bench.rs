//! Helpers the benchmark binaries (`src/bin/bench_*.rs`) share.

use std::process::{Command, Stdio};

use crate::ApiServer;

/// A benchmark step's result: the error text is printed as is.
pub type BenchResult<T> = Result<T, String>;

/// The fixture's kubectl, built from the same Kubernetes modules as the apiserver, against
/// `server`. Unlike [`ApiServer::kubectl`], a missing binary is an error rather than a panic.
pub fn kubectl(server: &ApiServer) -> BenchResult<Command> {
    let mut cmd = Command::new(ApiServer::binary()?);
    cmd.arg("kubectl")
        .env("KUBECONFIG", server.kubeconfig())
        .stdin(Stdio::null());
    Ok(cmd)
}

/// Prints `ok: what` on stderr, or fails the benchmark with it: a fast wrong answer must not
/// pass as a figure.
pub fn check(ok: bool, what: String) -> BenchResult<()> {
    if ok {
        eprintln!("  ok: {what}");
        Ok(())
    } else {
        Err(format!("check failed: {what}"))
    }
}

/// Median, min and max of `v` (not empty).
pub fn stats(mut v: Vec<f64>) -> (f64, f64, f64) {
    v.sort_by(f64::total_cmp);
    let mid = v.len() / 2;
    let median = if v.len().is_multiple_of(2) {
        (v[mid - 1] + v[mid]) / 2.0
    } else {
        v[mid]
    };
    (median, v[0], v[v.len() - 1])
}

/// The median of `v` (not empty).
pub fn median(v: Vec<f64>) -> f64 {
    stats(v).0
}

/// Clock ticks per second of the times in `/proc` (`/proc/<pid>/stat`, `/proc/stat`).
pub fn ticks_per_second() -> f64 {
    // SAFETY: sysconf reads a constant of the running kernel; it has no pointer arguments.
    let t = unsafe { libc::sysconf(libc::_SC_CLK_TCK) };
    if t > 0 { t as f64 } else { 100.0 }
}

/// CPU time (user + system) of process `pid` (`self` for this one) so far, in clock ticks;
/// with `waited_children`, that of its children it has waited for instead (kubectl and the
/// `diff` it runs).
pub fn cpu_ticks(pid: &str, waited_children: bool) -> BenchResult<u64> {
    let path = format!("/proc/{pid}/stat");
    let text = std::fs::read_to_string(&path).map_err(|e| format!("{path}: {e}"))?;
    // The command name is in parentheses and may hold spaces; fields are counted after it,
    // starting at field 3 (state): utime is field 14, stime 15, cutime 16, cstime 17.
    let rest = text
        .rsplit_once(')')
        .map(|(_, r)| r)
        .ok_or_else(|| format!("{path}: no command name"))?;
    let fields: Vec<&str> = rest.split_whitespace().collect();
    let at = if waited_children { 13 } else { 11 };
    let ticks = |i: usize| -> BenchResult<u64> {
        fields
            .get(i)
            .and_then(|f| f.parse().ok())
            .ok_or_else(|| format!("{path}: field {} is not a number", i + 3))
    };
    Ok(ticks(at)? + ticks(at + 1)?)
}

/// The machine's CPU time so far, summed over every core, in clock ticks (`/proc/stat`).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct MachineTicks {
    /// Running anything: user, nice, system, irq, softirq, steal.
    pub busy: u64,
    /// Idle with no I/O outstanding.
    pub idle: u64,
    /// Idle while a disk I/O was outstanding.
    pub iowait: u64,
}

impl MachineTicks {
    /// Now; all zero when `/proc/stat` cannot be read.
    pub fn now() -> Self {
        std::fs::read_to_string("/proc/stat")
            .ok()
            .and_then(|stat| stat.lines().next().map(Self::parse))
            .unwrap_or_default()
    }

    /// From the `cpu` line of `/proc/stat`: user nice system idle iowait irq softirq steal.
    pub fn parse(line: &str) -> Self {
        let f: Vec<u64> = line
            .split_whitespace()
            .skip(1)
            .take(8)
            .filter_map(|v| v.parse().ok())
            .collect();
        let at = |i: usize| f.get(i).copied().unwrap_or(0);
        Self {
            busy: at(0) + at(1) + at(2) + at(5) + at(6) + at(7),
            idle: at(3),
            iowait: at(4),
        }
    }

    /// What was spent from `earlier` to `self`.
    pub fn since(self, earlier: Self) -> Self {
        Self {
            busy: self.busy.saturating_sub(earlier.busy),
            idle: self.idle.saturating_sub(earlier.idle),
            iowait: self.iowait.saturating_sub(earlier.iowait),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn machine_ticks_split_busy_idle_and_iowait() {
        let t = MachineTicks::parse("cpu  10 1 5 100 7 2 3 4 0 0");
        assert_eq!(
            t,
            MachineTicks {
                busy: 10 + 1 + 5 + 2 + 3 + 4,
                idle: 100,
                iowait: 7
            }
        );
        let later = MachineTicks::parse("cpu  20 1 5 130 7 2 3 4 0 0");
        assert_eq!(
            later.since(t),
            MachineTicks {
                busy: 10,
                idle: 30,
                iowait: 0
            }
        );
    }

    #[test]
    fn this_process_has_cpu_ticks() {
        assert!(cpu_ticks("self", false).is_ok());
        assert!(cpu_ticks("self", true).is_ok());
        assert!(cpu_ticks("no-such-pid", false).is_err());
    }
}
