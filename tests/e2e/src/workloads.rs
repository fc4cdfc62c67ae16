//! Manifests and status helpers of the tests about waiting for applied objects to be current
//! (ADR 0021), directly (`tests/kube_wait.rs`) and through a region agent
//! (`tests/agent_wait.rs`). Workloads run on the kube-fixture with controllers, where kwok plays
//! the kubelets and the `harmony.test/fail` annotation makes a pod fail as a kubelet reports it.

use std::time::Duration;

use harmony::domain::ObjectChange;
use harmony::domain::capability::{ApplyFailure, CapabilityError, K8sObject, ObjectStatus};
use serde_json::{Value, json};

/// The values as objects (panics on one that is not a Kubernetes object).
pub fn objects(values: Vec<Value>) -> Vec<K8sObject> {
    values
        .into_iter()
        .map(|v| K8sObject::new(v).unwrap())
        .collect()
}

/// A Namespace `ns`.
pub fn namespace(ns: &str) -> Value {
    json!({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": ns}})
}

/// A ConfigMap `ns/name` with one key.
pub fn config_map(ns: &str, name: &str) -> Value {
    json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": name, "namespace": ns},
        "data": {"k": "v"}})
}

/// Pod template labelled `app: NAME`, annotated with a kwok failure stage when `fail` is set
/// (`crashloop`, `image-pull`, `exit`), and scheduled only where `node_selector` says when it
/// is set.
pub fn template(name: &str, fail: Option<&str>, node_selector: Option<Value>) -> Value {
    let mut t = json!({
        "metadata": {"labels": {"app": name}},
        "spec": {"containers": [{"name": "app", "image": "registry.example/app:1"}]}
    });
    if let Some(mode) = fail {
        t["metadata"]["annotations"] = json!({"harmony.test/fail": mode});
    }
    if let Some(sel) = node_selector {
        t["spec"]["nodeSelector"] = sel;
    }
    t
}

/// A Deployment `ns/name` of `replicas` pods from `template`.
pub fn deployment(ns: &str, name: &str, replicas: u32, template: Value) -> Value {
    json!({"apiVersion": "apps/v1", "kind": "Deployment",
        "metadata": {"name": name, "namespace": ns},
        "spec": {"replicas": replicas, "selector": {"matchLabels": {"app": name}},
                 "template": template}})
}

/// A Job `ns/name` with no retries, its pod failing as `fail` says when set.
pub fn job(ns: &str, name: &str, fail: Option<&str>) -> Value {
    let mut t = template(name, fail, None);
    t["spec"]["restartPolicy"] = json!("Never");
    json!({"apiVersion": "batch/v1", "kind": "Job", "metadata": {"name": name, "namespace": ns},
        "spec": {"backoffLimit": 0, "template": t}})
}

/// A 1 Gi ReadWriteOnce claim `ns/name` (it stays Pending: the fixture has no provisioner).
pub fn claim(ns: &str, name: &str) -> Value {
    json!({"apiVersion": "v1", "kind": "PersistentVolumeClaim",
        "metadata": {"name": name, "namespace": ns},
        "spec": {"accessModes": ["ReadWriteOnce"], "resources": {"requests": {"storage": "1Gi"}}}})
}

/// The waited status of `object` (`apps/v1 Deployment shop/web`) among `changes` (panics when
/// it has none).
pub fn status_of<'a>(changes: &'a [ObjectChange], object: &str) -> &'a ObjectStatus {
    &changes
        .iter()
        .find(|c| c.object == object)
        .and_then(|c| c.status.as_ref())
        .unwrap_or_else(|| panic!("no status for {object} in {changes:#?}"))
        .status
}

/// An object's status, the wait's timeout when it ran out of time, and what was applied.
pub type NotCurrent = (
    Vec<(String, ObjectStatus)>,
    Option<Duration>,
    Vec<ObjectChange>,
);

/// The apply's failure: the objects named not current, whether it was the timeout, and the
/// changes applied (panics on any other error).
pub fn not_current(f: ApplyFailure) -> NotCurrent {
    match f.error {
        CapabilityError::NotCurrent { objects, timed_out } => (objects, timed_out, f.applied),
        other => panic!("expected NotCurrent, got {other}"),
    }
}
