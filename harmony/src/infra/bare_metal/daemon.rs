use std::path::{Path, PathBuf};
use std::process::{Command, Output, Stdio};
use std::time::{Duration, Instant};

/// Running or checking a service binary failed.
#[derive(Debug, thiserror::Error)]
pub enum DaemonError {
    /// The binary could not be started at all.
    #[error("cannot run {binary}: {source}; install it ({install}) or set its path")]
    NotInstalled {
        /// The binary.
        binary: String,
        /// How to install it.
        install: String,
        /// The OS error.
        #[source]
        source: std::io::Error,
    },
    /// The binary ran and failed.
    #[error("{command} failed ({status}): {output}")]
    Failed {
        /// The command line.
        command: String,
        /// Its exit status.
        status: String,
        /// Its standard error and output, trimmed.
        output: String,
    },
    /// The daemon did not exit after being asked to.
    #[error(
        "{binary} (pid {pid}) did not stop within {}",
        crate::domain::capability::seconds(after)
    )]
    DidNotStop {
        /// The binary.
        binary: String,
        /// Its process id.
        pid: i32,
        /// How long Harmony waited.
        after: Duration,
    },
}

/// A service binary Harmony runs as a daemon that writes its pid into a file Harmony owns.
///
/// `prefix` runs it through a wrapper, e.g. `ip netns exec NAME` in tests.
#[derive(Debug, Clone)]
pub struct Daemon {
    /// The binary, e.g. `dnsmasq`.
    pub binary: PathBuf,
    /// Words put before the binary on every command line.
    pub prefix: Vec<String>,
    /// The pid file the daemon writes.
    pub pidfile: PathBuf,
    /// How to install the binary, for error messages (`apt-get install dnsmasq-base`).
    pub install: String,
}

impl Daemon {
    fn command(&self, args: &[String]) -> Command {
        let mut words: Vec<String> = self.prefix.clone();
        words.push(self.binary.display().to_string());
        words.extend(args.iter().cloned());
        let mut cmd = Command::new(&words[0]);
        cmd.args(&words[1..])
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped());
        cmd
    }

    /// Runs the binary with `args` to completion and fails unless it exits 0.
    pub fn run(&self, args: &[String]) -> Result<Output, DaemonError> {
        let mut cmd = self.command(args);
        let shown = format!("{} {}", self.binary.display(), args.join(" "));
        let out = cmd.output().map_err(|source| DaemonError::NotInstalled {
            binary: self.binary.display().to_string(),
            install: self.install.clone(),
            source,
        })?;
        if out.status.success() {
            return Ok(out);
        }
        let text = format!(
            "{}{}",
            String::from_utf8_lossy(&out.stderr),
            String::from_utf8_lossy(&out.stdout)
        );
        Err(DaemonError::Failed {
            command: shown,
            status: out.status.to_string(),
            output: text.trim().to_string(),
        })
    }

    /// The pid of the running daemon, if its pid file names a live process.
    pub fn running_pid(&self) -> Option<i32> {
        let pid: i32 = std::fs::read_to_string(&self.pidfile)
            .ok()?
            .trim()
            .parse()
            .ok()?;
        (pid > 0 && alive(pid)).then_some(pid)
    }

    /// Sends `signal` to the running daemon; `false` when it is not running.
    pub fn signal(&self, signal: i32) -> bool {
        match self.running_pid() {
            // SAFETY: kill(2) has no memory-safety preconditions.
            Some(pid) => unsafe { libc::kill(pid, signal) == 0 },
            None => false,
        }
    }

    /// Stops the running daemon (SIGTERM, then waits up to `wait`); fine when it is not running.
    pub fn stop(&self, wait: Duration) -> Result<(), DaemonError> {
        let Some(pid) = self.running_pid() else {
            return Ok(());
        };
        // SAFETY: kill(2) has no memory-safety preconditions.
        unsafe { libc::kill(pid, libc::SIGTERM) };
        let start = Instant::now();
        while alive(pid) {
            if start.elapsed() > wait {
                return Err(DaemonError::DidNotStop {
                    binary: self.binary.display().to_string(),
                    pid,
                    after: wait,
                });
            }
            std::thread::sleep(Duration::from_millis(50));
        }
        let _ = std::fs::remove_file(&self.pidfile);
        Ok(())
    }

    /// The pid file's folder.
    pub fn dir(&self) -> &Path {
        self.pidfile.parent().unwrap_or(Path::new("."))
    }
}

fn alive(pid: i32) -> bool {
    // A zombie still answers kill(0); treat it as gone.
    if let Ok(stat) = std::fs::read_to_string(format!("/proc/{pid}/stat"))
        && let Some(state) = stat
            .rsplit(')')
            .next()
            .and_then(|s| s.split_whitespace().next())
    {
        return state != "Z";
    }
    // SAFETY: kill(2) with signal 0 only checks for existence.
    unsafe { libc::kill(pid, 0) == 0 }
}
