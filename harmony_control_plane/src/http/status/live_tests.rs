//! The live status page: its event stream through the real router (credential, caller scope,
//! filter, changes only, end of session), the bound on open streams, and the CSP that lets
//! only the page's own script run.

use axum::body::Body;
use axum::http::{HeaderMap, Request, StatusCode, header};
use harmony_agent_protocol::tenancy::ProjectQuota;
use harmony_api::Health;
use http_body_util::BodyExt;
use serde_json::Value;
use std::time::Duration;
use tower::ServiceExt;

use super::*;
use crate::http::status::view::tests::{region_of, zone};
use crate::http::test_world::{ADMIN, app, send};
use crate::services::{regions, tenancy};

/// An open event stream: its events one by one.
struct Events {
    body: Body,
    buf: String,
}

impl Events {
    /// Opens `path` with `headers`; the status and headers, and the stream when it is one.
    async fn open(
        app: &axum::Router,
        path: &str,
        headers: &[(header::HeaderName, String)],
    ) -> (StatusCode, HeaderMap, Self) {
        let mut req = Request::builder().method("GET").uri(path);
        for (k, v) in headers {
            req = req.header(k, v);
        }
        let r = app
            .clone()
            .oneshot(req.body(Body::empty()).unwrap())
            .await
            .unwrap();
        let (parts, body) = r.into_parts();
        let events = Self {
            body,
            buf: String::new(),
        };
        (parts.status, parts.headers, events)
    }

    /// The next event (name, data), skipping comments; panics after 10 s without one.
    async fn next(&mut self) -> (String, String) {
        loop {
            if let Some(end) = self.buf.find("\n\n") {
                let block: String = self.buf.drain(..end + 2).collect();
                let field = |name: &str| {
                    block
                        .lines()
                        .filter_map(|l| l.strip_prefix(name))
                        .map(|v| v.trim_start().to_string())
                        .collect::<Vec<_>>()
                        .join("\n")
                };
                let event = field("event:");
                if !event.is_empty() {
                    return (event, field("data:"));
                }
                continue;
            }
            let frame = tokio::time::timeout(Duration::from_secs(10), self.body.frame())
                .await
                .expect("an event within 10 s")
                .expect("the stream is open")
                .unwrap();
            if let Ok(data) = frame.into_data() {
                self.buf.push_str(&String::from_utf8_lossy(&data));
            }
        }
    }

    /// The next `update`, as JSON.
    async fn update(&mut self) -> Value {
        let (event, data) = self.next().await;
        assert_eq!(event, "update", "{data}");
        serde_json::from_str(&data).unwrap()
    }
}

fn bearer(token: &str) -> Vec<(header::HeaderName, String)> {
    vec![(header::AUTHORIZATION, format!("Bearer {token}"))]
}

fn order(update: &Value) -> Vec<String> {
    update["order"]
        .as_array()
        .unwrap()
        .iter()
        .map(|k| k.as_str().unwrap().to_string())
        .collect()
}

#[tokio::test]
async fn the_event_stream_takes_the_pages_credential_scope_and_filter() {
    let dir = tempfile::tempdir().unwrap();
    let (app, cp) = app(dir.path()).await;
    regions::create(&cp, "eu-west", "paris-1", None)
        .await
        .unwrap();
    regions::create(&cp, "us-east", "nyc-1", None)
        .await
        .unwrap();
    // acme has a project in eu-west, globex one in us-east.
    for (tenant, project, region) in [
        ("acme", "web", "eu-west"),
        ("globex", "globex-secret-project", "us-east"),
    ] {
        let quota = ProjectQuota {
            cpu: Some("2".into()),
            ..Default::default()
        };
        tenancy::create_tenant(&cp, tenant).await.unwrap();
        tenancy::set_cap(&cp, tenant, region, &quota).await.unwrap();
        tenancy::create_project(&cp, tenant, project, None)
            .await
            .unwrap();
        tenancy::set_quota(&cp, tenant, project, region, &quota)
            .await
            .unwrap();
    }
    let (_, acme) = tenancy::mint_token(&cp, "acme", None).await.unwrap();

    // No credential: the login form, like the page.
    let (status, headers, _) = Events::open(&app, "/status/events", &[]).await;
    assert_eq!(status, StatusCode::SEE_OTHER);
    assert_eq!(headers[header::LOCATION], "/status/login");

    // The admin: every zone, with the admin cells.
    let (status, headers, mut admin) = Events::open(&app, "/status/events", &bearer(ADMIN)).await;
    assert_eq!(status, StatusCode::OK);
    assert_eq!(headers[header::CONTENT_TYPE], "text/event-stream");
    assert_eq!(headers[header::CACHE_CONTROL], "no-store");
    let first = admin.update().await;
    assert_eq!(order(&first), ["eu-west/paris-1", "us-east/nyc-1"]);
    let rows = first["rows"].to_string();
    assert!(
        rows.contains("class=\\\"reason\\\"") && rows.contains("pending_requests"),
        "{rows}"
    );
    for section in view::LIVE_SECTIONS {
        assert!(
            first["sections"].get(section).is_some(),
            "{section}: {first}"
        );
    }

    // A change shows in the next update, alone.
    regions::add_zone(&cp, "eu-west", "paris-2", None)
        .await
        .unwrap();
    let next = admin.update().await;
    assert_eq!(
        order(&next),
        ["eu-west/paris-1", "eu-west/paris-2", "us-east/nyc-1"]
    );
    let sent: Vec<_> = next["rows"].as_object().unwrap().keys().cloned().collect();
    assert_eq!(sent, ["eu-west/paris-2"], "only the new row: {next}");
    assert_eq!(
        next["sections"]
            .as_object()
            .unwrap()
            .keys()
            .collect::<Vec<_>>(),
        ["filters", "tenancy"],
        "the counts and the projects' use per zone changed, nothing else: {next}"
    );

    // A tenant: the zones of its project's region, no admin field, nothing of another tenant.
    let (status, _, mut theirs) =
        Events::open(&app, "/status/events", &bearer(acme.expose())).await;
    assert_eq!(status, StatusCode::OK);
    let update = theirs.update().await;
    assert_eq!(order(&update), ["eu-west/paris-1", "eu-west/paris-2"]);
    let text = update.to_string();
    for s in [
        // The admin's health reason (the since-when line is the tenant's too).
        "class=\\\"reason\\\"",
        "pending_requests",
        "last_heartbeat",
        "agent_version",
        "replica",
        "globex",
        "secret-project",
        "us-east",
        "nyc-1",
        "Decommissioned",
    ] {
        assert!(!text.contains(s), "{s:?} in a tenant's stream: {text}");
    }
    assert!(text.contains("acme-web"), "its own project: {text}");

    // The page's filter.
    let (_, _, mut healthy) =
        Events::open(&app, "/status/events?health=healthy", &bearer(ADMIN)).await;
    let only = healthy.update().await;
    assert_eq!(order(&only), [view::EMPTY_KEY]);
    assert!(
        only["rows"][view::EMPTY_KEY]
            .as_str()
            .unwrap()
            .contains("No zone is healthy.")
    );
    let (status, _, _) = Events::open(&app, "/status/events?health=sick", &bearer(ADMIN)).await;
    assert_eq!(status, StatusCode::BAD_REQUEST);
}

/// Signs in through the form; the session cookie.
async fn sign_in(app: &axum::Router, token: &str) -> String {
    let (status, headers, _) = send(
        app,
        Request::builder()
            .method("POST")
            .uri("/status/login")
            .header(header::CONTENT_TYPE, "application/x-www-form-urlencoded")
            .body(Body::from(format!("token={token}")))
            .unwrap(),
    )
    .await;
    assert_eq!(status, StatusCode::SEE_OTHER);
    let set = headers[header::SET_COOKIE].to_str().unwrap();
    set.split(';').next().unwrap().to_string()
}

#[tokio::test]
async fn a_stream_ends_when_its_session_ends() {
    let dir = tempfile::tempdir().unwrap();
    let (app, cp) = app(dir.path()).await;
    regions::create(&cp, "eu-west", "paris-1", None)
        .await
        .unwrap();

    // Logout.
    let cookie = sign_in(&app, ADMIN).await;
    let with_cookie = [(header::COOKIE, cookie.clone())];
    let (status, _, mut stream) = Events::open(&app, "/status/events", &with_cookie).await;
    assert_eq!(status, StatusCode::OK);
    stream.update().await;
    let (status, _, _) = send(
        &app,
        Request::builder()
            .method("POST")
            .uri("/status/logout")
            .header(header::COOKIE, &cookie)
            .body(Body::empty())
            .unwrap(),
    )
    .await;
    assert_eq!(status, StatusCode::SEE_OTHER);
    assert_eq!(stream.next().await.0, "end");
    let closed = tokio::time::timeout(Duration::from_secs(10), stream.body.frame())
        .await
        .unwrap();
    assert!(closed.is_none(), "the stream closes after end");

    // The tenant token a session was opened with, revoked.
    tenancy::create_tenant(&cp, "acme").await.unwrap();
    let (record, token) = tenancy::mint_token(&cp, "acme", None).await.unwrap();
    let cookie = sign_in(&app, token.expose()).await;
    let (_, _, mut stream) =
        Events::open(&app, "/status/events", &[(header::COOKIE, cookie)]).await;
    stream.update().await;
    tenancy::revoke_token(&cp, "acme", &record.id)
        .await
        .unwrap();
    assert_eq!(stream.next().await.0, "end");
}

#[test]
fn an_update_carries_only_what_changed() {
    let now = 1_700_000_000_000;
    let beat = Some(now - 1_000);
    let two = |b: Health| {
        [region_of(
            "eu",
            vec![zone("a", Health::Healthy, beat), zone("b", b, beat)],
        )]
    };
    let page = view::build(&two(Health::Healthy), &Caller::Admin, None, now);
    let first = render(&page).unwrap();
    let mut sent = None;
    let all = update(&mut sent, first.clone(), &page, false).unwrap();
    let all: Value = serde_json::from_str(&all).unwrap();
    assert_eq!(
        all["rows"].as_object().unwrap().len(),
        2,
        "the first: everything"
    );
    assert_eq!(
        all["sections"].as_object().unwrap().len(),
        view::LIVE_SECTIONS.len()
    );
    assert_eq!(update(&mut sent, first.clone(), &page, true), None);

    // Only the clock moved ("1 s ago" is "3 s ago" now): sent with the clocks' refresh only.
    let later = view::build(&two(Health::Healthy), &Caller::Admin, None, now + 2_000);
    let aged = render(&later).unwrap();
    assert_ne!(aged, first);
    assert_eq!(update(&mut sent, aged.clone(), &later, false), None);
    let refresh = update(&mut sent, aged.clone(), &later, true).unwrap();
    let refresh: Value = serde_json::from_str(&refresh).unwrap();
    let ago = refresh["rows"]["eu/a"].as_str().unwrap();
    assert!(ago.contains(">3 s ago<"), "{ago}");
    assert_eq!(
        update(&mut sent, aged, &later, true),
        None,
        "the client has it"
    );

    // A zone turns unavailable: its row alone, and the new order.
    let page = view::build(&two(Health::Unavailable), &Caller::Admin, None, now + 2_000);
    let diff = update(&mut sent, render(&page).unwrap(), &page, false).unwrap();
    let diff: Value = serde_json::from_str(&diff).unwrap();
    assert_eq!(
        diff["order"],
        serde_json::json!(["eu/b", "eu/a"]),
        "the unavailable zone first"
    );
    let rows: Vec<_> = diff["rows"].as_object().unwrap().keys().cloned().collect();
    assert_eq!(rows, ["eu/b"]);
    let b = diff["rows"]["eu/b"].as_str().unwrap();
    assert!(b.contains("data-health=\"unavailable\""), "{b}");
    assert!(b.contains("region healthy: 1 of 2 zones healthy"), "{b}");
}

#[test]
fn streams_are_bounded_per_caller_and_counted_down_when_dropped() {
    let streams: &'static Streams = Box::leak(Box::default());
    let mine: Vec<_> = (0..MAX_PER_CALLER)
        .map(|_| streams.open("tenant:acme").unwrap())
        .collect();
    assert!(
        streams.open("tenant:acme").is_none(),
        "over the caller's limit"
    );
    let other = streams
        .open("admin")
        .expect("another caller still opens one");
    drop(mine);
    assert!(
        streams.open("tenant:acme").is_some(),
        "counted down on drop"
    );
    drop(other);
    let many: Vec<_> = (0..MAX_STREAMS)
        .map(|i| streams.open(&format!("tenant:t{i}")).unwrap())
        .collect();
    assert!(streams.open("admin").is_none(), "over the process's limit");
    drop(many);
    assert!(streams.open("admin").is_some());
}

#[tokio::test]
async fn the_csp_lets_only_the_pages_own_script_run() {
    let dir = tempfile::tempdir().unwrap();
    let (app, _) = app(dir.path()).await;
    let get = |path: &str| {
        Request::builder()
            .method("GET")
            .uri(path)
            .header(header::AUTHORIZATION, format!("Bearer {ADMIN}"))
            .body(Body::empty())
            .unwrap()
    };
    let (status, headers, html) = send(&app, get("/status")).await;
    assert_eq!(status, StatusCode::OK);
    let csp = headers[header::CONTENT_SECURITY_POLICY].to_str().unwrap();
    let directive = |name: &str| {
        csp.split(';')
            .map(str::trim)
            .find_map(|d| d.strip_prefix(name))
            .map(str::trim)
            .unwrap_or_else(|| panic!("no {name} in {csp}"))
    };
    assert_eq!(directive("default-src"), "'none'");
    assert_eq!(
        directive("script-src"),
        "'self'",
        "no inline or eval: {csp}"
    );
    assert_eq!(directive("connect-src"), "'self'");
    let scripts: Vec<_> = html.match_indices("<script").collect();
    assert_eq!(scripts.len(), 1, "{html}");
    assert!(html.contains("<script src=\"/status/live.js\" defer></script>"));

    let (status, headers, js) = send(&app, get("/status/live.js")).await;
    assert_eq!(status, StatusCode::OK);
    assert_eq!(
        headers[header::CONTENT_TYPE],
        "text/javascript; charset=utf-8"
    );
    assert_eq!(headers[header::X_CONTENT_TYPE_OPTIONS], "nosniff");
    assert!(js.contains("EventSource") && js.contains("aria-pressed"));
}

#[tokio::test]
async fn a_change_made_through_one_replica_reaches_a_stream_served_by_another() {
    let dir = tempfile::tempdir().unwrap();
    // Two replicas over one store: the stream is served by one, the change made through the
    // other (nothing but the store connects them).
    let (serving, _) = app(dir.path()).await;
    let (_, writer) = app(dir.path()).await;
    regions::create(&writer, "eu-west", "paris-1", None)
        .await
        .unwrap();
    let (status, _, mut events) = Events::open(&serving, "/status/events", &bearer(ADMIN)).await;
    assert_eq!(status, StatusCode::OK);
    assert_eq!(order(&events.update().await), ["eu-west/paris-1"]);

    regions::create(&writer, "us-east", "nyc-1", None)
        .await
        .unwrap();
    // The next update (the stream reads the store every second) carries the new row.
    let update = events.update().await;
    let mut seen = order(&update);
    seen.sort();
    assert_eq!(seen, ["eu-west/paris-1", "us-east/nyc-1"], "{update}");
    assert!(
        update["rows"]["us-east/nyc-1"]
            .as_str()
            .is_some_and(|row| row.contains("nyc-1")),
        "{update}"
    );
}
