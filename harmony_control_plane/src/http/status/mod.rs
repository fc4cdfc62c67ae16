//! The status page: server-rendered HTML (askama) showing every region and zone with its
//! health, for the same token scopes as the API, kept up to date in place by its own script
//! over server-sent events ([`live`]; without scripts it reloads itself instead).
//!
//! ```text
//! GET  /status[?health=healthy|unhealthy|unavailable]  -> 200 text/html (400 for another health)
//! GET  /status/events[?health=...]                     -> text/event-stream (see [`live`])
//! GET  /status/live.js                                 -> the page's script
//! GET  /status/requests/{id}                          -> one request (see [`requests`]; 404 for
//!                                                         another tenant's, like a missing one)
//! GET  /status/login                                   -> 200 the login form
//! POST /status/login   token=<API token> (form)        -> 303 /status + session cookie
//!                                                         (401 form again for a wrong token)
//! POST /status/logout                                  -> 303 /status/login, cookie cleared
//! ```
//!
//! `/status` takes `Authorization: Bearer <token>` like the API, or the session cookie the login
//! form sets (HttpOnly, Secure, SameSite=Strict, Path=/status): a random session id, never the
//! token. The session lives in the store (`services::page_sessions`), so logout, token
//! revocation, the admin token changing and expiry end it on every replica. The cookie counts on
//! `/status*` only; a page request without a valid credential is sent to the login form. Login
//! and logout refuse cross-site requests (`Sec-Fetch-Site: cross-site`, or an `Origin` or
//! `Referer` of another host). The token is never rendered or logged.

pub mod live;
pub mod ops;
pub mod requests;
pub mod tenancy;
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
use harmony_agent_protocol::SecretString;
use serde::Deserialize;

use super::caller::Caller;
use super::{AppState, Failure, bearer, caller_for};
use crate::services::page_sessions;
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
/// How long the session cookie lives, in seconds (the session itself ends then too).
pub const COOKIE_MAX_AGE_S: u64 = page_sessions::SESSION_TTL.as_secs();

/// The page's routes.
pub fn routes() -> Router<AppState> {
    Router::new()
        .route(PAGE_PATH, get(page))
        .route(live::EVENTS_PATH, get(live::events))
        .route(live::SCRIPT_PATH, get(live::script))
        .route(requests::DETAIL_PATH, get(requests::detail))
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

/// What a request presents: its bearer token, else on the page's paths the session cookie.
pub enum Presented {
    /// An API token (`Authorization: Bearer`).
    Token(SecretString),
    /// A status-page session id (the cookie).
    Session(String),
}

/// The credential a request presents, if any.
pub fn credential(path: &str, headers: &HeaderMap) -> Option<Presented> {
    bearer(headers).map(Presented::Token).or_else(|| {
        is_page(path)
            .then(|| cookie_session(headers))
            .flatten()
            .map(Presented::Session)
    })
}

/// Who `presented` proves the caller is, if anyone.
pub async fn caller_of(state: &AppState, presented: Presented) -> Result<Option<Caller>, Failure> {
    match presented {
        Presented::Token(token) => caller_for(state, &token).await,
        Presented::Session(id) => page_sessions::viewer(&state.cp, &id, &state.admin_hash)
            .await
            .map(|viewer| {
                viewer.map(|v| match v {
                    None => Caller::Admin,
                    Some(tenant) => Caller::Tenant { tenant },
                })
            })
            .map_err(Failure::from),
    }
}

fn cookie_session(headers: &HeaderMap) -> Option<String> {
    headers
        .get_all(header::COOKIE)
        .iter()
        .filter_map(|v| v.to_str().ok())
        .flat_map(|v| v.split(';'))
        .filter_map(|pair| pair.trim().split_once('='))
        .find(|(name, _)| *name == COOKIE)
        .map(|(_, value)| value.trim().to_string())
        .filter(|v| {
            !v.is_empty()
                && v.len() <= 128
                && v.bytes()
                    .all(|b| b.is_ascii_alphanumeric() || b"_-".contains(&b))
        })
}

/// Whether a login or logout comes from the page itself. A browser's Fetch Metadata decides
/// when sent (`Sec-Fetch-Site`: only `same-origin`, or `none` for a typed address); without it,
/// the `Origin` (else `Referer`) must name the host the request was sent to, and `Origin: null`
/// (an opaque or hidden origin) is refused. The page's own `Referrer-Policy: no-referrer` makes
/// Chromium send `Origin: null` on its own forms, which is why Fetch Metadata comes first. A
/// client that sends none of these (curl) is let through: login CSRF needs a browser.
fn same_site(headers: &HeaderMap, uri: &axum::http::Uri) -> bool {
    let text = |name: &str| headers.get(name).and_then(|v| v.to_str().ok());
    if let Some(site) = text("sec-fetch-site") {
        return site == "same-origin" || site == "none";
    }
    // HTTP/1.1 names the host in `Host`; HTTP/2 in the `:authority` the URI carries.
    let host = text("host").or_else(|| uri.authority().map(|a| a.as_str()));
    let authority = |url: &str| {
        url.split_once("://")
            .map(|(_, rest)| rest.split(['/', '?', '#']).next().unwrap_or("").to_string())
    };
    match text("origin").or_else(|| text("referer")) {
        Some("null") => false,
        Some(from) => authority(from).is_some_and(|a| Some(a.as_str()) == host),
        None => true,
    }
}

fn cross_site() -> Response {
    message_page(
        StatusCode::FORBIDDEN,
        "Cross-site request refused",
        "sign in and out from the status page itself (/status/login); a form on another site may not sign you in or out".into(),
    )
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
    match view::load(&s.cp, &caller, filter, now_ms()).await {
        Ok(page) => render(StatusCode::OK, page.render()),
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

/// `POST /status/login`: checks the token and opens a session; the cookie carries the
/// session's id, never the token.
async fn login(
    State(s): State<AppState>,
    headers: HeaderMap,
    uri: axum::http::Uri,
    form: Result<Form<LoginForm>, FormRejection>,
) -> Response {
    if !same_site(&headers, &uri) {
        let h = |n: &str| {
            headers
                .get(n)
                .and_then(|v| v.to_str().ok())
                .unwrap_or("-")
                .escape_debug()
                .to_string()
        };
        log::warn!(
            "status page: a cross-site sign-in was refused (Host {}, Origin {}, Referer {}, Sec-Fetch-Site {})",
            h("host"),
            h("origin"),
            h("referer"),
            h("sec-fetch-site")
        );
        return cross_site();
    }
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
    let opened = match page_sessions::open(&s.cp, &token, &s.admin_hash).await {
        Ok(opened) => opened,
        Err(e) => return Failure::from(e).into_response(),
    };
    let Some((session, _)) = opened else {
        log::info!("status page: a sign-in with an unknown or expired token was refused");
        return refused(
            StatusCode::UNAUTHORIZED,
            "token: not a valid admin or tenant token (it may have expired or been revoked); ask an admin for one",
        );
    };
    let value = format!(
        "{COOKIE}={}; Path={PAGE_PATH}; Max-Age={COOKIE_MAX_AGE_S}; HttpOnly; Secure; SameSite=Strict",
        session.expose()
    );
    redirect(PAGE_PATH, HeaderValue::from_str(&value).ok())
}

/// `POST /status/logout`: ends the session on every replica and clears the cookie.
async fn logout(State(s): State<AppState>, headers: HeaderMap, uri: axum::http::Uri) -> Response {
    if !same_site(&headers, &uri) {
        return cross_site();
    }
    if let Some(id) = cookie_session(&headers)
        && let Err(e) = page_sessions::end(&s.cp, &id).await
    {
        return Failure::from(e).into_response();
    }
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

/// An HTML answer; no script but the page's own may run (Content-Security-Policy), nothing is
/// cached.
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
            "default-src 'none'; script-src 'self'; connect-src 'self'; style-src 'unsafe-inline'; form-action 'self'; frame-ancestors 'none'; base-uri 'none'",
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
