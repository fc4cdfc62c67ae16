//! Unit tests of `topology.rs`, against two render-mode planes.

use super::*;
use serde_json::{Value, json};

fn obj(v: Value) -> K8sObject {
    K8sObject::new(v).unwrap()
}

fn web() -> K8sObject {
    obj(json!({"apiVersion": "apps/v1", "kind": "Deployment",
        "metadata": {"name": "web", "namespace": "shop"},
        "spec": {"selector": {}, "template": {"spec": {"containers": [{"name": "web",
            "envFrom": [{"secretRef": {"name": "db-credentials"}}]}]}}}}))
}

fn secret(name: &str) -> K8sObject {
    obj(json!({"apiVersion": "v1", "kind": "Secret",
        "metadata": {"name": name, "namespace": "shop"}, "stringData": {"password": "hunter2"}}))
}

fn service() -> K8sObject {
    obj(
        json!({"apiVersion": "v1", "kind": "Service", "metadata": {"name": "web", "namespace": "shop"},
        "spec": {"ports": [{"port": 80}]}}),
    )
}

fn ctx(dir: &std::path::Path, plan: bool) -> RunContext {
    RunContext {
        plan,
        out_dir: dir.to_path_buf(),
        ..RunContext::default()
    }
}

fn owned() -> ApplyOptions {
    ApplyOptions {
        owner: Some("shop".into()),
        ..ApplyOptions::default()
    }
}

fn locations(changes: &[ObjectChange]) -> Vec<(String, String)> {
    changes
        .iter()
        .map(|c| (c.object.clone(), c.location.clone().unwrap_or_default()))
        .collect()
}

#[tokio::test(flavor = "multi_thread")]
async fn render_mode_writes_one_folder_per_plane_and_labels_each_change() {
    let dir = tempfile::tempdir().unwrap();
    let split = SplitPlaneTopology::rendered("split", &ctx(dir.path(), false))
        .with_data_plane_kubeconfig("shop", "data-plane-kubeconfig", "token: s3cr3t-kubeconfig");
    split.ensure_ready().await.unwrap();
    let changes = split
        .apply(&[web(), secret("db-credentials"), service()], &owned())
        .await
        .unwrap();
    let root = dir.path();
    let control = root.join("control-plane/kubernetes/namespaces/shop");
    let data = root.join("data-plane/kubernetes/namespaces/shop");
    assert!(control.join("deployment.apps_web.yaml").is_file());
    assert!(control.join("secret_db-credentials.yaml").is_file());
    assert!(control.join("secret_data-plane-kubeconfig.yaml").is_file());
    assert!(data.join("service_web.yaml").is_file());
    assert!(!data.join("deployment.apps_web.yaml").exists());
    assert!(!control.join("service_web.yaml").exists());
    let shown = locations(&changes);
    let at = |object: &str| {
        shown
            .iter()
            .find(|(o, _)| o == object)
            .map(|(_, l)| l.clone())
            .unwrap_or_else(|| panic!("{object} not in {shown:#?}"))
    };
    assert!(at("v1 Service shop/web").starts_with("data-plane: not needed by any pod @ "));
    assert!(at("apps/v1 Deployment shop/web").starts_with("control-plane: runnable @ "));
    assert!(
        at("v1 Secret shop/db-credentials")
            .starts_with("control-plane: used by apps/v1 Deployment shop/web (envFrom) @ "),
        "{shown:#?}"
    );
    assert!(
        at("v1 Secret shop/data-plane-kubeconfig")
            .starts_with("control-plane: kubeconfig for runnables to reach the data plane @ ")
    );
    assert!(!format!("{changes:?}").contains("s3cr3t-kubeconfig"));
    // The kubeconfig Secret is applied once per run.
    let again = split
        .apply(&[web(), secret("db-credentials")], &owned())
        .await
        .unwrap();
    assert_eq!(again.len(), 2, "{again:#?}");
    assert!(again.iter().all(|c| c.action == ChangeAction::Unchanged));
}

#[tokio::test(flavor = "multi_thread")]
async fn a_missing_reference_fails_before_anything_is_written() {
    let dir = tempfile::tempdir().unwrap();
    let split = SplitPlaneTopology::rendered("split", &ctx(dir.path(), false));
    split.ensure_ready().await.unwrap();
    let err = split
        .apply(&[web(), service()], &owned())
        .await
        .unwrap_err();
    let text = err.to_string();
    assert!(text.contains("apps/v1 Deployment shop/web"), "{text}");
    assert!(
        text.contains("v1 Secret shop/db-credentials (envFrom)"),
        "{text}"
    );
    assert!(err.applied.is_empty());
    assert!(!dir.path().join("data-plane/kubernetes").exists());
    assert!(!dir.path().join("control-plane/kubernetes").exists());
}

#[tokio::test(flavor = "multi_thread")]
async fn earlier_declarations_count_in_plan_mode_and_the_wrong_plane_is_named() {
    let dir = tempfile::tempdir().unwrap();
    let split = SplitPlaneTopology::rendered("split", &ctx(dir.path(), true));
    let pinned = obj(json!({"apiVersion": "v1", "kind": "Secret",
        "metadata": {"name": "db-credentials", "namespace": "shop",
                     "annotations": {"harmony.io/plane": "control"}}}));
    split.apply(&[pinned], &owned()).await.unwrap();
    split.apply(&[web()], &owned()).await.unwrap();
    assert!(
        !dir.path().join("control-plane").exists(),
        "plan writes nothing"
    );

    // Declared alone, without the annotation, it goes to the data plane: the error says so.
    let split = SplitPlaneTopology::rendered("split", &ctx(dir.path(), true));
    split
        .apply(&[secret("db-credentials")], &owned())
        .await
        .unwrap();
    let err = split
        .apply(&[web()], &owned())
        .await
        .unwrap_err()
        .to_string();
    assert!(err.contains("declared for the data-plane only"), "{err}");
    assert!(err.contains("harmony.io/plane: control"), "{err}");
}

#[tokio::test(flavor = "multi_thread")]
async fn planes_in_different_modes_are_refused() {
    let dir = tempfile::tempdir().unwrap();
    let split = SplitPlaneTopology::new(
        "split",
        RenderTopology::from_context(&ctx(dir.path(), true)).with_site("a"),
        RenderTopology::from_context(&ctx(dir.path(), false)).with_site("b"),
        &RunContext::default(),
    );
    let err = split.ensure_ready().await.unwrap_err().to_string();
    assert!(err.contains("control plane runs in plan mode"), "{err}");
}
