//! The agent acting as its rolled-out ServiceAccount on a fixture API server: the rollout's
//! RBAC applied by the admin, a kubeconfig that impersonates the ServiceAccount, and the agent's
//! real executor (presence, containment, request records, ops) driven request by request.

use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

use harmony::infra::kube::KubeTarget;
use harmony_agent::cluster::Cluster;
use harmony_agent::exec::presence::Presence;
use harmony_agent::exec::record_store::RecordStore;
use harmony_agent::exec::{DedupeWindow, Executor};
use harmony_agent::providers::registry::{HealthPolicy, Registry, RegistryConfig};
use harmony_agent_protocol::{Frame, Req, Res};
use serde_json::{Value, json};
use tokio::sync::mpsc;

use crate::ApiServer;

/// Applies `objects` as the fixture's admin (server-side apply of one `v1 List`).
pub fn apply_as_admin(server: &ApiServer, dir: &Path, objects: &[Value]) -> Result<(), String> {
    let file = dir.join(format!("admin-apply-{}.json", std::process::id()));
    let list = json!({"apiVersion": "v1", "kind": "List", "items": objects});
    std::fs::write(&file, list.to_string()).map_err(|e| e.to_string())?;
    let out = server.kubectl(&["apply", "--server-side", "-f", &file.display().to_string()]);
    if out.status.success() {
        Ok(())
    } else {
        Err(format!(
            "kubectl apply as admin: {}",
            String::from_utf8_lossy(&out.stderr)
        ))
    }
}

/// The value of `key: value` on a line of the fixture's kubeconfig (clientcmd's YAML).
fn field(text: &str, key: &str) -> Result<String, String> {
    text.lines()
        .find_map(|l| l.trim().strip_prefix(&format!("{key}: ")))
        .map(|v| v.trim().to_string())
        .ok_or_else(|| format!("the fixture's kubeconfig has no {key}"))
}

/// Writes to `dir` a kubeconfig for `server` whose user is the admin impersonating
/// ServiceAccount `namespace/name` (`as`, and `as-groups` as the API server gives a
/// ServiceAccount: `system:serviceaccounts`, `system:serviceaccounts:<namespace>`,
/// `system:authenticated`).
pub fn impersonating_kubeconfig(
    server: &ApiServer,
    dir: &Path,
    namespace: &str,
    name: &str,
) -> Result<PathBuf, String> {
    let text = std::fs::read_to_string(server.kubeconfig()).map_err(|e| e.to_string())?;
    let config = json!({
        "apiVersion": "v1", "kind": "Config", "current-context": "sa",
        "clusters": [{"name": "fixture", "cluster": {
            "server": field(&text, "server")?,
            "certificate-authority-data": field(&text, "certificate-authority-data")?}}],
        "users": [{"name": "sa", "user": {
            "client-certificate-data": field(&text, "client-certificate-data")?,
            "client-key-data": field(&text, "client-key-data")?,
            "as": format!("system:serviceaccount:{namespace}:{name}"),
            "as-groups": ["system:serviceaccounts", format!("system:serviceaccounts:{namespace}"),
                          "system:authenticated"]}}],
        "contexts": [{"name": "sa", "context": {"cluster": "fixture", "user": "sa"}}]
    });
    let path = dir.join(format!("as-{namespace}-{name}.kubeconfig"));
    std::fs::write(&path, config.to_string()).map_err(|e| e.to_string())?;
    Ok(path)
}

/// The agent's executor on the cluster of `kubeconfig`, with its request records in
/// `namespace` and project presence binding `service_account`; no provider.
pub struct AgentExec {
    executor: Arc<Executor>,
    frames: mpsc::UnboundedReceiver<Frame>,
}

impl AgentExec {
    /// Builds it (nothing is contacted until the first request).
    pub fn new(
        kubeconfig: &Path,
        namespace: &str,
        service_account: Option<(String, String)>,
    ) -> Result<Self, String> {
        Self::with_presence(kubeconfig, namespace, Presence::new(service_account))
    }

    /// Like [`AgentExec::new`], with project presence configured by the caller (e.g. a short
    /// quota wait).
    pub fn with_presence(
        kubeconfig: &Path,
        namespace: &str,
        presence: Presence,
    ) -> Result<Self, String> {
        let cluster = Arc::new(Cluster::new(
            "region under test".into(),
            KubeTarget::Kubeconfig {
                path: Some(kubeconfig.to_path_buf()),
                context: None,
            },
        ));
        let (tx, frames) = mpsc::unbounded_channel();
        let registry = Registry::new(
            RegistryConfig {
                policy: HealthPolicy {
                    interval: Duration::from_secs(5),
                    unhealthy_after: Duration::from_secs(15),
                    unavailable_after: Duration::from_secs(30),
                },
                builtins: Vec::new(),
                file: None,
                discovery_interval: Duration::from_secs(30),
                instance_poll: Duration::from_secs(5),
            },
            cluster.clone(),
            harmony_agent::providers::external::http_client()?,
            tx.clone(),
        )?;
        let ttl = Duration::from_secs(3600);
        let records = Arc::new(RecordStore::new(cluster.clone(), namespace.into(), ttl));
        let executor = Executor::new(cluster, registry, DedupeWindow::new(256, ttl), records, tx)
            .with_presence(presence);
        Ok(Self {
            executor: Arc::new(executor),
            frames,
        })
    }

    /// Runs `req` as the agent does and returns its `res`.
    pub async fn run(&mut self, req: Req) -> Res {
        let id = req.id.clone();
        self.executor.submit(req);
        loop {
            match self.frames.recv().await {
                Some(Frame::Res(res)) if res.id == id => return res,
                Some(_) => {}
                None => panic!("the executor's outbox closed before request {id} was answered"),
            }
        }
    }
}

/// Plays kube-controller-manager's resourcequota controller, which the fixture does not run:
/// every ResourceQuota whose `status.hard` differs from its `spec.hard` gets its status filled
/// as the controller would (`status.hard` = `spec.hard`, `status.used` counted: `count/<r>` by
/// listing `<r>` in the namespace, anything else 0, as nothing runs on a fixture). From then on
/// the API server's quota admission keeps `status.used` itself. Runs on a thread of its own
/// until dropped.
pub struct QuotaControllerStandIn {
    stop: Arc<std::sync::atomic::AtomicBool>,
    thread: Option<std::thread::JoinHandle<()>>,
}

fn kubectl_json(binary: &Path, kubeconfig: &Path, args: &[&str]) -> Option<Value> {
    let out = std::process::Command::new(binary)
        .arg("kubectl")
        .args(args)
        .env("KUBECONFIG", kubeconfig)
        .stdin(std::process::Stdio::null())
        .output()
        .ok()?;
    out.status
        .success()
        .then(|| serde_json::from_slice(&out.stdout).ok())
        .flatten()
}

/// Fills the status of every quota of the cluster that needs it; returns how many it filled.
fn fill_quota_statuses(binary: &Path, kubeconfig: &Path) -> usize {
    let Some(list) = kubectl_json(
        binary,
        kubeconfig,
        &["get", "resourcequotas", "-A", "-o", "json"],
    ) else {
        return 0;
    };
    let mut filled = 0;
    for q in list["items"].as_array().into_iter().flatten() {
        let hard = &q["spec"]["hard"];
        if hard.is_null() || &q["status"]["hard"] == hard {
            continue;
        }
        let (Some(ns), Some(name)) = (
            q["metadata"]["namespace"].as_str(),
            q["metadata"]["name"].as_str(),
        ) else {
            continue;
        };
        let mut used = serde_json::Map::new();
        for key in hard.as_object().into_iter().flatten().map(|(k, _)| k) {
            let n = match key.strip_prefix("count/") {
                Some(resource) => kubectl_json(
                    binary,
                    kubeconfig,
                    &["get", resource, "-n", ns, "-o", "json"],
                )
                .and_then(|l| l["items"].as_array().map(Vec::len))
                .unwrap_or(0),
                None => 0,
            };
            used.insert(key.clone(), json!(n.to_string()));
        }
        let patch = json!({"status": {"hard": hard, "used": used}}).to_string();
        let ok = std::process::Command::new(binary)
            .arg("kubectl")
            .args([
                "patch",
                "resourcequota",
                name,
                "-n",
                ns,
                "--subresource=status",
                "--type=merge",
                "-p",
                &patch,
            ])
            .env("KUBECONFIG", kubeconfig)
            .stdin(std::process::Stdio::null())
            .output()
            .is_ok_and(|o| o.status.success());
        if ok {
            filled += 1;
        }
    }
    filled
}

impl QuotaControllerStandIn {
    /// Starts filling quota statuses on `server` (as its admin).
    pub fn start(server: &ApiServer) -> Result<Self, String> {
        let binary = ApiServer::binary()?;
        let kubeconfig = server.kubeconfig();
        let stop = Arc::new(std::sync::atomic::AtomicBool::new(false));
        let flag = stop.clone();
        let thread = std::thread::spawn(move || {
            while !flag.load(std::sync::atomic::Ordering::Relaxed) {
                fill_quota_statuses(&binary, &kubeconfig);
                std::thread::sleep(Duration::from_millis(200));
            }
        });
        Ok(Self {
            stop,
            thread: Some(thread),
        })
    }
}

impl Drop for QuotaControllerStandIn {
    fn drop(&mut self) {
        self.stop.store(true, std::sync::atomic::Ordering::Relaxed);
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
    }
}
