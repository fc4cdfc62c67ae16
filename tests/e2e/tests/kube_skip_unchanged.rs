//! Skipping provably unchanged objects, against a real kube-apiserver: the drift battery.
//!
//! A re-apply sends no server-side apply for an object whose live state shows it unchanged
//! (Harmony's managed fields are exactly what it declares, each with the declared value). Every
//! drift of a field Harmony owns must still be re-applied, and fields Harmony does not own must
//! never be touched. Nor does an apply LIST what it can know without asking: the objects of a
//! namespace it saw absent; nor send anything once it was dropped. Requests are counted from the API server's own metrics
//! (`apiserver_request_total`), not from Harmony's report.
//!
//! Run: `cargo test -p harmony_e2e --test kube_skip_unchanged`.

use serde_json::{Value, json};
use std::process::Command;

use harmony::domain::capability::{ApplyOptions, K8sClient, K8sObject};
use harmony::domain::{ChangeAction, ObjectChange, RunContext, Topology};
use harmony::infra::kube::K8sTopology;
use harmony_e2e::ApiServer;

const NS: &str = "drift";

/// One drift of the battery: what it is, the kind it drifts, how to make it, and whether the
/// re-apply put it back.
type Drift = (
    &'static str,
    &'static str,
    Box<dyn Fn(&ApiServer)>,
    Box<dyn Fn(&ApiServer) -> bool>,
);

fn objects() -> Vec<K8sObject> {
    let container = |name: &str, cpu: &str| {
        json!({"name": name, "image": "nginx:1.27", "args": ["--a", "--b"],
            "env": [{"name": "A", "value": "1"}, {"name": "B", "value": "2"}, {"name": "C", "value": "3"}],
            "resources": {"limits": {"cpu": cpu}}})
    };
    let deployment = |name: &str, cpu: &str| {
        json!({"apiVersion": "apps/v1", "kind": "Deployment",
            "metadata": {"name": name, "namespace": NS, "labels": {"app": name},
                "annotations": {"note": "kept"}},
            "spec": {"replicas": 2, "selector": {"matchLabels": {"app": name}},
                "template": {"metadata": {"labels": {"app": name}},
                    "spec": {"containers": [container(name, cpu)]}}}})
    };
    [
        json!({"apiVersion": "v1", "kind": "Namespace",
            "metadata": {"name": NS, "labels": {"purpose": "drift"}}}),
        deployment("web", "1"),
        // The server stores `1000m` as `1`: never provably unchanged, so always sent.
        deployment("normalised", "1000m"),
        json!({"apiVersion": "v1", "kind": "ConfigMap",
            "metadata": {"name": "cfg", "namespace": NS, "labels": {"tier": "front"}},
            "data": {"key": "value"}}),
        json!({"apiVersion": "v1", "kind": "Service",
            "metadata": {"name": "web", "namespace": NS},
            "spec": {"selector": {"app": "web"},
                "ports": [{"name": "http", "port": 80, "targetPort": 8080}]}}),
    ]
    .into_iter()
    .map(|v| K8sObject::new(v).unwrap())
    .collect()
}

/// Server-side applies the API server has answered so far (dry runs included).
fn applies(server: &ApiServer) -> u64 {
    server.requests_answered("APPLY", None)
}

async fn topology(server: &ApiServer, ctx: RunContext) -> K8sTopology {
    let t = server.topology("fixture", &ctx);
    t.ensure_ready()
        .await
        .unwrap_or_else(|e| panic!("{e}\n{}", server.log_tail()));
    t
}

/// Applies every object with `t`; the changes and how many applies the server received.
async fn apply(server: &ApiServer, t: &K8sTopology) -> (Vec<ObjectChange>, u64) {
    let before = applies(server);
    let changes = t
        .apply(&objects(), &ApplyOptions::default())
        .await
        .unwrap_or_else(|e| panic!("{e}"));
    (changes, applies(server) - before)
}

fn action(changes: &[ObjectChange], object: &str) -> ChangeAction {
    changes
        .iter()
        .find(|c| c.object.contains(object))
        .unwrap_or_else(|| panic!("{object} not in {changes:?}"))
        .action
}

fn kubectl_ok(server: &ApiServer, args: &[&str]) {
    let out = server.kubectl(args);
    assert!(out.status.success(), "kubectl {args:?}: {out:?}");
}

fn get(server: &ApiServer, kind: &str, name: &str) -> Value {
    let out = server.kubectl(&["get", kind, name, "-n", NS, "-o", "json"]);
    assert!(out.status.success(), "{out:?}");
    serde_json::from_slice(&out.stdout).unwrap()
}

fn env_names(server: &ApiServer) -> Vec<String> {
    get(server, "deployment", "web")["spec"]["template"]["spec"]["containers"][0]["env"]
        .as_array()
        .unwrap()
        .iter()
        .map(|e| e["name"].as_str().unwrap().to_string())
        .collect()
}

#[tokio::test(flavor = "multi_thread")]
async fn unchanged_objects_are_not_sent_and_every_drift_of_an_owned_field_is() {
    let server = ApiServer::start().unwrap_or_else(|e| panic!("{e}"));
    let t = topology(&server, RunContext::default()).await;
    let all = objects().len() as u64;
    let (changes, sent) = apply(&server, &t).await;
    assert_eq!(sent, all, "the first apply sends every object: {changes:?}");

    // Steady state: only the object whose quantity the server normalised is sent again; the
    // report is the same (unchanged) either way.
    let (changes, sent) = apply(&server, &t).await;
    assert_eq!(sent, 1, "{changes:?}");
    assert!(
        changes.iter().all(|c| c.action == ChangeAction::Unchanged),
        "{changes:?}"
    );
    // A plan of unchanged objects sends no dry-run either.
    let plan = topology(
        &server,
        RunContext {
            plan: true,
            ..RunContext::default()
        },
    )
    .await;
    let (changes, sent) = apply(&server, &plan).await;
    assert_eq!(sent, 1, "{changes:?}");
    // --no-skip sends every object.
    let no_skip = topology(
        &server,
        RunContext {
            no_skip: true,
            ..RunContext::default()
        },
    )
    .await;
    let (_, sent) = apply(&server, &no_skip).await;
    assert_eq!(sent, all);

    // Fields Harmony does not own are never touched: another manager's label, a field the
    // server defaulted and someone changed. Nothing of Harmony's drifted: nothing is sent.
    kubectl_ok(
        &server,
        &["label", "configmap", "cfg", "-n", NS, "team=blue"],
    );
    kubectl_ok(
        &server,
        &[
            "patch",
            "service",
            "web",
            "-n",
            NS,
            "-p",
            r#"{"spec":{"sessionAffinity":"ClientIP"}}"#,
        ],
    );
    let (changes, sent) = apply(&server, &t).await;
    assert_eq!(sent, 1, "{changes:?}");
    assert_eq!(
        get(&server, "configmap", "cfg")["metadata"]["labels"]["team"],
        "blue"
    );
    assert_eq!(
        get(&server, "service", "web")["spec"]["sessionAffinity"],
        "ClientIP"
    );

    // Every drift of an owned field: sent again (2 = the drifted object and `normalised`) and
    // put back. A drift made by an update (edit, scale, patch) leaves its field to that
    // manager, so taking it back needs --force-conflicts, as with kubectl.
    let forced = topology(
        &server,
        RunContext {
            force_conflicts: true,
            ..RunContext::default()
        },
    )
    .await;
    let battery: Vec<Drift> = vec![
        (
            "kubectl edit of the image",
            "Deployment",
            Box::new(|s: &ApiServer| {
                let out = Command::new(ApiServer::binary().unwrap())
                    .args(["kubectl", "edit", "deployment", "web", "-n", NS])
                    .env("KUBECONFIG", s.kubeconfig())
                    .env("KUBE_EDITOR", "sed -i s/nginx:1.27/nginx:1.26/")
                    .output()
                    .unwrap();
                assert!(out.status.success(), "{out:?}");
                assert_eq!(
                    get(s, "deployment", "web")["spec"]["template"]["spec"]["containers"][0]["image"],
                    "nginx:1.26"
                );
            }),
            Box::new(|s: &ApiServer| {
                get(s, "deployment", "web")["spec"]["template"]["spec"]["containers"][0]["image"]
                    == "nginx:1.27"
            }),
        ),
        (
            "kubectl scale",
            "Deployment",
            Box::new(|s: &ApiServer| {
                kubectl_ok(s, &["scale", "deployment", "web", "-n", NS, "--replicas=5"])
            }),
            Box::new(|s: &ApiServer| get(s, "deployment", "web")["spec"]["replicas"] == 2),
        ),
        (
            "a label removed",
            "ConfigMap",
            Box::new(|s: &ApiServer| {
                kubectl_ok(s, &["label", "configmap", "cfg", "-n", NS, "tier-"])
            }),
            Box::new(|s: &ApiServer| {
                get(s, "configmap", "cfg")["metadata"]["labels"]["tier"] == "front"
            }),
        ),
        (
            "an annotation removed",
            "Deployment",
            Box::new(|s: &ApiServer| {
                kubectl_ok(s, &["annotate", "deployment", "web", "-n", NS, "note-"])
            }),
            Box::new(|s: &ApiServer| {
                get(s, "deployment", "web")["metadata"]["annotations"]["note"] == "kept"
            }),
        ),
        (
            "a list item removed",
            "Deployment",
            Box::new(|s: &ApiServer| {
                kubectl_ok(
                    s,
                    &[
                        "patch",
                        "deployment",
                        "web",
                        "-n",
                        NS,
                        "--type",
                        "json",
                        "-p",
                        r#"[{"op":"remove","path":"/spec/template/spec/containers/0/env/1"}]"#,
                    ],
                );
                assert_eq!(env_names(s), ["A", "C"]);
            }),
            Box::new(|s: &ApiServer| env_names(s).contains(&"B".to_string())),
        ),
        (
            "a service port changed",
            "Service",
            Box::new(|s: &ApiServer| {
                kubectl_ok(
                    s,
                    &[
                        "patch",
                        "service",
                        "web",
                        "-n",
                        NS,
                        "--type",
                        "json",
                        "-p",
                        r#"[{"op":"replace","path":"/spec/ports/0/targetPort","value":9090}]"#,
                    ],
                );
            }),
            Box::new(|s: &ApiServer| {
                get(s, "service", "web")["spec"]["ports"][0]["targetPort"] == 8080
            }),
        ),
    ];
    // Unforced, the first drift is sent and refused by the server, never reported unchanged.
    (battery[0].2)(&server);
    let before = applies(&server);
    let e = t
        .apply(&objects(), &ApplyOptions::default())
        .await
        .expect_err("kubectl edit owns the image now");
    assert!(applies(&server) > before, "sent: {e}");
    assert!(e.to_string().contains("kubectl-edit"), "{e}");
    for (what, kind, drift, restored) in &battery {
        drift(&server);
        let (changes, sent) = apply(&server, &forced).await;
        assert_eq!(sent, 2, "{what}: {changes:?}");
        assert_eq!(
            action(&changes, kind),
            ChangeAction::Update,
            "{what}: {changes:?}"
        );
        assert!(restored(&server), "{what}: not put back");
        let (changes, sent) = apply(&server, &t).await;
        assert_eq!(
            sent, 1,
            "{what}: after the repair, unchanged again: {changes:?}"
        );
    }

    // A list reordered: sent again (whatever the server then keeps of the order).
    kubectl_ok(
        &server,
        &[
            "patch",
            "deployment",
            "web",
            "-n",
            NS,
            "--type",
            "json",
            "-p",
            r#"[{"op":"move","from":"/spec/template/spec/containers/0/env/0","path":"/spec/template/spec/containers/0/env/2"}]"#,
        ],
    );
    assert_eq!(env_names(&server), ["B", "C", "A"]);
    let (changes, sent) = apply(&server, &t).await;
    assert_eq!(sent, 2, "a reordered list: {changes:?}");

    // Another manager's server-side apply with --force-conflicts takes a field Harmony owned:
    // Harmony's next apply is sent (and, forced, takes the field back).
    let intruder = r#"{"apiVersion":"v1","kind":"ConfigMap","metadata":{"name":"cfg","namespace":"drift"},"data":{"key":"theirs"}}"#;
    let out = server.kubectl_stdin(
        &[
            "apply",
            "--server-side",
            "--force-conflicts",
            "--field-manager=intruder",
            "-f",
            "-",
        ],
        intruder,
    );
    assert!(out.status.success(), "{out:?}");
    let (changes, sent) = apply(&server, &forced).await;
    assert_eq!(sent, 2, "another manager's forced apply: {changes:?}");
    assert_eq!(get(&server, "configmap", "cfg")["data"]["key"], "value");
    let (changes, sent) = apply(&server, &t).await;
    assert_eq!(sent, 1, "{changes:?}");
}

/// `names` as ConfigMaps in `ns`, each holding `value`.
fn config_maps(ns: &str, names: &[&str], value: &str) -> Vec<K8sObject> {
    names
        .iter()
        .map(|name| {
            K8sObject::new(json!({"apiVersion": "v1", "kind": "ConfigMap",
                "metadata": {"name": name, "namespace": ns}, "data": {"key": value}}))
            .unwrap()
        })
        .collect()
}

#[tokio::test(flavor = "multi_thread")]
async fn objects_of_a_namespace_seen_absent_are_known_absent_without_a_list() {
    let server = ApiServer::start().unwrap_or_else(|e| panic!("{e}"));
    let t = topology(&server, RunContext::default()).await;
    // "old" exists and holds one of the declared ConfigMaps, made by hand; "new" does not.
    kubectl_ok(&server, &["create", "namespace", "old"]);
    kubectl_ok(
        &server,
        &[
            "create",
            "configmap",
            "a",
            "-n",
            "old",
            "--from-literal=other=by-hand",
        ],
    );
    let namespace = |name: &str| {
        // Labelled: a namespace declaring nothing but its name gets no managed-fields entry
        // for Harmony, so it can never be proven unchanged, and is always sent.
        K8sObject::new(json!({"apiVersion": "v1", "kind": "Namespace",
            "metadata": {"name": name, "labels": {"owner": "harmony"}}}))
        .unwrap()
    };
    let mut declared = vec![namespace("old"), namespace("new")];
    declared.extend(config_maps("old", &["a", "b", "c"], "1"));
    declared.extend(config_maps("new", &["a", "b", "c"], "1"));
    // "implicit" is used but not declared: created first, also known absent.
    declared.extend(config_maps("implicit", &["a", "b"], "1"));

    let lists = server.requests_answered("LIST", Some("configmaps"));
    let changes = t
        .apply(&declared, &ApplyOptions::default())
        .await
        .unwrap_or_else(|e| panic!("{e}"));
    assert_eq!(
        server.requests_answered("LIST", Some("configmaps")) - lists,
        1,
        "only the ConfigMaps of \"old\" are listed: {changes:?}"
    );
    let of = |ns: &str, name: &str| {
        changes
            .iter()
            .find(|c| c.object == format!("v1 ConfigMap {ns}/{name}"))
            .unwrap_or_else(|| panic!("{ns}/{name} not in {changes:?}"))
            .action
    };
    assert_eq!(of("old", "a"), ChangeAction::Update, "{changes:?}");
    for (ns, name) in [
        ("old", "b"),
        ("old", "c"),
        ("new", "a"),
        ("new", "b"),
        ("new", "c"),
        ("implicit", "a"),
        ("implicit", "b"),
    ] {
        assert_eq!(
            of(ns, name),
            ChangeAction::Create,
            "{ns}/{name}: {changes:?}"
        );
    }
    for ns in ["old", "new", "implicit"] {
        let out = server.kubectl(&[
            "get",
            "configmap",
            "a",
            "-n",
            ns,
            "-o",
            "jsonpath={.data.key}",
        ]);
        assert_eq!(String::from_utf8_lossy(&out.stdout), "1", "{ns}: {out:?}");
    }

    // Every namespace exists now: each is listed, and nothing is sent again.
    let lists = server.requests_answered("LIST", Some("configmaps"));
    let sent = applies(&server);
    let again = t
        .apply(&declared, &ApplyOptions::default())
        .await
        .unwrap_or_else(|e| panic!("{e}"));
    assert_eq!(
        server.requests_answered("LIST", Some("configmaps")) - lists,
        3,
        "{again:?}"
    );
    assert_eq!(applies(&server) - sent, 0, "{again:?}");
    assert!(
        again.iter().all(|c| c.action == ChangeAction::Unchanged),
        "{again:?}"
    );
}

#[tokio::test(flavor = "multi_thread")]
async fn an_apply_dropped_midway_sends_nothing_more() {
    let server = ApiServer::start().unwrap_or_else(|e| panic!("{e}"));
    let t = server
        .topology("fixture", &RunContext::default())
        .with_concurrency(1);
    t.ensure_ready()
        .await
        .unwrap_or_else(|e| panic!("{e}\n{}", server.log_tail()));
    let names: Vec<String> = (0..300).map(|i| format!("cm-{i:03}")).collect();
    let names: Vec<&str> = names.iter().map(String::as_str).collect();
    let objects = config_maps("dropped", &names, "1");
    let before = applies(&server);
    // One at a time, 300 creates take seconds: the apply is dropped a few dozen in.
    let dropped = tokio::time::timeout(
        std::time::Duration::from_millis(300),
        t.apply(&objects, &ApplyOptions::default()),
    )
    .await;
    assert!(dropped.is_err(), "the apply finished before it was dropped");
    let at_drop = applies(&server) - before;
    std::thread::sleep(std::time::Duration::from_secs(2));
    let later = applies(&server) - before;
    assert!(
        at_drop < names.len() as u64,
        "{at_drop} applies by the time of the drop"
    );
    assert_eq!(later, at_drop, "applies sent after the apply was dropped");
}
