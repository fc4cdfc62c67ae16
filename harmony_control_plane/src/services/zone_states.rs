//! Each zone's health transitions, stored (not derived from its last heartbeat when read): a
//! zone's state now and since when, and a bounded history.
//!
//! A transition is recorded where it is seen: when an agent connects and disconnects, when its
//! heartbeat says its cluster became reachable or unreachable (once per change, not per
//! heartbeat), and when a zone is decommissioned. What only time makes happen (a heartbeat
//! turning late, a zone turning unavailable) is recorded by a sweep every replica runs, with the
//! moment the threshold was crossed, not the moment the sweep noticed. Every write is the
//! store's conditional one ([`StatusStore::record_zone_state`](crate::store::StatusStore)):
//! replicas sweeping at once write a change once, and an observation older than the stored one
//! never replaces it.

use harmony_agent_protocol::AgentStatus;
use harmony_api::Health;
use std::collections::HashMap;
use std::time::Duration;

use super::ControlPlane;
use super::health::{HealthPolicy, Liveness, Observed, liveness, observe, status_of};
use super::scrub;
use crate::store::{SessionRecord, StoreError, ZoneRecord, ZoneState, now_ms};

/// The longest agent error shown, in characters.
pub const MAX_AGENT_ERROR_CHARS: usize = 300;

/// A zone's health now, why, and since when: decommissioned zones since their decommission,
/// zones whose agent never connected since they were added, the others as their session row
/// says ([`observe`]).
pub fn observe_zone(
    z: &ZoneRecord,
    session: Option<&SessionRecord>,
    now: i64,
    policy: &HealthPolicy,
) -> Observed {
    if let Some(at) = z.decommissioned_at {
        return Observed {
            health: Health::Unavailable,
            reason: "decommissioned".into(),
            since: Some(at),
        };
    }
    match session {
        None => Observed {
            since: Some(z.created_at),
            ..observe(now, &Liveness::default(), policy)
        },
        Some(s) => observe(now, &liveness(s), policy),
    }
}

/// When the zone took the health it has now: the stored transition when it is to that health;
/// otherwise (the change is not recorded yet: the next sweep records it) when it took it, as
/// `observed` says. A decommissioned zone's is its decommission.
pub fn health_since(
    z: &ZoneRecord,
    stored: Option<&ZoneState>,
    observed: &Observed,
) -> Option<i64> {
    if z.decommissioned_at.is_some() {
        return observed.since;
    }
    stored
        .filter(|s| s.health == observed.health)
        .map(|s| s.since)
        .or(observed.since)
}

/// The last error the zone's agent reported (why it cannot reach its cluster), scrubbed of
/// credentials and cut to [`MAX_AGENT_ERROR_CHARS`]; `None` while it reaches it.
pub fn agent_error(session: Option<&SessionRecord>) -> Option<String> {
    error_of(&status_of(session?)?)
}

/// Why `status` says the cluster is unreachable, scrubbed and cut; `None` when it is reachable.
fn error_of(status: &AgentStatus) -> Option<String> {
    Some(status)
        .filter(|s| !s.k8s_reachable)
        .and_then(|s| s.detail.as_deref())
        .map(|d| scrub::for_page(d, MAX_AGENT_ERROR_CHARS))
        .filter(|d| !d.is_empty())
}

/// What to write for a zone observed as `observed`, given its `stored` state: nothing when the
/// health is the stored one, or when the observation is older than the stored change (it was
/// read before it; the store would refuse it anyway). A decommission is final: it is written
/// even over a later change (an agent's last heartbeat racing its revocation), at that change's
/// time.
pub fn to_record(
    z: &ZoneRecord,
    stored: Option<&ZoneState>,
    observed: &Observed,
) -> Option<ZoneState> {
    let mut since = observed.since?;
    if let Some(s) = stored {
        if s.health == observed.health {
            return None;
        }
        if z.decommissioned_at.is_some() {
            since = since.max(s.since);
        } else if since < s.since {
            return None;
        }
    }
    Some(ZoneState {
        region: z.region.clone(),
        zone: z.zone.clone(),
        health: observed.health,
        reason: observed.reason.clone(),
        since,
    })
}

/// Records `observed` for `region`/`zone` (nothing without a start time). A failure is logged:
/// the sweep records the change later.
async fn record(cp: &ControlPlane, region: &str, zone: &str, observed: Observed) {
    let Some(since) = observed.since else { return };
    let state = ZoneState {
        region: region.to_string(),
        zone: zone.to_string(),
        health: observed.health,
        reason: observed.reason,
        since,
    };
    match cp.store.record_zone_state(&state).await {
        Ok(true) => log::debug!(
            "region {region} zone {zone}: {} since {since}: {}",
            state.health,
            state.reason
        ),
        Ok(false) => {}
        Err(e) => log::warn!("region {region} zone {zone}: state change not recorded: {e}"),
    }
}

/// An agent connected: its zone waits for the first heartbeat.
pub async fn on_connect(cp: &ControlPlane, session: &SessionRecord) {
    let observed = observe(
        session.connected_at,
        &liveness(session),
        &cp.settings.policy,
    );
    record(cp, &session.region, &session.zone, observed).await;
}

/// A heartbeat (arrived at `at`) reported `status`, whose cluster reachability differs from the
/// previous heartbeat's of its connection (or it is the first): the change is recorded, an
/// unreachable cluster with the agent's error ([`agent_error`]'s text) in its reason.
pub async fn on_reachability(
    cp: &ControlPlane,
    (region, zone): (&str, &str),
    status: &AgentStatus,
    at: i64,
) {
    let live = Liveness {
        connected: true,
        last_heartbeat_ms: Some(at),
        k8s_reachable: status.k8s_reachable,
        pinged: true,
        connected_at: at,
        disconnected_at: None,
    };
    let mut observed = observe(at, &live, &cp.settings.policy);
    if let Some(why) = error_of(status) {
        observed.reason = format!("{}: {why}", observed.reason);
    }
    record(cp, region, zone, observed).await;
}

/// Something changed a zone that the store now shows (its agent disconnected, it was
/// decommissioned): records what the zone's row and session say.
pub async fn refresh(cp: &ControlPlane, region: &str, zone: &str) {
    let read = async {
        let z = cp.store.region_zones(region).await?;
        let session = cp.store.session(region, zone).await?;
        Ok::<_, StoreError>((z.into_iter().find(|z| z.zone == zone), session))
    };
    match read.await {
        Ok((Some(z), session)) => {
            let o = observe_zone(&z, session.as_ref(), now_ms(), &cp.settings.policy);
            record(cp, region, zone, o).await;
        }
        Ok((None, _)) => {}
        Err(e) => log::warn!("region {region} zone {zone}: state not refreshed: {e}"),
    }
}

/// Every zone's stored state, by (region, zone).
pub async fn stored(cp: &ControlPlane) -> Result<HashMap<(String, String), ZoneState>, StoreError> {
    Ok(cp
        .store
        .zone_states()
        .await?
        .into_iter()
        .map(|s| ((s.region.clone(), s.zone.clone()), s))
        .collect())
}

/// Records every zone whose health changed since its stored state (time-based changes, and any
/// change a hook missed). The stored states are read first: a change recorded after that read
/// is newer than this sweep's and wins.
pub async fn sweep(cp: &ControlPlane) -> Result<usize, StoreError> {
    let stored = stored(cp).await?;
    let snap = super::zones::Snapshot::read_live(cp).await?;
    let now = now_ms();
    // Written together: after an outage of the whole control plane, every zone changes at once.
    let changes: Vec<ZoneState> = snap
        .zones
        .iter()
        .filter_map(|z| {
            let key = (z.region.clone(), z.zone.clone());
            let o = observe_zone(z, snap.session(z), now, &cp.settings.policy);
            to_record(z, stored.get(&key), &o)
        })
        .collect();
    if changes.is_empty() {
        return Ok(0);
    }
    let recorded = cp.store.record_zone_states(&changes).await?;
    Ok(recorded.into_iter().filter(|r| *r).count())
}

/// The job name of the sweep's turn ([`StatusStore::take_turn`](crate::store::StatusStore)).
pub const SWEEP_TURN: &str = "zone-state sweep";

/// Sweeps when this replica has the sweep's turn; `Ok(None)` while another replica has it.
/// Every replica could sweep (the writes are conditional), but each sweep reads every zone,
/// session and state row and tries each change: with N replicas, N times the work for the
/// same result (measured while 12,000 agents bootstrapped on 6 replicas, the zone-state
/// upserts were PostgreSQL's costliest statement). One replica holds the turn and renews it on
/// each sweep; when it stops, another takes over once its lease (three intervals) runs out.
///
/// `pause`: how long this replica waits between its sweeps ([`next_sweep_after`]); the lease is
/// three of them.
pub async fn sweep_in_turn(
    cp: &ControlPlane,
    pause: Duration,
) -> Result<Option<usize>, StoreError> {
    if !keep_turn(cp, pause).await? {
        return Ok(None);
    }
    sweep(cp).await.map(Some)
}

/// How often each replica sweeps: its heartbeat interval, within 1 s and 5 s. A sweep reads
/// every zone and session row, so not more often; the times it records are the thresholds'
/// crossings whenever it runs, and a zone's view shows the change before it is recorded.
pub fn sweep_interval(policy: &HealthPolicy) -> Duration {
    policy
        .heartbeat
        .clamp(Duration::from_secs(1), Duration::from_secs(5))
}

/// Takes or renews this replica's sweep turn for three `pause`s from now (`false`: another
/// replica holds it). Renewed after a long sweep too: the pause before the next one can
/// outlast the lease taken before it, and another replica would take the turn (and read
/// everything again) meanwhile.
pub async fn keep_turn(cp: &ControlPlane, pause: Duration) -> Result<bool, StoreError> {
    cp.store
        .take_turn(
            SWEEP_TURN,
            &cp.settings.replica_id,
            now_ms(),
            (pause * 3).as_millis() as i64,
        )
        .await
}

/// A sweep takes at most this share of the time: one that took `t` is followed by the next
/// `SWEEP_DUTY × t` after it started at the earliest.
pub const SWEEP_DUTY: u32 = 4;

/// When the next sweep starts after one that started a `took` ago: after the sweep interval,
/// or later when sweeps take long. A sweep reads every zone, session and state row: at 100,000
/// zones that took about 5 s of PostgreSQL's time, so at a 5 s interval the holder swept
/// without pause, the single largest share of the database's work (docs/benchmarks.md). The
/// recorded starts are still the thresholds' crossings, and a zone's view shows its health
/// live; only the history is written later.
pub fn next_sweep_after(interval: Duration, took: Duration) -> Duration {
    interval.max(took * SWEEP_DUTY)
}

#[cfg(test)]
#[path = "zone_states_tests.rs"]
mod tests;
