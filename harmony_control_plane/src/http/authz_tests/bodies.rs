//! What each caller is shown: its own projects and requests, and of a region no admin field.

use axum::http::Method as M;
use serde_json::{Value, json};

use super::{ADMIN, get, must, submit, world};

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

/// `tenant/project` of each project listed.
fn projects(v: Value) -> Vec<String> {
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
}

#[tokio::test]
async fn a_tenant_sees_its_own_projects_and_requests_and_no_admin_field_of_a_region() {
    let w = world().await;
    let (app, a, tok_a, tok_b) = (&w.app, ADMIN, w.tok_a.as_str(), w.tok_b.as_str());
    // As the matrix leaves it: B also has project blog, and A a second request pending.
    let blog = json!({"project": "blog"});
    must(
        app,
        a,
        M::POST,
        "/v1/admin/tenants/beta/projects",
        blog,
        201,
    )
    .await;
    let ask = json!({"op": "get_objects", "project": "web", "params": {"objects": []},
        "timeout_s": 0.05});
    assert_eq!(submit(app, tok_a, &ask).await.0, 504);

    // Projects: each tenant its own, the admin every tenant's.
    assert_eq!(
        projects(get(app, tok_a, "/v1/projects").await),
        ["acme/api", "acme/web"]
    );
    assert_eq!(
        projects(get(app, tok_b, "/v1/projects").await),
        ["beta/blog", "beta/shop"]
    );
    assert_eq!(projects(get(app, a, "/v1/projects").await).len(), 4);
    // Regions: a tenant sees region, zone(s) and health; none of the admin's keys.
    for token in [tok_a, tok_b] {
        let list = get(app, token, "/v1/regions").await;
        let regions = list["regions"].as_array().unwrap();
        assert!(!regions.is_empty());
        for r in regions
            .iter()
            .chain([&get(app, token, "/v1/regions/eu").await])
        {
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
    let admin_view = get(app, a, "/v1/regions/eu").await;
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
    let a1 = get(app, tok_a, "/v1/requests/a-1").await;
    assert_eq!(
        (a1["op"].as_str(), a1["id"].as_str()),
        (Some("get_objects"), Some("a-1"))
    );
    for id in ["a-1", "b-fresh"] {
        let body = json!({"id": id, "op": "get_objects", "project": "shop",
            "params": {"objects": []}, "timeout_s": 0.05});
        let (status, answer) = submit(app, tok_b, &body).await;
        assert_eq!(status, 504, "{id}: {answer}");
        let text = answer.to_string();
        assert!(!text.contains("acme") && !text.contains("web"), "{text}");
    }
}
