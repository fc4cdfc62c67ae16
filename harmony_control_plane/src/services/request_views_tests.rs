//! Requests as the status page shows them, over a real SQLite store: per zone and per viewer,
//! their last progress lines (bounded, scrubbed, only for their own zone's agent), and
//! summaries that never carry a secret value.

use harmony_agent_protocol::{ErrorBody, RawJson, Res, WireChange};
use serde_json::json;
use std::sync::Arc;

use super::*;
use crate::services::ControlPlane;
use crate::store::sqlite::SqliteStore;
use crate::store::{NewRequest, RequestScope, RequestState};

fn control_plane(dir: &std::path::Path) -> Arc<ControlPlane> {
    let store = Arc::new(SqliteStore::open(&dir.join("cp.sqlite")).unwrap());
    ControlPlane::new(store, crate::services::tests::settings())
}

/// Submits request `id` (stored as `<tenant>@<id>` for a tenant) to `eu`'s zone `zone`.
async fn submit(cp: &ControlPlane, tenant: Option<&str>, id: &str, zone: &str) -> String {
    submit_with(cp, tenant, id, zone, "{}").await
}

/// Stores an `apply_manifests` request `id` of `tenant` (as `<tenant>@<id>`; project `p`) with
/// `params` in `eu`'s zone `zone`; its stored id.
pub(crate) async fn submit_with(
    cp: &ControlPlane,
    tenant: Option<&str>,
    id: &str,
    zone: &str,
    params: &str,
) -> String {
    let stored = crate::services::requests::scoped_id(tenant, id);
    let mut r = NewRequest::new(&stored, "eu", "apply_manifests", params, now_ms()).in_zone(zone);
    if let Some(t) = tenant {
        r = r.scoped(RequestScope {
            tenant: t.into(),
            project: "p".into(),
            project_json: "{}".into(),
        });
    }
    cp.store.submit_request(&r).await.unwrap();
    stored
}

/// Stores the agent's refusal of request `stored` with `message`.
pub(crate) async fn fail(cp: &ControlPlane, stored: &str, message: &str) {
    let res = Res::err(stored, ErrorBody::new("invalid_params", message));
    let json = serde_json::to_string(&res).unwrap();
    assert!(
        cp.store
            .complete_request(stored, &json, now_ms())
            .await
            .unwrap()
    );
}

#[tokio::test]
async fn each_viewer_sees_its_own_requests_per_zone_and_failures_with_their_error() {
    let dir = tempfile::tempdir().unwrap();
    let cp = control_plane(dir.path());
    for i in 0..5 {
        submit(&cp, None, &format!("q{i}"), "a").await;
    }
    let acme_failed = submit(&cp, Some("acme"), "r1", "b").await;
    fail(&cp, &acme_failed, "manifest 1 has no kind").await;
    let globex_failed = submit(&cp, Some("globex"), "r1", "b").await;
    fail(&cp, &globex_failed, "the other tenant's failure").await;
    let ok = submit(&cp, Some("acme"), "r2", "b").await;
    let done = serde_json::to_string(&Res::ok(&ok, json!({}))).unwrap();
    cp.store
        .complete_request(&ok, &done, now_ms())
        .await
        .unwrap();

    let admin = by_zone(&cp, None).await.unwrap();
    let a = &admin[&("eu".to_string(), "a".to_string())];
    assert_eq!(a.in_flight_total, 5);
    let shown: Vec<&str> = a.in_flight.iter().map(|r| r.id.as_str()).collect();
    assert_eq!(shown, ["q0", "q1", "q2"], "the oldest, in submit order");
    let b = &admin[&("eu".to_string(), "b".to_string())];
    assert_eq!((b.in_flight_total, b.failures_total), (0, 2));
    assert!(b.failures.iter().all(|f| f.state == RequestState::Done));

    let acme = by_zone(&cp, Some("acme")).await.unwrap();
    assert!(
        !acme.contains_key(&("eu".to_string(), "a".to_string())),
        "the admin's requests"
    );
    let b = &acme[&("eu".to_string(), "b".to_string())];
    assert_eq!(b.failures.len(), 1, "{b:?}");
    assert_eq!(b.failures[0].id, "acme@r1");
    assert_eq!(
        b.failures[0].error.as_deref(),
        Some("invalid_params: manifest 1 has no kind")
    );

    // Its detail by its own id; the other tenant's request of the same id is not found.
    let mine = detail(&cp, "r1", Some("acme")).await.unwrap().unwrap();
    assert_eq!(mine.shown_id, "r1");
    assert_eq!(mine.record.id, "acme@r1");
    assert!(
        detail(&cp, "globex@r1", Some("acme"))
            .await
            .unwrap()
            .is_none()
    );
    assert!(detail(&cp, "r9", Some("acme")).await.unwrap().is_none());
    let by_admin = detail(&cp, "globex@r1", None).await.unwrap().unwrap();
    assert_eq!(by_admin.shown_id, "globex@r1");
    let outcome = outcome_summary(by_admin.res.as_ref().unwrap());
    assert_eq!(
        outcome.message.as_deref(),
        Some("the other tenant's failure")
    );
}

#[tokio::test]
async fn progress_keeps_the_last_lines_of_an_unanswered_request_of_the_agents_own_zone() {
    let dir = tempfile::tempdir().unwrap();
    let cp = control_plane(dir.path());
    let id = submit(&cp, None, "p1", "a").await;
    for n in 0..8u64 {
        let detail = format!("step {n} token=s3cr3t-{n}");
        assert!(
            record_progress(&cp, ("eu", "a"), &id, n, "applying", &detail)
                .await
                .unwrap()
        );
    }
    // Another zone's agent, or an unknown request: not stored.
    assert!(
        !record_progress(&cp, ("eu", "b"), &id, 8, "x", "y")
            .await
            .unwrap()
    );
    assert!(
        !record_progress(&cp, ("eu", "a"), "nope", 0, "x", "y")
            .await
            .unwrap()
    );
    let lines = cp.store.progress(&id).await.unwrap();
    let details: Vec<&str> = lines.iter().map(|l| l.detail.as_str()).collect();
    assert_eq!(
        details,
        [3, 4, 5, 6, 7].map(|n| format!("step {n} token=<redacted>")),
        "the last five, oldest first, scrubbed"
    );
    // Finished: no more lines.
    fail(&cp, &id, "x").await;
    assert!(
        !record_progress(&cp, ("eu", "a"), &id, 9, "late", "y")
            .await
            .unwrap()
    );
}

#[test]
fn params_are_summarised_without_any_value_that_could_be_secret() {
    let params = json!({
        "manifests": [
            {"apiVersion": "v1", "kind": "Secret", "metadata": {"name": "db", "namespace": "shop"},
             "data": {"password": "aHVudGVyMg=="}, "stringData": {"token": "plain-secret"}},
            {"apiVersion": "apps/v1", "kind": "Deployment", "metadata": {"name": "web", "namespace": "shop"},
             "spec": {"template": {"spec": {"containers": [{"env": [{"name": "X", "value": "env-secret"}]}]}}}},
            {"apiVersion": "apps/v1", "kind": "Deployment", "metadata": {"name": "api", "namespace": "shop"}}
        ],
        "dry_run": true,
        "wait_timeout_s": 60,
        "owner": "owner-name",
        "token": 12345
    });
    let lines = params_summary(&params.to_string());
    let text = lines.join("\n");
    for secret in [
        "aHVudGVyMg==",
        "plain-secret",
        "env-secret",
        "owner-name",
        "12345",
    ] {
        assert!(!text.contains(secret), "{secret} in {text}");
    }
    for shown in [
        "manifests: 3 objects: 1 Secret, 2 Deployment",
        "Secret shop/db",
        "Deployment shop/web",
        "dry_run: true",
        "wait_timeout_s: 60",
        "also set (values not shown): owner, token",
    ] {
        assert!(
            lines.iter().any(|l| l == shown),
            "{shown:?} not in {lines:#?}"
        );
    }
    let many: Vec<_> = (0..25)
        .map(|i| json!({"kind": "ConfigMap", "metadata": {"name": format!("c{i}")}}))
        .collect();
    let lines = params_summary(&json!({ "manifests": many }).to_string());
    assert_eq!(lines.len(), 1 + OBJECTS_SHOWN + 1, "{lines:#?}");
    assert_eq!(lines.last().unwrap(), "… and 15 more");
    assert_eq!(
        params_summary("[1]"),
        ["params: not a JSON object (3 bytes)"]
    );
}

#[test]
fn outcomes_show_errors_and_changes_never_result_values() {
    let mut body = ErrorBody::new("forbidden", "cannot create: Authorization: Bearer abc.def");
    body.applied = vec![WireChange {
        object: "v1 ConfigMap shop/a".into(),
        action: "create".into(),
        location: None,
        diff: vec![],
        status: None,
    }];
    let failed = outcome_summary(&Res::err("r", body));
    assert!(!failed.ok);
    assert_eq!(failed.code.as_deref(), Some("forbidden"));
    assert_eq!(
        failed.message.as_deref(),
        Some("cannot create: Authorization: Bearer <redacted>")
    );
    assert_eq!(
        failed.lines,
        [
            "applied before the failure: 1",
            "create v1 ConfigMap shop/a"
        ]
    );

    let secret = json!({"objects": [{"kind": "Secret", "data": {"password": "aHVudGVyMg=="}}]});
    let read = Res::ok_raw("r", RawJson::from_serialize(&secret).unwrap());
    let shown = outcome_summary(&read).lines.join("\n");
    assert!(
        shown.starts_with("result: an object with objects ("),
        "{shown}"
    );
    assert!(!shown.contains("aHVudGVyMg=="), "{shown}");
}
