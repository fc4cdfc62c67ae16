//! Durable requests: persisted before they are acknowledged, delivered by whichever replica
//! holds the region's agent (see [`super::dispatch`]), answered from the store on any replica.
//!
//! The id is an idempotency key: the same id with the same region, op and params (as canonical
//! JSON: keys in any order, any spacing) joins the first request (or returns its stored
//! result); the same id with anything else is refused.
//!
//! Ids live in the tenant a request runs for: a tenant's `r1` is stored as `<tenant>@r1`
//! ([`scoped_id`]), so another tenant's `r1` never conflicts with it, never changes the answer
//! and cannot be taken ahead of it. A caller's id cannot hold `@`, so no caller can name a
//! stored id of another tenant, and the admin reads every request by its tenant-qualified id.
//! Instance requests (`<instance>.<verb>.<attempt>`, [`super::instance_requests`]) are submitted by the
//! control plane with [`submit_as`] under ids no caller can send.
//! Waiting uses store events (`RequestDone`, `Progress`) and polls every second as a safety net,
//! so a lost event delays an answer by at most a second and never loses it.

use harmony_agent_protocol::containment::{first_misplaced, labelled_zone, objects_of};
use harmony_agent_protocol::{Frame, MAX_FRAME_BYTES, RawJson, Req, Res, encoded_len};
use harmony_api::{Health, RequestStatus};
use std::time::Duration;

pub use super::request_waits::{call, stream, wait_answer};
use super::{ControlPlane, zones};
use crate::store::{
    Event, NewRequest, RegionRecord, RequestRecord, RequestState, StoreError, Submitted, now_ms,
};

/// How long a caller waits when it names no timeout.
pub const DEFAULT_WAIT: Duration = Duration::from_secs(60);

/// The safety-net poll of a waiting caller: an answer whose event was lost is seen this late.
pub const POLL: Duration = Duration::from_secs(1);

/// The longest request id.
pub const MAX_ID_CHARS: usize = 128;

/// Why a request was refused or got no answer.
#[derive(Debug, thiserror::Error)]
pub enum RequestError {
    /// The id is empty, too long or has a character other than letters, digits and `._~:-`.
    #[error(
        "id: must be 1 to {MAX_ID_CHARS} characters among letters, digits and . _ ~ : -; omit it to let the control plane choose"
    )]
    InvalidId,
    /// The op is empty.
    #[error("op: must name the op to run (e.g. apply_manifests, get_inventory)")]
    InvalidOp,
    /// No such region.
    #[error("no region {0}; create it with POST /v1/admin/regions")]
    UnknownRegion(String),
    /// The region is decommissioned.
    #[error("region {0} is decommissioned; no agent will answer")]
    Decommissioned(String),
    /// The named zone is not an active zone of the region.
    #[error(
        "zone: region {region} has no active zone {zone}; its zones: {known}. Name one of them, or omit zone to let the control plane pick a healthy one"
    )]
    UnknownZone {
        /// The region.
        region: String,
        /// The zone asked for.
        zone: String,
        /// Its active zones, comma-separated.
        known: String,
    },
    /// An object of the request belongs to another region or zone (422 `containment`).
    #[error("{0}")]
    Containment(String),
    /// The `req` frame would exceed what the region's agent accepts: refused, never queued.
    #[error(
        "request {id}: its req frame would be {size} bytes, over the {limit}-byte limit of region {region}'s agent; send fewer or smaller manifests per request"
    )]
    TooLarge {
        /// The request id.
        id: String,
        /// The region.
        region: String,
        /// The encoded frame's size.
        size: u64,
        /// The agent's limit (from its last hello).
        limit: u64,
    },
    /// The id is taken by a request with another region, op or params.
    #[error(
        "id: request {id} already exists with a different op or params (region {region}, op {op}); resend exactly the same body to read its result, or choose a new id for a different request"
    )]
    DuplicateId {
        /// The id.
        id: String,
        /// The stored request's region.
        region: String,
        /// The stored request's op.
        op: String,
    },
    /// No answer within the wait; the request stays queued.
    #[error(
        "timed out after {waited_s:.1}s waiting for region {region} to answer request {id} (region {health}: {reason}); the request stays queued: retry with the same id to join it instead of acting twice, or read it with GET /v1/requests/{id}"
    )]
    Timeout {
        /// The request id.
        id: String,
        /// The region.
        region: String,
        /// How long the caller waited, in seconds.
        waited_s: f64,
        /// The region's health when the wait ended.
        health: Health,
        /// Why.
        reason: String,
    },
    /// The request was dropped before an answer (its region was decommissioned).
    #[error("request {id} to region {region} was dropped before an answer: {message}")]
    Cancelled {
        /// The request id.
        id: String,
        /// The region.
        region: String,
        /// Why.
        message: String,
    },
    /// No request with this id (never submitted, or pruned after the retention).
    #[error(
        "no request {0}; finished requests are kept for the control plane's --request-retention-s"
    )]
    NotFound(String),
    /// The request may not run as asked (tenant, project, op or objects).
    #[error(transparent)]
    Scope(#[from] super::scope::ScopeError),
    /// The id belongs to a request of another tenant (nothing more is told).
    #[error("id: {0} is taken; choose a new id")]
    IdTaken(String),
    /// The state database failed.
    #[error(transparent)]
    Store(#[from] StoreError),
    /// Something that should not happen (a stored result that does not parse, no randomness).
    #[error("internal error: {0}")]
    Internal(String),
}

/// A request as the caller sent it.
#[derive(Debug, Clone)]
pub struct Submission {
    /// The idempotency key; chosen at random when `None`.
    pub id: Option<String>,
    /// The op.
    pub op: String,
    /// The params, byte for byte.
    pub params: RawJson,
    /// The project it runs for, checked (see [`super::scope::request_scope`]).
    pub scope: Option<crate::store::RequestScope>,
    /// The zone whose agent runs it; placement picks one when `None`.
    pub zone: Option<String>,
    /// Whether the caller is the admin: it knows a tenant's request by its tenant-qualified id
    /// (what answers and errors then show), a tenant by the id it sent.
    pub by_admin: bool,
}

/// A persisted request.
#[derive(Debug, Clone)]
pub struct Accepted {
    /// Its stored id (tenant-qualified for a tenant's request, see [`scoped_id`]).
    pub id: String,
    /// Its id as the caller named it (what answers and errors show).
    pub shown: String,
    /// Its region.
    pub region: String,
    /// The zone it was placed in.
    pub zone: String,
    /// Whether this call created it (`false`: it joined an identical earlier one).
    pub created: bool,
}

/// Something a waiting caller learns.
#[derive(Debug)]
pub enum Update {
    /// The agent's progress.
    Progress {
        /// A short stage name.
        stage: String,
        /// Detail for people.
        detail: String,
    },
    /// The end: the answer, or why there is none.
    Finished(Result<Res, RequestError>),
}

/// The wait a caller gets: what it asked for (default [`DEFAULT_WAIT`]), capped by the server.
pub fn wait_for(asked_s: Option<f64>, max: Duration) -> Duration {
    asked_s
        .filter(|t| *t > 0.0)
        .map(|t| Duration::try_from_secs_f64(t).unwrap_or(max))
        .unwrap_or(DEFAULT_WAIT)
        .min(max)
}

/// Checks a caller's id, or picks a random one.
pub fn request_id(id: Option<String>) -> Result<String, RequestError> {
    match id {
        // The id is a path segment of `GET /v1/requests/{id}`: only characters that need no
        // escaping there.
        Some(id)
            if !id.is_empty()
                && id.len() <= MAX_ID_CHARS
                && id
                    .bytes()
                    .all(|b| b.is_ascii_alphanumeric() || b"._~:-".contains(&b)) =>
        {
            Ok(id)
        }
        Some(_) => Err(RequestError::InvalidId),
        None => super::random_hex(16).map_err(|e| RequestError::Internal(e.to_string())),
    }
}

/// The separator of a tenant-qualified request id: never in a caller's id.
pub const TENANT_SEP: char = '@';

/// The stored id of a caller's request `id` run for `tenant` (`None`: the admin's own).
pub fn scoped_id(tenant: Option<&str>, id: &str) -> String {
    match tenant {
        Some(t) => format!("{t}{TENANT_SEP}{id}"),
        None => id.to_string(),
    }
}

/// The id a viewer knows a stored request by: without its tenant for that tenant; the stored
/// (tenant-qualified) id for the admin.
pub fn shown_id<'a>(viewer: Option<&str>, stored: &'a str) -> &'a str {
    viewer
        .and_then(|t| stored.strip_prefix(t))
        .and_then(|rest| rest.strip_prefix(TENANT_SEP))
        .unwrap_or(stored)
}

/// The size of the `req` frame that would carry this request, and whether it fits `limit`.
pub fn frame_size(id: &str, op: &str, params: &RawJson) -> u64 {
    let req = Req {
        id: id.to_string(),
        op: op.to_string(),
        params: params.clone(),
        project: None,
    };
    encoded_len(&Frame::Req(req)) as u64
}

/// Persists a caller's request for `region` (or finds the identical one already stored) under
/// its tenant-scoped id, and wakes the replica holding the agent of the zone it is placed in.
pub async fn submit(
    cp: &ControlPlane,
    region: &str,
    sub: Submission,
) -> Result<Accepted, RequestError> {
    let (id, shown) = ids_of(&sub)?;
    submit_as(cp, region, id, shown, sub).await
}

/// The stored id of a caller's request (tenant-scoped) and the id its caller knows it by.
pub(super) fn ids_of(sub: &Submission) -> Result<(String, String), RequestError> {
    let sent = request_id(sub.id.clone())?;
    let tenant = sub.scope.as_ref().map(|s| s.tenant.clone());
    let id = scoped_id(tenant.as_deref(), &sent);
    let shown = if sub.by_admin { id.clone() } else { sent };
    Ok((id, shown))
}

/// Persists a request under the stored id `id` (shown to its caller as `shown`); the control
/// plane's own requests come here directly, with ids no caller can send.
pub(crate) async fn submit_as(
    cp: &ControlPlane,
    region: &str,
    id: String,
    shown: String,
    sub: Submission,
) -> Result<Accepted, RequestError> {
    if sub.op.trim().is_empty() {
        return Err(RequestError::InvalidOp);
    }
    let record = cp
        .store
        .region(region)
        .await?
        .ok_or_else(|| RequestError::UnknownRegion(region.to_string()))?;
    if record.decommissioned_at.is_some() {
        return Err(RequestError::Decommissioned(region.to_string()));
    }
    let zone = place_request(cp, &record, &sub).await?;
    let session = cp.store.session(region, &zone).await?;
    // A project's objects: none of a kind the zone's cluster serves cluster-scoped (from its
    // agent's last hello).
    if let Some(scope) = &sub.scope {
        let hello: Option<harmony_agent_protocol::Hello> = session
            .as_ref()
            .and_then(|s| serde_json::from_str(&s.hello_json).ok());
        if let Some(hello) = hello {
            super::scope::check_reported(
                &sub.op,
                &sub.params,
                &super::scope::namespace_of(scope),
                &hello.cluster_scoped,
            )?;
        }
    }
    // The agent's limit from its last hello; before any hello, the protocol's default.
    let limit = session.map_or(MAX_FRAME_BYTES as u64, |s| s.max_frame_bytes);
    // The project scope travels on the frame too (`,"project":` and its JSON).
    let size = frame_size(&id, &sub.op, &sub.params)
        + sub
            .scope
            .as_ref()
            .map_or(0, |s| s.project_json.len() as u64 + 11);
    if size > limit {
        return Err(RequestError::TooLarge {
            id: shown,
            region: region.to_string(),
            size,
            limit,
        });
    }
    let mut new = NewRequest::new(&id, region, &sub.op, sub.params.get(), now_ms()).in_zone(&zone);
    new.scope = sub.scope;
    match cp.store.submit_request(&new).await? {
        Submitted::Created => {
            log::debug!(
                "request {id} for region {region} zone {zone}: op {} queued",
                sub.op
            );
            let queued = Event::RequestQueued {
                region: region.to_string(),
                zone: Some(zone.clone()),
            };
            if let Err(e) = cp.store.publish(&queued).await {
                // The holder's one-second poll delivers it anyway.
                log::warn!("request {id}: {e}");
            }
            Ok(Accepted {
                id,
                shown,
                region: region.to_string(),
                zone,
                created: true,
            })
        }
        Submitted::Existing(r) => {
            log::debug!("request {id} for region {region}: joins the identical earlier request");
            Ok(Accepted {
                id,
                shown,
                region: r.region,
                zone: r.zone,
                created: false,
            })
        }
        // Only the admin's unscoped ids can meet a request of a tenant (an instance request).
        Submitted::Mismatch(r)
            if tenant_of(&r) != new.scope.as_ref().map(|s| s.tenant.as_str()) =>
        {
            Err(RequestError::IdTaken(shown))
        }
        Submitted::Mismatch(r) => Err(RequestError::DuplicateId {
            id: shown,
            region: r.region,
            op: r.op,
        }),
    }
}

/// The zone of `region` a request goes to: the one named (or, when none is, the one its objects'
/// zone label agrees on), else the zone placement picks (healthy, then unhealthy, then the
/// first). Objects labelled for another region or zone are refused (containment).
pub(crate) async fn place_request(
    cp: &ControlPlane,
    record: &RegionRecord,
    sub: &Submission,
) -> Result<String, RequestError> {
    let region = record.name.as_str();
    let snap = zones::Snapshot::read_region(cp, region).await?;
    let zones: Vec<_> = snap
        .zones_of(record)
        .into_iter()
        .filter(|z| z.decommissioned_at.is_none())
        .collect();
    let params: Option<serde_json::Value> = match sub.op.as_str() {
        "apply_manifests" | "delete_manifests" => serde_json::from_str(sub.params.get()).ok(),
        _ => None,
    };
    let objects = params.as_ref().map(objects_of).unwrap_or_default();
    let labelled = labelled_zone(objects.iter().copied())
        .filter(|z| zones.iter().any(|known| &known.zone == z));
    let zone = match sub.zone.clone().or(labelled) {
        Some(named) => {
            if !zones.iter().any(|z| z.zone == named) {
                return Err(RequestError::UnknownZone {
                    region: region.to_string(),
                    zone: named,
                    known: zones::zone_names(&zones),
                });
            }
            named
        }
        None => snap
            .placement_zone(record, now_ms(), &cp.settings.policy)
            .map(|z| z.zone)
            .ok_or_else(|| RequestError::Decommissioned(region.to_string()))?,
    };
    if let Some(m) = first_misplaced(objects.iter().copied(), region, Some(&zone)) {
        return Err(RequestError::Containment(m.to_string()));
    }
    Ok(zone)
}

/// Relays an agent's progress line for request `id` to every replica's waiting callers.
pub async fn relay_progress(
    cp: &ControlPlane,
    id: String,
    stage: String,
    detail: String,
) -> Result<(), StoreError> {
    cp.store
        .publish(&Event::Progress { id, stage, detail })
        .await
}

/// The answer of a finished request, with the id its caller knows (`shown`).
pub(super) fn finished(r: RequestRecord, shown: &str) -> Result<Res, RequestError> {
    let res = parse_res(&r)?;
    match r.state {
        RequestState::Cancelled => Err(RequestError::Cancelled {
            id: shown.to_string(),
            region: r.region,
            message: res
                .and_then(|res| res.error.map(|e| e.message))
                .unwrap_or_else(|| "no reason stored".into()),
        }),
        _ => res
            .map(|mut res| {
                res.id = shown.to_string();
                res
            })
            .ok_or_else(|| RequestError::Internal(format!("request {shown} has no result"))),
    }
}

/// The `res` frame stored with a finished request (`None` while unanswered).
pub(crate) fn parse_res(r: &RequestRecord) -> Result<Option<Res>, RequestError> {
    r.res
        .as_deref()
        .map(serde_json::from_str::<Res>)
        .transpose()
        .map_err(|e| RequestError::Internal(format!("the stored result of request {}: {e}", r.id)))
}

/// The tenant a stored request runs for.
fn tenant_of(r: &RequestRecord) -> Option<&str> {
    r.scope.as_ref().map(|s| s.tenant.as_str())
}

/// The stored request a viewer names `id`: for a tenant, its own `id` (scoped), else one of
/// its requests stored unscoped (its instances' requests, requests from before ids were
/// scoped); another tenant's is not found, exactly like a missing one.
pub(crate) async fn lookup(
    cp: &ControlPlane,
    id: &str,
    viewer: Option<&str>,
) -> Result<Option<RequestRecord>, RequestError> {
    let Some(tenant) = viewer else {
        return Ok(cp.store.request(id).await?);
    };
    if let Some(r) = cp.store.request(&scoped_id(Some(tenant), id)).await? {
        return Ok(Some(r));
    }
    Ok(cp
        .store
        .request(id)
        .await?
        .filter(|r| tenant_of(r) == Some(tenant)))
}

/// A request as stored, for `GET /v1/requests/{id}`; for a tenant (`viewer`), only its own
/// requests exist, by the ids it sent.
pub async fn status(
    cp: &ControlPlane,
    id: &str,
    viewer: Option<&str>,
) -> Result<RequestStatus, RequestError> {
    let r = lookup(cp, id, viewer)
        .await?
        .ok_or_else(|| RequestError::NotFound(id.to_string()))?;
    let mut res = parse_res(&r)?;
    let shown = shown_id(viewer, &r.id).to_string();
    if let Some(res) = res.as_mut() {
        res.id = shown.clone();
    }
    Ok(RequestStatus {
        state: match r.state {
            RequestState::Queued => harmony_api::RequestState::Queued,
            RequestState::Sent => harmony_api::RequestState::Sent,
            RequestState::Done => harmony_api::RequestState::Done,
            RequestState::Cancelled => harmony_api::RequestState::Cancelled,
        },
        id: shown,
        region: r.region,
        zone: (!r.zone.is_empty()).then_some(r.zone),
        op: r.op,
        deliveries: r.deliveries,
        created_at: r.created_at,
        completed_at: r.completed_at,
        res,
    })
}

#[cfg(test)]
#[path = "requests_tests.rs"]
mod tests;
