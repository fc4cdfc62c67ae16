//! Delivery of durable requests by the replica holding a region's agent connection: on connect
//! every unanswered request in submit order, then each new one when woken (a `RequestQueued`
//! event or the one-second poll). Results are stored (the first one wins) and announced with
//! `RequestDone`, which wakes the callers on every replica.
//!
//! Delivery is at-least-once: a request stays unanswered until its `res` is stored and is sent
//! again on every new connection of its region; the agent dedupes by id.

use harmony_agent_protocol::{ErrorBody, Frame, Req, Res, code, encoded_len};
use std::collections::HashSet;

use super::ControlPlane;
use crate::store::{Event, RequestRecord, StoreError, now_ms};

/// What one connection has delivered so far.
#[derive(Debug)]
pub struct Delivery {
    region: String,
    zone: String,
    /// The largest frame this connection's agent accepts.
    limit: u64,
    /// Ids sent on this connection and not yet answered.
    sent: HashSet<String>,
}

impl Delivery {
    /// Delivery state of a new connection of `region`/`zone` whose agent accepts frames up to
    /// `limit`.
    pub fn new(region: &str, zone: &str, limit: u64) -> Self {
        Self {
            region: region.to_string(),
            zone: zone.to_string(),
            limit,
            sent: HashSet::new(),
        }
    }

    /// The `req` frames to send now, in submit order: every unanswered request of the zone not
    /// yet sent on this connection, each marked sent. A request too large for this agent (its
    /// limit shrank since submit) is answered `too_large` instead, so it never blocks the rest.
    pub async fn next(&mut self, cp: &ControlPlane) -> Result<Vec<Frame>, StoreError> {
        let unanswered = cp.store.unanswered(&self.region, &self.zone).await?;
        let live: HashSet<&str> = unanswered.iter().map(|r| r.id.as_str()).collect();
        // Forget ids answered (or cancelled) meanwhile, so the set stays small.
        self.sent.retain(|id| live.contains(id.as_str()));
        let mut frames = Vec::new();
        for r in unanswered {
            if self.sent.contains(&r.id) {
                continue;
            }
            match self.frame(&r) {
                Ok(frame) => {
                    if cp.store.mark_sent(&r.id, now_ms()).await? {
                        self.sent.insert(r.id);
                        frames.push(frame);
                    }
                }
                Err(refusal) => {
                    log::warn!("region {}: {}", self.region, refusal.message);
                    finish(cp, &r.id, &Res::err(&r.id, refusal)).await?;
                }
            }
        }
        Ok(frames)
    }

    fn frame(&self, r: &RequestRecord) -> Result<Frame, ErrorBody> {
        let params =
            harmony_agent_protocol::RawJson::from_string(r.params.clone()).map_err(|e| {
                ErrorBody::new(
                    code::INTERNAL,
                    format!("request {}: its stored params are not JSON: {e}", r.id),
                )
            })?;
        // The scope snapshotted at submit: every delivery carries the same one.
        let project = match &r.scope {
            None => None,
            Some(s) => Some(serde_json::from_str(&s.project_json).map_err(|e| {
                ErrorBody::new(
                    code::INTERNAL,
                    format!(
                        "request {}: its stored project scope is not valid: {e}",
                        r.id
                    ),
                )
            })?),
        };
        let frame = Frame::Req(Req {
            id: r.id.clone(),
            op: r.op.clone(),
            params,
            project,
        });
        // The whole frame, project scope included.
        let size = encoded_len(&frame) as u64;
        if size > self.limit {
            return Err(ErrorBody::new(
                code::TOO_LARGE,
                format!(
                    "request {}: its req frame is {size} bytes, over the {}-byte limit the agent of region {} announced when it reconnected; send fewer or smaller manifests per request",
                    r.id, self.limit, self.region
                ),
            ));
        }
        Ok(frame)
    }

    /// Notes that `id` was answered on this connection.
    pub fn answered(&mut self, id: &str) {
        self.sent.remove(id);
    }
}

/// Stores the agent's answer `res`, received from the agent of `region`'s zone `zone`. Only
/// that zone's own requests can be answered by it, and only the first answer counts.
/// `Ok(false)` when ignored.
pub async fn record_result(
    cp: &ControlPlane,
    region: &str,
    zone: &str,
    res: &Res,
) -> Result<bool, StoreError> {
    match cp.store.request(&res.id).await? {
        Some(r) if r.region == region && r.zone == zone => finish(cp, &res.id, res).await,
        Some(r) => {
            log::warn!(
                "region {region} zone {zone}: answer to request {} of region {} zone {} ignored; an agent only answers its own zone's requests",
                res.id,
                r.region,
                r.zone
            );
            Ok(false)
        }
        None => {
            log::debug!(
                "region {region}: answer to unknown request {} ignored (pruned, or never submitted)",
                res.id
            );
            Ok(false)
        }
    }
}

/// Stores `res` as the result of request `id` and wakes its waiters; `Ok(false)` when it already
/// had one.
async fn finish(cp: &ControlPlane, id: &str, res: &Res) -> Result<bool, StoreError> {
    let json =
        serde_json::to_string(res).map_err(|e| StoreError::new("json", "encode a result", e))?;
    if !cp.store.complete_request(id, &json, now_ms()).await? {
        log::debug!("request {id}: already answered; this answer is ignored");
        return Ok(false);
    }
    announce_done(cp, id).await;
    Ok(true)
}

async fn announce_done(cp: &ControlPlane, id: &str) {
    let done = Event::RequestDone { id: id.to_string() };
    if let Err(e) = cp.store.publish(&done).await {
        // Waiters poll every second: they see the result anyway, a little later.
        log::warn!("request {id}: {e}");
    }
}

/// Drops every unanswered request of `region`'s zone `zone` with an `unreachable` error
/// carrying `message` (the zone was decommissioned: no agent will ever answer). Returns how
/// many.
pub async fn cancel_unanswered(
    cp: &ControlPlane,
    region: &str,
    zone: &str,
    message: &str,
) -> Result<usize, StoreError> {
    let mut cancelled = 0;
    for r in cp.store.unanswered(region, zone).await? {
        let res = Res::err(&r.id, ErrorBody::new(code::UNREACHABLE, message));
        let json = serde_json::to_string(&res)
            .map_err(|e| StoreError::new("json", "encode a result", e))?;
        if cp.store.cancel_request(&r.id, &json, now_ms()).await? {
            announce_done(cp, &r.id).await;
            cancelled += 1;
        }
    }
    Ok(cancelled)
}
