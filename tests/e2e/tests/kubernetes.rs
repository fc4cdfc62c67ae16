//! K8sTopology against real kube-apiserver processes (tests/kube-fixture), no mocks.

use serde_json::json;
use std::time::{Duration, Instant};

use harmony::domain::capability::{
    ApplyOptions, CapabilityError, K8sClient, K8sObject, WaitCondition, WaitOutcome,
};
use harmony::domain::{ChangeAction, ObjectChange, RunContext, Topology};
use harmony::infra::kube::{K8sTopology, KubeTarget};
use harmony_e2e::ApiServer;

fn obj(v: serde_json::Value) -> K8sObject {
    K8sObject::new(v).unwrap()
}

fn config_map(ns: &str, name: &str, value: &str) -> K8sObject {
    obj(
        json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": name, "namespace": ns}, "data": {"key": value}}),
    )
}

fn secret(ns: &str, value: &str) -> K8sObject {
    obj(
        json!({"apiVersion": "v1", "kind": "Secret", "metadata": {"name": "db", "namespace": ns}, "stringData": {"password": value}}),
    )
}

fn deployment(ns: &str, replicas: i32) -> K8sObject {
    obj(
        json!({"apiVersion": "apps/v1", "kind": "Deployment", "metadata": {"name": "web", "namespace": ns},
        "spec": {"replicas": replicas, "selector": {"matchLabels": {"app": "web"}},
                 "template": {"metadata": {"labels": {"app": "web"}},
                              "spec": {"containers": [{"name": "web", "image": "nginx:1.27"}]}}}}),
    )
}

fn service(ns: &str) -> K8sObject {
    obj(
        json!({"apiVersion": "v1", "kind": "Service", "metadata": {"name": "web", "namespace": ns},
        "spec": {"selector": {"app": "web"}, "ports": [{"port": 80, "targetPort": 8080}]}}),
    )
}

async fn ready(server: &ApiServer, plan: bool) -> K8sTopology {
    let ctx = RunContext {
        plan,
        ..RunContext::default()
    };
    let topology = server.topology("fixture", &ctx);
    topology
        .ensure_ready()
        .await
        .unwrap_or_else(|e| panic!("{e}\n{}", server.log_tail()));
    topology
}

fn actions(changes: &[ObjectChange]) -> Vec<(String, ChangeAction)> {
    changes
        .iter()
        .map(|c| (c.object.clone(), c.action))
        .collect()
}

fn start() -> ApiServer {
    ApiServer::start().unwrap_or_else(|e| panic!("{e}"))
}

#[tokio::test(flavor = "multi_thread")]
async fn apply_creates_reapply_is_unchanged_and_a_change_shows_its_diff() {
    let server = start();
    let k8s = ready(&server, false).await;
    // The namespace "shop" is not declared: it must be created first, implicitly.
    let objects = vec![
        config_map("shop", "settings", "1"),
        secret("shop", "hunter2"),
        deployment("shop", 2),
        service("shop"),
    ];
    let first = k8s.apply(&objects, &ApplyOptions::default()).await.unwrap();
    assert_eq!(
        actions(&first),
        [
            ("v1 Namespace shop".to_string(), ChangeAction::Create),
            (
                "v1 ConfigMap shop/settings".to_string(),
                ChangeAction::Create
            ),
            ("v1 Secret shop/db".to_string(), ChangeAction::Create),
            (
                "apps/v1 Deployment shop/web".to_string(),
                ChangeAction::Create
            ),
            ("v1 Service shop/web".to_string(), ChangeAction::Create),
        ]
    );
    let out = server.kubectl(&[
        "get",
        "deployment",
        "web",
        "-n",
        "shop",
        "-o",
        "jsonpath={.spec.replicas}",
    ]);
    assert_eq!(String::from_utf8_lossy(&out.stdout), "2");

    let again = k8s.apply(&objects, &ApplyOptions::default()).await.unwrap();
    assert!(
        again.iter().all(|c| c.action == ChangeAction::Unchanged),
        "{again:#?}"
    );
    assert_eq!(
        again.len(),
        4,
        "the namespace now exists and is no longer implicit"
    );

    let changed = vec![
        config_map("shop", "settings", "2"),
        secret("shop", "hunter2"),
        deployment("shop", 3),
        service("shop"),
    ];
    let third = k8s.apply(&changed, &ApplyOptions::default()).await.unwrap();
    let cm = third
        .iter()
        .find(|c| c.object == "v1 ConfigMap shop/settings")
        .unwrap();
    assert_eq!(cm.action, ChangeAction::Update);
    assert_eq!(
        (
            cm.diff[0].path.as_str(),
            cm.diff[0].old.as_deref(),
            cm.diff[0].new.as_deref()
        ),
        ("data.key", Some("\"1\""), Some("\"2\""))
    );
    let dep = third
        .iter()
        .find(|c| c.object == "apps/v1 Deployment shop/web")
        .unwrap();
    assert!(
        dep.diff
            .iter()
            .any(|d| d.path == "spec.replicas" && d.new.as_deref() == Some("3")),
        "{dep:#?}"
    );
    let secret_change = third
        .iter()
        .find(|c| c.object == "v1 Secret shop/db")
        .unwrap();
    assert_eq!(secret_change.action, ChangeAction::Unchanged);

    let got = k8s
        .get(config_map("shop", "settings", "").reference())
        .await
        .unwrap()
        .unwrap();
    assert_eq!(got.value()["data"]["key"], "2");
    let deleted = k8s.delete(got.reference()).await.unwrap();
    assert_eq!(deleted.action, ChangeAction::Delete);
    assert_eq!(
        k8s.delete(got.reference()).await.unwrap().action,
        ChangeAction::Unchanged
    );
}

#[tokio::test(flavor = "multi_thread")]
async fn plan_changes_nothing_and_never_shows_secret_values() {
    let server = start();
    let live = ready(&server, false).await;
    live.apply(
        &[
            secret("vault", "old-secret-value"),
            config_map("vault", "c", "a"),
        ],
        &ApplyOptions::default(),
    )
    .await
    .unwrap();
    let plan = ready(&server, true).await;
    let planned = plan
        .apply(
            &[
                secret("vault", "new-secret-value"),
                config_map("vault", "c", "b"),
                config_map("vault", "new", "x"),
            ],
            &ApplyOptions::default(),
        )
        .await
        .unwrap();
    let shown = format!("{planned:?}");
    assert!(
        !shown.contains("old-secret-value") && !shown.contains("new-secret-value"),
        "{shown}"
    );
    // Base64 forms must not leak either.
    assert!(
        !shown.contains("b2xkLXNlY3JldC12YWx1ZQ") && !shown.contains("bmV3LXNlY3JldC12YWx1ZQ"),
        "{shown}"
    );
    let s = planned
        .iter()
        .find(|c| c.object == "v1 Secret vault/db")
        .unwrap();
    assert_eq!(s.action, ChangeAction::Update);
    assert!(
        s.diff
            .iter()
            .all(|d| d.new.as_deref() == Some("<redacted>")),
        "{s:?}"
    );
    assert_eq!(
        planned
            .iter()
            .find(|c| c.object == "v1 ConfigMap vault/new")
            .unwrap()
            .action,
        ChangeAction::Create
    );
    // Nothing was written.
    let out = server.kubectl(&["get", "configmap", "-n", "vault", "-o", "name"]);
    let names = String::from_utf8_lossy(&out.stdout);
    assert!(
        names.contains("configmap/c") && !names.contains("configmap/new"),
        "{names}"
    );
    let out = server.kubectl(&[
        "get",
        "configmap",
        "c",
        "-n",
        "vault",
        "-o",
        "jsonpath={.data.key}",
    ]);
    assert_eq!(String::from_utf8_lossy(&out.stdout), "a");
}

#[tokio::test(flavor = "multi_thread")]
async fn real_crd_schema_rejects_an_invalid_cnpg_cluster_naming_the_field() {
    let server = start();
    server.install_crds().unwrap();
    let k8s = ready(&server, false).await;
    let bad = obj(
        json!({"apiVersion": "postgresql.cnpg.io/v1", "kind": "Cluster",
        "metadata": {"name": "pg", "namespace": "db"},
        "spec": {"instances": "three", "storage": {"size": "1Gi"}}}),
    );
    let err = k8s
        .apply(&[bad], &ApplyOptions::default())
        .await
        .unwrap_err();
    let text = err.to_string();
    assert!(text.contains("spec.instances"), "{text}");
    assert!(
        text.contains("postgresql.cnpg.io/v1 Cluster db/pg rejected by https://127.0.0.1:"),
        "{text}"
    );
    // The server's code (it gives no reason for this one), then its message; never kube-rs's
    // types in debug form.
    assert!(
        text.contains(": HTTP 500: failed to create typed patch object"),
        "{text}"
    );
    for debug in ["Status {", "Some(", "\\\""] {
        assert!(!text.contains(debug), "{debug} in {text}");
    }
    assert!(
        matches!(err.error, CapabilityError::Rejected { .. }),
        "{err:?}"
    );
    // The implicit namespace was created before the failure and is reported as applied.
    assert_eq!(
        actions(&err.applied),
        [("v1 Namespace db".to_string(), ChangeAction::Create)]
    );

    let good = obj(
        json!({"apiVersion": "postgresql.cnpg.io/v1", "kind": "Cluster",
        "metadata": {"name": "pg", "namespace": "db"}, "spec": {"instances": 3, "storage": {"size": "1Gi"}}}),
    );
    let ok = k8s.apply(&[good], &ApplyOptions::default()).await.unwrap();
    assert_eq!(ok[0].action, ChangeAction::Create);
}

#[tokio::test(flavor = "multi_thread")]
async fn a_conflict_names_the_other_manager_and_force_takes_ownership() {
    let server = start();
    let k8s = ready(&server, false).await;
    let out = server.kubectl(&[
        "create",
        "configmap",
        "owned",
        "-n",
        "default",
        "--from-literal=key=theirs",
    ]);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let err = k8s
        .apply(
            &[config_map("default", "owned", "ours")],
            &ApplyOptions::default(),
        )
        .await
        .unwrap_err();
    match &err.error {
        CapabilityError::Conflict {
            manager, fields, ..
        } => {
            assert_eq!(manager, "kubectl-create");
            assert!(fields.contains(".data.key"), "{fields}");
        }
        other => panic!("expected a conflict, got {other:?}"),
    }
    let forced = k8s
        .apply(
            &[config_map("default", "owned", "ours")],
            &ApplyOptions {
                force_conflicts: true,
                ..ApplyOptions::default()
            },
        )
        .await
        .unwrap();
    assert_eq!(forced[0].action, ChangeAction::Update);

    // The operator's --force-conflicts does the same for every apply of the run.
    let out = server.kubectl(&[
        "create",
        "configmap",
        "owned-too",
        "-n",
        "default",
        "--from-literal=key=theirs",
    ]);
    assert!(out.status.success());
    let ctx = RunContext {
        force_conflicts: true,
        ..RunContext::default()
    };
    let forcing = server.topology("forcing", &ctx);
    forcing.ensure_ready().await.unwrap();
    let taken = forcing
        .apply(
            &[config_map("default", "owned-too", "ours")],
            &ApplyOptions::default(),
        )
        .await
        .unwrap();
    assert_eq!(taken[0].action, ChangeAction::Update);
    let out = server.kubectl(&[
        "get",
        "configmap",
        "owned-too",
        "-o",
        "jsonpath={.data.key}",
    ]);
    assert_eq!(String::from_utf8_lossy(&out.stdout), "ours");
}

#[tokio::test(flavor = "multi_thread")]
async fn crds_first_then_their_resources_and_waits_name_what_they_waited_for() {
    let server = start();
    let k8s = ready(&server, false).await;
    let crd = obj(
        json!({"apiVersion": "apiextensions.k8s.io/v1", "kind": "CustomResourceDefinition",
        "metadata": {"name": "widgets.example.com"},
        "spec": {"group": "example.com", "scope": "Namespaced",
                 "names": {"plural": "widgets", "singular": "widget", "kind": "Widget"},
                 "versions": [{"name": "v1", "served": true, "storage": true,
                    "schema": {"openAPIV3Schema": {"type": "object", "properties": {"spec": {"type": "object",
                        "properties": {"size": {"type": "integer"}}}}}}}]}}),
    );
    let widget = obj(
        json!({"apiVersion": "example.com/v1", "kind": "Widget", "metadata": {"name": "w", "namespace": "default"}, "spec": {"size": 3}}),
    );
    // The custom resource comes first in the list; ordering must still apply the CRD first.
    let changes = k8s
        .apply(&[widget, crd.clone()], &ApplyOptions::default())
        .await
        .unwrap();
    assert_eq!(
        actions(&changes),
        [
            (
                "apiextensions.k8s.io/v1 CustomResourceDefinition widgets.example.com".to_string(),
                ChangeAction::Create
            ),
            (
                "example.com/v1 Widget default/w".to_string(),
                ChangeAction::Create
            ),
        ]
    );
    let established = k8s
        .wait_for(
            crd.reference(),
            &WaitCondition::condition("Established"),
            Duration::from_secs(10),
        )
        .await;
    assert_eq!(established.unwrap(), WaitOutcome::Satisfied);

    // No controller-manager runs here, so a Deployment never becomes Available: the timeout says so.
    k8s.apply(&[deployment("default", 1)], &ApplyOptions::default())
        .await
        .unwrap();
    let err = k8s
        .wait_for(
            deployment("default", 1).reference(),
            &WaitCondition::condition("Available"),
            Duration::from_secs(1),
        )
        .await
        .unwrap_err();
    let text = err.to_string();
    assert!(
        text.contains("condition Available=True on apps/v1 Deployment default/web"),
        "{text}"
    );
}

#[tokio::test(flavor = "multi_thread")]
async fn two_api_servers_run_side_by_side_and_stay_separate() {
    let (a, b) = (start(), start());
    assert_ne!(a.url(), b.url());
    let (ka, kb) = (ready(&a, false).await, ready(&b, false).await);
    ka.apply(
        &[config_map("default", "only-on-a", "1")],
        &ApplyOptions::default(),
    )
    .await
    .unwrap();
    kb.apply(
        &[config_map("default", "only-on-b", "1")],
        &ApplyOptions::default(),
    )
    .await
    .unwrap();
    assert!(
        ka.get(config_map("default", "only-on-a", "").reference())
            .await
            .unwrap()
            .is_some()
    );
    assert!(
        ka.get(config_map("default", "only-on-b", "").reference())
            .await
            .unwrap()
            .is_none()
    );
    assert!(
        kb.get(config_map("default", "only-on-b", "").reference())
            .await
            .unwrap()
            .is_some()
    );
    assert!(
        kb.get(config_map("default", "only-on-a", "").reference())
            .await
            .unwrap()
            .is_none()
    );
}

#[tokio::test(flavor = "multi_thread")]
async fn an_unreachable_cluster_fails_ensure_ready_fast_naming_the_server() {
    // A listener that accepts and never answers: the worst case, a black hole on loopback.
    let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let port = listener.local_addr().unwrap().port();
    let dir = tempfile::tempdir().unwrap();
    let kubeconfig = dir.path().join("kubeconfig");
    std::fs::write(
        &kubeconfig,
        format!(
            "apiVersion: v1\nkind: Config\nclusters:\n- name: c\n  cluster:\n    server: https://127.0.0.1:{port}\n    insecure-skip-tls-verify: true\ncontexts:\n- name: c\n  context:\n    cluster: c\n    user: u\ncurrent-context: c\nusers:\n- name: u\n  user:\n    token: not-a-real-token\n"
        ),
    )
    .unwrap();
    let k8s = K8sTopology::new(
        "gone",
        KubeTarget::Kubeconfig {
            path: Some(kubeconfig),
            context: None,
        },
        &RunContext::default(),
    );
    let started = Instant::now();
    let err = k8s.ensure_ready().await.unwrap_err();
    let elapsed = started.elapsed();
    drop(listener);
    assert!(elapsed < Duration::from_secs(10), "took {elapsed:?}");
    assert!(
        err.to_string().contains(&format!("127.0.0.1:{port}")),
        "{err}"
    );
    assert!(!err.to_string().contains("not-a-real-token"), "{err}");
}

fn owned(owner: &str) -> ApplyOptions {
    ApplyOptions {
        owner: Some(owner.into()),
        ..ApplyOptions::default()
    }
}

#[tokio::test(flavor = "multi_thread")]
async fn prune_removes_only_owned_objects_no_longer_declared() {
    let server = start();
    let live = ready(&server, false).await;
    let declared = vec![
        config_map("app", "keep", "1"),
        config_map("app", "drop", "1"),
        deployment("app", 1),
    ];
    live.apply(&declared, &owned("Score A")).await.unwrap();
    // Same kind, same namespace, not owned by Score A: must survive every prune.
    live.apply(
        &[config_map("app", "someone-elses", "1")],
        &owned("Score B"),
    )
    .await
    .unwrap();
    let out = server.kubectl(&[
        "create",
        "configmap",
        "hand-made",
        "-n",
        "app",
        "--from-literal=a=b",
    ]);
    assert!(out.status.success());
    let labels = server.kubectl(&[
        "get",
        "configmap",
        "keep",
        "-n",
        "app",
        "-o",
        "jsonpath={.metadata.labels}",
    ]);
    assert!(
        String::from_utf8_lossy(&labels.stdout).contains("applyset.kubernetes.io/part-of"),
        "members are labelled"
    );

    let now = vec![config_map("app", "keep", "1")];
    // Without --prune nothing is deleted.
    let no_prune = live.apply(&now, &owned("Score A")).await.unwrap();
    assert!(
        no_prune.iter().all(|c| c.action != ChangeAction::Delete),
        "{no_prune:#?}"
    );

    // The plan shows the deletions and deletes nothing.
    let plan_ctx = RunContext {
        plan: true,
        prune: true,
        ..RunContext::default()
    };
    let plan = server.topology("plan", &plan_ctx);
    plan.ensure_ready().await.unwrap();
    let planned = plan.apply(&now, &owned("Score A")).await.unwrap();
    let mut deletes: Vec<String> = planned
        .iter()
        .filter(|c| c.action == ChangeAction::Delete)
        .map(|c| c.object.clone())
        .collect();
    deletes.sort();
    assert_eq!(
        deletes,
        ["apps/v1 Deployment app/web", "v1 ConfigMap app/drop"]
    );
    assert!(
        server
            .kubectl(&["get", "configmap", "drop", "-n", "app"])
            .status
            .success(),
        "plan must not delete"
    );

    let prune_ctx = RunContext {
        prune: true,
        ..RunContext::default()
    };
    let pruning = server.topology("prune", &prune_ctx);
    pruning.ensure_ready().await.unwrap();
    let applied = pruning.apply(&now, &owned("Score A")).await.unwrap();
    let mut deleted: Vec<String> = applied
        .iter()
        .filter(|c| c.action == ChangeAction::Delete)
        .map(|c| c.object.clone())
        .collect();
    deleted.sort();
    assert_eq!(
        deleted,
        ["apps/v1 Deployment app/web", "v1 ConfigMap app/drop"]
    );
    let out = server.kubectl(&["get", "configmaps,deployments", "-n", "app", "-o", "name"]);
    let left = String::from_utf8_lossy(&out.stdout);
    for survivor in [
        "configmap/keep",
        "configmap/someone-elses",
        "configmap/hand-made",
    ] {
        assert!(left.contains(survivor), "{survivor} missing from:\n{left}");
    }
    assert!(
        !left.contains("configmap/drop") && !left.contains("deployment"),
        "{left}"
    );
    // Converged: a second pruning apply changes nothing.
    let again = pruning.apply(&now, &owned("Score A")).await.unwrap();
    assert!(
        again.iter().all(|c| c.action == ChangeAction::Unchanged),
        "{again:#?}"
    );
}

/// Applies three ConfigMaps to `ns` (one LIST covers them), then again unchanged, then with one
/// changed, and returns the three reports.
async fn three_applies(k8s: &K8sTopology, ns: &str) -> Vec<Vec<ObjectChange>> {
    let declared = |second: &str| {
        vec![
            config_map(ns, "a", "1"),
            config_map(ns, "b", second),
            config_map(ns, "c", "1"),
        ]
    };
    let mut reports = Vec::new();
    for objects in [declared("1"), declared("1"), declared("2")] {
        let report = k8s.apply(&objects, &ApplyOptions::default()).await;
        reports.push(report.unwrap_or_else(|e| panic!("applying to {ns}: {}", e.error)));
    }
    reports
}

#[tokio::test(flavor = "multi_thread")]
async fn the_report_is_the_same_whether_live_state_is_listed_or_read_one_by_one() {
    let server = start();
    let work = tempfile::tempdir().unwrap();
    // A ServiceAccount that may get, create and patch ConfigMaps but not list them, as the
    // agent's least-privilege roles allow for some kinds: apply falls back to a GET per object.
    harmony_e2e::agent_rbac::apply_as_admin(
        &server,
        work.path(),
        &[
            json!({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "listed"}}),
            json!({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "unlisted"}}),
            json!({"apiVersion": "v1", "kind": "ServiceAccount",
                   "metadata": {"name": "applier", "namespace": "unlisted"}}),
            json!({"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "Role",
                   "metadata": {"name": "no-list", "namespace": "unlisted"},
                   "rules": [{"apiGroups": [""], "resources": ["configmaps"],
                              "verbs": ["get", "create", "patch"]}]}),
            json!({"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "RoleBinding",
                   "metadata": {"name": "applier", "namespace": "unlisted"},
                   "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "Role",
                               "name": "no-list"},
                   "subjects": [{"kind": "ServiceAccount", "name": "applier",
                                 "namespace": "unlisted"}]}),
            // Apply reads the namespaces its objects use, to create missing ones first.
            json!({"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "ClusterRole",
                   "metadata": {"name": "applier-namespaces"},
                   "rules": [{"apiGroups": [""], "resources": ["namespaces"],
                              "verbs": ["get"]}]}),
            json!({"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "ClusterRoleBinding",
                   "metadata": {"name": "applier-namespaces"},
                   "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole",
                               "name": "applier-namespaces"},
                   "subjects": [{"kind": "ServiceAccount", "name": "applier",
                                 "namespace": "unlisted"}]}),
        ],
    )
    .unwrap();
    let kubeconfig = harmony_e2e::agent_rbac::impersonating_kubeconfig(
        &server,
        work.path(),
        "unlisted",
        "applier",
    )
    .unwrap();
    let no_list = K8sTopology::new(
        "no-list",
        KubeTarget::Kubeconfig {
            path: Some(kubeconfig),
            context: None,
        },
        &RunContext::default(),
    );
    no_list.ensure_ready().await.unwrap();
    let refused = server.kubectl(&[
        "auth",
        "can-i",
        "list",
        "configmaps",
        "-n",
        "unlisted",
        "--as",
        "system:serviceaccount:unlisted:applier",
    ]);
    assert_eq!(String::from_utf8_lossy(&refused.stdout).trim(), "no");

    let admin = ready(&server, false).await;
    let listed = three_applies(&admin, "listed").await;
    let fetched = three_applies(&no_list, "unlisted").await;
    let shape = |reports: &[Vec<ObjectChange>]| -> Vec<Vec<(String, ChangeAction, Vec<String>)>> {
        reports
            .iter()
            .map(|r| {
                r.iter()
                    .map(|c| {
                        let name = c.object.rsplit('/').next().unwrap_or_default().to_string();
                        let diff = c
                            .diff
                            .iter()
                            .map(|d| format!("{} {:?} -> {:?}", d.path, d.old, d.new))
                            .collect();
                        (name, c.action, diff)
                    })
                    .collect()
            })
            .collect()
    };
    let expected = |action: ChangeAction| {
        ["a", "b", "c"]
            .map(|n| (n.to_string(), action, Vec::new()))
            .to_vec()
    };
    let mut third = expected(ChangeAction::Unchanged);
    third[1] = (
        "b".to_string(),
        ChangeAction::Update,
        vec![r#"data.key Some("\"1\"") -> Some("\"2\"")"#.to_string()],
    );
    let want = vec![
        expected(ChangeAction::Create),
        expected(ChangeAction::Unchanged),
        third,
    ];
    assert_eq!(shape(&listed), want, "listed live state");
    assert_eq!(
        shape(&fetched),
        want,
        "live state read one object at a time"
    );
}
