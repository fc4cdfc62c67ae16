//! Zone health transitions over a real SQLite store: recorded where they are seen (connect,
//! reachability, disconnect, decommission) and by the sweep (thresholds crossed), each with its
//! start time; what a sweep would write; the agent's error, scrubbed.

use harmony_agent_protocol::AgentStatus;
use harmony_api::Health;
use std::sync::Arc;
use std::time::Duration;

use super::*;
use crate::services::{ControlPlane, HealthPolicy, Settings, identities, regions, sessions};
use crate::store::sqlite::SqliteStore;

fn zone(decommissioned_at: Option<i64>) -> ZoneRecord {
    ZoneRecord {
        region: "eu".into(),
        zone: "z".into(),
        created_at: 10,
        decommissioned_at,
        has_identity: true,
        live_identity: true,
    }
}

fn state(health: Health, since: i64) -> ZoneState {
    ZoneState {
        region: "eu".into(),
        zone: "z".into(),
        health,
        reason: "before".into(),
        since,
    }
}

fn seen(health: Health, since: i64) -> Observed {
    Observed {
        health,
        reason: "now".into(),
        since: Some(since),
    }
}

#[test]
fn a_sweep_writes_only_a_change_not_older_than_the_stored_one() {
    let z = zone(None);
    let written = to_record(&z, None, &seen(Health::Healthy, 50)).unwrap();
    assert_eq!((written.health, written.since), (Health::Healthy, 50));
    let stored = state(Health::Healthy, 40);
    assert_eq!(
        to_record(&z, Some(&stored), &seen(Health::Healthy, 60)),
        None
    );
    // Read before a newer change was stored: left to that change.
    assert_eq!(
        to_record(&z, Some(&stored), &seen(Health::Unhealthy, 30)),
        None
    );
    let later = to_record(&z, Some(&stored), &seen(Health::Unhealthy, 45)).unwrap();
    assert_eq!(
        (later.health, later.since, later.reason.as_str()),
        (Health::Unhealthy, 45, "now")
    );
    // A decommission wins even over a later heartbeat's change.
    let gone = zone(Some(20));
    let o = observe_zone(&gone, None, 100, &settings().policy);
    let w = to_record(&gone, Some(&stored), &o).unwrap();
    assert_eq!(
        (w.health, w.since, w.reason.as_str()),
        (Health::Unavailable, 40, "decommissioned")
    );
    // Never connected: unavailable since the zone was added.
    assert_eq!(
        observe_zone(&z, None, 100, &settings().policy).since,
        Some(10)
    );
}

#[test]
fn the_start_shown_is_the_stored_one_for_the_same_health() {
    let z = zone(None);
    let stored = state(Health::Unavailable, 40);
    assert_eq!(
        health_since(&z, Some(&stored), &seen(Health::Unavailable, 90)),
        Some(40)
    );
    assert_eq!(
        health_since(&z, Some(&stored), &seen(Health::Healthy, 90)),
        Some(90)
    );
    assert_eq!(health_since(&z, None, &seen(Health::Healthy, 90)), Some(90));
    assert_eq!(
        health_since(
            &zone(Some(20)),
            Some(&stored),
            &seen(Health::Unavailable, 20)
        ),
        Some(20)
    );
}

#[test]
fn the_agents_error_is_shown_scrubbed_only_while_its_cluster_is_unreachable() {
    let session = |status: &str| SessionRecord {
        region: "eu".into(),
        zone: "z".into(),
        replica: "r".into(),
        conn: "c".into(),
        connected: true,
        connected_at: 1,
        disconnected_at: None,
        last_heartbeat_at: 1,
        hello_json: "{}".into(),
        status_json: Some(status.into()),
        services_json: None,
        max_frame_bytes: 1,
    };
    let down = session(
        r#"{"k8s_reachable":false,"detail":"Get https://10.0.0.1:6443/version: Authorization: Bearer abc.def refused\n dial tcp: i/o timeout"}"#,
    );
    assert_eq!(
        agent_error(Some(&down)).as_deref(),
        Some(
            "Get https://10.0.0.1:6443/version: Authorization: Bearer <redacted> refused dial tcp: i/o timeout"
        )
    );
    let up = session(r#"{"k8s_reachable":true,"detail":"v1.31.0"}"#);
    assert_eq!(agent_error(Some(&up)), None);
    assert_eq!(agent_error(None), None);
    let long = session(&format!(
        r#"{{"k8s_reachable":false,"detail":"{}"}}"#,
        "x".repeat(5000)
    ));
    assert_eq!(
        agent_error(Some(&long)).unwrap().chars().count(),
        MAX_AGENT_ERROR_CHARS
    );
}

/// Thresholds no test run crosses by being slow.
fn settings() -> Settings {
    crate::services::tests::settings()
}

/// A heartbeat late after 60 ms, unavailable after 120 ms.
fn quick() -> Settings {
    Settings {
        policy: HealthPolicy {
            heartbeat: Duration::from_millis(20),
            unhealthy_after: Duration::from_millis(60),
            unavailable_after: Duration::from_millis(120),
        },
        ..settings()
    }
}

/// A control plane without background tasks: the test runs each sweep.
fn control_plane(dir: &std::path::Path, settings: Settings) -> Arc<ControlPlane> {
    let store = Arc::new(SqliteStore::open(&dir.join("cp.sqlite")).unwrap());
    ControlPlane::new(store, settings)
}

/// A stand-in agent connection of `eu`/`z`.
async fn connect(cp: &ControlPlane) -> sessions::Opened {
    let hello = crate::services::tests::zone_hello("eu", "z", "0.1.0");
    crate::services::tests::stand_in(cp, &hello, None).await
}

async fn now_state(cp: &ControlPlane) -> ZoneState {
    let states = cp.store.zone_states().await.unwrap();
    assert_eq!(states.len(), 1, "{states:?}");
    states[0].clone()
}

#[tokio::test]
async fn each_transition_is_stored_with_when_it_began() {
    let dir = tempfile::tempdir().unwrap();
    let cp = control_plane(dir.path(), settings());
    regions::create(&cp, "eu", "z", None).await.unwrap();
    // Never connected: the sweep records it unavailable since the zone was added.
    assert_eq!(sweep(&cp).await.unwrap(), 1);
    let created = cp.store.zones().await.unwrap()[0].created_at;
    let s = now_state(&cp).await;
    assert_eq!((s.health, s.since), (Health::Unavailable, created));
    assert_eq!(
        sweep(&cp).await.unwrap(),
        0,
        "nothing changed: nothing written"
    );

    // Connected: unhealthy until the first heartbeat says whether it reaches its cluster.
    let opened = connect(&cp).await;
    let session = cp.store.session("eu", "z").await.unwrap().unwrap();
    let s = now_state(&cp).await;
    assert_eq!(
        (s.health, s.since),
        (Health::Unhealthy, session.connected_at)
    );
    assert!(s.reason.contains("first heartbeat"), "{}", s.reason);

    // Its heartbeat says reachable: healthy from then; unreachable later: unhealthy from then,
    // with the agent's error.
    let status = |reachable: bool| AgentStatus {
        k8s_reachable: reachable,
        detail: Some("dial tcp: i/o timeout; token=abc".into()),
        ..AgentStatus::default()
    };
    let beat = |reachable: bool| {
        sessions::heartbeat(&cp, "eu", &opened.conn, &status(reachable));
    };
    beat(true);
    let reached = crate::store::now_ms();
    on_reachability(&cp, ("eu", "z"), &status(true), reached).await;
    let s = now_state(&cp).await;
    assert_eq!((s.health, s.since), (Health::Healthy, reached));
    // An observation older than the stored change never replaces it.
    on_reachability(&cp, ("eu", "z"), &status(false), reached - 1).await;
    assert_eq!(now_state(&cp).await.health, Health::Healthy);
    beat(false);
    sessions::flush_heartbeats(&cp).await.unwrap();
    let lost = crate::store::now_ms();
    on_reachability(&cp, ("eu", "z"), &status(false), lost).await;
    let s = now_state(&cp).await;
    assert_eq!((s.health, s.since), (Health::Unhealthy, lost));
    assert_eq!(
        s.reason,
        "the agent cannot reach its Kubernetes API server: dial tcp: i/o timeout; token=<redacted>"
    );

    // Disconnected: still unhealthy, since it became so.
    sessions::close(&cp, "eu", "z", &opened.conn).await.unwrap();
    assert_eq!(now_state(&cp).await.since, lost);

    // Decommissioned: unavailable since the decommission, the zone's view saying so.
    identities::revoke_zone(&cp, "eu", "z").await.unwrap();
    let at = cp.store.zones().await.unwrap()[0]
        .decommissioned_at
        .unwrap();
    let s = now_state(&cp).await;
    assert_eq!(
        (s.health, s.since, s.reason.as_str()),
        (Health::Unavailable, at, "decommissioned")
    );
    assert_eq!(sweep(&cp).await.unwrap(), 0);
    let view = regions::view(&cp, "eu").await.unwrap();
    assert_eq!(view.zones[0].health_since, Some(at));

    let history = cp.store.zone_history("eu", "z", 10).await.unwrap();
    let healths: Vec<Health> = history.iter().map(|s| s.health).collect();
    use Health::*;
    assert_eq!(
        healths,
        [Unavailable, Unhealthy, Healthy, Unhealthy, Unavailable],
        "newest first: {history:?}"
    );
}

#[tokio::test]
async fn a_late_heartbeat_is_recorded_from_when_the_threshold_was_crossed() {
    let dir = tempfile::tempdir().unwrap();
    let cp = control_plane(dir.path(), quick());
    regions::create(&cp, "eu", "z", None).await.unwrap();
    let opened = connect(&cp).await;
    let status = AgentStatus {
        k8s_reachable: true,
        ..AgentStatus::default()
    };
    sessions::heartbeat(&cp, "eu", &opened.conn, &status);
    sessions::flush_heartbeats(&cp).await.unwrap();
    let last = cp
        .store
        .session("eu", "z")
        .await
        .unwrap()
        .unwrap()
        .last_heartbeat_at;
    on_reachability(&cp, ("eu", "z"), &status, last).await;
    // Connected but silent past the unhealthy threshold, not yet the unavailable one.
    tokio::time::sleep(Duration::from_millis(80)).await;
    sweep(&cp).await.unwrap();
    let s = now_state(&cp).await;
    if s.health == Health::Unhealthy {
        assert_eq!(s.since, last + 60);
        assert!(s.reason.starts_with("heartbeat "), "{}", s.reason);
        assert!(s.reason.ends_with(" late (limit 60 ms)"), "{}", s.reason);
    } else {
        // A slow machine got past the unavailable threshold first.
        assert_eq!((s.health, s.since), (Health::Unavailable, last + 120));
    }
    let view = regions::view(&cp, "eu").await.unwrap();
    assert_eq!(view.zones[0].health_since, Some(s.since));
    // Silent past the unavailable threshold: from the last heartbeat plus that threshold.
    tokio::time::sleep(Duration::from_millis(100)).await;
    sweep(&cp).await.unwrap();
    let s = now_state(&cp).await;
    assert_eq!((s.health, s.since), (Health::Unavailable, last + 120));
    assert!(
        s.reason
            .starts_with("connected but silent: no heartbeat for "),
        "{}",
        s.reason
    );
    assert!(s.reason.ends_with(" (limit 120 ms)"), "{}", s.reason);
    drop(opened);
}

#[tokio::test]
async fn one_replica_at_a_time_sweeps_and_another_takes_over_when_its_lease_runs_out() {
    let dir = tempfile::tempdir().unwrap();
    let store = Arc::new(SqliteStore::open(&dir.path().join("cp.sqlite")).unwrap());
    let replica = |id: &str| {
        ControlPlane::new(
            store.clone(),
            Settings {
                replica_id: id.into(),
                ..quick()
            },
        )
    };
    let (a, b) = (replica("cp-a"), replica("cp-b"));
    let pause = sweep_interval(&quick().policy);
    regions::create(&a, "eu", "z", None).await.unwrap();
    // The first to ask sweeps (the new zone's state), and keeps the turn on its next sweep;
    // the other does nothing meanwhile.
    assert_eq!(sweep_in_turn(&a, pause).await.unwrap(), Some(1));
    assert_eq!(sweep_in_turn(&b, pause).await.unwrap(), None);
    assert_eq!(sweep_in_turn(&a, pause).await.unwrap(), Some(0));
    assert_eq!(sweep_in_turn(&b, pause).await.unwrap(), None);
    // After a long sweep a keeps the turn for three of its longer pauses: b does not take it
    // when the three intervals of the lease taken before the sweep have run out.
    assert!(keep_turn(&a, pause * 4).await.unwrap());
    tokio::time::sleep(pause * 3 + Duration::from_millis(20)).await;
    assert_eq!(sweep_in_turn(&b, pause).await.unwrap(), None);
    assert!(keep_turn(&a, pause).await.unwrap());
    // a stops sweeping: b takes over once a's lease (three sweep intervals) has run out.
    let lease = sweep_interval(&quick().policy) * 3;
    tokio::time::sleep(lease + Duration::from_millis(20)).await;
    assert_eq!(sweep_in_turn(&b, pause).await.unwrap(), Some(0));
    assert_eq!(sweep_in_turn(&a, pause).await.unwrap(), None);
}

#[test]
fn long_sweeps_are_spaced_so_they_take_at_most_their_share_of_the_time() {
    let interval = Duration::from_secs(5);
    // Quick sweeps keep the interval.
    assert_eq!(
        next_sweep_after(interval, Duration::from_millis(30)),
        interval
    );
    // A sweep of 5 s (100,000 zones) is followed by the next 20 s after it started.
    assert_eq!(
        next_sweep_after(interval, Duration::from_secs(5)),
        Duration::from_secs(5) * SWEEP_DUTY
    );
    assert!(next_sweep_after(interval, Duration::from_secs(2)) > interval);
}

/// A flush the store could not take (another process held the SQLite file's lock past the busy
/// timeout) fails as busy, and the next flush writes its heartbeats. Dropped, a connection's
/// first heartbeat left its zone "waiting for the agent's first heartbeat" until the next one,
/// a whole heartbeat interval later.
#[tokio::test]
async fn heartbeats_a_busy_store_refused_are_written_by_the_next_flush() {
    let dir = tempfile::tempdir().unwrap();
    let cp = control_plane(dir.path(), settings());
    regions::create(&cp, "eu", "z", None).await.unwrap();
    let opened = connect(&cp).await;
    let blocker = rusqlite::Connection::open(dir.path().join("cp.sqlite")).unwrap();
    blocker.execute_batch("BEGIN EXCLUSIVE").unwrap();
    let status = AgentStatus {
        k8s_reachable: true,
        ..AgentStatus::default()
    };
    sessions::heartbeat(&cp, "eu", &opened.conn, &status);
    let e = sessions::flush_heartbeats(&cp).await.unwrap_err();
    // Busy, so the HTTP edge answers 503 `overloaded` with `Retry-After` (http/error.rs).
    assert!(e.overloaded, "{e}");
    assert!(e.to_string().contains("--db file"), "{e}");
    blocker.execute_batch("ROLLBACK").unwrap();
    sessions::flush_heartbeats(&cp).await.unwrap();
    let view = regions::view(&cp, "eu").await.unwrap();
    assert_eq!(view.health, Health::Healthy, "{view:?}");
}
