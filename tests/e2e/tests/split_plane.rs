//! SplitPlaneTopology against two real kube-apiserver processes (tests/kube-fixture), no mocks:
//! placement, the closure check (claims, selecting Services and ServiceAccount pull secrets
//! included) and prune, checked by listing both servers with kubectl.

use serde_json::json;
use std::collections::BTreeSet;

use harmony::domain::capability::{ApplyOptions, K8sClient, K8sObject};
use harmony::domain::{ChangeAction, ObjectChange, RunContext, Topology};
use harmony::infra::kube::{K8sTopology, KubeTarget};
use harmony::infra::split_plane::SplitPlaneTopology;
use harmony_e2e::ApiServer;

const NS: &str = "shop";
/// What the tests list on each server (`kubectl get ... -o name` spelling).
const LISTED: &str = "deployments,jobs,serviceaccounts,roles,rolebindings,configmaps,secrets,services,persistentvolumeclaims";

fn obj(v: serde_json::Value) -> K8sObject {
    K8sObject::new(v).unwrap()
}

fn start() -> ApiServer {
    ApiServer::start().unwrap_or_else(|e| panic!("{e}"))
}

fn owned() -> ApplyOptions {
    ApplyOptions {
        owner: Some("shop stack".into()),
        ..ApplyOptions::default()
    }
}

async fn split(
    control: &ApiServer,
    data: &ApiServer,
    ctx: &RunContext,
) -> SplitPlaneTopology<K8sTopology> {
    let topology = SplitPlaneTopology::new(
        "split",
        control.topology("control", ctx),
        data.topology("data", ctx),
        ctx,
    );
    topology
        .ensure_ready()
        .await
        .unwrap_or_else(|e| panic!("{e}\n{}\n{}", control.log_tail(), data.log_tail()));
    topology
}

fn widget_crd() -> K8sObject {
    obj(
        json!({"apiVersion": "apiextensions.k8s.io/v1", "kind": "CustomResourceDefinition",
        "metadata": {"name": "widgets.example.com"},
        "spec": {"group": "example.com", "scope": "Namespaced",
            "names": {"plural": "widgets", "singular": "widget", "kind": "Widget"},
            "versions": [{"name": "v1", "served": true, "storage": true,
                "schema": {"openAPIV3Schema": {"type": "object", "properties": {"spec": {
                    "type": "object", "x-kubernetes-preserve-unknown-fields": true}}}}}]}}),
    )
}

fn config_map(name: &str) -> K8sObject {
    obj(json!({"apiVersion": "v1", "kind": "ConfigMap",
        "metadata": {"name": name, "namespace": NS}, "data": {"key": "value"}}))
}

fn secret(name: &str) -> K8sObject {
    obj(json!({"apiVersion": "v1", "kind": "Secret",
        "metadata": {"name": name, "namespace": NS}, "stringData": {"value": format!("{name}-value")}}))
}

/// Service `web` selecting the pods labelled `app: <app>` (the web Deployment's are `web`).
fn service(app: &str) -> K8sObject {
    obj(
        json!({"apiVersion": "v1", "kind": "Service", "metadata": {"name": "web", "namespace": NS},
        "spec": {"selector": {"app": app}, "ports": [{"port": 80, "targetPort": 8080}]}}),
    )
}

/// The web Deployment; `mounts` is the ConfigMap it mounts, `env_from` the Secret it reads.
fn deployment(mounts: Option<&str>, env_from: Option<&str>) -> K8sObject {
    let mut container = json!({"name": "web", "image": "nginx:1.27"});
    if let Some(s) = env_from {
        container["envFrom"] = json!([{"secretRef": {"name": s}}]);
    }
    let mut pod = json!({"serviceAccountName": "app", "containers": [container]});
    if let Some(cm) = mounts {
        pod["volumes"] = json!([{"name": "config", "configMap": {"name": cm}}]);
        pod["containers"][0]["volumeMounts"] = json!([{"name": "config", "mountPath": "/etc/web"}]);
    }
    obj(
        json!({"apiVersion": "apps/v1", "kind": "Deployment", "metadata": {"name": "web", "namespace": NS},
        "spec": {"replicas": 1, "selector": {"matchLabels": {"app": "web"}},
                 "template": {"metadata": {"labels": {"app": "web"}}, "spec": pod}}}),
    )
}

/// The Score's objects: runnables and what they use, a custom resource and what it refers to.
fn stack() -> Vec<K8sObject> {
    vec![
        widget_crd(),
        obj(
            json!({"apiVersion": "example.com/v1", "kind": "Widget", "metadata": {"name": "w", "namespace": NS},
            "spec": {"size": 3, "tokenSecretRef": {"name": "widget-token"},
                     "credentialsSecretRef": {"name": "db-credentials"}}}),
        ),
        secret("widget-token"),
        secret("db-credentials"),
        obj(
            json!({"apiVersion": "v1", "kind": "ServiceAccount", "metadata": {"name": "app", "namespace": NS}}),
        ),
        obj(
            json!({"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "Role",
            "metadata": {"name": "app-reader", "namespace": NS},
            "rules": [{"apiGroups": [""], "resources": ["configmaps"], "verbs": ["get", "list"]}]}),
        ),
        obj(
            json!({"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "RoleBinding",
            "metadata": {"name": "app-reader", "namespace": NS},
            "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "Role", "name": "app-reader"},
            "subjects": [{"kind": "ServiceAccount", "name": "app", "namespace": NS}]}),
        ),
        config_map("web-config"),
        config_map("plain-settings"),
        secret("web-env"),
        deployment(Some("web-config"), Some("web-env")),
        obj(
            json!({"apiVersion": "batch/v1", "kind": "Job", "metadata": {"name": "migrate", "namespace": NS},
            "spec": {"template": {"spec": {"serviceAccountName": "app", "restartPolicy": "Never",
                "containers": [{"name": "migrate", "image": "busybox:1.37",
                    "env": [{"name": "DB_PASSWORD", "valueFrom": {"secretKeyRef": {"name": "db-credentials", "key": "value"}}}]}]}}}}),
        ),
        service("web"),
    ]
}

fn text(b: &[u8]) -> String {
    String::from_utf8_lossy(b).into_owned()
}

/// `kubectl get <kinds> -n shop -o name` on `server`, as a set.
fn listed(server: &ApiServer, kinds: &str) -> BTreeSet<String> {
    let out = server.kubectl(&["get", kinds, "-n", NS, "-o", "name"]);
    assert!(out.status.success(), "{}", text(&out.stderr));
    text(&out.stdout)
        .lines()
        // Published into every namespace when a controller-manager runs; not ours.
        .filter(|n| *n != "configmap/kube-root-ca.crt")
        .map(str::to_string)
        .collect()
}

fn crds(server: &ApiServer) -> String {
    text(&server.kubectl(&["get", "crd", "-o", "name"]).stdout)
}

fn location<'a>(changes: &'a [ObjectChange], object: &str, plane: &str) -> &'a str {
    changes
        .iter()
        .filter(|c| c.object == object)
        .filter_map(|c| c.location.as_deref())
        .find(|l| l.contains(plane))
        .unwrap_or_else(|| panic!("{object} on {plane} not in {changes:#?}"))
}

#[tokio::test(flavor = "multi_thread")]
async fn each_object_lands_only_on_its_plane_and_the_report_says_why() {
    let (control, data) = (start(), start());
    let kubeconfig = std::fs::read_to_string(data.kubeconfig()).unwrap();
    let ctx = RunContext::default();
    let topology = split(&control, &data, &ctx)
        .await
        .with_data_plane_kubeconfig(NS, "data-plane-kubeconfig", kubeconfig.clone());
    let changes = topology.apply(&stack(), &owned()).await.unwrap();

    let on_control: BTreeSet<&str> = [
        "deployment.apps/web",
        "job.batch/migrate",
        "serviceaccount/app",
        "role.rbac.authorization.k8s.io/app-reader",
        "rolebinding.rbac.authorization.k8s.io/app-reader",
        "configmap/web-config",
        "secret/web-env",
        "secret/db-credentials",
        "secret/data-plane-kubeconfig",
        "service/web",
    ]
    .into();
    let on_data: BTreeSet<&str> = [
        "secret/widget-token",
        "secret/db-credentials",
        "configmap/plain-settings",
    ]
    .into();
    let ours: BTreeSet<&str> = on_control.union(&on_data).copied().collect();
    for (server, expected, plane) in [
        (&control, &on_control, "control"),
        (&data, &on_data, "data"),
    ] {
        let found = listed(server, LISTED);
        let mine: BTreeSet<&str> = found
            .iter()
            .map(String::as_str)
            .filter(|n| ours.contains(n))
            .collect();
        assert_eq!(&mine, expected, "{plane} plane holds:\n{found:#?}");
    }
    assert!(crds(&data).contains("widgets.example.com"));
    assert!(!crds(&control).contains("widgets.example.com"));
    assert_eq!(
        listed(&data, "widgets"),
        BTreeSet::from(["widget.example.com/w".to_string()])
    );

    // The report: each object's plane and why, then the server it went to.
    let (c, d) = (control.url(), data.url());
    let at = |object, plane| location(&changes, object, plane).to_string();
    assert!(
        at("apps/v1 Deployment shop/web", "control-plane")
            .starts_with("control-plane: runnable @ ")
    );
    assert!(at("apps/v1 Deployment shop/web", "control-plane").contains(&c));
    assert_eq!(
        at("v1 ConfigMap shop/web-config", "control-plane")
            .split(" @ ")
            .next(),
        Some("control-plane: used by apps/v1 Deployment shop/web (volume \"config\")")
    );
    assert!(
        at(
            "rbac.authorization.k8s.io/v1 RoleBinding shop/app-reader",
            "control-plane"
        )
        .starts_with("control-plane: binds ServiceAccount shop/app used by ")
    );
    assert!(
        at(
            "rbac.authorization.k8s.io/v1 Role shop/app-reader",
            "control-plane"
        )
        .starts_with(
            "control-plane: referenced by rbac.authorization.k8s.io/v1 RoleBinding shop/app-reader"
        )
    );
    assert!(at("v1 Secret shop/widget-token", "data-plane").starts_with(
        "data-plane: referenced by example.com/v1 Widget shop/w (spec.tokenSecretRef) @ "
    ));
    assert!(at("v1 Secret shop/widget-token", "data-plane").contains(&d));
    assert!(
        at("v1 ConfigMap shop/plain-settings", "data-plane")
            .starts_with("data-plane: not needed by any pod @ ")
    );
    assert!(at("v1 Service shop/web", "control-plane").starts_with(
        "control-plane: selects the pods of apps/v1 Deployment shop/web (app=web) @ "
    ));
    assert!(at("example.com/v1 Widget shop/w", "data-plane").starts_with("data-plane: "));
    for plane in ["control-plane", "data-plane"] {
        let both = at("v1 Secret shop/db-credentials", plane);
        assert!(both.starts_with(&format!("both ({plane}): used by batch/v1 Job shop/migrate (env DB_PASSWORD); referenced by example.com/v1 Widget shop/w")), "{both}");
    }
    assert!(
        at("v1 Secret shop/data-plane-kubeconfig", "control-plane")
            .starts_with("control-plane: kubeconfig for runnables to reach the data plane")
    );

    // The kubeconfig Secret holds the data plane's credentials, which never show in the report.
    let shown = format!("{changes:?}");
    for line in kubeconfig
        .lines()
        .filter(|l| l.contains("-data:") || l.contains("token:"))
    {
        let value = line.split(':').nth(1).unwrap_or_default().trim();
        assert!(
            value.len() < 8 || !shown.contains(value),
            "credential shown in report"
        );
    }
    let stored = control.kubectl(&[
        "get",
        "secret",
        "data-plane-kubeconfig",
        "-n",
        NS,
        "-o",
        "go-template={{index .data \"kubeconfig\" | base64decode}}",
    ]);
    assert_eq!(text(&stored.stdout), kubeconfig, "{}", text(&stored.stderr));

    // Converged: applying the same Score again changes nothing on either plane.
    let again = split(&control, &data, &ctx)
        .await
        .with_data_plane_kubeconfig(NS, "data-plane-kubeconfig", kubeconfig);
    let second = again.apply(&stack(), &owned()).await.unwrap();
    assert!(
        second.iter().all(|c| c.action == ChangeAction::Unchanged),
        "{second:#?}"
    );
}

#[tokio::test(flavor = "multi_thread")]
async fn a_missing_reference_fails_the_closure_check_and_nothing_is_applied() {
    let (control, data) = (start(), start());
    let ctx = RunContext::default();
    let topology = split(&control, &data, &ctx).await;
    let objects = vec![
        config_map("web-config"),
        deployment(Some("web-config"), Some("db-credentials")),
        obj(
            json!({"apiVersion": "v1", "kind": "ServiceAccount", "metadata": {"name": "app", "namespace": NS}}),
        ),
        service("web"),
    ];
    let err = topology.apply(&objects, &owned()).await.unwrap_err();
    let message = err.to_string();
    assert!(message.contains("apps/v1 Deployment shop/web"), "{message}");
    assert!(
        message.contains("v1 Secret shop/db-credentials (envFrom)"),
        "{message}"
    );
    assert!(err.applied.is_empty(), "{:#?}", err.applied);
    for server in [&control, &data] {
        let namespaces = text(&server.kubectl(&["get", "namespaces", "-o", "name"]).stdout);
        assert!(
            !namespaces.contains("namespace/shop")
                && !namespaces.contains("namespace/harmony-system"),
            "something was applied:\n{namespaces}"
        );
    }

    // Present on the data plane is not enough: the pod runs on the control plane.
    for server in [&data, &control] {
        let out = server.kubectl(&["create", "namespace", NS]);
        assert!(out.status.success(), "{}", text(&out.stderr));
    }
    let create = |server: &ApiServer| {
        let out = server.kubectl(&[
            "create",
            "secret",
            "generic",
            "db-credentials",
            "-n",
            NS,
            "--from-literal=password=made-by-hand",
        ]);
        assert!(out.status.success(), "{}", text(&out.stderr));
    };
    create(&data);
    let err = topology.apply(&objects, &owned()).await.unwrap_err();
    assert!(
        err.to_string().contains("v1 Secret shop/db-credentials"),
        "{err}"
    );

    // Present live on the control plane: the check passes and the pod template is applied there.
    create(&control);
    let changes = topology.apply(&objects, &owned()).await.unwrap();
    assert!(
        changes
            .iter()
            .all(|c| c.object != "v1 Secret shop/db-credentials"),
        "an undeclared object is not applied: {changes:#?}"
    );
    assert!(listed(&control, "deployments").contains("deployment.apps/web"));
    assert!(!listed(&data, "deployments").contains("deployment.apps/web"));
}

#[tokio::test(flavor = "multi_thread")]
async fn prune_removes_objects_from_the_right_plane_only() {
    let (control, data) = (start(), start());
    let first = split(&control, &data, &RunContext::default()).await;
    let sa = obj(
        json!({"apiVersion": "v1", "kind": "ServiceAccount", "metadata": {"name": "app", "namespace": NS}}),
    );
    first
        .apply(
            &[
                sa.clone(),
                deployment(Some("settings"), None),
                config_map("settings"),
                config_map("extra"),
                // It selects no pod of this apply: data plane.
                service("reports"),
            ],
            &owned(),
        )
        .await
        .unwrap();
    assert!(listed(&control, "configmaps").contains("configmap/settings"));
    assert!(listed(&data, "configmaps").contains("configmap/extra"));
    // Same names on the other plane, made by hand: not owned, never pruned.
    for (server, name) in [(&data, "settings"), (&control, "extra")] {
        let out = server.kubectl(&["create", "configmap", name, "-n", NS, "--from-literal=a=b"]);
        assert!(out.status.success(), "{}", text(&out.stderr));
    }

    let now = [sa.clone(), deployment(None, None), service("reports")];
    let deletes = |changes: &[ObjectChange]| -> Vec<(String, String)> {
        let mut d: Vec<(String, String)> = changes
            .iter()
            .filter(|c| c.action == ChangeAction::Delete)
            .map(|c| {
                let loc = c.location.clone().unwrap_or_default();
                (
                    c.object.clone(),
                    loc.split(" @ ").next().unwrap_or_default().to_string(),
                )
            })
            .collect();
        d.sort();
        d
    };
    let expected = vec![
        (
            "v1 ConfigMap shop/extra".to_string(),
            "data-plane: pruned, no longer declared".to_string(),
        ),
        (
            "v1 ConfigMap shop/settings".to_string(),
            "control-plane: pruned, no longer declared".to_string(),
        ),
    ];
    let plan_ctx = RunContext {
        plan: true,
        prune: true,
        ..RunContext::default()
    };
    let planned = split(&control, &data, &plan_ctx)
        .await
        .apply(&now, &owned())
        .await
        .unwrap();
    assert_eq!(deletes(&planned), expected);
    assert!(
        listed(&control, "configmaps").contains("configmap/settings"),
        "plan must not delete"
    );

    let prune_ctx = RunContext {
        prune: true,
        ..RunContext::default()
    };
    let pruning = split(&control, &data, &prune_ctx).await;
    let applied = pruning.apply(&now, &owned()).await.unwrap();
    assert_eq!(deletes(&applied), expected);
    assert_eq!(
        listed(&control, "configmaps"),
        BTreeSet::from(["configmap/extra".to_string()]),
        "the control plane keeps the hand-made extra only"
    );
    assert_eq!(
        listed(&data, "configmaps"),
        BTreeSet::from(["configmap/settings".to_string()]),
        "the data plane keeps the hand-made settings only"
    );

    // A Score left with nothing on the data plane still prunes it.
    let last = pruning
        .apply(&[sa, deployment(None, None)], &owned())
        .await
        .unwrap();
    assert_eq!(
        deletes(&last),
        [(
            "v1 Service shop/web".to_string(),
            "data-plane: pruned, no longer declared".to_string()
        )]
    );
    assert!(listed(&data, "services").is_empty());
    assert!(listed(&control, "deployments").contains("deployment.apps/web"));
}

#[tokio::test(flavor = "multi_thread")]
async fn ensure_ready_names_the_plane_that_is_not_ready() {
    let control = start();
    // A port nobody listens on.
    let port = std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port();
    let dir = tempfile::tempdir().unwrap();
    let kubeconfig = dir.path().join("kubeconfig");
    std::fs::write(
        &kubeconfig,
        format!(
            "apiVersion: v1\nkind: Config\nclusters:\n- name: c\n  cluster:\n    server: https://127.0.0.1:{port}\n    insecure-skip-tls-verify: true\ncontexts:\n- name: c\n  context:\n    cluster: c\n    user: u\ncurrent-context: c\nusers:\n- name: u\n  user:\n    token: not-a-real-token\n"
        ),
    )
    .unwrap();
    let ctx = RunContext::default();
    let gone = K8sTopology::new(
        "gone",
        KubeTarget::Kubeconfig {
            path: Some(kubeconfig),
            context: None,
        },
        &ctx,
    );
    let topology = SplitPlaneTopology::new("split", control.topology("control", &ctx), gone, &ctx);
    let err = topology.ensure_ready().await.unwrap_err().to_string();
    assert!(
        err.contains("data-plane (topology \"gone\") is not ready"),
        "{err}"
    );
    assert!(err.contains(&format!("127.0.0.1:{port}")), "{err}");
    assert!(!err.contains("control-plane"), "{err}");
}

/// Deployment `name` running as ServiceAccount `sa`, its pods labelled `app: <name>`, with
/// `volumes` in its pod template.
fn runnable(name: &str, sa: &str, volumes: serde_json::Value) -> K8sObject {
    obj(json!({"apiVersion": "apps/v1", "kind": "Deployment",
        "metadata": {"name": name, "namespace": NS},
        "spec": {"replicas": 1, "selector": {"matchLabels": {"app": name}},
            "template": {"metadata": {"labels": {"app": name}}, "spec": {
                "serviceAccountName": sa, "volumes": volumes,
                "containers": [{"name": name, "image": "registry.example.com/web:1.0"}]}}}}))
}

fn service_account(name: &str, pull_secrets: &[&str]) -> K8sObject {
    let secrets: Vec<serde_json::Value> = pull_secrets.iter().map(|s| json!({"name": s})).collect();
    obj(json!({"apiVersion": "v1", "kind": "ServiceAccount",
        "metadata": {"name": name, "namespace": NS}, "imagePullSecrets": secrets}))
}

/// Fails unless the closure check refused `objects` naming `needle`, with nothing applied:
/// neither server has the namespace the objects live in.
async fn refused(
    topology: &SplitPlaneTopology<K8sTopology>,
    objects: &[K8sObject],
    needle: &str,
    servers: [&ApiServer; 2],
) {
    let err = topology.apply(objects, &owned()).await.unwrap_err();
    let message = err.to_string();
    assert!(message.contains("split-plane closure check"), "{message}");
    assert!(message.contains(needle), "{needle} not in: {message}");
    assert!(err.applied.is_empty(), "{:#?}", err.applied);
    for server in servers {
        let namespaces = text(&server.kubectl(&["get", "namespaces", "-o", "name"]).stdout);
        assert!(
            !namespaces.contains("namespace/shop"),
            "something was applied:\n{namespaces}"
        );
    }
}

#[tokio::test(flavor = "multi_thread")]
async fn a_mounted_claim_goes_with_its_pod_or_the_check_names_it() {
    let (control, data) = (start(), start());
    let topology = split(&control, &data, &RunContext::default()).await;
    let web = runnable(
        "web",
        "app",
        json!([{"name": "data", "persistentVolumeClaim": {"claimName": "web-data"}}]),
    );
    let sa = service_account("app", &[]);
    refused(
        &topology,
        &[sa.clone(), web.clone()],
        "needs v1 PersistentVolumeClaim shop/web-data (volume \"data\") on the control-plane",
        [&control, &data],
    )
    .await;

    let claim = obj(json!({"apiVersion": "v1", "kind": "PersistentVolumeClaim",
        "metadata": {"name": "web-data", "namespace": NS},
        "spec": {"accessModes": ["ReadWriteOnce"], "resources": {"requests": {"storage": "1Gi"}}}}));
    let changes = topology.apply(&[sa, claim, web], &owned()).await.unwrap();
    assert!(listed(&control, "persistentvolumeclaims").contains("persistentvolumeclaim/web-data"));
    assert!(listed(&data, "persistentvolumeclaims").is_empty());
    assert!(
        location(
            &changes,
            "v1 PersistentVolumeClaim shop/web-data",
            "control-plane"
        )
        .starts_with("control-plane: used by apps/v1 Deployment shop/web (volume \"data\") @ ")
    );
}

#[tokio::test(flavor = "multi_thread")]
async fn a_service_selecting_the_pods_goes_with_them_or_the_check_names_it() {
    let (control, data) = (start(), start());
    let topology = split(&control, &data, &RunContext::default()).await;
    let web = runnable("web", "app", json!([]));
    let sa = service_account("app", &[]);
    // Pinned to the data plane, where no pod runs: its endpoints would stay empty.
    let mut pinned = service("web").value().clone();
    pinned["metadata"]["annotations"] = json!({"harmony.io/plane": "data"});
    refused(
        &topology,
        &[sa.clone(), web.clone(), obj(pinned)],
        "needs v1 Service shop/web (selects its pods: app=web), declared for the data-plane only on the control-plane",
        [&control, &data],
    )
    .await;

    let mut reports = service("reports").value().clone();
    reports["metadata"]["name"] = json!("reports");
    let changes = topology
        .apply(&[sa, web, service("web"), obj(reports)], &owned())
        .await
        .unwrap();
    assert_eq!(
        listed(&control, "services"),
        BTreeSet::from(["service/web".to_string()])
    );
    assert_eq!(
        listed(&data, "services"),
        BTreeSet::from(["service/reports".to_string()])
    );
    assert!(
        location(&changes, "v1 Service shop/web", "control-plane").starts_with(
            "control-plane: selects the pods of apps/v1 Deployment shop/web (app=web) @ "
        )
    );
    assert!(
        location(&changes, "v1 Service shop/reports", "data-plane")
            .starts_with("data-plane: not needed by any pod @ ")
    );
}

#[tokio::test(flavor = "multi_thread")]
async fn the_pull_secrets_of_a_runnables_service_account_go_with_it_or_the_check_names_them() {
    let (control, data) = (start(), start());
    let topology = split(&control, &data, &RunContext::default()).await;
    let web = runnable("web", "app", json!([]));
    let sa = service_account("app", &["registry"]);
    refused(
        &topology,
        &[sa.clone(), web.clone()],
        "needs v1 Secret shop/registry (imagePullSecrets of ServiceAccount shop/app) on the control-plane",
        [&control, &data],
    )
    .await;

    let changes = topology
        .apply(&[secret("registry"), sa, web], &owned())
        .await
        .unwrap();
    assert!(listed(&control, "secrets").contains("secret/registry"));
    assert!(!listed(&data, "secrets").contains("secret/registry"));
    assert!(
        location(&changes, "v1 Secret shop/registry", "control-plane")
            .starts_with("control-plane: image pull secret of ServiceAccount shop/app @ ")
    );

    // A ServiceAccount made by hand on the control plane: its pull secrets are read there.
    for args in [
        vec!["create", "serviceaccount", "builder", "-n", NS],
        vec![
            "patch",
            "serviceaccount",
            "builder",
            "-n",
            NS,
            "-p",
            r#"{"imagePullSecrets": [{"name": "builder-registry"}]}"#,
        ],
    ] {
        let out = control.kubectl(&args);
        assert!(out.status.success(), "{}", text(&out.stderr));
    }
    let builder = runnable("builder", "builder", json!([]));
    let err = topology
        .apply(std::slice::from_ref(&builder), &owned())
        .await
        .unwrap_err();
    assert!(
        err.to_string().contains(
            "needs v1 Secret shop/builder-registry (imagePullSecrets of ServiceAccount shop/builder)"
        ),
        "{err}"
    );
    assert!(!listed(&control, "deployments").contains("deployment.apps/builder"));
    let out = control.kubectl(&[
        "create",
        "secret",
        "docker-registry",
        "builder-registry",
        "-n",
        NS,
        "--docker-server=registry.example.com",
        "--docker-username=builder",
        "--docker-password=made-by-hand",
    ]);
    assert!(out.status.success(), "{}", text(&out.stderr));
    topology.apply(&[builder], &owned()).await.unwrap();
    assert!(listed(&control, "deployments").contains("deployment.apps/builder"));
}
