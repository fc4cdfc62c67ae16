//! The authorisation matrix of the control plane's API, in process: every route × {no token, a
//! wrong token, tenant A, tenant B, the admin} → the expected status, through the real router
//! over a real SQLite store ([`super::test_world`]), with one region whose agent never connects
//! (requests that pass every check wait 50 ms and answer 504, deterministically). Then the
//! bodies: a tenant never sees another's projects or requests, nor any admin field of a region;
//! tenant requests are held to their project (its namespace, its quota in the region, the ops a
//! tenant may run); a project quota over the tenant's cap is a 422 with the figures; revoked and
//! expired tokens are refused.
//!
//! What needs the real process stays in `tests/e2e/tests/control_plane_authz.rs`: the same
//! callers over the TLS listener and no token in the process's log at debug level, and the
//! tenancy calls of `ControlPlaneClient` over the network.

mod bodies;
mod matrix;
mod scope;

use axum::http::Method as M;
use serde_json::{Value, json};

use super::test_world::{ADMIN, app, call, must};

/// The world of every test here, as the admin sets it up: regions `eu`, `spare` and `bootable`
/// (no agent connects), tenants `acme` (A: projects `web` with a quota in `eu`, and `api`
/// without; a cap in `eu`) and `beta` (B: project `shop` with a quota in `eu`), a token for
/// each and a spare one of B's, and A's request `a-1`, queued and answered 504.
struct World {
    app: axum::Router,
    /// Tenant A's (acme's) token.
    tok_a: String,
    /// Tenant B's (beta's) token.
    tok_b: String,
    /// A second token of B's, as issued: `id` and `token`.
    spare: Value,
    _dir: tempfile::TempDir,
}

async fn world() -> World {
    let dir = tempfile::tempdir().unwrap();
    let (app, _) = app(dir.path()).await;
    let a = ADMIN;
    for region in ["eu", "spare", "bootable"] {
        let body = json!({"region": region, "zone": "z1"});
        must(&app, a, M::POST, "/v1/admin/regions", body, 201).await;
    }
    for tenant in ["acme", "beta"] {
        let body = json!({"tenant": tenant});
        must(&app, a, M::POST, "/v1/admin/tenants", body, 201).await;
    }
    let issue = |tenant: &'static str| {
        let app = &app;
        let path = format!("/v1/admin/tenants/{tenant}/tokens");
        async move { must(app, a, M::POST, &path, json!({}), 201).await }
    };
    let token = |v: Value| v["token"].as_str().unwrap().to_string();
    let tok_a = token(issue("acme").await);
    let tok_b = token(issue("beta").await);
    let spare = issue("beta").await;
    assert!(tok_a.starts_with("htt_") && tok_a != tok_b);
    let cap = json!({"cpu": "4", "memory": "8Gi"});
    must(&app, a, M::PUT, "/v1/admin/tenants/acme/caps/eu", cap, 200).await;
    let projects = "/v1/admin/tenants/acme/projects";
    let web = must(&app, a, M::POST, projects, json!({"project": "web"}), 201).await;
    assert_eq!(web["namespace"], "acme-web");
    must(&app, a, M::POST, projects, json!({"project": "api"}), 201).await;
    let shop = json!({"project": "shop"});
    must(
        &app,
        a,
        M::POST,
        "/v1/admin/tenants/beta/projects",
        shop,
        201,
    )
    .await;
    let quota = json!({"cpu": "2", "memory": "4Gi"});
    for path in [
        "/v1/admin/tenants/acme/projects/web/quotas/eu",
        "/v1/admin/tenants/beta/projects/shop/quotas/eu",
    ] {
        must(&app, a, M::PUT, path, quota.clone(), 200).await;
    }
    // A request of tenant A's (no agent: queued, 504 after its 50 ms).
    let mine = json!({"id": "a-1", "op": "get_objects", "project": "web",
        "params": {"objects": []}, "timeout_s": 0.05});
    let (status, answer) = submit(&app, &tok_a, &mine).await;
    assert_eq!(status, 504, "{answer}");
    World {
        app,
        tok_a,
        tok_b,
        spare,
        _dir: dir,
    }
}

/// Submits `body` to region `eu` with `token`: the status and the body.
async fn submit(app: &axum::Router, token: &str, body: &Value) -> (u16, Value) {
    call(
        app,
        M::POST,
        "/v1/regions/eu/requests",
        Some(token),
        Some(body),
    )
    .await
}

/// A GET with `token` that must answer 200; its body.
async fn get(app: &axum::Router, token: &str, path: &str) -> Value {
    must(app, token, M::GET, path, Value::Null, 200).await
}
