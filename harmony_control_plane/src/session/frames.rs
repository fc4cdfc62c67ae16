//! What a welcomed agent's frames do.

use harmony_agent_protocol::{
    ErrorFrame, Frame, IdentityFrame, Res, Services, code, decode_with_limit,
};
use std::collections::HashMap;
use std::sync::Arc;

use crate::services::dispatch::{self, Delivery};
use crate::services::identities;
use crate::services::{ControlPlane, instances, request_views, requests, sessions, zone_states};

/// One welcomed connection's state.
pub(super) struct Connection {
    pub cp: Arc<ControlPlane>,
    pub region: String,
    pub zone: String,
    pub conn: String,
    /// The hash of the identity this connection uses (the newest one after a renewal).
    pub identity_hash: [u8; 32],
    /// A bootstrap exchange not yet known to have reached the agent.
    pub unconfirmed: bool,
    /// The latest `services` frame of this connection.
    pub services: Option<Services>,
    pub delivery: Delivery,
    /// Whether the last heartbeat said the cluster is reachable (`None` before the first): a
    /// change is recorded as the zone's health transition.
    pub reachable: Option<bool>,
    /// Progress lines received per unanswered request (numbers the stored lines).
    pub progress: HashMap<String, u64>,
}

/// The most requests whose progress lines one connection numbers at once (an agent runs far
/// fewer at a time).
const MAX_TRACKED_PROGRESS: usize = 10_000;

/// The answer to a binary frame.
pub(super) fn binary_refused() -> Frame {
    Frame::Error(ErrorFrame {
        code: code::MALFORMED_FRAME.into(),
        message: "binary frames are not part of protocol v1; send JSON text frames".into(),
        id: None,
    })
}

fn unexpected(what: &str) -> Frame {
    Frame::Error(ErrorFrame {
        code: code::MALFORMED_FRAME.into(),
        message: format!("{what} frames are not sent by agents after hello"),
        id: None,
    })
}

impl Connection {
    /// Handles one text frame; returns the frames to answer with.
    pub(super) async fn handle_text(&mut self, text: &str) -> Vec<Frame> {
        let region = self.region.clone();
        let frame = match decode_with_limit(text, self.cp.settings.max_frame_bytes) {
            Ok(f) => f,
            Err(e) => {
                log::debug!("region {region}: invalid frame: {e}");
                return vec![Frame::Error(ErrorFrame::from_decode(&e))];
            }
        };
        if self.unconfirmed {
            // The agent speaks after welcome: it has its identity, so its bootstrap token
            // cannot give it out again.
            match identities::confirm(&self.cp, &self.identity_hash).await {
                Ok(()) => self.unconfirmed = false,
                Err(e) => log::error!("{e}"),
            }
        }
        match frame {
            Frame::Ping(p) => {
                log::trace!("region {region}: heartbeat {}", p.seq);
                sessions::heartbeat(&self.cp, &region, &self.conn, &p.status);
                let reachable = p.status.k8s_reachable;
                if self.reachable != Some(reachable) {
                    self.reachable = Some(reachable);
                    let zone = (region.as_str(), self.zone.as_str());
                    let at = crate::store::now_ms();
                    zone_states::on_reachability(&self.cp, zone, &p.status, at).await;
                }
                Vec::new()
            }
            Frame::Res(res) => {
                self.result(res).await;
                Vec::new()
            }
            Frame::Progress(p) => {
                log::debug!(
                    "region {region}: request {} {}: {}",
                    p.id,
                    p.stage,
                    p.detail
                );
                self.store_progress(&p.id, &p.stage, &p.detail).await;
                if let Err(e) = requests::relay_progress(&self.cp, p.id, p.stage, p.detail).await {
                    log::debug!("region {region}: progress not relayed: {e}");
                }
                Vec::new()
            }
            Frame::Error(e) => {
                log::warn!("region {region}: agent reported {}: {}", e.code, e.message);
                Vec::new()
            }
            Frame::Services(s) => {
                self.services(s).await;
                Vec::new()
            }
            Frame::Instance(status) => {
                if let Err(e) =
                    instances::apply_instance(&self.cp, &region, &self.zone, status).await
                {
                    log::error!("{e}");
                }
                Vec::new()
            }
            Frame::Renew(_) => vec![self.renew().await],
            Frame::Hello(_) => vec![unexpected("hello")],
            Frame::Welcome(_) => vec![unexpected("welcome")],
            Frame::Req(_) => vec![unexpected("req")],
            Frame::Identity(_) => vec![unexpected("identity")],
        }
    }

    /// Stores a progress line of request `id` (its last few are kept); only requests this
    /// connection was sent are counted, so the map stays as small as what is in flight.
    async fn store_progress(&mut self, id: &str, stage: &str, detail: &str) {
        if !self.progress.contains_key(id) && self.progress.len() >= MAX_TRACKED_PROGRESS {
            return;
        }
        let n = self.progress.entry(id.to_string()).or_default();
        let line = *n;
        *n += 1;
        let at = (self.region.as_str(), self.zone.as_str());
        match request_views::record_progress(&self.cp, at, id, line, stage, detail).await {
            Ok(true) => {}
            // Not an unanswered request of this zone: forget it.
            Ok(false) => {
                self.progress.remove(id);
            }
            Err(e) => log::debug!("region {}: progress of {id} not stored: {e}", self.region),
        }
    }

    async fn result(&mut self, res: Res) {
        let region = &self.region;
        self.delivery.answered(&res.id);
        self.progress.remove(&res.id);
        if let Some(e) = &res.error
            && e.code == code::RESULT_TOO_LARGE
        {
            log::warn!(
                "region {region}: request {}: the agent's result was too large: {}",
                res.id,
                e.message
            );
        }
        match dispatch::record_result(&self.cp, region, &self.zone, &res).await {
            Ok(true) => log::debug!("region {region}: request {} answered", res.id),
            Ok(false) => {}
            // Not stored: the request stays unanswered, so it is delivered again (it left the
            // sent set above) and the agent answers that from its dedupe record.
            Err(e) => log::error!("region {region}: request {}: {e}", res.id),
        }
    }

    async fn services(&mut self, s: Services) {
        let region = self.region.clone();
        match sessions::set_services(&self.cp, &region, &self.conn, &s).await {
            Ok(true) => {}
            Ok(false) => log::debug!("region {region}: services of a replaced connection ignored"),
            Err(e) => {
                log::error!("{e}");
                return;
            }
        }
        if self.services.as_ref() != Some(&s) {
            let summary: Vec<String> = s
                .offers
                .iter()
                .map(|o| format!("{} by {} ({})", o.service_type, o.provider, o.health))
                .collect();
            log::info!("region {region}: services now [{}]", summary.join(", "));
            self.services = Some(s);
        }
        // Queued creates may go now; not on this connection's task (it reads its frames).
        let cp = self.cp.clone();
        tokio::spawn(async move {
            if let Err(e) = instances::dispatch_queued(&cp, Some(&region)).await {
                log::error!("{e}");
            }
        });
    }

    async fn renew(&mut self) -> Frame {
        match identities::renew(&self.cp, &self.region, &self.identity_hash).await {
            Ok(renewed) => {
                self.identity_hash = renewed.hash;
                Frame::Identity(IdentityFrame {
                    identity: renewed.identity,
                    expires_at: renewed.expires_at,
                })
            }
            Err(e) => {
                log::warn!("region {}: renewal refused: {e}", self.region);
                Frame::Error(ErrorFrame {
                    code: match e {
                        identities::RenewError::NotValid => code::FORBIDDEN,
                        _ => code::INTERNAL,
                    }
                    .into(),
                    message: e.to_string(),
                    id: None,
                })
            }
        }
    }
}
