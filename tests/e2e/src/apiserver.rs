//! Starts real kube-apiserver processes (embedded etcd) from the `tests/kube-fixture` binary,
//! optionally with kube-controller-manager, kube-scheduler and kwok fake nodes
//! ([`ApiServer::start_with_controllers`]).

use std::io::Write;
use std::net::TcpListener;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Output, Stdio};
use std::time::Duration;

use harmony::domain::{RunContext, WaitPolicy};
use harmony::infra::kube::{K8sTopology, KubeTarget};

use crate::eventually::eventually_blocking;

/// How long a fixture may take from spawn to a written kubeconfig (cold etcd + apiserver).
const START_TIMEOUT: Duration = Duration::from_secs(180);

/// The same with `--controllers`: the fixture also starts three more processes and waits until
/// its nodes are Ready and untainted (the node-lifecycle controller's first passes).
const START_TIMEOUT_CONTROLLERS: Duration = Duration::from_secs(300);

/// How many kwok nodes [`ApiServer::start_with_controllers`] creates (the fixture's default).
pub const DEFAULT_NODES: usize = 3;

/// How to start an [`ApiServer`]; `Default` is what [`ApiServer::start`] does.
#[derive(Debug, Clone, Default)]
pub struct ApiServerOptions {
    /// Also run kube-controller-manager, kube-scheduler and kwok (`serve --controllers`), so
    /// Deployments get Pods, Pods get scheduled and run on fake nodes, Jobs finish, approved
    /// CSRs get certificates. See `tests/kube-fixture/README.md`.
    pub controllers: bool,
    /// With `controllers`: how many kwok nodes to create (`kwok-node-0`..); `None` means
    /// [`DEFAULT_NODES`].
    pub nodes: Option<usize>,
    /// Extra kube-apiserver flags (after `--`), e.g. an audit log.
    pub extra_flags: Vec<String>,
}

/// The real CRDs the tests install (`tests/crds`, inside the repository; sources in its
/// SOURCES.md).
pub fn crds_dir() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../crds")
}

/// One running API server with its own data dir and port; stopped on drop.
pub struct ApiServer {
    child: Child,
    dir: tempfile::TempDir,
    port: u16,
    binary: PathBuf,
    /// The fake nodes the fixture created (0 without controllers).
    nodes: usize,
}

impl ApiServer {
    /// The fixture binary: `$HARMONY_KUBE_FIXTURE`, else the build script's default location.
    pub fn binary() -> Result<PathBuf, String> {
        let path = match std::env::var_os("HARMONY_KUBE_FIXTURE") {
            Some(p) => PathBuf::from(p),
            None => {
                let home = std::env::var_os("HOME").ok_or("HOME is not set")?;
                PathBuf::from(home).join(".cache/harmony/kube-fixture/bin/kube-fixture")
            }
        };
        if path.is_file() {
            Ok(path)
        } else {
            Err(format!(
                "kube-apiserver fixture not found at {}; build it with `bash tests/kube-fixture/build.sh` (tests/run.sh does this) or set HARMONY_KUBE_FIXTURE",
                path.display()
            ))
        }
    }

    /// Starts a fresh API server and waits until it is ready.
    ///
    /// The port is picked free and then bound by the fixture, so another process can take it in
    /// between (tests run in parallel); that one failure is retried on a new port.
    pub fn start() -> Result<Self, String> {
        Self::start_with_flags(&[])
    }

    /// Like [`ApiServer::start`], passing `extra` flags to kube-apiserver (e.g. an audit log).
    pub fn start_with_flags(extra: &[String]) -> Result<Self, String> {
        Self::start_with_options(&ApiServerOptions {
            extra_flags: extra.to_vec(),
            ..ApiServerOptions::default()
        })
    }

    /// Starts an API server with kube-controller-manager, kube-scheduler and kwok, and
    /// [`DEFAULT_NODES`] Ready fake nodes ([`ApiServer::node_names`]); returns once the nodes
    /// are Ready and schedulable. Slower to start than [`ApiServer::start`] (a few seconds more
    /// and three more processes), so only for tests that need controllers.
    pub fn start_with_controllers() -> Result<Self, String> {
        Self::start_with_options(&ApiServerOptions {
            controllers: true,
            ..ApiServerOptions::default()
        })
    }

    /// Starts an API server as `options` say, and waits until it is ready.
    pub fn start_with_options(options: &ApiServerOptions) -> Result<Self, String> {
        let mut attempt = 0;
        loop {
            attempt += 1;
            match Self::start_once(options) {
                Err(e) if attempt < 4 && e.contains("address already in use") => continue,
                other => return other,
            }
        }
    }

    fn start_once(options: &ApiServerOptions) -> Result<Self, String> {
        let binary = Self::binary()?;
        let dir = tempfile::Builder::new()
            .prefix("harmony-apiserver-")
            .tempdir()
            .map_err(|e| format!("temp dir: {e}"))?;
        let port = free_port()?;
        let log =
            std::fs::File::create(dir.path().join("fixture.log")).map_err(|e| e.to_string())?;
        let log_err = log.try_clone().map_err(|e| e.to_string())?;
        let nodes = if options.controllers {
            options.nodes.unwrap_or(DEFAULT_NODES)
        } else {
            0
        };
        let mut command = Command::new(&binary);
        command
            .arg("serve")
            .arg("--dir")
            .arg(dir.path().join("data"))
            .arg("--port")
            .arg(port.to_string());
        if options.controllers {
            command.arg("--controllers").arg(format!("--nodes={nodes}"));
        }
        let child = command
            .arg("--")
            .args(&options.extra_flags)
            .stdin(Stdio::null())
            .stdout(log)
            .stderr(log_err)
            .spawn()
            .map_err(|e| format!("cannot start {}: {e}", binary.display()))?;
        let mut server = Self {
            child,
            dir,
            port,
            binary,
            nodes,
        };
        let timeout = if options.controllers {
            START_TIMEOUT_CONTROLLERS
        } else {
            START_TIMEOUT
        };
        server.wait_ready(timeout)?;
        Ok(server)
    }

    fn wait_ready(&mut self, timeout: Duration) -> Result<(), String> {
        let kubeconfig = self.kubeconfig();
        let child = &mut self.child;
        let ready = eventually_blocking(timeout, "the fixture to write its kubeconfig", || {
            if kubeconfig.is_file() {
                return Some(Ok(()));
            }
            match child.try_wait() {
                Ok(Some(status)) => Some(Err(format!(
                    "fixture exited with {status} before it was ready"
                ))),
                _ => None,
            }
        });
        match ready {
            Ok(Ok(())) => Ok(()),
            Ok(Err(exited)) => Err(format!("{exited}:\n{}", self.log_tail())),
            Err(w) => Err(format!("fixture not ready: {w}:\n{}", self.log_tail())),
        }
    }

    /// The fixture's process id, to read its CPU time from `/proc` (benchmarks).
    pub fn pid(&self) -> u32 {
        self.child.id()
    }

    /// The last lines of the fixture's log, for failure messages.
    pub fn log_tail(&self) -> String {
        let text = std::fs::read_to_string(self.dir.path().join("fixture.log")).unwrap_or_default();
        let lines: Vec<&str> = text.lines().collect();
        lines[lines.len().saturating_sub(30)..].join("\n")
    }

    /// The fixture's state directory (`serve --dir`): PKI, etcd data, and one log per
    /// component (`apiserver.log`; with controllers also `controller-manager.log`,
    /// `scheduler.log`, `kwok.log`).
    pub fn data_dir(&self) -> PathBuf {
        self.dir.path().join("data")
    }

    /// The whole log of one component (`"apiserver"`, `"controller-manager"`, `"scheduler"`,
    /// `"kwok"`); empty if it has none (yet). A child that died is reported in `"apiserver"`.
    pub fn component_log(&self, component: &str) -> String {
        std::fs::read_to_string(self.data_dir().join(format!("{component}.log")))
            .unwrap_or_default()
    }

    /// The last `lines` lines of each of `components`' logs (see [`Self::component_log`]), for
    /// failure messages.
    pub fn component_log_tails(&self, components: &[&str], lines: usize) -> String {
        components
            .iter()
            .map(|c| {
                let text = self.component_log(c);
                let all: Vec<&str> = text.lines().collect();
                format!(
                    "--- {c}.log (last lines)\n{}",
                    all[all.len().saturating_sub(lines)..].join("\n")
                )
            })
            .collect::<Vec<_>>()
            .join("\n")
    }

    /// The names of the kwok nodes the fixture created and waited Ready for (`kwok-node-0`..,
    /// labelled `type=kwok`); empty without controllers.
    pub fn node_names(&self) -> Vec<String> {
        (0..self.nodes).map(|i| format!("kwok-node-{i}")).collect()
    }

    /// The admin kubeconfig the fixture wrote.
    pub fn kubeconfig(&self) -> PathBuf {
        self.dir.path().join("data/kubeconfig")
    }

    /// `https://127.0.0.1:<port>`.
    pub fn url(&self) -> String {
        format!("https://127.0.0.1:{}", self.port)
    }

    /// A `K8sTopology` for this server. On a fixture without controllers nothing ever becomes
    /// current (no controller rolls a Deployment out), so its applies do not wait; the suites
    /// about waiting start the fixture with its controllers.
    pub fn topology(&self, name: &str, ctx: &RunContext) -> K8sTopology {
        let target = KubeTarget::Kubeconfig {
            path: Some(self.kubeconfig()),
            context: None,
        };
        let topology = K8sTopology::new(name, target, ctx);
        if self.nodes == 0 {
            topology.with_wait(WaitPolicy::disabled())
        } else {
            topology
        }
    }

    /// Runs the fixture's kubectl (same Kubernetes module set) against this server.
    pub fn kubectl(&self, args: &[&str]) -> Output {
        Command::new(&self.binary)
            .arg("kubectl")
            .args(args)
            .env("KUBECONFIG", self.kubeconfig())
            .stdin(Stdio::null())
            .output()
            .unwrap_or_else(|e| panic!("cannot run kubectl: {e}"))
    }

    /// Requests the API server has answered so far with `verb` (`APPLY`, `LIST`, `GET`, ...),
    /// for `resource` (`configmaps`) or every resource, counted from its own metrics
    /// (`apiserver_request_total`), so a test sees what was sent, not what a client reported.
    ///
    /// The server counts a request just after answering it, so a read made as soon as a client
    /// has its answer can miss it: the count is read until two reads 200 ms apart agree (for
    /// at most 10 s).
    pub fn requests_answered(&self, verb: &str, resource: Option<&str>) -> u64 {
        let mut last = self.requests_counted(verb, resource);
        let end = std::time::Instant::now() + Duration::from_secs(10);
        while std::time::Instant::now() < end {
            std::thread::sleep(Duration::from_millis(200));
            let now = self.requests_counted(verb, resource);
            if now == last {
                break;
            }
            last = now;
        }
        last
    }

    /// One read of the count [`Self::requests_answered`] settles.
    fn requests_counted(&self, verb: &str, resource: Option<&str>) -> u64 {
        let out = self.kubectl(&["get", "--raw", "/metrics"]);
        assert!(out.status.success(), "{out:?}");
        let verb = format!("verb=\"{verb}\"");
        let resource = resource.map(|r| format!("resource=\"{r}\""));
        String::from_utf8_lossy(&out.stdout)
            .lines()
            .filter(|l| l.starts_with("apiserver_request_total{") && l.contains(&verb))
            .filter(|l| resource.as_ref().is_none_or(|r| l.contains(r.as_str())))
            .filter_map(|l| l.rsplit(' ').next()?.parse::<f64>().ok())
            .sum::<f64>() as u64
    }

    /// Runs the fixture's kubectl with `stdin` as its standard input (e.g. `apply -f -`).
    pub fn kubectl_stdin(&self, args: &[&str], stdin: &str) -> Output {
        let mut child = Command::new(&self.binary)
            .arg("kubectl")
            .args(args)
            .env("KUBECONFIG", self.kubeconfig())
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .unwrap_or_else(|e| panic!("cannot run kubectl: {e}"));
        // kubectl may exit before reading everything (bad flags); its output tells why.
        let _ = child
            .stdin
            .take()
            .expect("piped stdin")
            .write_all(stdin.as_bytes());
        child
            .wait_with_output()
            .unwrap_or_else(|e| panic!("cannot wait for kubectl: {e}"))
    }

    /// `kubectl apply -f -` of `manifest` (YAML or JSON, several documents allowed).
    pub fn apply(&self, manifest: &str) -> Result<(), String> {
        let out = self.kubectl_stdin(&["apply", "-f", "-"], manifest);
        if out.status.success() {
            Ok(())
        } else {
            Err(format!(
                "kubectl apply: {}",
                String::from_utf8_lossy(&out.stderr)
            ))
        }
    }

    /// Installs the real CRDs from `tests/crds` and waits until they are Established.
    pub fn install_crds(&self) -> Result<(), String> {
        let dir = crds_dir();
        let files = [
            "postgresql.cnpg.io_clusters.yaml",
            "route.openshift.io_routes.yaml",
        ];
        for f in files {
            let path = dir.join(f);
            let out = self.kubectl(&["apply", "--server-side", "-f", &path.display().to_string()]);
            if !out.status.success() {
                return Err(format!(
                    "installing {}: {}",
                    path.display(),
                    String::from_utf8_lossy(&out.stderr)
                ));
            }
        }
        let out = self.kubectl(&[
            "wait",
            "--for=condition=Established",
            "--timeout=60s",
            "crd/clusters.postgresql.cnpg.io",
            "crd/routes.route.openshift.io",
        ]);
        if out.status.success() {
            Ok(())
        } else {
            Err(format!(
                "CRDs not established: {}",
                String::from_utf8_lossy(&out.stderr)
            ))
        }
    }
}

impl Drop for ApiServer {
    fn drop(&mut self) {
        // SIGTERM lets etcd close cleanly; SIGKILL only if it does not stop in time.
        let _ = Command::new("kill")
            .arg("-TERM")
            .arg(self.child.id().to_string())
            .status();
        if crate::command::wait_or_kill(&mut self.child, Duration::from_secs(10)).is_err() {
            let _ = self.child.kill();
            let _ = self.child.wait();
        }
    }
}

fn free_port() -> Result<u16, String> {
    let listener = TcpListener::bind("127.0.0.1:0").map_err(|e| format!("no free port: {e}"))?;
    listener
        .local_addr()
        .map(|a| a.port())
        .map_err(|e| e.to_string())
}
