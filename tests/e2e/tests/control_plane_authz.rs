//! The authorisation matrix of the control plane's API: every route × {no token, a wrong token,
//! tenant A, tenant B, the admin} → the expected status, against a real control-plane process
//! (SQLite) with one region whose agent never connects (requests that pass every check wait
//! 50 ms and answer 504, deterministically). Then the bodies: a tenant never sees another's
//! projects or requests, nor any admin field of a region; tenant requests are held to their
//! project (its namespace, its quota in the region, the ops a tenant may run); a project quota
//! over the tenant's cap is a 422 with the figures; revoked and expired tokens are refused; and
//! no token appears in the control plane's log (run at debug level).
//!
//! Run: `cargo test -p harmony_e2e --test control_plane_authz`.

#[path = "control_plane_authz/client.rs"]
mod client;

use harmony_e2e::multi_region::{ControlPlane, ControlPlaneOptions, Pki};
use harmony_e2e::raw_api::RawApi;
use harmony_http::reqwest::Method;
use serde_json::{Value, json};

const CP_BIN: &str = env!("CARGO_BIN_EXE_e2e-control-plane");

/// Keys of a region (or zone) that only the admin sees.
const ADMIN_KEYS: &[&str] = &[
    "agent_version",
    "ops",
    "pending_requests",
    "replica",
    "services",
    "advertised_services",
    "last_heartbeat",
    "connected",
    "connected_at",
    "node_count",
    "capacity",
    "k8s_reachable",
    "health_reason",
    "bootstrapped",
    "decommissioned",
    "created_at",
    "max_frame_bytes",
];

/// The object's keys, sorted.
fn keys(v: &Value) -> Vec<String> {
    let mut k: Vec<String> = v
        .as_object()
        .map(|o| o.keys().cloned().collect())
        .unwrap_or_default();
    k.sort();
    k
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_route_answers_each_kind_of_caller_as_its_scope_allows() {
    let pki = Pki::new().unwrap();
    let mut cp = ControlPlane::start(
        std::path::Path::new(CP_BIN),
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

    // Set-up, as the admin: one region (its agent never connects), two tenants with projects.
    for region in ["eu", "spare", "bootable"] {
        api.must(
            a,
            M::POST,
            "/v1/admin/regions",
            json!({"region": region, "zone": "z1"}),
            201,
        )
        .await;
    }
    for tenant in ["acme", "beta"] {
        api.must(
            a,
            M::POST,
            "/v1/admin/tenants",
            json!({"tenant": tenant}),
            201,
        )
        .await;
    }
    let token = |v: Value| v["token"].as_str().unwrap().to_string();
    let tok_a = token(
        api.must(a, M::POST, "/v1/admin/tenants/acme/tokens", json!({}), 201)
            .await,
    );
    let tok_b = token(
        api.must(a, M::POST, "/v1/admin/tenants/beta/tokens", json!({}), 201)
            .await,
    );
    let spare = api
        .must(a, M::POST, "/v1/admin/tenants/beta/tokens", json!({}), 201)
        .await;
    let spare_id = spare["id"].as_str().unwrap().to_string();
    assert!(tok_a.starts_with("htt_") && tok_a != tok_b);
    api.must(
        a,
        M::PUT,
        "/v1/admin/tenants/acme/caps/eu",
        json!({"cpu": "4", "memory": "8Gi"}),
        200,
    )
    .await;
    let web = api
        .must(
            a,
            M::POST,
            "/v1/admin/tenants/acme/projects",
            json!({"project": "web"}),
            201,
        )
        .await;
    assert_eq!(web["namespace"], "acme-web");
    api.must(
        a,
        M::POST,
        "/v1/admin/tenants/acme/projects",
        json!({"project": "api"}),
        201,
    )
    .await;
    api.must(
        a,
        M::POST,
        "/v1/admin/tenants/beta/projects",
        json!({"project": "shop"}),
        201,
    )
    .await;
    let quota = json!({"cpu": "2", "memory": "4Gi"});
    api.must(
        a,
        M::PUT,
        "/v1/admin/tenants/acme/projects/web/quotas/eu",
        quota.clone(),
        200,
    )
    .await;
    api.must(
        a,
        M::PUT,
        "/v1/admin/tenants/beta/projects/shop/quotas/eu",
        quota.clone(),
        200,
    )
    .await;
    // A request of tenant A's (no agent: queued, 504 after its 50 ms).
    let mine = json!({"id": "a-1", "op": "get_objects", "project": "web",
        "params": {"objects": []}, "timeout_s": 0.05});
    let (status, answer) = api
        .call(
            M::POST,
            "/v1/regions/eu/requests",
            Some(&tok_a),
            Some(&mine),
        )
        .await;
    assert_eq!(status, 504, "{answer}");

    // The matrix: [no token, wrong token, tenant A, tenant B, admin].
    let wrong = "htt_0123456789abcdef_not-a-real-secret";
    let callers: [Option<&str>; 5] = [None, Some(wrong), Some(&tok_a), Some(&tok_b), Some(a)];
    let ask = json!({"op": "get_objects", "project": "web", "params": {"objects": []},
        "timeout_s": 0.05});
    let none = Value::Null;
    let revoke = format!("/v1/admin/tenants/beta/tokens/{spare_id}");
    #[rustfmt::skip]
    let table: Vec<(Method, &str, Value, [u16; 5])> = vec![
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
            let (status, answer) = api.call(method.clone(), path, *caller, body).await;
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

    // Bodies. Projects: each tenant its own, the admin every tenant's.
    let projects = |v: Value| -> Vec<String> {
        v["projects"]
            .as_array()
            .unwrap()
            .iter()
            .map(|p| {
                format!(
                    "{}/{}",
                    p["tenant"].as_str().unwrap(),
                    p["project"].as_str().unwrap()
                )
            })
            .collect()
    };
    let get = |token: &str, path: &str| {
        let (api, token, path) = (&api, token.to_string(), path.to_string());
        async move {
            let (status, body) = api.call(M::GET, &path, Some(&token), None).await;
            assert_eq!(status, 200, "{path}: {body}");
            body
        }
    };
    assert_eq!(
        projects(get(&tok_a, "/v1/projects").await),
        ["acme/api", "acme/web"]
    );
    assert_eq!(
        projects(get(&tok_b, "/v1/projects").await),
        ["beta/blog", "beta/shop"]
    );
    assert_eq!(projects(get(a, "/v1/projects").await).len(), 4);
    // Regions: a tenant sees region, zone(s) and health; none of the admin's keys.
    for token in [&tok_a, &tok_b] {
        let list = get(token, "/v1/regions").await;
        let regions = list["regions"].as_array().unwrap();
        assert!(!regions.is_empty());
        for r in regions.iter().chain([&get(token, "/v1/regions/eu").await]) {
            assert_eq!(keys(r), ["health", "region", "zone", "zones"], "{r}");
            for z in r["zones"].as_array().unwrap() {
                assert_eq!(keys(z), ["health", "zone"], "{z}");
            }
            let text = r.to_string();
            for k in ADMIN_KEYS {
                assert!(
                    !text.contains(&format!("\"{k}\"")),
                    "{k} in a tenant's {text}"
                );
            }
        }
    }
    let admin_view = get(a, "/v1/regions/eu").await;
    for k in [
        "agent_version",
        "pending_requests",
        "health_reason",
        "connected",
    ] {
        assert!(
            admin_view.get(k).is_some(),
            "the admin's view lacks {k}: {admin_view}"
        );
    }
    assert_eq!(admin_view["pending_requests"], 2, "{admin_view}");
    // Requests: A reads its own; B's a-1 is its own request (as a fresh id is), and tells it
    // nothing of A's.
    let a1 = get(&tok_a, "/v1/requests/a-1").await;
    assert_eq!(
        (a1["op"].as_str(), a1["id"].as_str()),
        (Some("get_objects"), Some("a-1"))
    );
    for id in ["a-1", "b-fresh"] {
        let (status, answer) = api
            .call(
                M::POST,
                "/v1/regions/eu/requests",
                Some(&tok_b),
                Some(&json!({"id": id,
                "op": "get_objects", "project": "shop", "params": {"objects": []}, "timeout_s": 0.05})),
            )
            .await;
        assert_eq!(status, 504, "{id}: {answer}");
        let text = answer.to_string();
        assert!(!text.contains("acme") && !text.contains("web"), "{text}");
    }

    // Tenant requests are held to their project.
    let submit = |token: String, body: Value| {
        let api = &api;
        async move {
            api.call(
                M::POST,
                "/v1/regions/eu/requests",
                Some(&token),
                Some(&body),
            )
            .await
        }
    };
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
        let (got, answer) = submit(tok_a.clone(), body.clone()).await;
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
    assert_eq!(submit(tok_a.clone(), ok).await.0, 504);
    let for_acme = json!({"id": "admin-for-acme", "op": "get_objects", "tenant": "acme",
        "project": "web", "params": {"objects": []}, "timeout_s": 0.05});
    assert_eq!(submit(admin.clone(), for_acme).await.0, 504);
    assert_eq!(
        get(&tok_a, "/v1/requests/admin-for-acme").await["id"],
        "admin-for-acme"
    );

    // A quota over the tenant's cap: 422 naming the cap, the resource and the figures.
    let (status, answer) = api
        .call(
            M::PUT,
            "/v1/admin/tenants/acme/projects/api/quotas/eu",
            Some(a),
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

    // Revoked and expired tokens are refused like unknown ones.
    let (status, _) = api
        .call(M::GET, "/v1/projects", spare["token"].as_str(), None)
        .await;
    assert_eq!(status, 401, "a revoked token still works");
    let short = api
        .must(
            a,
            M::POST,
            "/v1/admin/tenants/acme/tokens",
            json!({"ttl_s": 0.001}),
            201,
        )
        .await;
    tokio::time::sleep(std::time::Duration::from_millis(20)).await;
    let (status, _) = api
        .call(M::GET, "/v1/projects", short["token"].as_str(), None)
        .await;
    assert_eq!(status, 401, "an expired token still works");

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
    for t in [&tok_a, &tok_b, &token(spare.clone()), &token(short.clone())] {
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
