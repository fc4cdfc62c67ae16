use async_trait::async_trait;
use kube::config::{KubeConfigOptions, Kubeconfig};
use kube::{Client, Config};
use std::path::PathBuf;
use std::time::Duration;
use tokio::sync::OnceCell;

use super::error::describe;
use super::resolve::KindCache;
use crate::domain::capability::SecretBytes;
use crate::domain::{
    ExecutionMode, PreparationError, PreparationOutcome, RunContext, Topology, WaitPolicy,
};

/// The field manager every server-side apply from Harmony uses.
pub const FIELD_MANAGER: &str = "harmony";

/// How long `ensure_ready` may take to reach the API server before failing.
const READY_TIMEOUT: Duration = Duration::from_secs(8);

/// Where the cluster's credentials come from.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum KubeTarget {
    /// `KUBECONFIG` / `~/.kube/config`, else the in-cluster service account.
    Infer,
    /// A kubeconfig file (or the default one when `None`) and optionally a named context.
    Kubeconfig {
        /// The file; `None` means `KUBECONFIG` or `~/.kube/config`.
        path: Option<PathBuf>,
        /// The context; `None` means the file's current context.
        context: Option<String>,
    },
    /// The pod's service account.
    InCluster,
    /// A kubeconfig document held in memory (read from a Secret, say); never printed.
    Inline(SecretBytes),
}

/// Objects applied at once unless `with_concurrency` says otherwise. Measured with `bench_apply
/// --objects 1000 --concurrency N` (2026-11-24, 2 cores, median of 6 runs, one request per
/// object): first apply 1.31 / 1.39 / 1.21 / 1.21 s and re-apply 1.36 / 1.22 / 1.16 / 1.19 s at
/// 8 / 16 / 32 / 64. The API server is CPU-bound by 32 requests in flight; 64 gains nothing and
/// holds twice the HTTP/1.1 connections (one TLS handshake each) and API Priority and Fairness
/// seats on a shared cluster.
pub const DEFAULT_CONCURRENCY: usize = 32;

/// A live Kubernetes cluster reached directly (kubeconfig or in-cluster).
pub struct K8sTopology {
    name: String,
    target: KubeTarget,
    plan: bool,
    prune: bool,
    force_conflicts: bool,
    skip_unchanged: bool,
    concurrency: usize,
    wait: WaitPolicy,
    field_manager: String,
    pub(super) connection: OnceCell<Connection>,
    pub(super) kinds: KindCache,
}

/// A client and the server URL it talks to (for messages).
pub(super) struct Connection {
    pub client: Client,
    pub server: String,
}

impl K8sTopology {
    /// A topology named `name` for `target`; nothing is contacted until `ensure_ready`.
    pub fn new(name: impl Into<String>, target: KubeTarget, ctx: &RunContext) -> Self {
        Self {
            name: name.into(),
            target,
            plan: ctx.plan,
            prune: ctx.prune,
            force_conflicts: ctx.force_conflicts,
            skip_unchanged: !ctx.no_skip,
            concurrency: DEFAULT_CONCURRENCY,
            wait: ctx.wait,
            field_manager: FIELD_MANAGER.to_string(),
            connection: OnceCell::new(),
            kinds: KindCache::default(),
        }
    }

    /// Sets how many objects are applied at once (default [`DEFAULT_CONCURRENCY`]).
    pub fn with_concurrency(mut self, n: usize) -> Self {
        self.concurrency = n.max(1);
        self
    }

    /// Sets whether and how long an apply waits for its objects to become current (default:
    /// the run context's, i.e. `--no-wait` / `--wait-timeout`).
    pub fn with_wait(mut self, wait: WaitPolicy) -> Self {
        self.wait = wait;
        self
    }

    /// Whether and how long an apply waits for its objects to become current.
    pub fn wait_policy(&self) -> WaitPolicy {
        self.wait
    }

    /// Sets the server-side apply field manager (default [`FIELD_MANAGER`]; the region agent
    /// uses `harmony-agent`).
    pub fn with_field_manager(mut self, manager: impl Into<String>) -> Self {
        self.field_manager = manager.into();
        self
    }

    pub(super) fn field_manager(&self) -> &str {
        &self.field_manager
    }

    /// The kube-rs client, after `ensure_ready`, for calls the `K8sClient` trait does not cover
    /// (listing nodes, probing `/version`).
    pub fn client(&self) -> Result<Client, crate::domain::capability::CapabilityError> {
        self.connection().map(|c| c.client.clone())
    }

    pub(super) fn concurrency(&self) -> usize {
        self.concurrency
    }

    pub(super) fn prune_enabled(&self) -> bool {
        self.prune
    }

    /// Whether an object the phase's LIST (or GET) shows provably unchanged is reported
    /// `unchanged` without its PATCH (default; `--no-skip` turns it off).
    pub(super) fn skip_unchanged(&self) -> bool {
        self.skip_unchanged
    }

    /// Whether the operator asked to take over conflicting fields for every apply.
    pub(super) fn force_all(&self) -> bool {
        self.force_conflicts
    }

    pub(super) fn dry_run(&self) -> bool {
        self.plan
    }

    pub(super) fn connection(
        &self,
    ) -> Result<&Connection, crate::domain::capability::CapabilityError> {
        self.connection.get().ok_or_else(|| {
            crate::domain::capability::CapabilityError::Unsupported {
                what: "a Kubernetes call before ensure_ready".into(),
                backend: format!("topology {}", self.name),
                reason: "run Scores through the Maestro, which prepares the topology first".into(),
            }
        })
    }

    async fn load_config(&self) -> Result<Config, String> {
        let mut config = match &self.target {
            KubeTarget::Infer => Config::infer().await.map_err(|e| {
                format!(
                    "no kubeconfig (KUBECONFIG or ~/.kube/config) and not in a cluster: {}",
                    describe(&e)
                )
            })?,
            KubeTarget::InCluster => Config::incluster()
                .map_err(|e| format!("in-cluster configuration: {}", describe(&e)))?,
            KubeTarget::Inline(yaml) => {
                let text = std::str::from_utf8(yaml.expose())
                    .map_err(|_| "the inline kubeconfig is not UTF-8 text".to_string())?;
                // The parser's message may quote the document, which holds credentials.
                let kc = Kubeconfig::from_yaml(text).map_err(|_| {
                    "the inline kubeconfig does not parse as a kubeconfig".to_string()
                })?;
                Config::from_custom_kubeconfig(kc, &KubeConfigOptions::default())
                    .await
                    .map_err(|e| format!("inline kubeconfig: {}", describe(&e)))?
            }
            KubeTarget::Kubeconfig { path, context } => {
                let options = KubeConfigOptions {
                    context: context.clone(),
                    ..Default::default()
                };
                let (kc, file) = match path {
                    Some(p) => (
                        Kubeconfig::read_from(p).map_err(|e| {
                            kubeconfig_failure(
                                &format!("--kubeconfig {}", p.display()),
                                &e,
                                "give --kubeconfig a kubeconfig file (`kubectl config view --raw` prints one)",
                            )
                        })?,
                        p.display().to_string(),
                    ),
                    None => {
                        let file = default_kubeconfig_name();
                        let kc = Kubeconfig::read().map_err(|e| {
                            kubeconfig_failure(
                                &format!("default kubeconfig {file}"),
                                &e,
                                "pass --kubeconfig FILE, or set KUBECONFIG to the kubeconfig's path",
                            )
                        })?;
                        (kc, file)
                    }
                };
                if let Some(name) = context {
                    check_context(&kc, name, &file)?;
                }
                Config::from_custom_kubeconfig(kc, &options)
                    .await
                    .map_err(|e| match context {
                        Some(c) => format!("kubeconfig {file}, context {c}: {}", describe(&e)),
                        None if kc_has_no_current_context(&e) => format!(
                            "{} {file}: no current context (an empty file has none); fix: set current-context in the file, or pass --context NAME",
                            if path.is_some() { "--kubeconfig" } else { "default kubeconfig" }
                        ),
                        None => format!("kubeconfig {file}: {}", describe(&e)),
                    })?
            }
        };
        config.connect_timeout = Some(Duration::from_secs(5));
        config.read_timeout = Some(Duration::from_secs(60));
        Ok(config)
    }
}

/// Why the first call to `server` failed: refused credentials and refusals say so (the server
/// answered); anything else is a connection failure.
fn unready(server: &str, e: &kube::Error) -> String {
    match e {
        kube::Error::Api(s) if s.code == 401 => format!(
            "API server {server} refused the credentials: {}; check the user's token or client certificate in the kubeconfig (or log in again)",
            describe(e)
        ),
        kube::Error::Api(_) => format!("API server {server} refused the request: {}", describe(e)),
        _ => {
            let why = describe(e);
            // rustls names the verdict (`UnknownIssuer`, `NotValidForName`), not the fix.
            let fix = if why.contains("invalid peer certificate") {
                "; the server's certificate is not one the kubeconfig's cluster trusts: set its certificate-authority-data (or certificate-authority) to the CA that signed it"
            } else {
                ""
            };
            format!("cannot reach API server {server}: {why}{fix}")
        }
    }
}

/// Why the kubeconfig `named` (`kubeconfig /path`, `default kubeconfig ~/.kube/config`) cannot
/// be loaded, naming the file once.
fn kubeconfig_failure(named: &str, e: &kube::config::KubeconfigError, fix: &str) -> String {
    match e {
        kube::config::KubeconfigError::ReadConfig(io, _) => {
            format!("cannot read {named}: {io}; fix: {fix}")
        }
        other => format!("{named}: {}; fix: {fix}", describe(other)),
    }
}

/// kube-rs's "failed to determine current context": an empty kubeconfig, or one without
/// `current-context`.
fn kc_has_no_current_context(e: &kube::config::KubeconfigError) -> bool {
    matches!(e, kube::config::KubeconfigError::CurrentContextNotSet)
}

/// How the default kubeconfig is named in messages: `$KUBECONFIG` (with its value) or
/// `~/.kube/config`.
fn default_kubeconfig_name() -> String {
    match std::env::var_os("KUBECONFIG") {
        Some(v) if !v.is_empty() => format!("$KUBECONFIG ({})", v.to_string_lossy()),
        _ => "~/.kube/config".to_string(),
    }
}

/// Fails naming the contexts `kc` has when `context` is not one of them.
pub(crate) fn check_context(kc: &Kubeconfig, context: &str, file: &str) -> Result<(), String> {
    if kc.contexts.iter().any(|c| c.name == context) {
        return Ok(());
    }
    let names: Vec<&str> = kc.contexts.iter().map(|c| c.name.as_str()).collect();
    let fix = match (names.first(), &kc.current_context) {
        (None, _) => format!(
            "add a context named {context} to {file}, or pass --kubeconfig with a file that has one"
        ),
        (Some(_), Some(current)) => format!(
            "pass one of them to --context, or leave --context out to use the current context ({current})"
        ),
        (Some(first), None) => format!("pass one of them to --context (e.g. --context {first})"),
    };
    let has = if names.is_empty() {
        "it has none".to_string()
    } else {
        format!("it has: {}", names.join(", "))
    };
    Err(format!(
        "--context {context}: no such context in {file}; {has}; fix: {fix}"
    ))
}

#[async_trait]
impl Topology for K8sTopology {
    fn name(&self) -> &str {
        &self.name
    }

    fn mode(&self) -> ExecutionMode {
        if self.plan {
            ExecutionMode::Plan
        } else {
            ExecutionMode::Apply
        }
    }

    async fn ensure_ready(&self) -> Result<PreparationOutcome, PreparationError> {
        let fail = |reason: String| PreparationError {
            topology: self.name.clone(),
            reason,
        };
        let config = self.load_config().await.map_err(fail)?;
        let server = config.cluster_url.to_string();
        let client = Client::try_from(config).map_err(|e| {
            fail(format!(
                "cannot build a client for {server}: {}",
                describe(&e)
            ))
        })?;
        let info = match tokio::time::timeout(READY_TIMEOUT, client.apiserver_version()).await {
            Ok(Ok(info)) => info,
            Ok(Err(e)) => return Err(fail(unready(&server, &e))),
            Err(_) => {
                return Err(fail(format!(
                    "cannot reach API server {server}: no answer within {}s",
                    READY_TIMEOUT.as_secs()
                )));
            }
        };
        let minor: u32 = info.minor.trim_end_matches('+').parse().unwrap_or(0);
        if info.major != "1" || minor < 22 {
            return Err(fail(format!(
                "API server {server} runs Kubernetes {}; server-side apply needs 1.22 or newer",
                info.git_version
            )));
        }
        let message = format!("connected to {server} (Kubernetes {})", info.git_version);
        let _ = self.connection.set(Connection { client, server });
        Ok(PreparationOutcome::Success(message))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const TWO_CONTEXTS: &str = "apiVersion: v1
kind: Config
current-context: staging
clusters:
- name: c
  cluster:
    server: https://127.0.0.1:1
contexts:
- name: staging
  context: {cluster: c, user: u}
- name: prod-eu
  context: {cluster: c, user: u}
users:
- name: u
  user: {token: not-a-real-token}
";

    #[tokio::test(flavor = "multi_thread")]
    async fn unknown_context_lists_the_contexts_of_the_file() {
        let dir = tempfile::tempdir().unwrap();
        let file = dir.path().join("kubeconfig");
        std::fs::write(&file, TWO_CONTEXTS).unwrap();
        let topo = K8sTopology::new(
            "k",
            KubeTarget::Kubeconfig {
                path: Some(file.clone()),
                context: Some("prod".into()),
            },
            &RunContext::default(),
        );
        let err = topo.ensure_ready().await.unwrap_err().to_string();
        assert!(
            err.contains(&format!(
                "--context prod: no such context in {}; it has: staging, prod-eu",
                file.display()
            )),
            "{err}"
        );
        assert!(err.contains("leave --context out"), "{err}");
        assert!(!err.contains("not-a-real-token"), "{err}");
    }

    #[test]
    fn a_known_context_passes_and_an_empty_file_says_it_has_none() {
        let kc = Kubeconfig::from_yaml(TWO_CONTEXTS).unwrap();
        assert!(check_context(&kc, "prod-eu", "f").is_ok());
        let err = check_context(&Kubeconfig::default(), "x", "f").unwrap_err();
        assert!(err.contains("no such context in f; it has none"), "{err}");
    }
}
