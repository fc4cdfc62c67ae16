//! Which Services select a runnable's pods. A Service's endpoints are computed on the API
//! server where the pods run, so a Service selecting pods of the control plane is useful only
//! there. Pure functions over manifests, no I/O.

use serde_json::{Map, Value};

use super::references::{DEFAULT_NAMESPACE, pod_spec};
use crate::domain::capability::K8sObject;

/// The labels a runnable of `kind` gives its pods (Pod, CronJob, or any kind with
/// `spec.template`).
fn pod_labels<'a>(kind: &str, value: &'a Value) -> Option<&'a Map<String, Value>> {
    let pointer = match kind {
        "Pod" => "/metadata/labels",
        "CronJob" => "/spec/jobTemplate/spec/template/metadata/labels",
        _ => "/spec/template/metadata/labels",
    };
    value.pointer(pointer).and_then(Value::as_object)
}

fn namespace(object: &K8sObject) -> &str {
    object
        .reference()
        .namespace
        .as_deref()
        .unwrap_or(DEFAULT_NAMESPACE)
}

/// `app=web,tier=front` when `service` selects the pods of `runnable`: same namespace, a
/// non-empty `spec.selector`, and every selector label on the pod template. `None` otherwise,
/// including Services without a selector (their endpoints are managed by hand).
pub(super) fn selects(service: &K8sObject, runnable: &K8sObject) -> Option<String> {
    if namespace(service) != namespace(runnable) {
        return None;
    }
    let selector = service
        .value()
        .pointer("/spec/selector")
        .and_then(Value::as_object)
        .filter(|s| !s.is_empty())?;
    let kind = &runnable.reference().kind;
    // A runnable without a pod spec (a malformed object) runs no pods to select.
    pod_spec(kind, runnable.value())?;
    let labels = pod_labels(kind, runnable.value())?;
    let mut shown = Vec::new();
    for (key, wanted) in selector {
        if labels.get(key) != Some(wanted) {
            return None;
        }
        shown.push(format!("{key}={}", wanted.as_str().unwrap_or_default()));
    }
    Some(shown.join(","))
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn obj(v: Value) -> K8sObject {
        K8sObject::new(v).unwrap()
    }

    fn service(namespace: &str, selector: Value) -> K8sObject {
        obj(json!({"apiVersion": "v1", "kind": "Service",
            "metadata": {"name": "web", "namespace": namespace},
            "spec": {"selector": selector, "ports": [{"port": 80}]}}))
    }

    fn deployment(labels: Value) -> K8sObject {
        obj(json!({"apiVersion": "apps/v1", "kind": "Deployment",
            "metadata": {"name": "web", "namespace": "shop"},
            "spec": {"selector": {"matchLabels": labels}, "template": {
                "metadata": {"labels": labels}, "spec": {"containers": [{"name": "c"}]}}}}))
    }

    #[test]
    fn a_service_selects_pods_carrying_every_label_of_its_selector() {
        let web = deployment(json!({"app": "web", "tier": "front"}));
        assert_eq!(
            selects(&service("shop", json!({"app": "web"})), &web).as_deref(),
            Some("app=web")
        );
        assert_eq!(
            selects(
                &service("shop", json!({"app": "web", "tier": "front"})),
                &web
            )
            .as_deref(),
            Some("app=web,tier=front")
        );
        assert_eq!(selects(&service("shop", json!({"app": "api"})), &web), None);
        assert_eq!(
            selects(&service("shop", json!({"app": "web", "x": "y"})), &web),
            None
        );
        assert_eq!(
            selects(&service("other", json!({"app": "web"})), &web),
            None
        );
        assert_eq!(selects(&service("shop", json!({})), &web), None);
    }

    #[test]
    fn pods_of_every_runnable_shape_are_matched() {
        let pod = obj(json!({"apiVersion": "v1", "kind": "Pod",
            "metadata": {"name": "p", "labels": {"app": "web"}},
            "spec": {"containers": [{"name": "c"}]}}));
        let cron = obj(json!({"apiVersion": "batch/v1", "kind": "CronJob",
            "metadata": {"name": "c", "namespace": "default"},
            "spec": {"jobTemplate": {"spec": {"template": {"metadata": {"labels": {"app": "web"}},
                "spec": {"containers": [{"name": "c"}]}}}}}}));
        let svc = service("default", json!({"app": "web"}));
        assert!(selects(&svc, &pod).is_some());
        assert!(selects(&svc, &cron).is_some());
    }
}
