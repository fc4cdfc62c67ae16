//! Running a short command from a fixture: stdin closed, output in temp files (a daemon that
//! keeps our pipes open cannot block us), killed after a bound ([`run_bounded`]); and the two
//! waits on a process a fixture starts: its exit within a bound ([`wait_or_kill`]) and its
//! first accepted connection ([`wait_listening`]).

use std::io::{Read, Seek};
use std::net::{SocketAddr, TcpStream};
use std::process::{Child, Command, ExitStatus, Stdio};
use std::time::{Duration, Instant};

use crate::eventually::eventually_blocking;

/// What a command printed and how it ended.
#[derive(Debug)]
pub struct Ran {
    /// How it exited.
    pub status: ExitStatus,
    /// Its standard output.
    pub stdout: String,
    /// Its standard error.
    pub stderr: String,
}

/// Runs `cmd` (named `what` in errors) and kills it after `timeout`; `hint` follows a failure
/// to start it (how to install it).
pub fn run_bounded(
    cmd: &mut Command,
    what: &str,
    timeout: Duration,
    hint: &str,
) -> Result<Ran, String> {
    let temp = || tempfile::tempfile().map_err(|e| format!("a temp file for {what}: {e}"));
    let (mut out, mut err) = (temp()?, temp()?);
    let mut child = cmd
        .stdin(Stdio::null())
        .stdout(out.try_clone().map_err(|e| format!("{what}: {e}"))?)
        .stderr(err.try_clone().map_err(|e| format!("{what}: {e}"))?)
        .spawn()
        .map_err(|e| format!("cannot run {what} ({:?}): {e}{hint}", cmd.get_program()))?;
    let status = match wait_or_kill(&mut child, timeout) {
        Ok(Some(status)) => status,
        Ok(None) => return Err(format!("{what} did not finish within {timeout:?}")),
        Err(e) => return Err(format!("waiting for {what}: {e}")),
    };
    let read = |f: &mut std::fs::File| {
        let mut s = String::new();
        let _ = f.seek(std::io::SeekFrom::Start(0));
        let _ = f.read_to_string(&mut s);
        s
    };
    Ok(Ran {
        status,
        stdout: read(&mut out),
        stderr: read(&mut err),
    })
}

/// Waits up to `timeout` for `child` to exit: its status, or `None` when it still ran at the
/// bound (then it has been killed and reaped).
///
/// This is the process-wait primitive of the commands above, not a wait for a condition: it
/// polls `try_wait` every 10 ms (std has no wait with a timeout), so that a short command is
/// not slowed down by [`eventually_blocking`]'s longer pauses.
pub fn wait_or_kill(child: &mut Child, timeout: Duration) -> std::io::Result<Option<ExitStatus>> {
    let end = Instant::now() + timeout;
    loop {
        if let Some(status) = child.try_wait()? {
            return Ok(Some(status));
        }
        if Instant::now() >= end {
            let _ = child.kill();
            let _ = child.wait();
            return Ok(None);
        }
        std::thread::sleep(Duration::from_millis(10));
    }
}

/// Waits up to `timeout` for a process just started (`child`, named `what`) to accept TCP
/// connections on `addr`, failing at once if it exits first. The error says which; the caller
/// adds the process's log.
pub fn wait_listening(
    child: &mut Child,
    addr: SocketAddr,
    what: &str,
    timeout: Duration,
) -> Result<(), String> {
    eventually_blocking(timeout, format!("{what} to listen on {addr}"), || {
        let refused = match TcpStream::connect_timeout(&addr, Duration::from_millis(500)) {
            Ok(_) => return Ok(Ok(())),
            Err(e) => e,
        };
        match child.try_wait() {
            Ok(Some(status)) => Ok(Err(format!(
                "{what} exited with {status} before listening on {addr}"
            ))),
            _ => Err(refused),
        }
    })
    .map_err(|w| w.to_string())?
}
