//! Every route × every kind of caller → its status; revoked and expired tokens.

use axum::http::Method as M;
use serde_json::{Value, json};

use super::{ADMIN, call, must, world};

#[tokio::test]
async fn every_route_answers_each_kind_of_caller_as_its_scope_allows() {
    let w = world().await;
    let spare_id = w.spare["id"].as_str().unwrap();

    // [no token, wrong token, tenant A, tenant B, admin].
    let wrong = "htt_0123456789abcdef_not-a-real-secret";
    let callers: [Option<&str>; 5] = [
        None,
        Some(wrong),
        Some(&w.tok_a),
        Some(&w.tok_b),
        Some(ADMIN),
    ];
    let ask = json!({"op": "get_objects", "project": "web", "params": {"objects": []},
        "timeout_s": 0.05});
    let none = Value::Null;
    let revoke = format!("/v1/admin/tenants/beta/tokens/{spare_id}");
    #[rustfmt::skip]
    let table: Vec<(M, &str, Value, [u16; 5])> = vec![
        (M::GET, "/healthz", none.clone(), [200, 200, 200, 200, 200]),
        (M::POST, "/v1/admin/regions", json!({"region": "made", "zone": "z1"}), [401, 401, 403, 403, 201]),
        (M::POST, "/v1/admin/regions/bootable/bootstrap-token", none.clone(), [401, 401, 403, 403, 201]),
        (M::DELETE, "/v1/admin/regions/spare", none.clone(), [401, 401, 403, 403, 200]),
        (M::POST, "/v1/admin/tenants", json!({"tenant": "gamma"}), [401, 401, 403, 403, 201]),
        (M::GET, "/v1/admin/tenants", none.clone(), [401, 401, 403, 403, 200]),
        (M::POST, "/v1/admin/tenants/beta/tokens", json!({}), [401, 401, 403, 403, 201]),
        (M::DELETE, &revoke, none.clone(), [401, 401, 403, 403, 200]),
        (M::PUT, "/v1/admin/tenants/beta/caps/eu", json!({"cpu": "8"}), [401, 401, 403, 403, 200]),
        (M::POST, "/v1/admin/tenants/beta/projects", json!({"project": "blog"}), [401, 401, 403, 403, 201]),
        (M::PUT, "/v1/admin/tenants/beta/projects/blog/quotas/eu", json!({"cpu": "1"}), [401, 401, 403, 403, 200]),
        (M::GET, "/v1/admin/no-such-route", none.clone(), [401, 401, 403, 403, 404]),
        (M::GET, "/v1/projects", none.clone(), [401, 401, 200, 200, 200]),
        (M::GET, "/v1/regions", none.clone(), [401, 401, 200, 200, 200]),
        (M::GET, "/v1/regions/eu", none.clone(), [401, 401, 200, 200, 200]),
        (M::GET, "/v1/regions/nowhere", none.clone(), [401, 401, 404, 404, 404]),
        // Project "web" is A's: A waits (504), B has none (404), the admin names no tenant (400).
        (M::POST, "/v1/regions/eu/requests", ask.clone(), [401, 401, 504, 404, 400]),
        (M::POST, "/v1/regions/nowhere/requests", ask.clone(), [401, 401, 404, 404, 404]),
        // Ids live in the tenant: A's a-1 is acme@a-1 to the admin, and nothing to B.
        (M::GET, "/v1/requests/a-1", none.clone(), [401, 401, 200, 404, 404]),
        (M::GET, "/v1/requests/acme@a-1", none.clone(), [401, 401, 200, 404, 200]),
        (M::GET, "/v1/requests/no-such-request", none.clone(), [401, 401, 404, 404, 404]),
        // No region offers "queue": A is refused for that (409), B has no project web.
        (M::POST, "/v1/services", json!({"type": "queue", "project": "web"}), [401, 401, 409, 404, 400]),
        (M::GET, "/v1/services", none.clone(), [401, 401, 200, 200, 200]),
        (M::GET, "/v1/services/svc-none", none.clone(), [401, 401, 404, 404, 404]),
        (M::DELETE, "/v1/services/svc-none", none.clone(), [401, 401, 404, 404, 404]),
        (M::GET, "/v1/no-such-route", none.clone(), [401, 401, 404, 404, 404]),
    ];
    let names = ["no token", "wrong token", "tenant A", "tenant B", "admin"];
    let mut wrong_answers = Vec::new();
    for (method, path, body, expected) in &table {
        for (i, caller) in callers.iter().enumerate() {
            let body = (!body.is_null()).then_some(body);
            let (status, answer) = call(&w.app, method.clone(), path, *caller, body).await;
            if status != expected[i] {
                wrong_answers.push(format!(
                    "{method} {path} as {}: {status}, expected {}: {answer}",
                    names[i], expected[i]
                ));
            }
            if status == 401 {
                assert!(
                    answer["error"].as_str().unwrap().contains("Bearer"),
                    "{answer}"
                );
            }
        }
    }
    assert!(wrong_answers.is_empty(), "{}", wrong_answers.join("\n"));
}

#[tokio::test]
async fn revoked_and_expired_tokens_are_refused_like_unknown_ones() {
    let w = world().await;
    let spare = w.spare["token"].as_str();
    assert_eq!(
        call(&w.app, M::GET, "/v1/projects", spare, None).await.0,
        200
    );
    let revoke = format!(
        "/v1/admin/tenants/beta/tokens/{}",
        w.spare["id"].as_str().unwrap()
    );
    must(&w.app, ADMIN, M::DELETE, &revoke, Value::Null, 200).await;
    let (status, _) = call(&w.app, M::GET, "/v1/projects", spare, None).await;
    assert_eq!(status, 401, "a revoked token still works");
    let short = must(
        &w.app,
        ADMIN,
        M::POST,
        "/v1/admin/tenants/acme/tokens",
        json!({"ttl_s": 0.001}),
        201,
    )
    .await;
    tokio::time::sleep(std::time::Duration::from_millis(20)).await;
    let (status, _) = call(
        &w.app,
        M::GET,
        "/v1/projects",
        short["token"].as_str(),
        None,
    )
    .await;
    assert_eq!(status, 401, "an expired token still works");
}
