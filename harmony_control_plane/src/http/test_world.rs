//! The in-process HTTP test world: the real router over a real SQLite store in a temporary
//! folder, driven with `tower::ServiceExt::oneshot` (no listener, no TLS). Shared by the
//! status-page tests and the hostile-body property test.

use axum::body::Body;
use axum::http::{Request, StatusCode};
use http_body_util::BodyExt;
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
