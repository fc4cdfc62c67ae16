//! What the status page shows of requests: per zone, the requests in flight (oldest first) and
//! the recent failures with the agent's error; one request in detail (its params summarised
//! with no value that could be secret, its last progress lines, its outcome). The admin sees
//! every request; a tenant only its own, by the ids it sent.
//!
//! Agents' progress lines are stored here too: the last
//! [`PROGRESS_PER_REQUEST`](crate::store::status::PROGRESS_PER_REQUEST) of each request,
//! scrubbed of credentials and bounded.

use harmony_agent_protocol::{Res, WireChange};
use serde_json::Value;
use std::collections::HashMap;
use std::time::Duration;

use super::ControlPlane;
use super::requests::{self, RequestError};
use super::scrub;
use crate::store::status::MAX_PROGRESS_CHARS;
use crate::store::{ProgressLine, RequestRecord, RequestSummary, StoreError, now_ms};

/// Requests in flight listed per zone (its oldest).
pub const IN_FLIGHT_SHOWN: i64 = 3;

/// Failures listed per zone (its latest).
pub const FAILURES_SHOWN: i64 = 5;

/// How far back failures are listed.
pub const FAILURE_WINDOW: Duration = Duration::from_secs(24 * 3600);

/// Objects named one by one in a params or result summary (the others are counted).
pub const OBJECTS_SHOWN: usize = 10;

/// The longest stage name stored, in characters.
pub const MAX_STAGE_CHARS: usize = 40;

/// The longest error message shown on a request's page, in characters.
pub const MAX_MESSAGE_CHARS: usize = 1000;

/// A zone's requests as the page lists them.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct ZoneRequests {
    /// Its oldest unanswered requests (at most [`IN_FLIGHT_SHOWN`]).
    pub in_flight: Vec<RequestSummary>,
    /// How many are unanswered in all.
    pub in_flight_total: u64,
    /// Its latest failures within [`FAILURE_WINDOW`] (at most [`FAILURES_SHOWN`]), newest first.
    pub failures: Vec<RequestSummary>,
    /// How many failed within the window in all.
    pub failures_total: u64,
}

/// The requests of every zone that has some, for `viewer` (`None`: the admin, every request;
/// a tenant: its own), keyed by (region, zone).
pub async fn by_zone(
    cp: &ControlPlane,
    viewer: Option<&str>,
) -> Result<HashMap<(String, String), ZoneRequests>, StoreError> {
    let since = now_ms() - FAILURE_WINDOW.as_millis() as i64;
    let in_flight = cp
        .store
        .unanswered_summaries(viewer, IN_FLIGHT_SHOWN)
        .await?;
    let failures = cp
        .store
        .recent_failures(viewer, since, FAILURES_SHOWN)
        .await?;
    let mut out: HashMap<(String, String), ZoneRequests> = HashMap::new();
    for r in in_flight {
        let zone = out.entry((r.region.clone(), r.zone.clone())).or_default();
        zone.in_flight_total = r.zone_total;
        zone.in_flight.push(r);
    }
    for r in failures {
        let zone = out.entry((r.region.clone(), r.zone.clone())).or_default();
        zone.failures_total = r.zone_total;
        zone.failures.push(r);
    }
    Ok(out)
}

/// One request as its page shows it.
#[derive(Debug, Clone, PartialEq)]
pub struct RequestDetail {
    /// The id the viewer knows it by.
    pub shown_id: String,
    /// The request as stored.
    pub record: RequestRecord,
    /// Its outcome, once finished.
    pub res: Option<Res>,
    /// Its last progress lines, oldest first.
    pub progress: Vec<ProgressLine>,
}

/// Request `id` as `viewer` names it (the admin: its stored id; a tenant: the id it sent);
/// `None` when there is none, or it is another tenant's (the same answer).
pub async fn detail(
    cp: &ControlPlane,
    id: &str,
    viewer: Option<&str>,
) -> Result<Option<RequestDetail>, RequestError> {
    let Some(record) = requests::lookup(cp, id, viewer).await? else {
        return Ok(None);
    };
    let res = requests::parse_res(&record)?;
    let progress = cp.store.progress(&record.id).await?;
    Ok(Some(RequestDetail {
        shown_id: requests::shown_id(viewer, &record.id).to_string(),
        record,
        res,
        progress,
    }))
}

/// Stores progress line number `n` (counted by the agent's connection, from 0) of request `id`
/// of `region`'s zone `zone`: scrubbed of credentials, bounded, and only while the request is
/// unanswered and placed there.
pub async fn record_progress(
    cp: &ControlPlane,
    (region, zone): (&str, &str),
    id: &str,
    n: u64,
    stage: &str,
    detail: &str,
) -> Result<bool, StoreError> {
    let line = ProgressLine {
        at: now_ms(),
        stage: scrub::for_page(stage, MAX_STAGE_CHARS),
        detail: scrub::for_page(detail, MAX_PROGRESS_CHARS),
    };
    cp.store.add_progress(id, region, zone, n, &line).await
}

/// A request's params for people, with no value that could be secret: for manifests, how many
/// objects of each kind and the first [`OBJECTS_SHOWN`] by kind, namespace and name (never
/// their data); for other ops, their flags (booleans and numbers) and the names of their other
/// fields.
pub fn params_summary(params: &str) -> Vec<String> {
    let Ok(Value::Object(fields)) = serde_json::from_str::<Value>(params) else {
        return vec![format!(
            "params: not a JSON object ({} bytes)",
            params.len()
        )];
    };
    let mut lines = Vec::new();
    let mut others = Vec::new();
    for (key, value) in &fields {
        let key_shown = scrub::for_page(key, 40);
        match (key.as_str(), value) {
            ("manifests" | "objects", Value::Array(items)) => {
                lines.extend(objects_summary(&key_shown, items));
            }
            (_, Value::Bool(_) | Value::Number(_)) if !secret_key(key) => {
                lines.push(format!("{key_shown}: {value}"));
            }
            _ => others.push(key_shown),
        }
    }
    if !others.is_empty() {
        lines.push(format!(
            "also set (values not shown): {}",
            others.join(", ")
        ));
    }
    if lines.is_empty() {
        lines.push("no params".into());
    }
    lines
}

fn secret_key(key: &str) -> bool {
    scrub::for_page(&format!("{key}=x"), 200).ends_with(scrub::REDACTED)
}

/// `3 objects: 2 ConfigMap, 1 Secret`, then `ConfigMap app/web` for the first ones.
fn objects_summary(key: &str, items: &[Value]) -> Vec<String> {
    let mut kinds: Vec<(String, usize)> = Vec::new();
    let mut named = Vec::new();
    for item in items {
        let kind = text_at(item, &["kind"]).unwrap_or("(no kind)");
        let kind = scrub::for_page(kind, 60);
        match kinds.iter_mut().find(|(k, _)| *k == kind) {
            Some((_, n)) => *n += 1,
            None => kinds.push((kind.clone(), 1)),
        }
        if named.len() < OBJECTS_SHOWN {
            let name = text_at(item, &["metadata", "name"])
                .or_else(|| text_at(item, &["name"]))
                .unwrap_or("(no name)");
            let namespace =
                text_at(item, &["metadata", "namespace"]).or_else(|| text_at(item, &["namespace"]));
            let at = match namespace {
                Some(ns) => format!("{ns}/{name}"),
                None => name.to_string(),
            };
            named.push(format!("{kind} {}", scrub::for_page(&at, 120)));
        }
    }
    let counts: Vec<String> = kinds.iter().map(|(k, n)| format!("{n} {k}")).collect();
    let mut lines = vec![format!(
        "{key}: {} object{}{}{}",
        items.len(),
        if items.len() == 1 { "" } else { "s" },
        if counts.is_empty() { "" } else { ": " },
        counts.join(", ")
    )];
    lines.extend(named);
    if items.len() > OBJECTS_SHOWN {
        lines.push(format!("… and {} more", items.len() - OBJECTS_SHOWN));
    }
    lines
}

fn text_at<'a>(v: &'a Value, path: &[&str]) -> Option<&'a str> {
    path.iter()
        .try_fold(v, |v, k| v.get(*k))
        .and_then(Value::as_str)
}

/// A finished request's outcome for people.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct OutcomeSummary {
    /// Whether it succeeded.
    pub ok: bool,
    /// Its error code, when it failed.
    pub code: Option<String>,
    /// Its error message (scrubbed, at most [`MAX_MESSAGE_CHARS`]), when it failed.
    pub message: Option<String>,
    /// What it changed (`create apps/v1 Deployment shop/web`), or what its result holds.
    pub lines: Vec<String>,
}

/// `res` for people: the error's code and message, and the changes made (the first
/// [`OBJECTS_SHOWN`]) or the result's shape; never the result's values (a `get_objects`
/// result may hold a Secret's data).
pub fn outcome_summary(res: &Res) -> OutcomeSummary {
    match &res.error {
        Some(e) if !res.ok => OutcomeSummary {
            ok: false,
            code: Some(scrub::for_page(&e.code, 60)),
            message: Some(scrub::for_page(&e.message, MAX_MESSAGE_CHARS)),
            lines: changes_summary("applied before the failure", &e.applied),
        },
        _ if !res.ok => OutcomeSummary {
            ok: false,
            code: None,
            message: Some("failed without an error".into()),
            lines: Vec::new(),
        },
        _ => OutcomeSummary {
            ok: true,
            code: None,
            message: None,
            lines: result_summary(res),
        },
    }
}

fn result_summary(res: &Res) -> Vec<String> {
    let Some(raw) = &res.result else {
        return vec!["no result".into()];
    };
    if let Ok(r) = raw.parse::<harmony_agent_protocol::ops::ChangesResult>()
        && !r.changes.is_empty()
    {
        return changes_summary("changes", &r.changes);
    }
    let shape = match raw.parse::<Value>() {
        Ok(Value::Object(fields)) => {
            let keys: Vec<String> = fields.keys().map(|k| scrub::for_page(k, 40)).collect();
            format!("an object with {}", keys.join(", "))
        }
        Ok(Value::Array(items)) => format!("a list of {}", items.len()),
        Ok(_) => "a value".into(),
        Err(_) => "not JSON".into(),
    };
    vec![format!(
        "result: {shape} ({} bytes; values are not shown here: read them with GET /v1/requests/<id>)",
        raw.get().len()
    )]
}

fn changes_summary(what: &str, changes: &[WireChange]) -> Vec<String> {
    if changes.is_empty() {
        return Vec::new();
    }
    let mut lines = vec![format!("{what}: {}", changes.len())];
    lines.extend(changes.iter().take(OBJECTS_SHOWN).map(|c| {
        format!(
            "{} {}",
            scrub::for_page(&c.action, 20),
            scrub::for_page(&c.object, 160)
        )
    }));
    if changes.len() > OBJECTS_SHOWN {
        lines.push(format!("… and {} more", changes.len() - OBJECTS_SHOWN));
    }
    lines
}

#[cfg(test)]
#[path = "request_views_tests.rs"]
pub(crate) mod tests;
