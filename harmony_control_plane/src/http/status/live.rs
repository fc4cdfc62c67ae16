//! The status page, live: server-sent events the page's own script applies in place, so a
//! change shows within about a second without a reload (scroll and focus kept).
//!
//! ```text
//! GET /status/events[?health=...]  -> 200 text/event-stream (same credential, scope and filter
//!                                     as /status; 400 for another health; 429 over the limits)
//! GET /status/live.js              -> the page's script (the only one its CSP allows)
//! ```
//!
//! Any replica serves a stream: every [`TICK`] it reads the store through the services, as the
//! page does ([`view::load`]), renders each row with the page's own row template and sends an
//! `update` event only when something changed: the order of the rows' keys, the rows whose HTML
//! changed and the page's live sections ([`view::LIVE_SECTIONS`]) that changed. The first event
//! carries everything. Text that changes with the clock alone (`3s ago`, `queued 7 s`) is marked
//! `data-clock` in the templates (an element holding text only): a change there alone is sent
//! every [`CLOCK_REFRESH`], not every tick. A comment every [`KEEP_ALIVE`] keeps proxies from
//! closing a quiet stream.
//! The caller's credential is checked again on every tick: when its session ends (logout,
//! token revoked or expired, admin token changed) the stream sends `end` and closes. Streams are
//! bounded per caller ([`MAX_PER_CALLER`]) and per process ([`MAX_STREAMS`]).

use axum::extract::{Query, State};
use axum::http::StatusCode;
use axum::http::header::{self, HeaderMap, HeaderValue};
use axum::response::sse::{Event, KeepAlive, Sse};
use axum::response::{IntoResponse, Response};
use std::collections::{BTreeMap, HashMap};
use std::convert::Infallible;
use std::sync::{LazyLock, Mutex};
use std::time::Duration;

use super::view::{self, EMPTY_KEY, EmptyHtml, RowHtml, StatusPage};
use super::{PageQuery, caller_of, credential, message_page, secure_headers};
use crate::http::AppState;
use crate::http::caller::Caller;
use crate::store::now_ms;
use askama::Template;

/// The event stream.
pub const EVENTS_PATH: &str = "/status/events";
/// The page's script.
pub const SCRIPT_PATH: &str = "/status/live.js";
/// How often a stream reads the store.
pub const TICK: Duration = Duration::from_secs(1);
/// How often text that changes with the clock alone (`data-clock` elements) is refreshed.
pub const CLOCK_REFRESH: Duration = Duration::from_secs(5);
/// How often a quiet stream sends a comment.
pub const KEEP_ALIVE: Duration = Duration::from_secs(15);
/// Streams open at once in this process (each reads the store every [`TICK`]).
pub const MAX_STREAMS: usize = 64;
/// Streams open at once for one caller (the admin, or one tenant): a few tabs.
pub const MAX_PER_CALLER: usize = 8;

const SCRIPT: &str = include_str!("live.js");

/// Open streams, per caller.
#[derive(Debug, Default)]
pub struct Streams {
    open: Mutex<HashMap<String, usize>>,
}

/// One open stream; counted down when dropped (the client left or the stream ended).
#[derive(Debug)]
pub struct StreamPermit {
    streams: &'static Streams,
    key: String,
}

impl Streams {
    /// A permit for one more stream of `key`, unless `key` has [`MAX_PER_CALLER`] or the process
    /// [`MAX_STREAMS`] already.
    pub fn open(&'static self, key: &str) -> Option<StreamPermit> {
        let mut open = self.open.lock().unwrap_or_else(|e| e.into_inner());
        let total: usize = open.values().sum();
        let mine = open.get(key).copied().unwrap_or(0);
        if total >= MAX_STREAMS || mine >= MAX_PER_CALLER {
            return None;
        }
        open.insert(key.to_string(), mine + 1);
        Some(StreamPermit {
            streams: self,
            key: key.to_string(),
        })
    }
}

impl Drop for StreamPermit {
    fn drop(&mut self) {
        let mut open = self.streams.open.lock().unwrap_or_else(|e| e.into_inner());
        if let Some(n) = open.get_mut(&self.key) {
            *n -= 1;
            if *n == 0 {
                open.remove(&self.key);
            }
        }
    }
}

static STREAMS: LazyLock<Streams> = LazyLock::new(Streams::default);

fn caller_key(caller: &Caller) -> String {
    match caller {
        Caller::Admin => "admin".into(),
        Caller::Tenant { tenant } => format!("tenant:{tenant}"),
    }
}

/// `GET /status/live.js`.
pub async fn script() -> Response {
    let mut r = (
        [(header::CONTENT_TYPE, "text/javascript; charset=utf-8")],
        SCRIPT,
    )
        .into_response();
    secure_headers(r.headers_mut());
    r
}

/// The page as the live updates see it: each row's HTML by key, in order, and each live
/// section's HTML.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Rendered {
    /// The rows' keys, in the table's order.
    pub order: Vec<String>,
    /// Each row's `<tr>`.
    pub rows: BTreeMap<String, String>,
    /// Each live section's inner HTML.
    pub sections: BTreeMap<&'static str, String>,
}

/// Renders `page` as the live updates send it.
pub fn render(page: &StatusPage) -> Result<Rendered, askama::Error> {
    let mut out = Rendered::default();
    for row in &page.rows {
        out.order.push(row.key.clone());
        out.rows.insert(row.key.clone(), RowHtml { row }.render()?);
    }
    if page.rows.is_empty() {
        let empty = EmptyHtml {
            admin: page.admin,
            filter: page.filter,
            columns: page.columns,
        };
        out.order.push(EMPTY_KEY.into());
        out.rows.insert(EMPTY_KEY.into(), empty.render()?);
    }
    for name in view::LIVE_SECTIONS {
        let html = match name {
            "filters" => page.as_filters().render()?,
            "summary" => page.as_summary().render()?,
            "retired" => page.as_retired().render()?,
            _ => page.as_tenancy().render()?,
        };
        out.sections.insert(name, html);
    }
    Ok(out)
}

/// `html` without its `data-clock` elements' text (nor their attributes after `data-clock`):
/// two renderings that differ only by the clock compare equal.
pub fn without_clocks(html: &str) -> String {
    let mut out = String::with_capacity(html.len());
    let mut rest = html;
    while let Some(at) = rest.find("data-clock") {
        out.push_str(&rest[..at]);
        rest = rest[at..].find("</").map_or("", |end| &rest[at + end..]);
    }
    out.push_str(rest);
    out
}

/// The `update` event taking the page the client has (`sent`: `None` before the first event)
/// to `now`: the full order, and only the rows and sections that changed, `clocks` counting
/// changes of clock text too. `sent` becomes what the client has after it. `None` when
/// nothing is to be sent.
pub fn update(
    sent: &mut Option<Rendered>,
    now: Rendered,
    page: &StatusPage,
    clocks: bool,
) -> Option<String> {
    let first = sent.is_none();
    let before = sent.take().unwrap_or_default();
    let differs = |had: Option<&String>, new: &String| match had {
        None => true,
        Some(had) if clocks => had != new,
        Some(had) => without_clocks(had) != without_clocks(new),
    };
    let mut have = Rendered {
        order: now.order.clone(),
        ..Rendered::default()
    };
    let mut rows = BTreeMap::new();
    for (key, html) in now.rows {
        let had = before.rows.get(&key);
        if differs(had, &html) {
            rows.insert(key.clone(), html.clone());
            have.rows.insert(key, html);
        } else if let Some(had) = had {
            have.rows.insert(key, had.clone());
        }
    }
    let mut sections = BTreeMap::new();
    for (name, html) in now.sections {
        let had = before.sections.get(name);
        if differs(had, &html) {
            sections.insert(name, html.clone());
            have.sections.insert(name, html);
        } else if let Some(had) = had {
            have.sections.insert(name, had.clone());
        }
    }
    let moved = first || before.order != have.order;
    *sent = Some(have);
    if !moved && rows.is_empty() && sections.is_empty() {
        return None;
    }
    Some(
        serde_json::json!({
            "order": now.order,
            "rows": rows,
            "sections": sections,
            "generated": {"iso": page.generated.iso, "utc": page.generated.utc},
        })
        .to_string(),
    )
}

/// What a stream remembers between ticks.
struct Stream {
    state: AppState,
    headers: HeaderMap,
    caller: Caller,
    filter: Option<harmony_api::Health>,
    sent: Option<Rendered>,
    ticks: tokio::time::Interval,
    clocks_at: tokio::time::Instant,
    ended: bool,
    _permit: StreamPermit,
}

impl Stream {
    /// Whether the credential the stream was opened with still proves the same caller.
    async fn still_signed_in(&self) -> Option<bool> {
        let Some(presented) = credential(EVENTS_PATH, &self.headers) else {
            return Some(false);
        };
        match caller_of(&self.state, presented).await {
            Ok(now) => Some(now.as_ref() == Some(&self.caller)),
            // The store did not answer: try again next tick.
            Err(_) => None,
        }
    }

    /// The next event: waits for ticks until something changed or the session ended.
    async fn next(mut self) -> Option<(Result<Event, Infallible>, Self)> {
        if self.ended {
            return None;
        }
        loop {
            self.ticks.tick().await;
            match self.still_signed_in().await {
                Some(true) => {}
                Some(false) => {
                    self.ended = true;
                    let event = Event::default()
                        .event("end")
                        .data("your session ended: sign in again");
                    return Some((Ok(event), self));
                }
                None => continue,
            }
            let page = match view::load(&self.state.cp, &self.caller, self.filter, now_ms()).await {
                Ok(page) => page,
                Err(e) => {
                    log::debug!("status page stream: the regions could not be read: {e}");
                    continue;
                }
            };
            let rendered = match render(&page) {
                Ok(r) => r,
                Err(e) => {
                    log::warn!("status page stream: a row could not be rendered: {e}");
                    continue;
                }
            };
            let clocks = self.clocks_at.elapsed() >= CLOCK_REFRESH;
            if clocks {
                self.clocks_at = tokio::time::Instant::now();
            }
            if let Some(data) = update(&mut self.sent, rendered, &page, clocks) {
                return Some((Ok(Event::default().event("update").data(data)), self));
            }
        }
    }
}

/// `GET /status/events`.
pub(super) async fn events(
    State(s): State<AppState>,
    caller: Caller,
    headers: HeaderMap,
    Query(q): Query<PageQuery>,
) -> Response {
    let filter = match view::parse_filter(q.health.as_deref()) {
        Ok(f) => f,
        Err(message) => {
            return message_page(StatusCode::BAD_REQUEST, "Unknown health filter", message);
        }
    };
    let Some(permit) = STREAMS.open(&caller_key(&caller)) else {
        log::info!("status page: a live stream was refused: too many open");
        return message_page(
            StatusCode::TOO_MANY_REQUESTS,
            "Too many live pages",
            format!(
                "at most {MAX_PER_CALLER} live status pages per signed-in user and {MAX_STREAMS} per control plane replica are updated at once; close another tab, or reload later"
            ),
        );
    };
    let mut ticks = tokio::time::interval(TICK);
    ticks.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    let stream = Stream {
        state: s,
        headers,
        caller,
        filter,
        sent: None,
        ticks,
        clocks_at: tokio::time::Instant::now(),
        ended: false,
        _permit: permit,
    };
    let body = futures::stream::unfold(stream, Stream::next);
    let mut r = Sse::new(body)
        .keep_alive(KeepAlive::new().interval(KEEP_ALIVE).text("heartbeat"))
        .into_response();
    secure_headers(r.headers_mut());
    // Proxies that buffer responses (nginx) pass this one through as it comes.
    r.headers_mut()
        .insert("x-accel-buffering", HeaderValue::from_static("no"));
    r
}

#[cfg(test)]
#[path = "live_tests.rs"]
mod tests;
