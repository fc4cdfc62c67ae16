//! Where the control plane's memory per agent connection goes: the control plane runs under
//! heaptrack (its allocations recorded with their stacks); once every agent is in and has
//! heartbeat, the process is killed, so heaptrack's "leaked" bytes are exactly the heap alive
//! at that moment. Each live allocation whose stack passes through the connection code
//! (listener, upgrade, session, hub) is put in the bucket of the innermost frame that names a
//! known component (rustls, tungstenite, hyper, a task, a channel, ...), and each bucket is
//! divided by the number of agents.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::{Duration, Instant};

/// Frames that mark an allocation as made for a connection (startup state does not pass here).
const CONNECTION_CODE: &[&str] = &[
    "harmony_control_plane::http::listener",
    "harmony_control_plane::http::agent",
    "harmony_control_plane::session",
    "harmony_control_plane::hub",
];

/// Component buckets, matched against frames from the allocation site outwards.
const BUCKETS: &[(&str, &str)] = &[
    (
        "rustls",
        "TLS session (rustls: record layer, keys, buffers)",
    ),
    (
        "tungstenite",
        "WebSocket (tungstenite: read buffer, frame state)",
    ),
    ("hyper", "HTTP connection and upgrade (hyper)"),
    (
        "tokio::runtime::task",
        "tasks (futures, spawned per connection)",
    ),
    ("tokio::sync", "channels and locks (tokio::sync)"),
    (
        "tokio::runtime::io",
        "socket registration (tokio I/O driver)",
    ),
    ("harmony_control_plane::hub", "hub entry (per-agent sender)"),
    (
        "harmony_control_plane::session",
        "session state (identity, status, buffers)",
    ),
];

/// A shell script that runs `cp_bin` under heaptrack, writing to `<dir>/cp.zst`.
pub(crate) fn wrapper(dir: &Path, cp_bin: &Path) -> Result<PathBuf, String> {
    let heaptrack = which("heaptrack")
        .ok_or("--heap-profile needs heaptrack (apt-get install heaptrack); or run without it")?;
    let script = dir.join("cp-under-heaptrack.sh");
    let out = dir.join("cp");
    std::fs::write(
        &script,
        format!(
            "#!/bin/sh\nexec {} -o {} {} \"$@\"\n",
            heaptrack.display(),
            out.display(),
            cp_bin.display()
        ),
    )
    .map_err(|e| format!("writing {}: {e}", script.display()))?;
    use std::os::unix::fs::PermissionsExt;
    std::fs::set_permissions(&script, std::fs::Permissions::from_mode(0o755))
        .map_err(|e| e.to_string())?;
    Ok(script)
}

fn which(name: &str) -> Option<PathBuf> {
    let path = std::env::var_os("PATH").unwrap_or_default();
    std::env::split_paths(&path)
        .map(|d| d.join(name))
        .find(|p| p.is_file())
}

/// The control plane process itself (heaptrack's child): the process whose executable is
/// `cp_bin` and whose command line listens on `addr`.
pub(crate) fn real_pid(cp_bin: &Path, addr: &str) -> Option<u32> {
    let entries = std::fs::read_dir("/proc").ok()?;
    for e in entries.flatten() {
        let Ok(pid) = e.file_name().to_string_lossy().parse::<u32>() else {
            continue;
        };
        let exe = std::fs::read_link(format!("/proc/{pid}/exe")).ok();
        if exe.as_deref() != Some(cp_bin) {
            continue;
        }
        let cmdline = std::fs::read(format!("/proc/{pid}/cmdline")).unwrap_or_default();
        if String::from_utf8_lossy(&cmdline).contains(addr) {
            return Some(pid);
        }
    }
    None
}

/// Kills the control plane (`pid`), waits for heaptrack to write its file under `dir`, reads
/// the live heap by component, and returns the report lines (bytes per agent).
pub(crate) fn breakdown(dir: &Path, pid: u32, agents: usize) -> Result<Vec<String>, String> {
    // SAFETY: kill has no memory preconditions; pid is the control plane this run started.
    unsafe {
        libc::kill(pid as i32, libc::SIGKILL);
    }
    let data = dir.join("cp.zst");
    let deadline = Instant::now() + Duration::from_secs(300);
    // heaptrack writes its file once its interpreter has read everything: wait until it exists
    // and stops growing.
    let mut last = None;
    loop {
        let size = std::fs::metadata(&data).ok().map(|m| m.len());
        if size.is_some() && size == last && !heaptrack_running(dir) {
            break;
        }
        if Instant::now() > deadline {
            return Err("heaptrack did not finish its file within 5 minutes".into());
        }
        last = size;
        std::thread::sleep(Duration::from_millis(500));
    }
    let stacks = dir.join("stacks.txt");
    let out = Command::new("heaptrack_print")
        .arg("-f")
        .arg(&data)
        .args(["-p", "0", "-a", "0", "-T", "0", "-l", "0"])
        .arg("-F")
        .arg(&stacks)
        .args(["--flamegraph-cost-type", "leaked"])
        .output()
        .map_err(|e| format!("heaptrack_print: {e}"))?;
    if !out.status.success() {
        return Err(format!(
            "heaptrack_print failed: {}",
            String::from_utf8_lossy(&out.stderr)
        ));
    }
    let text = std::fs::read_to_string(&stacks).map_err(|e| e.to_string())?;
    // Kept for a closer look (flamegraph.pl reads it); the run's own folder goes away.
    let kept = std::env::temp_dir().join("bench-agents-heap-stacks.txt");
    let mut lines = report(&text, agents);
    if std::fs::write(&kept, &text).is_ok() {
        lines.push(format!(
            "(live allocations by stack, flame-graph format: {})",
            kept.display()
        ));
    }
    Ok(lines)
}

/// Whether a heaptrack interpreter writing under `dir` still runs.
fn heaptrack_running(dir: &Path) -> bool {
    let Ok(entries) = std::fs::read_dir("/proc") else {
        return false;
    };
    let needle = dir.to_string_lossy().to_string();
    entries.flatten().any(|e| {
        let cmdline = std::fs::read(e.path().join("cmdline")).unwrap_or_default();
        let cmd = String::from_utf8_lossy(&cmdline);
        cmd.contains("heaptrack") && cmd.contains(&needle)
    })
}

/// Sums the flame-graph lines (`root;...;leaf bytes`) into buckets, per agent.
fn report(stacks: &str, agents: usize) -> Vec<String> {
    let mut buckets: BTreeMap<&str, u64> = BTreeMap::new();
    let mut outside = 0u64;
    for line in stacks.lines() {
        let Some((stack, cost)) = line.rsplit_once(' ') else {
            continue;
        };
        let Ok(bytes) = cost.trim().parse::<u64>() else {
            continue;
        };
        if !CONNECTION_CODE.iter().any(|c| stack.contains(c)) {
            outside += bytes;
            continue;
        }
        let bucket = stack
            .rsplit(';')
            .find_map(|frame| {
                BUCKETS
                    .iter()
                    .find(|(needle, _)| frame.contains(needle))
                    .map(|(_, name)| *name)
            })
            .unwrap_or("other allocations in the connection code");
        *buckets.entry(bucket).or_default() += bytes;
    }
    let per = |b: u64| b as f64 / agents.max(1) as f64 / 1024.0;
    let total: u64 = buckets.values().sum();
    let mut rows: Vec<(&str, u64)> = buckets.into_iter().collect();
    rows.sort_by(|a, b| b.1.cmp(&a.1));
    let mut lines = vec![
        "| live heap per agent connection (heaptrack), by component | KiB |".to_string(),
        "| --- | ---: |".to_string(),
    ];
    for (name, bytes) in rows {
        lines.push(format!("| {name} | {:.2} |", per(bytes)));
    }
    lines.push(format!("| **all of the above** | **{:.2}** |", per(total)));
    lines.push(format!(
        "| (not per connection: startup, database, runtime; whole process) | {:.1} MiB |",
        outside as f64 / 1024.0 / 1024.0
    ));
    lines
}

#[cfg(test)]
mod tests {
    #[test]
    fn stacks_fall_in_the_innermost_named_component() {
        let stacks = "main;harmony_control_plane::http::listener::serve;tokio::task::spawn;tokio::runtime::task::core::Cell::new;malloc 2048\n\
                      main;harmony_control_plane::http::listener::connection;tokio_rustls::accept;rustls::conn::ConnectionCore::new;malloc 1024\n\
                      main;harmony_control_plane::session::run;tokio_tungstenite::WebSocketStream::from_raw_socket;tungstenite::protocol::WebSocket::new;malloc 1024\n\
                      main;rusqlite::Connection::open;malloc 99999\n";
        let lines = super::report(stacks, 1);
        let text = lines.join("\n");
        assert!(
            text.contains("| tasks (futures, spawned per connection) | 2.00 |"),
            "{text}"
        );
        assert!(
            text.contains("| TLS session (rustls: record layer, keys, buffers) | 1.00 |"),
            "{text}"
        );
        assert!(
            text.contains("| WebSocket (tungstenite: read buffer, frame state) | 1.00 |"),
            "{text}"
        );
        assert!(
            text.contains("| **all of the above** | **4.00** |"),
            "{text}"
        );
    }
}
