//! The status page: its askama rendering for admins and tenants, and its routes (login, cookie,
//! filter) through the real router over a real SQLite store.

use askama::Template;
use axum::body::Body;
use axum::http::{Request, StatusCode, header};
use harmony_api::{Health, RegionView};

use super::view::tests::{region_of, zone};
use super::view::{self, Stamp};
use crate::http::caller::Caller;
use crate::services::{regions, tenancy};

const NOW: i64 = 1_700_000_000_000;

fn region(name: &str, zone_name: &str, health: Health, heartbeat: Option<i64>) -> RegionView {
    let mut z = zone(zone_name, health, heartbeat);
    z.health_reason = Some(format!("reason-of-{name}"));
    region_of(name, vec![z])
}

fn regions_fixture() -> Vec<RegionView> {
    vec![
        region("us-east", "nyc-1", Health::Unavailable, None),
        region("eu-west", "paris-1", Health::Healthy, Some(NOW - 3_400)),
    ]
}

/// Text strings that only the admin columns carry.
const ADMIN_ONLY: [&str; 13] = [
    "Last heartbeat",
    "Requests in flight",
    "Agent version",
    "Ops",
    "Nodes",
    "Capacity",
    "Replica",
    "9.8.7-agentver",
    "get_inventory",
    "replica-xyz",
    "reason-of-",
    "3 s ago",
    "data-field=\"pending_requests\"",
];

#[test]
fn an_admin_sees_every_zone_with_heartbeat_in_flight_and_agent_columns() {
    let page = view::build(&regions_fixture(), &Caller::Admin, None, NOW);
    assert!(page.admin);
    let order: Vec<_> = page.rows.iter().map(|r| r.region.as_str()).collect();
    assert_eq!(order, ["us-east", "eu-west"], "the unavailable zone first");
    let html = page.render().unwrap();
    for s in ADMIN_ONLY {
        assert!(
            html.contains(s),
            "{s:?} missing from the admin page:\n{html}"
        );
    }
    assert!(html.contains("2023-11-14 22:13:16 UTC"), "{html}");
    assert!(html.contains("datetime=\"2023-11-14T22:13:16Z\""), "{html}");
    assert!(html.contains("<span class=\"none\">never</span>"), "{html}");
    assert!(
        html.contains("data-field=\"pending_requests\">4<"),
        "the unavailable region's queued requests: {html}"
    );
    assert!(html.contains("Signed in as <strong id=\"who\">admin</strong>"));
    assert_eq!(
        html.matches("<script").count(),
        1,
        "one script, the page's own: {html}"
    );
    assert!(html.contains("<script src=\"/status/live.js\" defer></script>"));
    assert!(
        html.contains("<noscript><meta http-equiv=\"refresh\" content=\"15\"></noscript>"),
        "the reload only without scripts: {html}"
    );
}

/// How many columns `caller`'s table has.
fn page_columns(caller: &Caller) -> usize {
    view::build(&regions_fixture(), caller, None, NOW).columns
}

#[test]
fn a_tenant_page_has_no_admin_column_headers_or_values() {
    let caller = Caller::Tenant {
        tenant: "acme".into(),
    };
    let page = view::build(&regions_fixture(), &caller, None, NOW);
    assert!(!page.admin && page.rows.iter().all(|r| r.admin.is_none()));
    let html = page.render().unwrap();
    for s in ADMIN_ONLY {
        assert!(!html.contains(s), "{s:?} shown to a tenant:\n{html}");
    }
    for s in [
        "eu-west",
        "paris-1",
        "us-east",
        "nyc-1",
        "healthy",
        "unavailable",
    ] {
        assert!(
            html.contains(s),
            "{s:?} missing from the tenant page:\n{html}"
        );
    }
    assert!(html.contains("tenant acme"));
    let headers = html.matches("<th scope=\"col\"").count();
    assert_eq!(headers, page_columns(&caller), "{html}");
    assert!(headers < page_columns(&Caller::Admin));
}

#[test]
fn the_health_filter_keeps_matching_zones_and_counts_each_health() {
    let page = view::build(
        &regions_fixture(),
        &Caller::Admin,
        Some(Health::Unavailable),
        NOW,
    );
    assert_eq!(page.rows.len(), 1);
    assert_eq!(page.rows[0].region, "us-east");
    let counts: Vec<_> = page
        .filters
        .iter()
        .map(|f| (f.label.as_str(), f.count, f.active))
        .collect();
    assert_eq!(
        counts,
        [
            ("all", 2, false),
            ("healthy", 1, false),
            ("unhealthy", 0, false),
            ("unavailable", 1, true)
        ]
    );
    let html = page.render().unwrap();
    assert!(html.contains("href=\"/status?health=healthy\""));
    assert!(!html.contains("paris-1"), "{html}");

    let none = view::build(
        &regions_fixture(),
        &Caller::Admin,
        Some(Health::Unhealthy),
        NOW,
    );
    let html = none.render().unwrap();
    assert!(html.contains("No zone is unhealthy."), "{html}");
    let colspan = format!("colspan=\"{}\"", html.matches("<th scope=\"col\"").count());
    assert!(
        html.contains(&colspan),
        "the message spans the table: {html}"
    );
}

#[test]
fn an_unknown_health_filter_names_the_allowed_values() {
    assert_eq!(view::parse_filter(None), Ok(None));
    assert_eq!(view::parse_filter(Some("")), Ok(None));
    assert_eq!(
        view::parse_filter(Some("unhealthy")),
        Ok(Some(Health::Unhealthy))
    );
    let e = view::parse_filter(Some("sick")).unwrap_err();
    assert!(e.starts_with("health: \"sick\""), "{e}");
    assert!(e.contains("healthy, unhealthy or unavailable"), "{e}");
}

#[test]
fn markup_in_names_and_reasons_is_escaped() {
    let mut r = region("eu-west", "paris-1", Health::Unhealthy, Some(NOW));
    // The page shows each zone's reason.
    r.zones[0].health_reason = Some("<script>alert(1)</script>".into());
    let html = view::build(&[r], &Caller::Admin, None, NOW)
        .render()
        .unwrap();
    assert!(!html.contains("<script>"), "{html}");
    assert!(html.contains("&#60;script&#62;") || html.contains("&lt;script&gt;"));
}

#[test]
fn stamps_are_utc_with_an_age() {
    let epoch = Stamp::new(0, 59_999);
    assert_eq!(epoch.utc, "1970-01-01 00:00:00 UTC");
    assert_eq!(epoch.iso, "1970-01-01T00:00:00Z");
    assert_eq!(epoch.ago, "59 s ago");
    let leap = Stamp::new(1_709_210_096_000, 1_709_210_096_000 + 61_000);
    assert_eq!(leap.utc, "2024-02-29 12:34:56 UTC");
    assert_eq!(leap.ago, "1 min ago");
    assert_eq!(Stamp::new(0, 3_661_000).ago, "1 h 1 min ago");
    assert_eq!(Stamp::new(0, 90_000_000).ago, "1 d 1 h ago");
    assert_eq!(Stamp::new(10_000, 0).ago, "0 s ago", "a clock ahead is now");
}

// --- the routes, through the real router -------------------------------------------------

use crate::http::test_world::{ADMIN, app, send};

fn get(path: &str) -> axum::http::request::Builder {
    Request::builder().method("GET").uri(path)
}

#[tokio::test]
async fn the_page_takes_a_bearer_token_or_the_login_cookie_and_never_shows_the_token() {
    let dir = tempfile::tempdir().unwrap();
    let (app, cp) = app(dir.path()).await;
    regions::create(&cp, "eu-west", "paris-1", None)
        .await
        .unwrap();

    // No credential: to the login form, which needs none.
    let (status, headers, _) = send(&app, get("/status").body(Body::empty()).unwrap()).await;
    assert_eq!(status, StatusCode::SEE_OTHER);
    assert_eq!(headers[header::LOCATION], "/status/login");
    let (status, headers, html) =
        send(&app, get("/status/login").body(Body::empty()).unwrap()).await;
    assert_eq!(status, StatusCode::OK);
    assert!(
        headers[header::CONTENT_TYPE]
            .to_str()
            .unwrap()
            .starts_with("text/html")
    );
    assert!(html.contains("name=\"token\""));

    // The bearer header, as for the API.
    let (status, headers, html) = send(
        &app,
        get("/status")
            .header(header::AUTHORIZATION, format!("Bearer {ADMIN}"))
            .body(Body::empty())
            .unwrap(),
    )
    .await;
    assert_eq!(status, StatusCode::OK, "{html}");
    assert!(html.contains("eu-west") && html.contains("paris-1"));
    assert!(
        headers[header::CONTENT_SECURITY_POLICY]
            .to_str()
            .unwrap()
            .contains("default-src 'none'")
    );

    // A wrong token on the form: refused, the token not echoed.
    let form = |token: &str| {
        Request::builder()
            .method("POST")
            .uri("/status/login")
            .header(header::CONTENT_TYPE, "application/x-www-form-urlencoded")
            .body(Body::from(format!("token={token}")))
            .unwrap()
    };
    let (status, headers, html) = send(&app, form("not-the-admin-token-at-all")).await;
    assert_eq!(status, StatusCode::UNAUTHORIZED);
    assert!(headers.get(header::SET_COOKIE).is_none());
    assert!(html.contains("token: not a valid") && !html.contains("not-the-admin-token-at-all"));

    // The right one: a cookie for /status only, then the page with it.
    let (status, headers, _) = send(&app, form(ADMIN)).await;
    assert_eq!(status, StatusCode::SEE_OTHER);
    assert_eq!(headers[header::LOCATION], "/status");
    let set = headers[header::SET_COOKIE].to_str().unwrap().to_string();
    for attr in ["HttpOnly", "Secure", "SameSite=Strict", "Path=/status"] {
        assert!(set.contains(attr), "{attr} missing from {set}");
    }
    assert!(
        !set.contains(ADMIN),
        "the cookie carries a session id, never the token"
    );
    let cookie = set.split(';').next().unwrap().to_string();
    let with_cookie = |path: &str| {
        get(path)
            .header(header::COOKIE, &cookie)
            .body(Body::empty())
            .unwrap()
    };
    let (status, _, html) = send(&app, with_cookie("/status")).await;
    assert_eq!(status, StatusCode::OK);
    assert!(html.contains("paris-1") && !html.contains(ADMIN));

    // The cookie is no credential for the API.
    let (status, _, _) = send(&app, with_cookie("/v1/regions")).await;
    assert_eq!(status, StatusCode::UNAUTHORIZED);

    // An unknown filter: 400 naming the allowed values.
    let (status, _, html) = send(&app, with_cookie("/status?health=sick")).await;
    assert_eq!(status, StatusCode::BAD_REQUEST);
    assert!(html.contains("healthy, unhealthy or unavailable"), "{html}");

    // Logout clears the cookie.
    let (status, headers, _) = send(
        &app,
        Request::builder()
            .method("POST")
            .uri("/status/logout")
            .body(Body::empty())
            .unwrap(),
    )
    .await;
    assert_eq!(status, StatusCode::SEE_OTHER);
    assert!(
        headers[header::SET_COOKIE]
            .to_str()
            .unwrap()
            .contains("Max-Age=0")
    );
}

/// A form POST to `path` with `cookie` and extra headers.
fn post_form(
    path: &str,
    body: &str,
    cookie: Option<&str>,
    extra: &[(&str, &str)],
) -> Request<Body> {
    let mut b = Request::builder()
        .method("POST")
        .uri(path)
        .header(header::HOST, "cp.example:8443")
        .header(header::CONTENT_TYPE, "application/x-www-form-urlencoded");
    if let Some(c) = cookie {
        b = b.header(header::COOKIE, c);
    }
    for (k, v) in extra {
        b = b.header(*k, *v);
    }
    b.body(Body::from(body.to_string())).unwrap()
}

fn cookie_of(headers: &axum::http::HeaderMap) -> String {
    let set = headers[header::SET_COOKIE].to_str().unwrap();
    set.split(';').next().unwrap().to_string()
}

#[tokio::test]
async fn a_session_ends_at_logout_and_at_revocation_on_every_replica_and_refuses_cross_site_forms()
{
    let dir = tempfile::tempdir().unwrap();
    // Two replicas over one store.
    let (other, _) = app(dir.path()).await;
    let (app, cp) = app(dir.path()).await;
    let page = |app: &axum::Router, cookie: &str| {
        let (app, cookie) = (app.clone(), cookie.to_string());
        async move {
            send(
                &app,
                get("/status")
                    .header(header::COOKIE, cookie)
                    .body(Body::empty())
                    .unwrap(),
            )
            .await
            .0
        }
    };
    // The admin signs in; the cookie is a random session id, not the token in any encoding.
    let same = [("origin", "https://cp.example:8443")];
    let (status, headers, _) = send(
        &app,
        post_form("/status/login", &format!("token={ADMIN}"), None, &same),
    )
    .await;
    assert_eq!(status, StatusCode::SEE_OTHER);
    let cookie = cookie_of(&headers);
    let value = cookie.split_once('=').unwrap().1;
    assert!(
        value.starts_with("hps_") && !value.contains(ADMIN),
        "{cookie}"
    );
    use base64::Engine;
    assert_ne!(
        value,
        base64::engine::general_purpose::URL_SAFE_NO_PAD.encode(ADMIN)
    );
    assert_eq!(page(&app, &cookie).await, StatusCode::OK);
    assert_eq!(
        page(&other, &cookie).await,
        StatusCode::OK,
        "every replica sees the session"
    );
    // Logout on one replica; the replayed cookie is refused on both.
    let (status, _, _) = send(
        &other,
        post_form("/status/logout", "", Some(&cookie), &same),
    )
    .await;
    assert_eq!(status, StatusCode::SEE_OTHER);
    assert_eq!(
        page(&app, &cookie).await,
        StatusCode::SEE_OTHER,
        "replay after logout"
    );
    assert_eq!(page(&other, &cookie).await, StatusCode::SEE_OTHER);

    // A tenant signs in; revoking its token ends its session at the next request.
    tenancy::create_tenant(&cp, "acme").await.unwrap();
    let (record, token) = tenancy::mint_token(&cp, "acme", None).await.unwrap();
    let (status, headers, _) = send(
        &app,
        post_form(
            "/status/login",
            &format!("token={}", token.expose()),
            None,
            &same,
        ),
    )
    .await;
    assert_eq!(status, StatusCode::SEE_OTHER);
    let tenant_cookie = cookie_of(&headers);
    assert_eq!(page(&app, &tenant_cookie).await, StatusCode::OK);
    assert!(tenancy::revoke_token(&cp, "acme", &record.id).await.is_ok());
    assert_eq!(
        page(&other, &tenant_cookie).await,
        StatusCode::SEE_OTHER,
        "revoked token"
    );

    // Cross-site forms: refused, no cookie set, nothing ended.
    let (status, headers, _) = send(
        &app,
        post_form("/status/login", &format!("token={ADMIN}"), None, &same),
    )
    .await;
    let fresh = cookie_of(&headers);
    assert_eq!(status, StatusCode::SEE_OTHER);
    for extra in [
        vec![("origin", "https://evil.example")],
        vec![("origin", "null")],
        vec![("referer", "https://evil.example/form")],
        vec![("sec-fetch-site", "cross-site")],
        vec![
            ("sec-fetch-site", "same-site"),
            ("origin", "https://cp.example:8443"),
        ],
    ] {
        let (status, headers, html) = send(
            &app,
            post_form("/status/login", &format!("token={ADMIN}"), None, &extra),
        )
        .await;
        assert_eq!(status, StatusCode::FORBIDDEN, "{extra:?}: {html}");
        assert!(headers.get(header::SET_COOKIE).is_none(), "{extra:?}");
        let (status, _, _) =
            send(&app, post_form("/status/logout", "", Some(&fresh), &extra)).await;
        assert_eq!(status, StatusCode::FORBIDDEN, "{extra:?}");
    }
    assert_eq!(
        page(&app, &fresh).await,
        StatusCode::OK,
        "a cross-site logout ended nothing"
    );
    // The page's own form as Chromium posts it: Origin null (its Referrer-Policy hides the
    // origin) but Fetch Metadata says same-origin.
    let chromium = [("origin", "null"), ("sec-fetch-site", "same-origin")];
    let (status, _, _) = send(
        &app,
        post_form("/status/login", &format!("token={ADMIN}"), None, &chromium),
    )
    .await;
    assert_eq!(status, StatusCode::SEE_OTHER);
    // A client that sends neither Origin nor Referer (curl) signs in.
    let (status, _, _) = send(
        &app,
        post_form("/status/login", &format!("token={ADMIN}"), None, &[]),
    )
    .await;
    assert_eq!(status, StatusCode::SEE_OTHER);
}
