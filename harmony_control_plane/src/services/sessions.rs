//! The session row of a zone's agent connection (one per region and zone): opened by the replica that welcomed the
//! agent (closing whichever connection it replaces, on any replica), heartbeats buffered in the
//! hub and written in batches, services advertised, closed at the end.

use harmony_agent_protocol::{AgentStatus, Hello, Services, close};

use super::ControlPlane;
use crate::hub::Inbox;
use crate::store::{Event, Heartbeat, SessionRecord, StoreError, now_ms};

/// The close reason of a replaced connection.
pub const REPLACED_REASON: &str = "a newer connection of this region and zone replaced this one";

/// A connection registered in the hub and recorded in the store.
#[derive(Debug)]
pub struct Opened {
    /// Its id.
    pub conn: String,
    /// Where its commands and delivery wake-ups arrive.
    pub inbox: Inbox,
}

/// Registers a welcomed agent's connection and records it as the region's session; the
/// connection it replaces is closed, on whichever replica holds it. `Ok(None)` when a
/// connection of the region opened later already holds the session: this one is stale.
pub async fn open(cp: &ControlPlane, hello: &Hello) -> Result<Option<Opened>, StoreError> {
    let region = hello.region.as_str();
    let zone = hello.zone.as_str();
    let previous = cp.store.session(region, zone).await?;
    let reserved = cp.hub.reserve();
    let conn = reserved.id.clone();
    let now = now_ms();
    let hello_json =
        serde_json::to_string(hello).map_err(|e| StoreError::new("json", "encode a hello", e))?;
    let record = SessionRecord {
        region: region.to_string(),
        zone: zone.to_string(),
        replica: cp.settings.replica_id.clone(),
        conn: conn.clone(),
        connected: true,
        connected_at: now,
        disconnected_at: None,
        last_heartbeat_at: now,
        hello_json,
        status_json: None,
        services_json: None,
        max_frame_bytes: hello.max_frame_bytes,
    };
    // Recorded first, registered second: a stale connection never displaces a newer one.
    if !cp.store.session_open(&record).await? {
        return Ok(None);
    }
    let Some(inbox) = cp
        .hub
        .connect(region, zone, &reserved, (close::REPLACED, REPLACED_REASON))
    else {
        // A later connection of this replica got in first; the row is (or will be) its own.
        cp.store.session_close(region, &conn, now_ms()).await?;
        return Ok(None);
    };
    if let Some(p) = previous.filter(|p| p.connected && p.replica != cp.settings.replica_id) {
        // Held by another replica: tell it to close that one (the hub closed a local one).
        let replaced = Event::CloseRegion {
            region: region.to_string(),
            zone: Some(zone.to_string()),
            code: close::REPLACED,
            reason: REPLACED_REASON.into(),
            conn: Some(p.conn),
        };
        if let Err(e) = cp.store.publish(&replaced).await {
            log::warn!("region {region}: {e}");
        }
    }
    super::zone_states::on_connect(cp, &record).await;
    Ok(Some(Opened { conn, inbox }))
}

/// Buffers a heartbeat of `region`'s connection `conn` for the next batched write.
pub fn heartbeat(cp: &ControlPlane, region: &str, conn: &str, status: &AgentStatus) {
    cp.hub.heartbeat(Heartbeat {
        region: region.to_string(),
        conn: conn.to_string(),
        at: now_ms(),
        status_json: serde_json::to_string(status).ok(),
    });
}

/// Writes every buffered heartbeat in one batch. When the store is busy or unreachable
/// ([`StoreError::is_transient`]) they go back in the buffer for the next flush: dropped, a
/// connection's first heartbeat would leave its zone waiting for the next one, a whole
/// heartbeat interval later.
pub async fn flush_heartbeats(cp: &ControlPlane) -> Result<(), StoreError> {
    let beats = cp.hub.take_heartbeats();
    if beats.is_empty() {
        return Ok(());
    }
    match cp.store.flush_session_heartbeats(&beats).await {
        Ok(_) => Ok(()),
        Err(e) => {
            if e.is_transient() {
                cp.hub.requeue_heartbeats(beats);
            }
            Err(e)
        }
    }
}

/// Stores the services `region`'s agent holds now; `Ok(false)` when `conn` is not current.
pub async fn set_services(
    cp: &ControlPlane,
    region: &str,
    conn: &str,
    services: &Services,
) -> Result<bool, StoreError> {
    let json = serde_json::to_string(services)
        .map_err(|e| StoreError::new("json", "encode a services frame", e))?;
    cp.store.session_services(region, conn, &json).await
}

/// Ends connection `conn` of `region`/`zone`: its last heartbeat is written, the hub forgets
/// it, and the session row says disconnected (unless a newer connection replaced it).
pub async fn close(
    cp: &ControlPlane,
    region: &str,
    zone: &str,
    conn: &str,
) -> Result<(), StoreError> {
    cp.hub.disconnect(region, zone, conn);
    if let Some(beat) = cp.hub.take_heartbeat(conn) {
        cp.store.session_heartbeats(&[beat]).await?;
    }
    if cp.store.session_close(region, conn, now_ms()).await? {
        super::zone_states::refresh(cp, region, zone).await;
    }
    Ok(())
}
