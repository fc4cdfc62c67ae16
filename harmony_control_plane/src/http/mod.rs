//! The HTTP edge: routes and handlers only (axum), over [`crate::services`]. Status codes and
//! wire formats live here and nowhere else. Served by [`listener`] (TLS, timeouts, connection
//! bound).

pub mod agent;
pub mod caller;
pub mod error;
pub mod instances;
pub mod listener;
pub mod regions;
pub mod requests;
pub mod status;
pub mod tenancy;

use axum::Router;
use axum::body::Bytes;
use axum::extract::{DefaultBodyLimit, FromRequest, Request, State};
use axum::http::header::AUTHORIZATION;
use axum::http::{HeaderMap, StatusCode};
use axum::middleware::{self, Next};
use axum::response::{IntoResponse, Response};
use axum::routing::{delete, get, post, put};
use harmony_agent_protocol::{AGENT_PATH, MAX_FRAME_BYTES, SecretString, code};
use serde::de::DeserializeOwned;
use std::sync::Arc;

use crate::services::ControlPlane;
use crate::tokens;
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
        .with_state(state)
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
        Some(token) => match caller_for(&state, &token).await {
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

/// A JSON request body; a body that does not parse is a 400 naming the field, one over
/// [`MAX_BODY_BYTES`] a 413 naming the limit.
pub struct Body<T>(pub T);

impl<S: Send + Sync, T: DeserializeOwned> FromRequest<S> for Body<T> {
    type Rejection = Failure;

    async fn from_request(req: Request, state: &S) -> Result<Self, Failure> {
        let what = format!("{} {}", req.method(), req.uri().path());
        let bytes = Bytes::from_request(req, state).await.map_err(|e| {
            if e.status() == StatusCode::PAYLOAD_TOO_LARGE {
                let mut f = Failure::new(
                    StatusCode::PAYLOAD_TOO_LARGE,
                    format!("{what}: the body is over the {MAX_BODY_BYTES}-byte limit; send fewer or smaller manifests per request"),
                )
                .code(code::TOO_LARGE);
                f.1.limit_bytes = Some(MAX_BODY_BYTES as u64);
                f
            } else {
                Failure::new(e.status(), format!("{what}: the body is unreadable: {e}"))
            }
        })?;
        serde_json::from_slice(&bytes)
            .map(Body)
            .map_err(|e| Failure::new(StatusCode::BAD_REQUEST, format!("{what}: {e}")))
    }
}
