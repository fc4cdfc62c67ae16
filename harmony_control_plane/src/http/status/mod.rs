//! The status page: server-rendered HTML (askama, no JavaScript) showing every region and zone
//! with its health, for the same token scopes as the API.
//!
//! ```text
//! GET  /status[?health=healthy|unhealthy|unavailable]  -> 200 text/html (400 for another health)
//! GET  /status/login                                   -> 200 the login form
//! POST /status/login   token=<API token> (form)        -> 303 /status + session cookie
//!                                                         (401 form again for a wrong token)
//! POST /status/logout                                  -> 303 /status/login, cookie cleared
//! ```
//!
//! `/status` takes `Authorization: Bearer <token>` like the API, or the cookie the login form
//! sets (HttpOnly, Secure, SameSite=Strict, Path=/status). The cookie counts on `/status*`
//! only; a page request without a valid credential is sent to the login form. The token is
//! never rendered or logged.

pub mod view;

#[cfg(test)]
mod tests;

use askama::Template;
use axum::Router;
use axum::extract::rejection::FormRejection;
use axum::extract::{Form, Query, State};
use axum::http::StatusCode;
use axum::http::header::{self, HeaderMap, HeaderValue};
use axum::response::{IntoResponse, Response};
use axum::routing::{get, post};
use base64::Engine;
use base64::engine::general_purpose::URL_SAFE_NO_PAD;
use harmony_agent_protocol::SecretString;
use serde::Deserialize;

use super::caller::Caller;
use super::{AppState, bearer, caller_for};
use crate::services::regions;
use crate::store::now_ms;
use view::{LoginPage, MessagePage};

/// The page.
pub const PAGE_PATH: &str = "/status";
/// The login form (GET) and its target (POST).
pub const LOGIN_PATH: &str = "/status/login";
/// Clears the session cookie (POST).
pub const LOGOUT_PATH: &str = "/status/logout";
/// The session cookie's name.
pub const COOKIE: &str = "harmony_status";
/// How long the session cookie lives, in seconds.
pub const COOKIE_MAX_AGE_S: u32 = 8 * 3600;

/// The page's routes.
pub fn routes() -> Router<AppState> {
    Router::new()
        .route(PAGE_PATH, get(page))
        .route(LOGIN_PATH, get(login_form).post(login))
        .route(LOGOUT_PATH, post(logout))
}

/// Whether `path` belongs to the page (where the session cookie counts).
pub fn is_page(path: &str) -> bool {
    path == PAGE_PATH || path.starts_with("/status/")
}

/// Whether `path` needs no credential: the login form and logout.
pub fn is_open(path: &str) -> bool {
    path == LOGIN_PATH || path == LOGOUT_PATH
}

/// The token a request presents: its bearer token, else on the page's paths the session
/// cookie's.
pub fn credential(path: &str, headers: &HeaderMap) -> Option<SecretString> {
    bearer(headers).or_else(|| is_page(path).then(|| cookie_token(headers)).flatten())
}

fn cookie_token(headers: &HeaderMap) -> Option<SecretString> {
    headers
        .get_all(header::COOKIE)
        .iter()
        .filter_map(|v| v.to_str().ok())
        .flat_map(|v| v.split(';'))
        .filter_map(|pair| pair.trim().split_once('='))
        .find(|(name, _)| *name == COOKIE)
        .and_then(|(_, value)| URL_SAFE_NO_PAD.decode(value.trim()).ok())
        .and_then(|bytes| String::from_utf8(bytes).ok())
        .filter(|t| !t.is_empty())
        .map(SecretString::new)
}

/// What a page request without a valid credential gets: 303 to the login form, clearing a
/// stale cookie.
pub fn login_redirect() -> Response {
    redirect(LOGIN_PATH, Some(clear_cookie()))
}

#[derive(Debug, Deserialize)]
struct PageQuery {
    health: Option<String>,
}

/// `GET /status`.
async fn page(State(s): State<AppState>, caller: Caller, Query(q): Query<PageQuery>) -> Response {
    let filter = match view::parse_filter(q.health.as_deref()) {
        Ok(f) => f,
        Err(message) => {
            return message_page(StatusCode::BAD_REQUEST, "Unknown health filter", message);
        }
    };
    match regions::list(&s.cp).await {
        Ok(list) => {
            let page = view::build(&list, &caller, filter, now_ms());
            render(StatusCode::OK, page.render())
        }
        Err(e) => message_page(
            StatusCode::INTERNAL_SERVER_ERROR,
            "Regions unavailable",
            format!("the regions could not be read: {e}; retry, and see the control plane's log"),
        ),
    }
}

/// `GET /status/login`.
async fn login_form() -> Response {
    render(StatusCode::OK, LoginPage { error: None }.render())
}

#[derive(Debug, Deserialize)]
struct LoginForm {
    #[serde(default)]
    token: String,
}

/// `POST /status/login`: checks the token and keeps it in the session cookie.
async fn login(
    State(s): State<AppState>,
    form: Result<Form<LoginForm>, FormRejection>,
) -> Response {
    let refused = |status, error: &str| {
        render(
            status,
            LoginPage {
                error: Some(error.to_string()),
            }
            .render(),
        )
    };
    let token = match form {
        Ok(Form(f)) => f.token.trim().to_string(),
        Err(_) => {
            return refused(
                StatusCode::BAD_REQUEST,
                "token: send the form's token field (application/x-www-form-urlencoded)",
            );
        }
    };
    if token.is_empty() {
        return refused(
            StatusCode::BAD_REQUEST,
            "token: paste an admin or tenant API token",
        );
    }
    let token = SecretString::new(token);
    let known = match caller_for(&s, &token).await {
        Ok(caller) => caller.is_some(),
        Err(e) => return e.into_response(),
    };
    if !known {
        log::info!("status page: a sign-in with an unknown or expired token was refused");
        return refused(
            StatusCode::UNAUTHORIZED,
            "token: not a valid admin or tenant token (it may have expired or been revoked); ask an admin for one",
        );
    }
    let value = format!(
        "{COOKIE}={}; Path={PAGE_PATH}; Max-Age={COOKIE_MAX_AGE_S}; HttpOnly; Secure; SameSite=Strict",
        URL_SAFE_NO_PAD.encode(token.expose())
    );
    redirect(PAGE_PATH, HeaderValue::from_str(&value).ok())
}

/// `POST /status/logout`.
async fn logout() -> Response {
    redirect(LOGIN_PATH, Some(clear_cookie()))
}

fn clear_cookie() -> HeaderValue {
    HeaderValue::from_static(
        "harmony_status=; Path=/status; Max-Age=0; HttpOnly; Secure; SameSite=Strict",
    )
}

fn redirect(to: &'static str, cookie: Option<HeaderValue>) -> Response {
    let mut r = (StatusCode::SEE_OTHER, [(header::LOCATION, to)]).into_response();
    if let Some(c) = cookie {
        r.headers_mut().insert(header::SET_COOKIE, c);
    }
    secure_headers(r.headers_mut());
    r
}

fn message_page(status: StatusCode, title: &str, message: String) -> Response {
    let page = MessagePage {
        title: title.to_string(),
        message,
    };
    render(status, page.render())
}

/// An HTML answer; no script may run (Content-Security-Policy), nothing is cached.
fn render(status: StatusCode, html: Result<String, askama::Error>) -> Response {
    let mut r = match html {
        Ok(body) => (
            status,
            [(header::CONTENT_TYPE, "text/html; charset=utf-8")],
            body,
        )
            .into_response(),
        Err(e) => (
            StatusCode::INTERNAL_SERVER_ERROR,
            [(header::CONTENT_TYPE, "text/plain; charset=utf-8")],
            format!("the status page could not be rendered: {e}"),
        )
            .into_response(),
    };
    secure_headers(r.headers_mut());
    r
}

fn secure_headers(h: &mut HeaderMap) {
    h.insert(
        header::CONTENT_SECURITY_POLICY,
        HeaderValue::from_static(
            "default-src 'none'; style-src 'unsafe-inline'; form-action 'self'; frame-ancestors 'none'; base-uri 'none'",
        ),
    );
    h.insert(header::CACHE_CONTROL, HeaderValue::from_static("no-store"));
    h.insert(
        header::X_CONTENT_TYPE_OPTIONS,
        HeaderValue::from_static("nosniff"),
    );
    h.insert(
        header::REFERRER_POLICY,
        HeaderValue::from_static("no-referrer"),
    );
    h.insert(header::X_FRAME_OPTIONS, HeaderValue::from_static("DENY"));
}
