//! A request's page and each zone's Requests cell, through the real router over a real SQLite
//! store (`test_world`): a tenant sees its own requests by the ids it sent and gets the same
//! 404 for another tenant's as for a missing one; agents' texts are escaped and scrubbed;
//! params never show a Secret's data; ids that cannot be one are a 400 naming `id`.

use axum::http::{Method, StatusCode};
use harmony_agent_protocol::tenancy::ProjectQuota;
use proptest::prelude::*;
use serde_json::json;

use super::*;
use crate::http::test_world::{ADMIN, app, request, send};
use crate::services::request_views::tests::{fail, submit_with};
use crate::services::{ControlPlane, regions, tenancy};

/// What an agent said when it refused acme's manifest: markup and a credential in it.
const AGENT_ERROR: &str = "manifest 1 has no kind <script>alert(1)</script> token=s3cr3t-value";

/// Stores request `id` of `tenant` (as `<tenant>@<id>`) in `eu`/`z` with a Secret among its
/// manifests; answered with `error` when given.
async fn stored(cp: &ControlPlane, tenant: Option<&str>, id: &str, error: Option<&str>) {
    let params = json!({"manifests": [
        {"apiVersion": "v1", "kind": "Secret", "metadata": {"name": "db", "namespace": "shop"},
         "stringData": {"password": "hunter2-secret-data"}},
        {"apiVersion": "apps/v1", "kind": "Deployment", "metadata": {"name": "web", "namespace": "shop"}}
    ]});
    let stored = submit_with(cp, tenant, id, "z", &params.to_string()).await;
    if let Some(message) = error {
        fail(cp, &stored, message).await;
    }
}

/// Tenant `name` with project `p` holding a quota in `eu`; its token.
async fn tenant(cp: &ControlPlane, name: &str) -> String {
    tenancy::create_tenant(cp, name).await.unwrap();
    tenancy::create_project(cp, name, "p", Some(&format!("{name}-p")))
        .await
        .unwrap();
    let quota = ProjectQuota {
        cpu: Some("1".into()),
        ..Default::default()
    };
    tenancy::set_quota(cp, name, "p", "eu", &quota)
        .await
        .unwrap();
    tenancy::mint_token(cp, name, None)
        .await
        .unwrap()
        .1
        .expose()
        .to_string()
}

async fn get(app: &axum::Router, token: &str, path: &str) -> (StatusCode, String) {
    let (status, _, body) = send(app, request(Method::GET, path, Some(token), None)).await;
    (status, body)
}

#[tokio::test]
async fn a_tenant_reads_its_own_request_and_another_tenants_is_the_same_404_as_none() {
    let dir = tempfile::tempdir().unwrap();
    let (app, cp) = app(dir.path()).await;
    regions::create(&cp, "eu", "z", None).await.unwrap();
    let acme = tenant(&cp, "acme").await;
    let globex = tenant(&cp, "globex").await;
    stored(&cp, Some("acme"), "r1", Some(AGENT_ERROR)).await;
    stored(&cp, Some("globex"), "g1", Some("globex's own failure")).await;
    stored(&cp, None, "adminreq7", None).await;

    let (status, page) = get(&app, &acme, "/status/requests/r1").await;
    assert_eq!(status, StatusCode::OK, "{page}");
    for shown in [
        "manifest 1 has no kind &#60;script&#62;alert(1)&#60;/script&#62; token=&#60;redacted&#62;",
        "<code>invalid_params</code>",
        "manifests: 2 objects: 1 Secret, 1 Deployment",
        "Secret shop/db",
        "id=\"request-id\">r1<",
        ">failed<",
    ] {
        assert!(page.contains(shown), "{shown:?} missing:\n{page}");
    }
    for hidden in [
        "<script>alert",
        "s3cr3t-value",
        "hunter2-secret-data",
        "acme@",
        "acme / p",
    ] {
        assert!(!page.contains(hidden), "{hidden:?} shown:\n{page}");
    }

    // Another tenant's request, by its stored id or by its own: the page of a missing one.
    let missing = |id: &str| {
        let (app, globex) = (&app, &globex);
        let id = id.to_string();
        async move {
            let (status, page) = get(app, globex, &format!("/status/requests/{id}")).await;
            assert_eq!(status, StatusCode::NOT_FOUND, "{id}: {page}");
            page.replace(&id, "<ID>")
        }
    };
    let none = missing("acme@zz").await;
    assert_eq!(missing("acme@r1").await, none);
    assert_eq!(missing("r1").await, none);
    assert_eq!(missing("adminreq7").await, none, "the admin's own request");
    assert!(!none.contains("manifest"), "{none}");
    assert!(
        get(&app, &globex, "/status/requests/g1")
            .await
            .0
            .is_success()
    );

    // The admin reads any request by its stored id, with its tenant and project.
    let (status, page) = get(&app, ADMIN, "/status/requests/acme@r1").await;
    assert_eq!(status, StatusCode::OK);
    assert!(page.contains("id=\"owner\">acme / p<"), "{page}");
    assert_eq!(
        get(&app, ADMIN, "/status/requests/r1").await.0,
        StatusCode::NOT_FOUND
    );
    let (status, page) = get(&app, ADMIN, "/status/requests/adminreq7").await;
    assert_eq!(status, StatusCode::OK);
    assert!(
        page.contains(">queued<") && page.contains("no answer yet"),
        "{page}"
    );

    // Ids no request can have: 400, naming the field.
    let long = "x".repeat(MAX_ID_CHARS + 1);
    for bad in ["a%20b", "a@b@c", "%40r1", "r1%3Cb%3E", long.as_str()] {
        let (status, page) = get(&app, &acme, &format!("/status/requests/{bad}")).await;
        assert_eq!(status, StatusCode::BAD_REQUEST, "{bad}: {page}");
        assert!(page.contains("id: a request id is 1 to"), "{bad}: {page}");
    }
    // Without a credential: the login form, as for the page.
    let (status, headers, _) = send(
        &app,
        request(Method::GET, "/status/requests/r1", None, None),
    )
    .await;
    assert_eq!(status, StatusCode::SEE_OTHER);
    assert_eq!(headers["location"], "/status/login");
}

#[tokio::test]
async fn each_zone_lists_the_requests_its_viewer_may_see_with_since_when() {
    let dir = tempfile::tempdir().unwrap();
    let (app, cp) = app(dir.path()).await;
    regions::create(&cp, "eu", "z", None).await.unwrap();
    let acme = tenant(&cp, "acme").await;
    stored(&cp, Some("acme"), "r1", Some(AGENT_ERROR)).await;
    stored(&cp, Some("globex"), "g1", Some("globex's own failure")).await;
    stored(&cp, None, "adminreq7", None).await;

    let (status, admin) = get(&app, ADMIN, "/status").await;
    assert_eq!(status, StatusCode::OK);
    for shown in [
        "data-col=\"requests\"",
        "1 in flight",
        "href=\"/status/requests/adminreq7\"",
        "; agent not connected",
        "href=\"/status/requests/acme@r1\"",
        "href=\"/status/requests/globex@g1\"",
        "globex&#39;s own failure",
        "token=&#60;redacted&#62;",
        "data-field=\"health_since\">unavailable since <time datetime=",
    ] {
        assert!(admin.contains(shown), "{shown:?} missing:\n{admin}");
    }
    assert!(!admin.contains("s3cr3t-value") && !admin.contains("<script>alert"));

    let (status, mine) = get(&app, &acme, "/status").await;
    assert_eq!(status, StatusCode::OK);
    assert!(mine.contains("href=\"/status/requests/r1\""), "{mine}");
    assert!(
        mine.contains("invalid_params: manifest 1 has no kind"),
        "{mine}"
    );
    for hidden in [
        "globex",
        "/status/requests/g1",
        "/status/requests/adminreq7",
        "acme@",
        "agent not connected",
    ] {
        assert!(!mine.contains(hidden), "{hidden:?} shown to acme:\n{mine}");
    }
}

#[test]
fn since_reads_as_a_time_of_day_today_and_a_date_before() {
    let now = 1_700_000_000_000; // 2023-11-14 22:13:20 UTC
    let s = Since::new(now - 12 * 60_000 - 500, now);
    assert_eq!(s.clock, "22:01:19 UTC");
    assert_eq!(s.duration, "12 min");
    assert_eq!(s.iso, "2023-11-14T22:01:19Z");
    let s = Since::new(now - 2 * 86_400_000, now);
    assert_eq!(s.clock, "2023-11-12 22:13:20 UTC");
    assert_eq!(s.duration, "2 d");
    let cell = state_cell(Some(now), Some("Bearer abc token"), false, now);
    assert_eq!(
        cell.agent_error, None,
        "a tenant never sees the agent's error"
    );
    let cell = state_cell(None, Some("Bearer abc more"), true, now);
    assert_eq!(cell.agent_error.as_deref(), Some("Bearer <redacted> more"));
}

proptest! {
    #[test]
    fn an_id_of_the_allowed_characters_is_taken_as_it_is(
        id in "[A-Za-z0-9._~:-]{1,100}",
        tenant in proptest::option::of("[a-z0-9-]{1,60}"),
    ) {
        let full = match &tenant {
            Some(t) => format!("{t}@{id}"),
            None => id.clone(),
        };
        prop_assert_eq!(parse_id(&full), Ok(full.as_str()));
    }

    #[test]
    fn anything_else_is_refused_naming_the_id_field(raw in "\\PC{0,250}") {
        let allowed = |c: char| c.is_ascii_alphanumeric() || "._~:-@".contains(c);
        let valid = !raw.is_empty()
            && raw.chars().count() <= MAX_ID_CHARS
            && raw.chars().all(allowed)
            && raw.matches('@').count() <= 1
            && !raw.starts_with('@')
            && !raw.ends_with('@');
        match parse_id(&raw) {
            Ok(id) => prop_assert!(valid && id == raw),
            Err(message) => {
                prop_assert!(!valid);
                prop_assert!(message.starts_with("id: "));
                // The same words whatever was sent: nothing of it is echoed.
                prop_assert_eq!(Err(message), parse_id(""));
            }
        }
    }
}
