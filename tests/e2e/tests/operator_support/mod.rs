//! What the operator's suites share (`operator.rs`, `operator_ha.rs`, `operator_health.rs`, `operator_switchover.rs`): kubectl on the
//! fixture API servers, polling, the operator's CRDs, and reading conditions.

#![allow(
    dead_code,
    reason = "each suite is its own crate and uses a part of this module"
)]

use serde_json::Value;
use std::time::Duration;

use harmony_e2e::ApiServer;
use harmony_e2e::eventually::{Seen, eventually_blocking};

/// Runs kubectl, failing the test with its message.
pub(crate) fn kubectl_ok(server: &ApiServer, args: &[&str]) -> String {
    let out = server.kubectl(args);
    assert!(
        out.status.success(),
        "kubectl {args:?}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8_lossy(&out.stdout).into_owned()
}

/// Applies `yaml` with kubectl (server-side), failing the test with kubectl's message.
pub(crate) fn apply_ok(server: &ApiServer, yaml: &str) {
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("manifest.yaml");
    std::fs::write(&file, yaml).unwrap();
    kubectl_ok(
        server,
        &["apply", "--server-side", "-f", &file.display().to_string()],
    );
}

/// `kubectl get ARGS -o json`, `None` when it fails (not found).
pub(crate) fn get_json(server: &ApiServer, args: &[&str]) -> Option<Value> {
    let mut full = vec!["get"];
    full.extend_from_slice(args);
    full.extend_from_slice(&["-o", "json"]);
    let out = server.kubectl(&full);
    out.status
        .success()
        .then(|| serde_json::from_slice(&out.stdout).unwrap())
}

/// [`eventually_blocking`] until `check` returns Some, or fails naming `what` with the last
/// value seen (the check's second value).
pub(crate) fn wait_for<T>(
    what: &str,
    timeout: Duration,
    mut check: impl FnMut() -> (Option<T>, String),
) -> T {
    eventually_blocking(timeout, what, || match check() {
        (Some(v), _) => Ok(v),
        (None, last) => Err(Seen(last)),
    })
    .unwrap_or_else(|w| panic!("{w}"))
}

/// A fixture API server; with `crds`, the real CloudNativePG and Route CRDs (a site).
pub(crate) fn start(crds: bool) -> ApiServer {
    let s = ApiServer::start().unwrap_or_else(|e| panic!("{e}"));
    if crds {
        s.install_crds().unwrap_or_else(|e| panic!("{e}"));
    }
    s
}

/// The control plane's API server with the operator's CRDs and its namespaces.
pub(crate) fn control_plane() -> ApiServer {
    let cp = start(false);
    apply_ok(&cp, &harmony_operator::crds_yaml().unwrap());
    kubectl_ok(
        &cp,
        &[
            "wait",
            "--for=condition=Established",
            "--timeout=60s",
            "crd/multisitepostgresqls.harmony.io",
            "crd/postgresqls.harmony.io",
            "crd/regionagents.harmony.io",
            "crd/sites.harmony.io",
        ],
    );
    kubectl_ok(&cp, &["create", "namespace", "harmony-system"]);
    kubectl_ok(&cp, &["create", "namespace", "tenant-a"]);
    cp
}

/// Declares `site` on the control plane as `name`, reached with its kubeconfig Secret.
pub(crate) fn declare_site(cp: &ApiServer, name: &str, site: &ApiServer) {
    use base64::Engine;
    let kubeconfig = std::fs::read_to_string(site.kubeconfig()).unwrap();
    let yaml = format!(
        "apiVersion: v1\nkind: Secret\nmetadata: {{name: {name}-kubeconfig, namespace: harmony-system}}\ndata: {{kubeconfig: {}}}\n---\n\
         apiVersion: harmony.io/v1alpha1\nkind: Site\nmetadata: {{name: {name}}}\nspec: {{kubeconfigSecret: {{namespace: harmony-system, name: {name}-kubeconfig}}}}\n",
        base64::engine::general_purpose::STANDARD.encode(kubeconfig)
    );
    apply_ok(cp, &yaml);
}

/// The `finance-db` `MultisitePostgreSQL` in `tenant-a` as the API server has it.
pub(crate) fn finance_db(cp: &ApiServer) -> Value {
    get_json(
        cp,
        &[
            "multisitepostgresqls.harmony.io",
            "finance-db",
            "-n",
            "tenant-a",
        ],
    )
    .unwrap_or_default()
}

/// A condition's (status, reason, message); empty strings when absent.
pub(crate) fn condition(resource: &Value, type_: &str) -> (String, String, String) {
    resource["status"]["conditions"]
        .as_array()
        .and_then(|cs| cs.iter().find(|c| c["type"] == type_))
        .map(|c| {
            let s = |k: &str| c[k].as_str().unwrap_or_default().to_string();
            (s("status"), s("reason"), s("message"))
        })
        .unwrap_or_default()
}
