//! What the status page says of each zone's state and requests, and one request's own page:
//!
//! ```text
//! GET /status/requests/{id}  -> 200 text/html: op, params summary, progress, outcome, times
//!                               400 an id no request can have (the message names `id`)
//!                               404 no such request, or another tenant's: the same page
//! ```
//!
//! Each zone row says since when the zone has its health (stored transitions) and, for the
//! admin, its agent's last error; its Requests cell lists the requests in flight with their age
//! (saying when the zone's agent is not connected) and the recent failures with the agent's
//! error, each linking to its page. The admin sees every request and knows one by its stored
//! id (`<tenant>@<id>` for a tenant's); a tenant sees its own, by the ids it sent. Nothing here
//! renders a request's params or result values: params are summarised (kinds, names, flags),
//! results shown as the changes made; agents' texts are scrubbed of credentials.

use askama::Template;
use axum::extract::rejection::PathRejection;
use axum::extract::{Path, State};
use axum::http::StatusCode;
use axum::response::Response;
use harmony_api::{Health, RegionView};
use std::collections::HashMap;
use std::time::Duration;

use super::view::{Stamp, StatusRow};
use super::{message_page, render};
use crate::http::AppState;
use crate::http::caller::Caller;
use crate::services::health::human_duration;
use crate::services::request_views::{self, OutcomeSummary, ZoneRequests};
use crate::services::scrub;
use crate::store::status::cut;
use crate::store::{RequestState, RequestSummary, StoreError, now_ms};

/// The route of a request's page.
pub const DETAIL_PATH: &str = "/status/requests/{id}";

/// Where a request's page is: this, then its id.
pub const DETAIL_PREFIX: &str = "/status/requests/";

/// The longest id a request can be known by: a caller's id, or a tenant's stored one (its
/// tenant, `@`, its id).
pub const MAX_ID_CHARS: usize = crate::services::requests::MAX_ID_CHARS + 64;

/// The longest error shown in a zone's list (the request's page shows more).
pub const LIST_ERROR_CHARS: usize = 120;

/// Checks a request id from the page's path: 1 to [`MAX_ID_CHARS`] letters, digits and
/// `. _ ~ : -`, with at most one `@` (a tenant's stored id) not at either end. The error names
/// the field and what it may hold.
pub fn parse_id(raw: &str) -> Result<&str, String> {
    let allowed = |c: char| c.is_ascii_alphanumeric() || "._~:-@".contains(c);
    let ok = !raw.is_empty()
        && raw.chars().count() <= MAX_ID_CHARS
        && raw.chars().all(allowed)
        && raw.matches('@').count() <= 1
        && !raw.starts_with('@')
        && !raw.ends_with('@');
    if ok {
        Ok(raw)
    } else {
        Err(format!(
            "id: a request id is 1 to {MAX_ID_CHARS} letters, digits and . _ ~ : - (a tenant's request, as the admin knows it: <tenant>@<id>); follow a link from the status page"
        ))
    }
}

/// Since when a zone has its health, as a row shows it: `unavailable since 06:41:07 UTC
/// (12 min)`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Since {
    /// RFC 3339, for `<time datetime>`.
    pub iso: String,
    /// The full UTC time (`2026-11-24 06:41:07 UTC`), for the `title`.
    pub utc: String,
    /// The time of day when it is today (`06:41:07 UTC`), else the full time.
    pub clock: String,
    /// How long ago, in human units (`12 min`).
    pub duration: String,
}

impl Since {
    /// `at_ms` seen at `now_ms`.
    pub fn new(at_ms: i64, now_ms: i64) -> Self {
        let at = Stamp::new(at_ms, now_ms);
        let today = Stamp::new(now_ms, now_ms);
        let clock = match at.utc.split_once(' ') {
            Some((day, time)) if today.utc.starts_with(day) => time.to_string(),
            _ => at.utc.clone(),
        };
        Self {
            iso: at.iso,
            utc: at.utc,
            clock,
            duration: ago(at_ms, now_ms),
        }
    }
}

/// `now_ms - at_ms` in human units (never negative).
fn ago(at_ms: i64, now_ms: i64) -> String {
    human_duration(Duration::from_millis(
        now_ms.saturating_sub(at_ms).max(0) as u64
    ))
}

/// A zone row's state cells: since when, and (admin only) its agent's last error.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct ZoneStateCell {
    /// Since when it has its health, when known.
    pub since: Option<Since>,
    /// Its agent's last error, scrubbed (admin only).
    pub agent_error: Option<String>,
}

/// The state cells of a zone whose health started at `health_since`; the agent's error only
/// for the admin.
pub fn state_cell(
    health_since: Option<i64>,
    agent_error: Option<&str>,
    admin: bool,
    now_ms: i64,
) -> ZoneStateCell {
    ZoneStateCell {
        since: health_since.map(|t| Since::new(t, now_ms)),
        agent_error: agent_error
            .filter(|_| admin)
            .map(|e| scrub::for_page(e, crate::services::zone_states::MAX_AGENT_ERROR_CHARS)),
    }
}

/// One request in a zone's list.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RequestLine {
    /// Its page.
    pub href: String,
    /// The id the viewer knows it by.
    pub id: String,
    /// Its op.
    pub op: String,
    /// Where it stands, with its age: `queued 3 min; agent not connected`, `failed 4 min ago`.
    pub status: String,
    /// Its error (failures only), scrubbed and short.
    pub error: Option<String>,
}

/// A zone row's Requests cell.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct ZoneRequestsCell {
    /// Its oldest requests in flight.
    pub in_flight: Vec<RequestLine>,
    /// How many are in flight in all.
    pub in_flight_total: u64,
    /// In flight and not listed.
    pub in_flight_more: u64,
    /// Its latest failures.
    pub failures: Vec<RequestLine>,
    /// Failed within the window and not listed.
    pub failures_more: u64,
    /// The failure window, in hours (`24 h`).
    pub window: String,
}

impl ZoneRequestsCell {
    /// Whether there is nothing to list.
    pub fn is_empty(&self) -> bool {
        self.in_flight.is_empty() && self.failures.is_empty()
    }
}

/// The Requests cell of a zone whose agent is `connected` (or not), for `viewer`.
pub fn requests_cell(
    zone: &ZoneRequests,
    viewer: Option<&str>,
    connected: bool,
    now_ms: i64,
) -> ZoneRequestsCell {
    let line = |r: &RequestSummary, status: String, error: Option<String>| {
        let id = crate::services::requests::shown_id(viewer, &r.id).to_string();
        RequestLine {
            href: format!("{DETAIL_PREFIX}{id}"),
            id,
            op: r.op.clone(),
            status,
            error,
        }
    };
    let in_flight = zone
        .in_flight
        .iter()
        .map(|r| {
            let status = match (r.state, r.sent_at) {
                (RequestState::Sent, Some(sent)) => {
                    format!("sent {} ago, no answer yet", ago(sent, now_ms))
                }
                _ => format!("queued {}", ago(r.created_at, now_ms)),
            };
            let status = if connected {
                status
            } else {
                format!("{status}; agent not connected")
            };
            line(r, status, None)
        })
        .collect::<Vec<_>>();
    let failures = zone
        .failures
        .iter()
        .map(|r| {
            let word = match r.state {
                RequestState::Cancelled => "dropped",
                _ => "failed",
            };
            let when = r.completed_at.unwrap_or(r.created_at);
            let error = r
                .error
                .as_deref()
                .map(|e| scrub::for_page(e, LIST_ERROR_CHARS));
            line(r, format!("{word} {} ago", ago(when, now_ms)), error)
        })
        .collect::<Vec<_>>();
    ZoneRequestsCell {
        in_flight_more: zone.in_flight_total.saturating_sub(in_flight.len() as u64),
        in_flight_total: zone.in_flight_total,
        in_flight,
        failures_more: zone.failures_total.saturating_sub(failures.len() as u64),
        failures,
        window: format!("{} h", request_views::FAILURE_WINDOW.as_secs() / 3600),
    }
}

/// Fills each row's Requests cell with what `caller` may see (the admin: every request; a
/// tenant: its own), the agents' connections as `regions` (admin views) say.
pub async fn attach(
    cp: &crate::services::ControlPlane,
    caller: &Caller,
    regions: &[RegionView],
    rows: &mut [StatusRow],
    now_ms: i64,
) -> Result<(), StoreError> {
    let viewer = caller.tenant();
    let mut zones = request_views::by_zone(cp, viewer).await?;
    let connected: HashMap<(&str, &str), bool> = regions
        .iter()
        .flat_map(|r| {
            r.zones.iter().map(move |z| {
                (
                    (r.region.as_str(), z.zone.as_str()),
                    z.connected == Some(true),
                )
            })
        })
        .collect();
    for row in rows {
        let Some(zone) = zones.remove(&(row.region.clone(), row.zone.clone())) else {
            continue;
        };
        let up = connected
            .get(&(row.region.as_str(), row.zone.as_str()))
            .copied()
            .unwrap_or(false);
        row.requests = requests_cell(&zone, viewer, up, now_ms);
    }
    Ok(())
}

/// A progress line as the request's page shows it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ProgressRow {
    /// When it arrived.
    pub at: Stamp,
    /// Its stage.
    pub stage: String,
    /// Its detail (scrubbed when stored).
    pub detail: String,
}

/// One request's page.
#[derive(Debug, Clone, Template)]
#[template(path = "status_request.html")]
pub struct RequestPage {
    /// Who is signed in.
    pub who: String,
    /// The id the viewer knows it by.
    pub id: String,
    /// Its region.
    pub region: String,
    /// Its zone (`—` when unknown).
    pub zone: String,
    /// Its op.
    pub op: String,
    /// `queued`, `sent`, `done`, `failed` or `cancelled`.
    pub state: String,
    /// The badge class of its state.
    pub badge: Health,
    /// `tenant / project` it runs for (admin only).
    pub owner: Option<String>,
    /// When it was submitted.
    pub created: Stamp,
    /// When it was last sent to its agent.
    pub sent: Option<Stamp>,
    /// When it finished.
    pub completed: Option<Stamp>,
    /// How many times it was sent.
    pub deliveries: u32,
    /// Its params, summarised.
    pub params: Vec<String>,
    /// Its last progress lines, oldest first.
    pub progress: Vec<ProgressRow>,
    /// Its outcome, once finished.
    pub outcome: Option<OutcomeSummary>,
}

/// `GET /status/requests/{id}`.
pub async fn detail(
    State(s): State<AppState>,
    caller: Caller,
    path: Result<Path<String>, PathRejection>,
) -> Response {
    let raw = match &path {
        Ok(Path(raw)) => raw.as_str(),
        Err(_) => "\u{fffd}",
    };
    let id = match parse_id(raw) {
        Ok(id) => id,
        Err(message) => {
            return message_page(StatusCode::BAD_REQUEST, "Invalid request id", message);
        }
    };
    let found = match request_views::detail(&s.cp, id, caller.tenant()).await {
        Ok(found) => found,
        Err(e) => {
            return message_page(
                StatusCode::INTERNAL_SERVER_ERROR,
                "Request unavailable",
                format!(
                    "request {id} could not be read: {e}; retry, and see the control plane's log"
                ),
            );
        }
    };
    let Some(d) = found else {
        return message_page(
            StatusCode::NOT_FOUND,
            "No such request",
            format!(
                "no request {id}; finished requests are kept for the control plane's --request-retention-s. Follow a link from the status page"
            ),
        );
    };
    let now = now_ms();
    let r = &d.record;
    let outcome = d.res.as_ref().map(request_views::outcome_summary);
    let (state, badge) = match (r.state, &outcome) {
        (RequestState::Done, Some(o)) if o.ok => ("done", Health::Healthy),
        (RequestState::Done, _) => ("failed", Health::Unavailable),
        (RequestState::Cancelled, _) => ("cancelled", Health::Unavailable),
        (RequestState::Sent, _) => ("sent", Health::Unhealthy),
        (RequestState::Queued, _) => ("queued", Health::Unhealthy),
    };
    let page = RequestPage {
        who: match &caller {
            Caller::Admin => "admin".into(),
            Caller::Tenant { tenant } => format!("tenant {tenant}"),
        },
        id: d.shown_id.clone(),
        region: r.region.clone(),
        zone: if r.zone.is_empty() {
            "—".into()
        } else {
            r.zone.clone()
        },
        op: cut(&r.op, 80),
        state: state.into(),
        badge,
        owner: caller
            .is_admin()
            .then(|| {
                r.scope
                    .as_ref()
                    .map(|s| format!("{} / {}", s.tenant, s.project))
            })
            .flatten(),
        created: Stamp::new(r.created_at, now),
        sent: r.sent_at.map(|t| Stamp::new(t, now)),
        completed: r.completed_at.map(|t| Stamp::new(t, now)),
        deliveries: r.deliveries,
        params: request_views::params_summary(&r.params),
        progress: d
            .progress
            .iter()
            .map(|p| ProgressRow {
                at: Stamp::new(p.at, now),
                stage: p.stage.clone(),
                detail: p.detail.clone(),
            })
            .collect(),
        outcome,
    };
    render(StatusCode::OK, page.render())
}

#[cfg(test)]
#[path = "requests_tests.rs"]
mod tests;
