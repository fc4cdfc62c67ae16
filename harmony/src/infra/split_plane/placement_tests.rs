//! Unit tests of `placement.rs`, kept apart so the rules stay readable on their own.

use super::*;
use serde_json::{Value, json};

fn obj(v: Value) -> K8sObject {
    K8sObject::new(v).unwrap()
}

fn api_version(group: &str) -> String {
    if group.is_empty() {
        "v1".into()
    } else {
        format!("{group}/v1")
    }
}

/// A minimal object of a built-in kind named `x` (in namespace `x` when namespaced).
fn of_kind(k: &BuiltinKind) -> K8sObject {
    let mut v = json!({"apiVersion": api_version(k.group), "kind": k.kind,
        "metadata": {"name": "x"}});
    if k.namespaced {
        v["metadata"]["namespace"] = json!("x");
    }
    if k.rule == KindRule::Binding {
        let role = if k.kind == "RoleBinding" {
            "Role"
        } else {
            "ClusterRole"
        };
        v["roleRef"] = json!({"apiGroup": RBAC, "kind": role, "name": "r"});
        v["subjects"] = json!([{"kind": "ServiceAccount", "name": "x", "namespace": "x"}]);
    }
    if k.rule == KindRule::SelectsPods {
        v["spec"] = json!({"selector": {"app": "x"}});
    }
    obj(v)
}

/// A Deployment in namespace `x` using ServiceAccount, ConfigMap, Secret and
/// PersistentVolumeClaim `x`, its pods labelled `app: x`.
fn consumer() -> K8sObject {
    obj(json!({"apiVersion": "apps/v1", "kind": "Deployment",
        "metadata": {"name": "consumer", "namespace": "x"},
        "spec": {"selector": {}, "template": {"metadata": {"labels": {"app": "x"}},
          "spec": {"serviceAccountName": "x",
            "volumes": [{"name": "v", "configMap": {"name": "x"}},
                        {"name": "d", "persistentVolumeClaim": {"claimName": "x"}}],
            "containers": [{"name": "c", "envFrom": [{"secretRef": {"name": "x"}}]}]}}}}))
}

fn binding(kind: &str, role_kind: &str) -> K8sObject {
    let mut b = json!({"apiVersion": "rbac.authorization.k8s.io/v1", "kind": kind,
        "metadata": {"name": "b", "namespace": "x"},
        "roleRef": {"apiGroup": RBAC, "kind": role_kind, "name": "x"},
        "subjects": [{"kind": "ServiceAccount", "name": "x", "namespace": "x"}]});
    if kind == "ClusterRoleBinding" {
        b["metadata"].as_object_mut().unwrap().remove("namespace");
    }
    obj(b)
}

fn placed(objects: &[K8sObject]) -> Vec<Decision> {
    place(objects, &KindOverrides::new()).unwrap()
}

#[test]
fn every_builtin_kind_has_a_known_plane_alone_and_next_to_a_pod_that_uses_it() {
    use Placement::{Control, Data};
    let mut checked = 0;
    for k in BUILTIN_KINDS {
        // (alone, in the company of a control-plane pod that uses it)
        let (alone, used) = match (k.group, k.kind) {
            ("", "Pod")
            | ("apps", "Deployment")
            | ("apps", "StatefulSet")
            | ("apps", "DaemonSet")
            | ("apps", "ReplicaSet")
            | ("batch", "Job")
            | ("batch", "CronJob") => (Control, Control),
            ("", "ConfigMap")
            | ("", "Secret")
            | ("", "ServiceAccount")
            | ("", "PersistentVolumeClaim") => (Data, Control),
            ("", "Service") => (Data, Control),
            (RBAC, "RoleBinding") | (RBAC, "ClusterRoleBinding") => (Data, Control),
            (RBAC, "Role") | (RBAC, "ClusterRole") => (Data, Control),
            ("", "Namespace") => (Data, Control),
            other => panic!("{other:?} has no expected plane here: add it to this test"),
        };
        checked += 1;
        let object = of_kind(k);
        assert_eq!(
            placed(std::slice::from_ref(&object))[0].placement,
            alone,
            "{} alone",
            k.kind
        );
        let mut scenario = vec![object, consumer()];
        match k.kind {
            "Role" => scenario.push(binding("RoleBinding", "Role")),
            "ClusterRole" => scenario.push(binding("ClusterRoleBinding", "ClusterRole")),
            _ => {}
        }
        let d = &placed(&scenario)[0];
        assert_eq!(d.placement, used, "{} used: {d:?}", k.kind);
    }
    assert_eq!(checked, BUILTIN_KINDS.len());
    // Anything else, custom resources and CRDs included, goes to the data plane.
    for (api, kind) in [
        ("example.com/v1", "Widget"),
        ("networking.k8s.io/v1", "Ingress"),
        ("apiextensions.k8s.io/v1", "CustomResourceDefinition"),
    ] {
        let o = obj(json!({"apiVersion": api, "kind": kind, "metadata": {"name": "x"}}));
        assert_eq!(placed(&[o, consumer()])[0], Decision::new(Data, NOT_NEEDED));
    }
}

#[test]
fn reasons_name_the_consumer_and_how_it_uses_the_object() {
    let sa = obj(
        json!({"apiVersion": "v1", "kind": "ServiceAccount", "metadata": {"name": "x", "namespace": "x"}}),
    );
    let cm = obj(
        json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "x", "namespace": "x"}}),
    );
    let unused = obj(
        json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "y", "namespace": "x"}}),
    );
    let ns = obj(json!({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "x"}}));
    let d = placed(&[
        consumer(),
        sa,
        cm,
        unused,
        binding("RoleBinding", "Role"),
        ns,
    ]);
    let reasons: Vec<(Placement, &str)> =
        d.iter().map(|d| (d.placement, d.reason.as_str())).collect();
    assert_eq!(
        reasons,
        [
            (Placement::Control, "runnable"),
            (
                Placement::Control,
                "used by apps/v1 Deployment x/consumer (serviceAccountName)"
            ),
            (
                Placement::Control,
                "used by apps/v1 Deployment x/consumer (volume \"v\")"
            ),
            (Placement::Data, NOT_NEEDED),
            (
                Placement::Control,
                "binds ServiceAccount x/x used by apps/v1 Deployment x/consumer"
            ),
            (Placement::Both, "holds objects of both planes"),
        ]
    );
}

#[test]
fn a_service_goes_where_the_pods_it_selects_run() {
    let service = |name: &str, app: &str| {
        obj(json!({"apiVersion": "v1", "kind": "Service",
            "metadata": {"name": name, "namespace": "x"},
            "spec": {"selector": {"app": app}, "ports": [{"port": 80}]}}))
    };
    let pinned_job = obj(json!({"apiVersion": "batch/v1", "kind": "Job",
        "metadata": {"name": "j", "namespace": "x", "annotations": {PLANE_ANNOTATION: "data"}},
        "spec": {"template": {"metadata": {"labels": {"app": "job"}},
            "spec": {"containers": [{"name": "c"}]}}}}));
    let d = placed(&[
        service("web", "x"),
        consumer(),
        service("other", "nobody"),
        service("batch", "job"),
        pinned_job,
    ]);
    assert_eq!(
        d[0],
        Decision::new(
            Placement::Control,
            "selects the pods of apps/v1 Deployment x/consumer (app=x)"
        )
    );
    assert_eq!(d[2], Decision::new(Placement::Data, NOT_NEEDED));
    // It follows the runnable wherever the runnable was put.
    assert_eq!(d[3].placement, Placement::Data);
}

#[test]
fn the_image_pull_secrets_of_a_service_account_go_with_it() {
    let sa = obj(json!({"apiVersion": "v1", "kind": "ServiceAccount",
        "metadata": {"name": "x", "namespace": "x"},
        "imagePullSecrets": [{"name": "registry"}]}));
    let registry = obj(
        json!({"apiVersion": "v1", "kind": "Secret", "metadata": {"name": "registry", "namespace": "x"}}),
    );
    // Declared before the ServiceAccount: the order of the apply does not matter.
    let d = placed(&[registry.clone(), consumer(), sa.clone()]);
    assert_eq!(
        d[0],
        Decision::new(
            Placement::Control,
            "image pull secret of ServiceAccount x/x"
        )
    );
    // A ServiceAccount no pod uses stays on the data plane, and so do its pull secrets.
    assert_eq!(placed(&[registry, sa])[0].placement, Placement::Data);
}

#[test]
fn a_secret_used_by_a_pod_and_referenced_by_a_custom_resource_goes_to_both() {
    let secret = |name: &str| {
        obj(
            json!({"apiVersion": "v1", "kind": "Secret", "metadata": {"name": name, "namespace": "x"}}),
        )
    };
    let widget = obj(json!({"apiVersion": "example.com/v1", "kind": "Widget",
        "metadata": {"name": "w", "namespace": "x"},
        "spec": {"credentialsSecretRef": {"name": "x"}, "tokenSecretRef": {"name": "token"}}}));
    let d = placed(&[consumer(), widget, secret("x"), secret("token")]);
    assert_eq!(d[1].placement, Placement::Data);
    assert_eq!(d[2].placement, Placement::Both);
    assert_eq!(
        d[2].reason,
        "used by apps/v1 Deployment x/consumer (envFrom); referenced by example.com/v1 Widget x/w (spec.credentialsSecretRef)"
    );
    assert_eq!(
        d[3],
        Decision::new(
            Placement::Data,
            "referenced by example.com/v1 Widget x/w (spec.tokenSecretRef)"
        )
    );
}

#[test]
fn the_annotation_beats_kind_overrides_which_beat_the_rules() {
    let pvc = obj(
        json!({"apiVersion": "v1", "kind": "PersistentVolumeClaim", "metadata": {"name": "data", "namespace": "x"}}),
    );
    let pinned_cm = obj(json!({"apiVersion": "v1", "kind": "ConfigMap",
        "metadata": {"name": "x", "namespace": "x", "annotations": {PLANE_ANNOTATION: "both"}}}));
    let job = obj(
        json!({"apiVersion": "batch/v1", "kind": "Job", "metadata": {"name": "j", "namespace": "x"},
        "spec": {"template": {"spec": {"containers": [{"name": "c", "envFrom": [{"secretRef": {"name": "s"}}]}]}}}}),
    );
    let secret = obj(
        json!({"apiVersion": "v1", "kind": "Secret", "metadata": {"name": "s", "namespace": "x"}}),
    );
    let overrides = KindOverrides::from([
        ("PersistentVolumeClaim".to_string(), Placement::Control),
        ("ConfigMap".to_string(), Placement::Data),
        ("Job.batch".to_string(), Placement::Data),
    ]);
    let d = place(&[pvc, pinned_cm, job, secret], &overrides).unwrap();
    assert_eq!(
        d[0],
        Decision::new(
            Placement::Control,
            "kind override for PersistentVolumeClaim"
        )
    );
    assert_eq!(
        d[1],
        Decision::new(Placement::Both, "annotation harmony.io/plane=both")
    );
    assert_eq!(
        d[2],
        Decision::new(Placement::Data, "kind override for Job.batch")
    );
    // What a runnable uses follows it, wherever it was put.
    assert_eq!(d[3].placement, Placement::Data);
}

#[test]
fn an_invalid_annotation_names_the_object_and_the_accepted_values() {
    let bad = obj(json!({"apiVersion": "v1", "kind": "ConfigMap",
        "metadata": {"name": "x", "namespace": "x", "annotations": {PLANE_ANNOTATION: "control-plane"}}}));
    let err = place(&[bad], &KindOverrides::new())
        .unwrap_err()
        .to_string();
    assert!(err.contains("v1 ConfigMap x/x"), "{err}");
    assert!(err.contains("\"control\", \"data\" or \"both\""), "{err}");
}

#[test]
fn many_consumers_are_summarised() {
    let mut objects: Vec<K8sObject> = (0..5)
        .map(|i| obj(json!({"apiVersion": "v1", "kind": "Pod", "metadata": {"name": format!("p{i}")},
            "spec": {"containers": [{"name": "c", "envFrom": [{"configMapRef": {"name": "shared"}}]}]}})))
        .collect();
    objects.push(obj(
        json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "shared"}}),
    ));
    let d = placed(&objects);
    assert_eq!(d[5].placement, Placement::Control);
    assert!(d[5].reason.ends_with("and 2 more"), "{}", d[5].reason);
}
