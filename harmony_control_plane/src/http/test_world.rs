//! The in-process HTTP test world: the real router over a real SQLite store in a temporary
//! folder, driven with `tower::ServiceExt::oneshot` (no listener, no TLS). Shared by the
//! status-page tests, the hostile-body property test and the authorisation matrix.

use axum::body::Body;
use axum::http::{Method, Request, StatusCode, header};
use http_body_util::BodyExt;
use serde_json::Value;
use std::sync::Arc;
use std::time::Duration;
use tower::ServiceExt;

use super::{AppState, router};
use crate::services::{ControlPlane, Settings};
use crate::store::sqlite::SqliteStore;
use crate::tokens;

/// The admin token of the test world.
pub(crate) const ADMIN: &str = "admin-token-for-the-in-process-http-tests";

/// The router and its control plane, with its SQLite store in `dir`.
pub(crate) async fn app(dir: &std::path::Path) -> (axum::Router, Arc<ControlPlane>) {
    let store = Arc::new(SqliteStore::open(&dir.join("cp.sqlite")).unwrap());
    let settings = Settings {
        // Short: a request no agent answers ends quickly (the hostile-body test sends many).
        max_request_wait: Duration::from_millis(100),
        ..crate::services::tests::settings()
    };
    let cp = ControlPlane::new(store, settings);
    let app = router(AppState {
        cp: cp.clone(),
        admin_hash: tokens::hash(ADMIN),
        ws_buffer_bytes: 1024,
    });
    (app, cp)
}

/// Sends `req` through the router: status, headers and the body as text.
pub(crate) async fn send(
    app: &axum::Router,
    req: Request<Body>,
) -> (StatusCode, axum::http::HeaderMap, String) {
    let r = app.clone().oneshot(req).await.unwrap();
    let (parts, body) = r.into_parts();
    let bytes = body.collect().await.unwrap().to_bytes();
    (
        parts.status,
        parts.headers,
        String::from_utf8_lossy(&bytes).into(),
    )
}

/// A request to `path`, with `Authorization: Bearer <token>` when there is a token and, when
/// there is a body, its bytes as `application/json` (sent as they are, JSON or not).
pub(crate) fn request(
    method: Method,
    path: &str,
    token: Option<&str>,
    body: Option<Vec<u8>>,
) -> Request<Body> {
    let mut b = Request::builder().method(method).uri(path);
    if let Some(t) = token {
        b = b.header(header::AUTHORIZATION, format!("Bearer {t}"));
    }
    let body = match body {
        Some(bytes) => {
            b = b.header(header::CONTENT_TYPE, "application/json");
            Body::from(bytes)
        }
        None => Body::empty(),
    };
    b.body(body).unwrap()
}

/// One call as an API client makes it: the status and the body as JSON (a JSON string when it
/// is not JSON).
pub(crate) async fn call(
    app: &axum::Router,
    method: Method,
    path: &str,
    token: Option<&str>,
    body: Option<&Value>,
) -> (u16, Value) {
    let body = body.map(|b| serde_json::to_vec(b).unwrap());
    let (status, _, text) = send(app, request(method, path, token, body)).await;
    (
        status.as_u16(),
        serde_json::from_str(&text).unwrap_or(Value::String(text)),
    )
}

/// A call with `token` that must answer `expect` (a null `body` sends none); its body.
pub(crate) async fn must(
    app: &axum::Router,
    token: &str,
    method: Method,
    path: &str,
    body: Value,
    expect: u16,
) -> Value {
    let sent = (!body.is_null()).then_some(&body);
    let (status, answer) = call(app, method, path, Some(token), sent).await;
    assert_eq!(status, expect, "{path}: {answer}");
    answer
}
