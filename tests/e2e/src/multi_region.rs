//! Multi-region harness: a CA and server certificate made with rcgen, and real control-plane and
//! agent processes on loopback, each logging to its own file.

use std::net::{SocketAddr, TcpListener};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, ExitStatus, Stdio};
use std::time::Duration;

use harmony::infra::control_plane::ControlPlaneClient;
use harmony_agent_protocol::SecretString;

use crate::eventually::eventually_blocking;

/// How long a control plane may take to accept connections.
const START_TIMEOUT: Duration = Duration::from_secs(30);

/// A CA and a server certificate for `127.0.0.1` and `localhost`, as PEM files.
pub struct Pki {
    dir: tempfile::TempDir,
    /// The CA certificate (PEM).
    pub ca_pem: String,
}

impl Pki {
    /// Makes a fresh CA and a server certificate signed by it.
    pub fn new() -> Result<Self, String> {
        use rcgen::{BasicConstraints, CertificateParams, DnType, IsCa, KeyPair, KeyUsagePurpose};
        let e = |e: rcgen::Error| e.to_string();
        let ca_key = KeyPair::generate().map_err(e)?;
        let mut ca_params = CertificateParams::new(Vec::<String>::new()).map_err(e)?;
        ca_params.is_ca = IsCa::Ca(BasicConstraints::Unconstrained);
        ca_params
            .distinguished_name
            .push(DnType::CommonName, "harmony test CA");
        ca_params.key_usages = vec![KeyUsagePurpose::KeyCertSign, KeyUsagePurpose::CrlSign];
        let ca = ca_params.self_signed(&ca_key).map_err(e)?;
        let issuer = rcgen::Issuer::new(ca_params, ca_key);
        let key = KeyPair::generate().map_err(e)?;
        let mut params =
            CertificateParams::new(vec!["localhost".to_string(), "127.0.0.1".to_string()])
                .map_err(e)?;
        params
            .distinguished_name
            .push(DnType::CommonName, "harmony control plane");
        let cert = params.signed_by(&key, &issuer).map_err(e)?;
        let dir = tempfile::Builder::new()
            .prefix("harmony-pki-")
            .tempdir()
            .map_err(|e| e.to_string())?;
        let write = |name: &str, text: &str| {
            std::fs::write(dir.path().join(name), text).map_err(|e| e.to_string())
        };
        write("ca.pem", &ca.pem())?;
        write("cert.pem", &cert.pem())?;
        write("key.pem", &key.serialize_pem())?;
        Ok(Self {
            ca_pem: ca.pem(),
            dir,
        })
    }

    /// The CA file agents trust.
    pub fn ca(&self) -> PathBuf {
        self.dir.path().join("ca.pem")
    }

    /// The server certificate file.
    pub fn cert(&self) -> PathBuf {
        self.dir.path().join("cert.pem")
    }

    /// The server key file.
    pub fn key(&self) -> PathBuf {
        self.dir.path().join("key.pem")
    }
}

/// A free loopback port.
pub fn free_port() -> Result<u16, String> {
    let l = TcpListener::bind("127.0.0.1:0").map_err(|e| e.to_string())?;
    l.local_addr().map(|a| a.port()).map_err(|e| e.to_string())
}

/// A random token-like string.
pub fn random_text(prefix: &str) -> String {
    let mut b = [0u8; 24];
    getrandom_fill(&mut b);
    format!(
        "{prefix}{}",
        b.iter().map(|x| format!("{x:02x}")).collect::<String>()
    )
}

fn getrandom_fill(b: &mut [u8]) {
    // /dev/urandom keeps the harness free of another dependency.
    use std::io::Read;
    if let Ok(mut f) = std::fs::File::open("/dev/urandom") {
        let _ = f.read_exact(b);
    }
}

/// Options of a control-plane process.
#[derive(Debug, Clone)]
pub struct ControlPlaneOptions {
    /// PostgreSQL URL of the shared store (`--database-url`); SQLite in the process's own state
    /// folder (`--db`) when `None`.
    pub database_url: Option<String>,
    /// This replica's name (`--replica-id`); the control plane picks one when `None`.
    pub replica_id: Option<String>,
    /// The admin token; a fresh random one when `None`. Replicas of one store share theirs.
    pub admin_token: Option<String>,
    /// Heartbeat interval (ms).
    pub heartbeat_ms: u64,
    /// Unhealthy threshold (ms).
    pub unhealthy_after_ms: u64,
    /// Unavailable threshold (ms).
    pub unavailable_after_ms: u64,
    /// Extra arguments (e.g. `-vv`).
    pub extra_args: Vec<String>,
    /// `RUST_LOG` for the process (unset when `None`).
    pub rust_log: Option<String>,
    /// The process's open-file limit (soft and hard `RLIMIT_NOFILE`); inherited when `None`.
    pub open_files: Option<u64>,
}

impl Default for ControlPlaneOptions {
    fn default() -> Self {
        Self {
            database_url: None,
            replica_id: None,
            admin_token: None,
            heartbeat_ms: 200,
            unhealthy_after_ms: 600,
            unavailable_after_ms: 1500,
            extra_args: Vec::new(),
            rust_log: None,
            open_files: None,
        }
    }
}

/// A control-plane process with its state folder, admin token and log file.
pub struct ControlPlane {
    child: Option<Child>,
    dir: tempfile::TempDir,
    /// The bound address.
    pub addr: SocketAddr,
    /// The admin token.
    pub admin_token: String,
    options: ControlPlaneOptions,
    binary: PathBuf,
    cert: PathBuf,
    key: PathBuf,
    ca_pem: String,
    starts: u32,
}

impl ControlPlane {
    /// Starts `binary` (the control plane) on a free loopback port and waits until it accepts
    /// connections. Tests pass `env!("CARGO_BIN_EXE_e2e-control-plane")`.
    pub fn start(binary: &Path, pki: &Pki, options: ControlPlaneOptions) -> Result<Self, String> {
        let dir = tempfile::Builder::new()
            .prefix("harmony-cp-")
            .tempdir()
            .map_err(|e| e.to_string())?;
        let admin_token = options
            .admin_token
            .clone()
            .unwrap_or_else(|| random_text("admin-"));
        std::fs::write(dir.path().join("admin-token"), &admin_token).map_err(|e| e.to_string())?;
        let port = free_port()?;
        let mut cp = Self {
            child: None,
            dir,
            addr: SocketAddr::from(([127, 0, 0, 1], port)),
            admin_token,
            options,
            binary: binary.to_path_buf(),
            cert: pki.cert(),
            key: pki.key(),
            ca_pem: pki.ca_pem.clone(),
            starts: 0,
        };
        cp.spawn()?;
        Ok(cp)
    }

    fn spawn(&mut self) -> Result<(), String> {
        self.starts += 1;
        let log = self.dir.path().join(format!("cp-{}.log", self.starts));
        let out = std::fs::File::create(&log).map_err(|e| e.to_string())?;
        let err = out.try_clone().map_err(|e| e.to_string())?;
        let o = &self.options;
        let mut cmd = Command::new(&self.binary);
        cmd.arg("--listen")
            .arg(self.addr.to_string())
            .arg("--tls-cert")
            .arg(&self.cert)
            .arg("--tls-key")
            .arg(&self.key)
            .arg("--admin-token-file")
            .arg(self.dir.path().join("admin-token"))
            .arg("--heartbeat-ms")
            .arg(o.heartbeat_ms.to_string())
            .arg("--unhealthy-after-ms")
            .arg(o.unhealthy_after_ms.to_string())
            .arg("--unavailable-after-ms")
            .arg(o.unavailable_after_ms.to_string())
            .args(&o.extra_args)
            .env_remove("RUST_LOG")
            .stdin(Stdio::null())
            .stdout(out)
            .stderr(err);
        match &o.database_url {
            Some(url) => cmd.arg("--database-url").arg(url),
            None => cmd.arg("--db").arg(self.dir.path().join("state.sqlite")),
        };
        if let Some(id) = &o.replica_id {
            cmd.arg("--replica-id").arg(id);
        }
        if let Some(l) = &o.rust_log {
            cmd.env("RUST_LOG", l);
        }
        if let Some(n) = o.open_files {
            use std::os::unix::process::CommandExt;
            let limit = libc::rlimit {
                rlim_cur: n,
                rlim_max: n,
            };
            // SAFETY: setrlimit is async-signal-safe and only reads `limit`, which is copied
            // into the closure.
            unsafe {
                cmd.pre_exec(move || {
                    if libc::setrlimit(libc::RLIMIT_NOFILE, &limit) == 0 {
                        Ok(())
                    } else {
                        Err(std::io::Error::last_os_error())
                    }
                });
            }
        }
        let child = cmd
            .spawn()
            .map_err(|e| format!("cannot start {}: {e}", self.binary.display()))?;
        let child = self.child.insert(child);
        crate::command::wait_listening(child, self.addr, "the control plane", START_TIMEOUT)
            .map_err(|e| format!("{e}:\n{}", self.logs()))
    }

    /// The process id, while it runs.
    pub fn pid(&self) -> Option<u32> {
        self.child.as_ref().map(Child::id)
    }

    /// `https://127.0.0.1:<port>`.
    pub fn url(&self) -> String {
        format!("https://{}", self.addr)
    }

    /// An admin client trusting the test CA.
    pub fn client(&self) -> ControlPlaneClient {
        ControlPlaneClient::new(
            &self.url(),
            SecretString::new(self.admin_token.clone()),
            Some(self.ca_pem.as_bytes()),
        )
        .unwrap_or_else(|e| panic!("{e}"))
    }

    /// Kills the process with SIGKILL.
    pub fn kill9(&mut self) {
        if let Some(mut c) = self.child.take() {
            let _ = c.kill();
            let _ = c.wait();
        }
    }

    /// Starts the process again on the same port with the same state.
    pub fn restart(&mut self) -> Result<(), String> {
        self.kill9();
        self.spawn()
    }

    /// Starts the process again after [`Self::kill9`] (nothing happens while it runs).
    pub fn start_again(&mut self) -> Result<(), String> {
        match self.child {
            Some(_) => Ok(()),
            None => self.spawn(),
        }
    }

    /// Whether the process runs (was started and has not exited).
    pub fn is_running(&mut self) -> bool {
        self.child
            .as_mut()
            .is_some_and(|c| matches!(c.try_wait(), Ok(None)))
    }

    /// The replica name given in the options, if any.
    pub fn replica_id(&self) -> Option<&str> {
        self.options.replica_id.as_deref()
    }

    /// Every log file of every start, concatenated.
    pub fn logs(&self) -> String {
        (1..=self.starts)
            .map(|i| {
                std::fs::read_to_string(self.dir.path().join(format!("cp-{i}.log")))
                    .unwrap_or_default()
            })
            .collect::<Vec<_>>()
            .join("\n")
    }

    /// The state folder (database, admin token).
    pub fn dir(&self) -> &Path {
        self.dir.path()
    }
}

impl Drop for ControlPlane {
    fn drop(&mut self) {
        self.kill9();
    }
}

/// Options of an agent process.
#[derive(Debug, Clone)]
pub struct AgentOptions {
    /// Control-plane URL.
    pub url: String,
    /// Region.
    pub region: String,
    /// Zone.
    pub zone: String,
    /// CA bundle.
    pub ca: PathBuf,
    /// Bootstrap token file.
    pub bootstrap_token_file: Option<PathBuf>,
    /// Identity file.
    pub identity_file: PathBuf,
    /// Keep the identity in this Secret (namespace, name) instead of the file.
    pub identity_secret: Option<(String, String)>,
    /// Kubeconfig of the fixture API server.
    pub kubeconfig: PathBuf,
    /// Backoff base (ms).
    pub backoff_base_ms: u64,
    /// Backoff cap (ms).
    pub backoff_max_ms: u64,
    /// Extra arguments.
    pub extra_args: Vec<String>,
    /// `RUST_LOG` (unset when `None`).
    pub rust_log: Option<String>,
}

impl AgentOptions {
    /// An agent of `region`/`zone` dialling `url` (trusting `ca`), operating the API server of
    /// `kubeconfig` and keeping its identity in `identity_file`; no bootstrap token, backoff
    /// 200 ms to 2 s (quick reconnects for tests), no extra arguments.
    pub fn new(
        url: &str,
        region: &str,
        zone: &str,
        ca: PathBuf,
        kubeconfig: PathBuf,
        identity_file: PathBuf,
    ) -> Self {
        Self {
            url: url.into(),
            region: region.into(),
            zone: zone.into(),
            ca,
            bootstrap_token_file: None,
            identity_file,
            identity_secret: None,
            kubeconfig,
            backoff_base_ms: 200,
            backoff_max_ms: 2000,
            extra_args: Vec::new(),
            rust_log: None,
        }
    }
}

/// An agent process logging to a file.
pub struct Agent {
    child: Option<Child>,
    log: PathBuf,
    status: Option<ExitStatus>,
}

impl Agent {
    /// Starts `binary` (the agent) logging to `log`. Tests pass `env!("CARGO_BIN_EXE_e2e-agent")`.
    pub fn start(binary: &Path, o: &AgentOptions, log: &Path) -> Result<Self, String> {
        let out = std::fs::OpenOptions::new()
            .create(true)
            .append(true)
            .open(log)
            .map_err(|e| e.to_string())?;
        let err = out.try_clone().map_err(|e| e.to_string())?;
        let mut cmd = Command::new(binary);
        cmd.arg("--control-plane")
            .arg(&o.url)
            .arg("--region")
            .arg(&o.region)
            .arg("--zone")
            .arg(&o.zone)
            .arg("--ca-bundle")
            .arg(&o.ca)
            .arg("--kubeconfig")
            .arg(&o.kubeconfig)
            .arg("--backoff-base-ms")
            .arg(o.backoff_base_ms.to_string())
            .arg("--backoff-max-ms")
            .arg(o.backoff_max_ms.to_string())
            .args(&o.extra_args)
            .env_remove("RUST_LOG")
            .stdin(Stdio::null())
            .stdout(out)
            .stderr(err);
        match &o.identity_secret {
            Some((namespace, name)) => {
                cmd.arg("--identity-secret")
                    .arg(name)
                    .arg("--namespace")
                    .arg(namespace);
            }
            None => {
                cmd.arg("--identity-file").arg(&o.identity_file);
            }
        }
        if let Some(t) = &o.bootstrap_token_file {
            cmd.arg("--bootstrap-token-file").arg(t);
        }
        if let Some(l) = &o.rust_log {
            cmd.env("RUST_LOG", l);
        }
        let child = cmd
            .spawn()
            .map_err(|e| format!("cannot start {}: {e}", binary.display()))?;
        Ok(Self {
            child: Some(child),
            log: log.to_path_buf(),
            status: None,
        })
    }

    /// Kills the process with SIGKILL.
    pub fn kill9(&mut self) {
        if let Some(mut c) = self.child.take() {
            let _ = c.kill();
            self.status = c.wait().ok();
        }
    }

    /// Sends SIGTERM and waits up to `timeout` for the exit.
    pub fn terminate(&mut self, timeout: Duration) -> Option<ExitStatus> {
        if let Some(c) = &self.child {
            let _ = Command::new("kill")
                .arg("-TERM")
                .arg(c.id().to_string())
                .status();
        }
        self.wait_exit(timeout)
    }

    /// Waits up to `timeout` for the process to exit by itself.
    pub fn wait_exit(&mut self, timeout: Duration) -> Option<ExitStatus> {
        eventually_blocking(timeout, "the agent to exit", || {
            if let Some(c) = self.child.as_mut()
                && let Ok(Some(s)) = c.try_wait()
            {
                self.status = Some(s);
                self.child = None;
            }
            self.status
        })
        .ok()
    }

    /// The log so far.
    pub fn log(&self) -> String {
        std::fs::read_to_string(&self.log).unwrap_or_default()
    }
}

impl Drop for Agent {
    fn drop(&mut self) {
        self.kill9();
    }
}
