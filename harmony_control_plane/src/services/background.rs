//! This replica's background work: routing store events to its connections, writing buffered
//! heartbeats, the one-second delivery poll, queued service creates, the zones' health
//! transitions, and pruning.

use std::sync::Arc;
use std::time::Duration;

use super::{ControlPlane, instance_requests, instances, log_store, sessions, zone_states};
use crate::store::{Event, next_event, now_ms};

/// How often each replica looks for requests whose `RequestQueued` event it may have missed.
const DELIVERY_POLL: Duration = Duration::from_secs(1);

/// How often finished requests older than the retention are deleted.
const PRUNE_EVERY: Duration = Duration::from_secs(60);

/// Prepares the store for this replica and starts its background tasks.
pub async fn start(cp: Arc<ControlPlane>) -> Result<(), crate::store::StoreError> {
    let now = now_ms();
    let me = cp.settings.replica_id.clone();
    let stale = if cp.store.backend() == "sqlite" {
        // One replica only: every session still marked connected is from a previous run. One
        // UPDATE per replica id that held them (usually one), not one per session: with
        // 10,000 agents, one per session kept a restarted control plane from accepting for 10 s
        // (the reconnect storm benchmark, docs/benchmarks.md).
        let replicas: std::collections::BTreeSet<String> = cp
            .store
            .sessions()
            .await?
            .into_iter()
            .filter(|s| s.connected)
            .map(|s| s.replica)
            .collect();
        let mut n = 0;
        for replica in replicas {
            n += cp.store.sessions_close_replica(&replica, now).await?;
        }
        n
    } else {
        cp.store.sessions_close_replica(&me, now).await?
    };
    if stale > 0 {
        log::info!("{stale} agent session(s) of a previous run marked disconnected");
    }
    tokio::spawn(route_events(cp.clone()));
    tokio::spawn(flush_heartbeats(cp.clone()));
    tokio::spawn(poll_deliveries(cp.clone()));
    tokio::spawn(tend_instances(cp.clone()));
    tokio::spawn(sweep_zone_states(cp.clone()));
    tokio::spawn(prune(cp));
    Ok(())
}

/// Before this replica exits: its buffered heartbeats are written and its sessions marked
/// disconnected, so every replica reports its regions as such at once (their agents reconnect
/// to another replica).
pub async fn stop(cp: &ControlPlane) {
    if let Err(e) = sessions::flush_heartbeats(cp).await {
        log_store(e);
    }
    match cp
        .store
        .sessions_close_replica(&cp.settings.replica_id, now_ms())
        .await
    {
        Ok(n) => log::info!("{n} agent session(s) of this replica marked disconnected"),
        Err(e) => log_store(e),
    }
}

/// Turns store events into actions on this replica's connections.
async fn route_events(cp: Arc<ControlPlane>) {
    let mut events = cp.store.subscribe();
    while let Some(event) = next_event(&mut events).await {
        match event {
            Event::RequestQueued { region, zone } => {
                cp.hub.nudge(&region, zone.as_deref());
            }
            Event::CloseRegion {
                region,
                zone,
                code,
                reason,
                conn,
            } => {
                if cp
                    .hub
                    .close(&region, zone.as_deref(), conn.as_deref(), code, &reason)
                {
                    log::info!(
                        "region {region} (zone {}): closing its connection: {reason}",
                        zone.as_deref().unwrap_or("every zone")
                    );
                }
            }
            // Only an instance's create or delete needs anything done; applying its answer
            // reads and writes the store, so not on this loop.
            Event::RequestDone { id } if instance_requests::parse_request_id(&id).is_some() => {
                let cp = cp.clone();
                tokio::spawn(async move {
                    if let Err(e) = instances::on_request_done(&cp, &id).await {
                        log_store(e);
                    }
                });
            }
            Event::Resync => {
                for (region, zone) in cp.hub.zones() {
                    cp.hub.nudge(&region, Some(&zone));
                }
            }
            Event::RequestDone { .. } | Event::Progress { .. } | Event::InstanceChanged { .. } => {}
        }
    }
    log::warn!("the store's event stream ended; deliveries rely on polling from now on");
}

async fn flush_heartbeats(cp: Arc<ControlPlane>) {
    let mut tick = tokio::time::interval(cp.settings.policy.flush_interval());
    tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    loop {
        tick.tick().await;
        if let Err(e) = sessions::flush_heartbeats(&cp).await {
            log_store(e);
        }
    }
}

/// The safety net under `RequestQueued`: wakes the connections this replica holds whose region
/// has requests never delivered.
async fn poll_deliveries(cp: Arc<ControlPlane>) {
    let mut tick = tokio::time::interval(DELIVERY_POLL);
    tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    loop {
        tick.tick().await;
        if cp.hub.connected() == 0 {
            continue;
        }
        match cp.store.queued_zones().await {
            Ok(zones) => {
                for (region, zone) in zones {
                    cp.hub.nudge(&region, Some(&zone));
                }
            }
            Err(e) => log_store(e),
        }
    }
}

/// Sends queued creates whose region advertises their type now (a region can turn healthy
/// without a new `services` frame) and applies answers whose event was missed.
async fn tend_instances(cp: Arc<ControlPlane>) {
    let mut tick = tokio::time::interval(cp.settings.policy.heartbeat);
    tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    loop {
        tick.tick().await;
        if let Err(e) = instances::dispatch_queued(&cp, None).await {
            log_store(e);
        }
        if let Err(e) = instances::reconcile(&cp).await {
            log_store(e);
        }
    }
}

/// Records the zones' time-based health changes (a heartbeat late, a zone unavailable) and
/// any change a hook missed, on the replica holding the sweep's turn.
/// Sweeps take at most a share of the time ([`zone_states::next_sweep_after`]).
async fn sweep_zone_states(cp: Arc<ControlPlane>) {
    let interval = zone_states::sweep_interval(&cp.settings.policy);
    let mut pause = interval;
    loop {
        let started = tokio::time::Instant::now();
        let swept = zone_states::sweep_in_turn(&cp, pause).await;
        let holder = matches!(swept, Ok(Some(_)));
        match swept {
            Ok(None | Some(0)) => {}
            Ok(Some(n)) => log::debug!("{n} zone state change(s) recorded"),
            Err(e) => log_store(e),
        }
        pause = zone_states::next_sweep_after(interval, started.elapsed());
        if holder
            && pause > interval
            && let Err(e) = zone_states::keep_turn(&cp, pause).await
        {
            log_store(e);
        }
        tokio::time::sleep_until(started + pause).await;
    }
}

async fn prune(cp: Arc<ControlPlane>) {
    let mut tick = tokio::time::interval(PRUNE_EVERY);
    tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    loop {
        tick.tick().await;
        let before = now_ms() - cp.settings.request_retention.as_millis() as i64;
        match cp.store.prune_requests(before).await {
            Ok(0) => {}
            Ok(n) => log::debug!("pruned {n} finished request(s) past the retention"),
            Err(e) => log_store(e),
        }
    }
}
