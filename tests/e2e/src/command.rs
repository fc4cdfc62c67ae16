//! Running a short command from a fixture: stdin closed, output in temp files (a daemon that
//! keeps our pipes open cannot block us), killed after a bound.

use std::io::{Read, Seek};
use std::process::{Command, ExitStatus, Stdio};
use std::time::{Duration, Instant};

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
    let started = Instant::now();
    let status = loop {
        match child.try_wait() {
            Ok(Some(status)) => break status,
            Ok(None) if started.elapsed() > timeout => {
                let _ = child.kill();
                let _ = child.wait();
                return Err(format!("{what} did not finish within {timeout:?}"));
            }
            Ok(None) => std::thread::sleep(Duration::from_millis(10)),
            Err(e) => return Err(format!("waiting for {what}: {e}")),
        }
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
