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

/// Component buckets, matched against frames (legacy-mangled `..` read as `::`) from the
/// allocation site outwards; `true` when the bucket grows with each agent connection.
const BUCKETS: &[(&str, &str, bool)] = &[
    ("rustls", "TLS (rustls: keys, connection state)", true),
    (
        "harmony_control_plane::http::listener::tls_stream",
        "TLS buffers (ADR 0032: bytes in flight only, none while a connection is idle)",
        true,
    ),
    (
        "tungstenite",
        "WebSocket (tungstenite: read buffer, frame state)",
        true,
    ),
    (
        "hyper",
        "upgraded socket (hyper: the boxed TLS stream, rustls' connection inline)",
        true,
    ),
    (
        "tokio::runtime::task",
        "task (the connection's future: session loop, timers)",
        true,
    ),
    (
        "tokio::runtime::io",
        "socket registration (tokio I/O driver)",
        true,
    ),
    (
        "harmony_control_plane::hub",
        "hub entry (close signal, delivery wake-up)",
        true,
    ),
    (
        "serde",
        "decoded frames the session keeps (hello: ops, names)",
        true,
    ),
    (
        "sqlite3",
        "SQLite page cache (the regions' rows; not per connection)",
        false,
    ),
];
const OTHER: &str = "everything else (startup, runtime, logging, event buffers)";

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

/// Sums the flame-graph lines (`root;...;leaf bytes`) into buckets: per agent for what grows
/// with connections, in MiB for the rest.
fn report(stacks: &str, agents: usize) -> Vec<String> {
    let mut buckets: BTreeMap<&str, u64> = BTreeMap::new();
    for line in stacks.lines() {
        let Some((stack, cost)) = line.rsplit_once(' ') else {
            continue;
        };
        let Ok(bytes) = cost.trim().parse::<u64>() else {
            continue;
        };
        let bucket = stack
            .rsplit(';')
            .find_map(|frame| {
                let frame = frame.replace("..", "::");
                BUCKETS
                    .iter()
                    .find(|(needle, ..)| frame.contains(needle))
                    .map(|(_, name, _)| *name)
            })
            .unwrap_or(OTHER);
        *buckets.entry(bucket).or_default() += bytes;
    }
    let kib = |b: u64| b as f64 / agents.max(1) as f64 / 1024.0;
    let per_connection = |name: &str| BUCKETS.iter().any(|(_, n, per)| *n == name && *per);
    let mut rows: Vec<(&str, u64)> = buckets.into_iter().collect();
    rows.sort_by_key(|r| std::cmp::Reverse(r.1));
    let mut lines = vec![
        format!(
            "| live heap of the control plane with {agents} agents (heaptrack), by component | per agent |"
        ),
        "| --- | ---: |".to_string(),
    ];
    let mut total = 0;
    for (name, bytes) in rows.iter().filter(|(n, _)| per_connection(n)) {
        total += bytes;
        lines.push(format!("| {name} | {:.2} KiB |", kib(*bytes)));
    }
    lines.push(format!(
        "| **per connection, all of the above** | **{:.2} KiB** |",
        kib(total)
    ));
    for (name, bytes) in rows.iter().filter(|(n, _)| !per_connection(n)) {
        lines.push(format!(
            "| {name} | {:.2} KiB ({:.1} MiB in all) |",
            kib(*bytes),
            *bytes as f64 / 1024.0 / 1024.0
        ));
    }
    lines
}

#[cfg(test)]
mod tests {
    #[test]
    fn stacks_fall_in_the_innermost_named_component() {
        let stacks = "main;tokio::task::spawn;tokio::runtime::task::core::Cell::new;malloc 2048\n\
                      main;_$LT$tokio_rustls..common..handshake..MidHandshake;rustls::msgs::deframer::buffers::DeframerVecBuffer::read;malloc 1024\n\
                      main;tokio_tungstenite::WebSocketStream::from_raw_socket;tungstenite::protocol::WebSocketContext::new;malloc 1024\n\
                      main;rusqlite::Connection::open;sqlite3MemMalloc 2048\n\
                      main;0x55f9;malloc 1024\n";
        let text = super::report(stacks, 1).join("\n");
        for row in [
            "| task (the connection's future: session loop, timers) | 2.00 KiB |",
            "| TLS (rustls: keys, connection state) | 1.00 KiB |",
            "| WebSocket (tungstenite: read buffer, frame state) | 1.00 KiB |",
            "| **per connection, all of the above** | **4.00 KiB** |",
            "| SQLite page cache (the regions' rows; not per connection) | 2.00 KiB (0.0 MiB in all) |",
            "| everything else (startup, runtime, logging, event buffers) | 1.00 KiB (0.0 MiB in all) |",
        ] {
            assert!(text.contains(row), "{row:?} missing:\n{text}");
        }
    }
}
