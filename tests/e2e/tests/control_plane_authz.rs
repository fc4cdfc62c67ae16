//! Tokens against a real control-plane process, over its TLS listener: the admin token, two
//! tenants' tokens, a wrong one, a revoked one and an expired one, each presented on the
//! tenant and admin routes (a tenant's request included), and then no token (nor a tenant
//! token's secret) in the process's log, though it runs at debug level. `client.rs`: the
//! tenancy calls of `ControlPlaneClient` over the network.
//!
//! The authorisation matrix itself (every route × {no token, a wrong token, tenant A, tenant B,
//! the admin} → its status), the bodies each caller is shown, the scope of tenant requests, a
//! quota over the cap and the refusal of revoked and expired tokens need no process: they run
//! in process in `harmony_control_plane/src/http/authz_tests.rs`
//! (`cargo test -p harmony_control_plane --lib http::authz_tests`).
//!
//! Run: `cargo test -p harmony_e2e --test control_plane_authz`.

#[path = "control_plane_authz/client.rs"]
mod client;

use harmony_e2e::multi_region::{ControlPlane, ControlPlaneOptions, Pki};
use harmony_e2e::raw_api::RawApi;
use harmony_http::reqwest::Method;
use serde_json::{Value, json};

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn no_token_reaches_the_log_though_every_kind_of_token_is_presented_at_debug_level() {
    let pki = Pki::new().unwrap();
    let mut cp = ControlPlane::start(
        harmony_e2e::bins!().control_plane(),
        &pki,
        ControlPlaneOptions {
            rust_log: Some("debug".into()),
            ..Default::default()
        },
    )
    .unwrap();
    let api = RawApi::new(&cp.url(), pki.ca_pem.as_bytes());
    let admin = cp.admin_token.clone();
    let a = &admin;
    use Method as M;

    // Set-up, as the admin: one region (its agent never connects), two tenants, acme with a
    // project that has a quota there; their tokens, a spare one revoked, a short one expired.
    #[rustfmt::skip]
    let set_up = [
        (M::POST, "/v1/admin/regions", json!({"region": "eu", "zone": "z1"}), 201),
        (M::POST, "/v1/admin/tenants", json!({"tenant": "acme"}), 201),
        (M::POST, "/v1/admin/tenants", json!({"tenant": "beta"}), 201),
        (M::POST, "/v1/admin/tenants/acme/projects", json!({"project": "web"}), 201),
        (M::PUT, "/v1/admin/tenants/acme/projects/web/quotas/eu", json!({"cpu": "2", "memory": "4Gi"}), 200),
    ];
    for (method, path, body, status) in set_up {
        api.must(a, method, path, body, status).await;
    }
    let issue = |tenant: &str, body: Value| {
        let (api, path) = (&api, format!("/v1/admin/tenants/{tenant}/tokens"));
        async move { api.must(a, M::POST, &path, body, 201).await }
    };
    let token = |v: &Value| v["token"].as_str().unwrap().to_string();
    let tok_a = token(&issue("acme", json!({})).await);
    let tok_b = token(&issue("beta", json!({})).await);
    let spare = issue("beta", json!({})).await;
    let short = issue("acme", json!({"ttl_s": 0.001})).await;
    let revoke = format!(
        "/v1/admin/tenants/beta/tokens/{}",
        spare["id"].as_str().unwrap()
    );
    api.must(a, M::DELETE, &revoke, Value::Null, 200).await;
    tokio::time::sleep(std::time::Duration::from_millis(20)).await;

    // Each token on a tenant route, an admin route and a tenant's request (no agent: queued,
    // 504 after its 50 ms): accepted (whatever the route then says) or refused with 401.
    let wrong = "htt_0123456789abcdef_not-a-real-secret";
    let (revoked, expired) = (token(&spare), token(&short));
    let callers: [(&str, Option<&str>, bool); 7] = [
        ("no token", None, false),
        ("a wrong token", Some(wrong), false),
        ("tenant A", Some(&tok_a), true),
        ("tenant B", Some(&tok_b), true),
        ("the admin", Some(a), true),
        ("a revoked token", Some(&revoked), false),
        ("an expired token", Some(&expired), false),
    ];
    let ask = json!({"id": "a-1", "op": "get_objects", "project": "web",
        "params": {"objects": []}, "timeout_s": 0.05});
    let routes = [
        (M::GET, "/v1/projects", None),
        (M::GET, "/v1/admin/tenants", None),
        (M::POST, "/v1/regions/eu/requests", Some(&ask)),
        (M::GET, "/v1/requests/a-1", None),
    ];
    for (who, token, valid) in callers {
        for (method, path, body) in &routes {
            let (status, answer) = api.call(method.clone(), path, token, *body).await;
            assert_eq!(
                status != 401,
                valid,
                "{method} {path} with {who}: {status} {answer}"
            );
        }
    }

    // No token is ever logged, though the control plane logs at debug level.
    let logs = cp.logs();
    assert!(
        logs.contains("tenant acme: token"),
        "the log lacks the token's issue:\n{logs}"
    );
    assert!(
        !logs.contains(admin.as_str()),
        "the admin token is in the control plane's log"
    );
    for t in [&tok_a, &tok_b, &revoked, &expired] {
        // `htt_<id>_<secret>`: the id may be logged, the secret never.
        let (_, secret) = t["htt_".len()..].split_once('_').unwrap();
        assert!(secret.len() >= 40, "{}", secret.len());
        assert!(
            !logs.contains(secret),
            "a tenant token is in the control plane's log"
        );
    }
    cp.kill9();
}
