//! The HTTP edge: routes and handlers only (axum), over [`crate::services`]. Status codes and
//! wire formats live here and nowhere else. Served by [`listener`] (TLS, timeouts, connection
//! bound).

pub mod agent;
#[cfg(test)]
mod authz_tests;
pub mod body;
pub mod caller;
pub mod error;
#[cfg(test)]
mod hostile_tests;
pub mod instances;
pub mod listener;
pub mod regions;
pub mod requests;
pub mod status;
pub mod tenancy;
#[cfg(test)]
pub(crate) mod test_world;

use axum::Router;
use axum::extract::{DefaultBodyLimit, Request, State};
use axum::http::header::AUTHORIZATION;
use axum::http::{HeaderMap, StatusCode};
use axum::middleware::{self, Next};
use axum::response::{IntoResponse, Response};
use axum::routing::{delete, get, post, put};
use harmony_agent_protocol::{AGENT_PATH, MAX_FRAME_BYTES, SecretString, code};
use std::sync::Arc;

use crate::services::ControlPlane;
use crate::tokens;
pub use body::Body;
pub use caller::Caller;
pub use error::Failure;

/// Largest request body: above the largest frame an agent accepts by default, so a request
/// that is too large for its agent reaches the handler and is refused with the agent's limit.
pub const MAX_BODY_BYTES: usize = 2 * MAX_FRAME_BYTES;

/// What every handler gets.
#[derive(Clone)]
pub struct AppState {
    /// The services.
    pub cp: Arc<ControlPlane>,
    /// SHA-256 of the admin token.
    pub admin_hash: [u8; 32],
    /// WebSocket read buffer per agent connection, in bytes.
    pub ws_buffer_bytes: usize,
}

/// The whole API: `/healthz` and `/v1/agent` open, everything else behind a token: the admin
/// token everywhere, a tenant token on the tenant-visible routes (each handler checks its
/// [`Caller`]).
pub fn router(state: AppState) -> Router {
    Router::new()
        .route("/healthz", get(|| async { "ok" }))
        .route(AGENT_PATH, get(agent::upgrade))
        .route(
            "/v1/admin/tenants",
            post(tenancy::create_tenant).get(tenancy::list_tenants),
        )
        .route(
            "/v1/admin/tenants/{tenant}/tokens",
            post(tenancy::create_token),
        )
        .route(
            "/v1/admin/tenants/{tenant}/tokens/{id}",
            delete(tenancy::revoke_token),
        )
        .route(
            "/v1/admin/tenants/{tenant}/caps/{region}",
            put(tenancy::set_cap),
        )
        .route(
            "/v1/admin/tenants/{tenant}/projects",
            post(tenancy::create_project),
        )
        .route(
            "/v1/admin/tenants/{tenant}/projects/{project}/quotas/{region}",
            put(tenancy::set_quota),
        )
        .route("/v1/projects", get(tenancy::list_projects))
        .route("/v1/admin/regions", post(regions::create))
        .route(
            "/v1/admin/regions/{region}/bootstrap-token",
            post(regions::new_bootstrap),
        )
        .route("/v1/admin/regions/{region}", delete(regions::decommission))
        .route("/v1/admin/regions/{region}/zones", post(regions::add_zone))
        .route(
            "/v1/admin/regions/{region}/zones/{zone}",
            delete(regions::decommission_zone),
        )
        .route("/v1/regions", get(regions::list))
        .route("/v1/regions/{region}", get(regions::one))
        .route("/v1/regions/{region}/requests", post(requests::submit))
        .route("/v1/requests/{id}", get(requests::status))
        .route("/v1/services", post(instances::create).get(instances::list))
        .route(
            "/v1/services/{id}",
            get(instances::one).delete(instances::delete),
        )
        .merge(status::routes())
        .fallback(not_found)
        .method_not_allowed_fallback(not_found)
        .layer(DefaultBodyLimit::max(MAX_BODY_BYTES))
        .layer(middleware::from_fn_with_state(state.clone(), authenticate))
        .layer(middleware::from_fn(log_request))
        .layer(tower_http::catch_panic::CatchPanicLayer::custom(panicked))
        .with_state(state)
}

/// A panic anywhere in a handler or middleware: logged once with a random request id, answered
/// 500 with the same id (the connection is not dropped). Handlers validate before they change
/// anything, so a panic leaves nothing half-created.
fn panicked(panic: Box<dyn std::any::Any + Send + 'static>) -> Response {
    let what = panic
        .downcast_ref::<String>()
        .map(String::as_str)
        .or_else(|| panic.downcast_ref::<&str>().copied())
        .unwrap_or("(no message)");
    let id = crate::services::random_hex(8).unwrap_or_else(|_| "unknown".into());
    log::error!("request {id}: a handler panicked: {what}");
    Failure::new(
        StatusCode::INTERNAL_SERVER_ERROR,
        format!("internal error (request id {id}); the control plane logged it: report the id"),
    )
    .code(code::INTERNAL)
    .into_response()
}

async fn log_request(req: Request, next: Next) -> Response {
    log::debug!("{} {}", req.method(), req.uri().path());
    next.run(req).await
}

async fn not_found(req: Request) -> Failure {
    Failure::new(
        StatusCode::NOT_FOUND,
        format!(
            "no endpoint {} {}; see docs/modules/multi_region.md",
            req.method(),
            req.uri().path()
        ),
    )
}

/// The `Authorization: Bearer` token, if any.
pub fn bearer(headers: &HeaderMap) -> Option<SecretString> {
    headers
        .get(AUTHORIZATION)
        .and_then(|v| v.to_str().ok())
        .and_then(|s| s.strip_prefix("Bearer "))
        .map(|s| SecretString::new(s.trim()))
}

/// Everything but the open paths needs a token (unknown paths too: nothing is told to a caller
/// without one). The admin token makes the caller [`Caller::Admin`], a valid tenant token
/// [`Caller::Tenant`]; handlers read it from the request's extensions. Tokens are compared as
/// SHA-256 in constant time and never logged. The status page also takes its session cookie, and
/// sends a caller without a credential to its login form.
async fn authenticate(State(state): State<AppState>, mut req: Request, next: Next) -> Response {
    let path = req.uri().path();
    if path == "/healthz" || path == AGENT_PATH || status::is_open(path) {
        return next.run(req).await;
    }
    let caller = match status::credential(path, req.headers()) {
        Some(presented) => match status::caller_of(&state, presented).await {
            Ok(caller) => caller,
            Err(e) => return e.into_response(),
        },
        None => None,
    };
    let Some(caller) = caller else {
        if status::is_page(path) {
            return status::login_redirect();
        }
        return Failure::new(
            StatusCode::UNAUTHORIZED,
            "missing or wrong token; send `Authorization: Bearer <token>`: the admin token (the control plane's --admin-token-file) or a tenant token (POST /v1/admin/tenants/{tenant}/tokens)",
        )
        .into_response();
    };
    // The admin's routes answer tenants 403 whatever follows in the path.
    if !caller.is_admin() && path.starts_with("/v1/admin/") {
        return Failure::new(
            StatusCode::FORBIDDEN,
            "this route needs the admin token; a tenant token reaches /v1/projects, /v1/regions, /v1/requests and /v1/services",
        )
        .code(code::FORBIDDEN)
        .into_response();
    }
    // A caller with a valid token: its connection is never shed to make room (listener::shed).
    if let Some(proof) = req.extensions().get::<listener::Proof>() {
        proof.proven();
    }
    req.extensions_mut().insert(caller);
    next.run(req).await
}

/// The scope `token` proves, if any: the admin token, or a valid tenant token.
pub async fn caller_for(state: &AppState, token: &SecretString) -> Result<Option<Caller>, Failure> {
    if tokens::same(&tokens::hash(token.expose()), &state.admin_hash) {
        return Ok(Some(Caller::Admin));
    }
    crate::services::tenancy::authenticate(&state.cp, token.expose())
        .await
        .map(|tenant| tenant.map(|tenant| Caller::Tenant { tenant }))
        .map_err(Failure::from)
}
