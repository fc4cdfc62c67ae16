//! Tenant requests are held to their project; a project quota over the tenant's cap is refused
//! with the figures.

use axum::http::Method as M;
use serde_json::{Value, json};

use super::{ADMIN, call, get, submit, world};

#[tokio::test]
async fn tenant_requests_are_held_to_their_project() {
    let w = world().await;
    let (app, tok_a) = (&w.app, w.tok_a.as_str());
    let refusals: Vec<(Value, u16, Vec<&str>)> = vec![
        (
            json!({"op": "get_objects", "params": {"objects": []}}),
            400,
            vec!["project:"],
        ),
        (
            json!({"op": "get_inventory", "project": "web"}),
            403,
            vec!["op:", "get_inventory"],
        ),
        (
            json!({"op": "apply_manifests", "project": "web", "params": {"manifests": [
            {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "x", "namespace": "kube-system"}}]}}),
            403,
            vec!["ConfigMap x", "kube-system", "acme-web"],
        ),
        (
            json!({"op": "get_objects", "project": "web", "params": {"objects": [
            {"api_version": "rbac.authorization.k8s.io/v1", "kind": "ClusterRole", "name": "admin"}]}}),
            422,
            vec!["ClusterRole admin", "cluster-scoped"],
        ),
        (
            json!({"op": "get_objects", "project": "api", "params": {"objects": []}}),
            422,
            vec!["PUT /v1/admin/tenants/acme/projects/api/quotas/eu"],
        ),
        (
            json!({"op": "get_objects", "tenant": "beta", "project": "shop", "params": {"objects": []}}),
            403,
            vec!["tenant:", "acme"],
        ),
    ];
    for (body, status, words) in refusals {
        let (got, answer) = submit(app, tok_a, &body).await;
        assert_eq!(got, status, "{body}: {answer}");
        let message = answer["error"].as_str().unwrap_or_default();
        for w in words {
            assert!(message.contains(w), "{body}: {message} lacks {w}");
        }
    }
    // A namespace-less object of the project's own namespace passes (the agent defaults it),
    // and the admin may act for a tenant's project; the tenant then reads that request.
    let ok = json!({"op": "apply_manifests", "project": "web", "timeout_s": 0.05, "params": {"manifests": [
        {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "x"}},
        {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "y", "namespace": "acme-web"}}]}});
    assert_eq!(submit(app, tok_a, &ok).await.0, 504);
    let for_acme = json!({"id": "admin-for-acme", "op": "get_objects", "tenant": "acme",
        "project": "web", "params": {"objects": []}, "timeout_s": 0.05});
    assert_eq!(submit(app, ADMIN, &for_acme).await.0, 504);
    assert_eq!(
        get(app, tok_a, "/v1/requests/admin-for-acme").await["id"],
        "admin-for-acme"
    );
}

#[tokio::test]
async fn a_quota_over_the_tenants_cap_is_a_422_naming_the_cap_the_resource_and_the_figures() {
    let w = world().await;
    let (status, answer) = call(
        &w.app,
        M::PUT,
        "/v1/admin/tenants/acme/projects/api/quotas/eu",
        Some(ADMIN),
        Some(&json!({"cpu": "2500m", "memory": "1Gi"})),
    )
    .await;
    assert_eq!(status, 422, "{answer}");
    let message = answer["error"].as_str().unwrap();
    for w in [
        "cpu",
        "cap is 4",
        "take 2",
        "asks 2500m",
        "PUT /v1/admin/tenants/acme/caps/eu",
    ] {
        assert!(message.contains(w), "{message} lacks {w}");
    }
}
