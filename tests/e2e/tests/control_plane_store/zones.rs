//! Zones: several per region, each with its own bootstrap tokens, identities, session row and
//! request queue.

use super::{Db, hash};
use harmony_control_plane::store::{
    Credential, Exchange, NewRequest, Refusal, SessionRecord, now_ms,
};

fn session(zone: &str, conn: &str, at: i64) -> SessionRecord {
    SessionRecord {
        region: "eu".into(),
        zone: zone.into(),
        replica: "replica-a".into(),
        conn: conn.into(),
        connected: true,
        connected_at: at,
        disconnected_at: None,
        last_heartbeat_at: at,
        hello_json: "{}".into(),
        status_json: None,
        services_json: None,
        max_frame_bytes: 4 << 20,
    }
}

pub(super) async fn zones_are_added_listed_and_decommissioned_one_by_one(db: Db) {
    let s = db.open().await;
    let now = now_ms();
    assert!(s.create_region("eu", "a").await.unwrap());
    assert!(s.add_zone("eu", "b").await.unwrap());
    assert!(
        !s.add_zone("eu", "b").await.unwrap(),
        "an active zone is not added twice"
    );
    assert!(
        !s.add_zone("nowhere", "b").await.unwrap(),
        "no zone without its region"
    );
    let zones: Vec<(String, String)> = s
        .zones()
        .await
        .unwrap()
        .into_iter()
        .map(|z| (z.region, z.zone))
        .collect();
    assert_eq!(
        zones,
        [("eu".into(), "a".into()), ("eu".into(), "b".into())]
    );
    // One region's zones (what placing a request reads), in the same order.
    let of = |v: Vec<harmony_control_plane::store::ZoneRecord>| {
        v.into_iter()
            .map(|z| (z.region, z.zone))
            .collect::<Vec<_>>()
    };
    assert_eq!(of(s.region_zones("eu").await.unwrap()), zones);
    assert!(s.region_zones("nowhere").await.unwrap().is_empty());

    // Each zone has its own bootstrap token: minting b's does not revoke a's.
    let a_id = s
        .add_bootstrap("eu", "a", &hash("hbt_a"), &hash("salt_a"), now + 60_000)
        .await
        .unwrap();
    let b_id = s
        .add_bootstrap("eu", "b", &hash("hbt_b"), &hash("salt_b"), now + 60_000)
        .await
        .unwrap();
    for (token, zone) in [("hbt_a", "a"), ("hbt_b", "b")] {
        match s.check(&hash(token), now).await.unwrap() {
            Ok(Credential::Bootstrap { zone: z, .. }) => assert_eq!(z, zone),
            other => panic!("{token}: {other:?}"),
        }
    }
    // Identities carry their token's zone, and keep it through a rotation.
    assert_eq!(
        s.exchange(a_id, "eu", &hash("hid_a"), now + 60_000)
            .await
            .unwrap(),
        Exchange::Issued
    );
    assert_eq!(
        s.exchange(b_id, "eu", &hash("hid_b"), now + 60_000)
            .await
            .unwrap(),
        Exchange::Issued
    );
    assert!(
        s.rotate_identity(
            "eu",
            &hash("hid_b"),
            &hash("hid_b2"),
            now,
            now + 60_000,
            now + 1000
        )
        .await
        .unwrap()
    );
    match s.check(&hash("hid_b2"), now).await.unwrap() {
        Ok(Credential::Identity { zone, region, .. }) => {
            assert_eq!((region.as_str(), zone.as_str()), ("eu", "b"))
        }
        other => panic!("{other:?}"),
    }
    let has_identity = |zones: Vec<harmony_control_plane::store::ZoneRecord>, z: &str| {
        zones
            .into_iter()
            .find(|r| r.zone == z)
            .unwrap()
            .has_identity
    };
    assert!(has_identity(s.zones().await.unwrap(), "b"));

    // Decommissioning zone b revokes b's identities only.
    assert!(s.decommission_zone("eu", "b").await.unwrap());
    assert!(
        !s.decommission_zone("eu", "b").await.unwrap(),
        "already decommissioned"
    );
    assert_eq!(
        s.check(&hash("hid_b2"), now).await.unwrap(),
        Err(Refusal::Revoked)
    );
    assert!(matches!(
        s.check(&hash("hid_a"), now).await.unwrap(),
        Ok(Credential::Identity { .. })
    ));
    let b = s
        .zones()
        .await
        .unwrap()
        .into_iter()
        .find(|z| z.zone == "b")
        .unwrap();
    assert!(b.decommissioned_at.is_some() && !b.has_identity);
    assert!(
        s.region("eu")
            .await
            .unwrap()
            .unwrap()
            .decommissioned_at
            .is_none()
    );
    // Added again, it is active with no identity until its agent bootstraps.
    assert!(s.add_zone("eu", "b").await.unwrap());
    let b = s
        .zones()
        .await
        .unwrap()
        .into_iter()
        .find(|z| z.zone == "b")
        .unwrap();
    assert!(b.decommissioned_at.is_none() && !b.has_identity);

    // Decommissioning the region decommissions every zone.
    assert!(s.decommission("eu").await.unwrap());
    assert!(
        s.zones()
            .await
            .unwrap()
            .iter()
            .all(|z| z.decommissioned_at.is_some())
    );
    assert_eq!(
        s.check(&hash("hid_a"), now).await.unwrap(),
        Err(Refusal::Revoked)
    );
}

pub(super) async fn sessions_and_requests_are_kept_per_zone(db: Db) {
    let s = db.open().await;
    s.create_region("eu", "a").await.unwrap();
    s.add_zone("eu", "b").await.unwrap();
    // One session row per zone: b's connection does not replace a's.
    assert!(s.session_open(&session("a", "conn-a", 100)).await.unwrap());
    assert!(s.session_open(&session("b", "conn-b", 200)).await.unwrap());
    assert_eq!(s.session("eu", "a").await.unwrap().unwrap().conn, "conn-a");
    assert_eq!(s.session("eu", "b").await.unwrap().unwrap().conn, "conn-b");
    assert_eq!(s.sessions().await.unwrap().len(), 2);
    // One region's sessions, by zone, and no other region's.
    s.create_region("us", "c").await.unwrap();
    let mut us = session("c", "conn-c", 250);
    us.region = "us".into();
    assert!(s.session_open(&us).await.unwrap());
    let conns = |v: Vec<harmony_control_plane::store::SessionRecord>| {
        v.into_iter().map(|r| r.conn).collect::<Vec<_>>()
    };
    assert_eq!(
        conns(s.region_sessions("eu").await.unwrap()),
        ["conn-a", "conn-b"]
    );
    assert_eq!(conns(s.region_sessions("us").await.unwrap()), ["conn-c"]);
    // And one region's zones, no other region's.
    let zones = s.region_zones("us").await.unwrap();
    assert_eq!(
        zones
            .iter()
            .map(|z| (z.region.as_str(), z.zone.as_str()))
            .collect::<Vec<_>>(),
        [("us", "c")]
    );
    assert!(s.session_close("eu", "conn-b", 300).await.unwrap());
    assert!(s.session("eu", "a").await.unwrap().unwrap().connected);

    // Requests queue per zone; one submitted without a zone goes to the first zone.
    s.submit_request(&NewRequest::new("r1", "eu", "op", "{}", 1).in_zone("a"))
        .await
        .unwrap();
    s.submit_request(&NewRequest::new("r2", "eu", "op", "{}", 2).in_zone("b"))
        .await
        .unwrap();
    s.submit_request(&NewRequest::new("r3", "eu", "op", "{}", 3))
        .await
        .unwrap();
    let ids = |v: Vec<harmony_control_plane::store::RequestRecord>| {
        v.into_iter().map(|r| r.id).collect::<Vec<_>>()
    };
    assert_eq!(ids(s.unanswered("eu", "a").await.unwrap()), ["r1", "r3"]);
    assert_eq!(ids(s.unanswered("eu", "b").await.unwrap()), ["r2"]);
    assert_eq!(s.request("r3").await.unwrap().unwrap().zone, "a");
    let counts = s.unanswered_counts().await.unwrap();
    assert_eq!(
        (
            counts[&("eu".into(), "a".into())],
            counts[&("eu".into(), "b".into())]
        ),
        (2, 1)
    );
    assert_eq!(
        s.queued_zones().await.unwrap(),
        [("eu".into(), "a".into()), ("eu".into(), "b".into())]
    );
    assert!(s.mark_sent("r2", 4).await.unwrap());
    assert_eq!(s.queued_zones().await.unwrap(), [("eu".into(), "a".into())]);
}

/// The PostgreSQL schema of version 1 (one zone per region), as that release created it.
const POSTGRES_RELEASE_1: &str = "
CREATE TABLE IF NOT EXISTS schema_version (version BIGINT NOT NULL);
CREATE TABLE IF NOT EXISTS regions (
    name TEXT PRIMARY KEY,
    zone TEXT NOT NULL,
    created_at BIGINT NOT NULL,
    decommissioned_at BIGINT
);
CREATE TABLE IF NOT EXISTS bootstrap_tokens (
    id BIGSERIAL PRIMARY KEY,
    region TEXT NOT NULL REFERENCES regions(name),
    hash BYTEA NOT NULL UNIQUE,
    salt BYTEA NOT NULL,
    created_at BIGINT NOT NULL,
    expires_at BIGINT NOT NULL,
    used_at BIGINT,
    revoked_at BIGINT
);
CREATE TABLE IF NOT EXISTS identities (
    id BIGSERIAL PRIMARY KEY,
    region TEXT NOT NULL REFERENCES regions(name),
    hash BYTEA NOT NULL UNIQUE,
    created_at BIGINT NOT NULL,
    revoked_at BIGINT,
    expires_at BIGINT,
    first_used_at BIGINT,
    valid_until BIGINT,
    bootstrap_id BIGINT REFERENCES bootstrap_tokens(id)
);
CREATE TABLE IF NOT EXISTS service_instances (
    id TEXT PRIMARY KEY,
    service_type TEXT NOT NULL,
    region TEXT NOT NULL,
    state TEXT NOT NULL,
    detail TEXT NOT NULL DEFAULT '',
    provider TEXT,
    outputs TEXT NOT NULL DEFAULT '{}',
    spec TEXT NOT NULL DEFAULT '{}',
    attempts BIGINT NOT NULL DEFAULT 0,
    created_at BIGINT NOT NULL,
    updated_at BIGINT NOT NULL
);
CREATE TABLE IF NOT EXISTS sessions (
    region TEXT PRIMARY KEY,
    replica TEXT NOT NULL,
    conn TEXT NOT NULL,
    connected BOOLEAN NOT NULL,
    connected_at BIGINT NOT NULL,
    disconnected_at BIGINT,
    last_heartbeat_at BIGINT NOT NULL,
    hello_json TEXT NOT NULL,
    status_json TEXT,
    services_json TEXT,
    max_frame_bytes BIGINT NOT NULL
);
CREATE TABLE IF NOT EXISTS requests (
    seq BIGSERIAL NOT NULL,
    id TEXT PRIMARY KEY,
    region TEXT NOT NULL,
    op TEXT NOT NULL,
    params TEXT NOT NULL,
    body_hash BYTEA NOT NULL,
    state TEXT NOT NULL,
    res TEXT,
    created_at BIGINT NOT NULL,
    sent_at BIGINT,
    completed_at BIGINT,
    deliveries BIGINT NOT NULL DEFAULT 0
);
CREATE INDEX IF NOT EXISTS identities_by_region ON identities(region);
CREATE INDEX IF NOT EXISTS identities_by_bootstrap ON identities(bootstrap_id);
CREATE INDEX IF NOT EXISTS bootstrap_by_region ON bootstrap_tokens(region);
CREATE INDEX IF NOT EXISTS service_instances_by_state ON service_instances(state);
CREATE INDEX IF NOT EXISTS sessions_by_replica ON sessions(replica);
CREATE INDEX IF NOT EXISTS requests_unanswered ON requests(region, seq)
    WHERE state IN ('queued', 'sent');
CREATE INDEX IF NOT EXISTS requests_queued ON requests(region) WHERE state = 'queued';
CREATE INDEX IF NOT EXISTS requests_finished ON requests(completed_at)
    WHERE state IN ('done', 'cancelled');
";

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn postgres_a_version_1_database_gets_zones_in_place() {
    let db = Db::postgres();
    let (client, driver) = db.connect().await;
    client.batch_execute(POSTGRES_RELEASE_1).await.unwrap();
    client
        .batch_execute(
            "INSERT INTO schema_version (version) VALUES (1);
             INSERT INTO regions (name, zone, created_at) VALUES ('eu', 'paris', 1);
             INSERT INTO sessions (region, replica, conn, connected, connected_at,
                 last_heartbeat_at, hello_json, max_frame_bytes)
                 VALUES ('eu', 'r1', 'c1', FALSE, 1, 1, '{}', 1024);
             INSERT INTO requests (id, region, op, params, body_hash, state, created_at)
                 VALUES ('q1', 'eu', 'op', '{}', decode(repeat('00', 32), 'hex'), 'queued', 1);",
        )
        .await
        .unwrap();
    client
        .execute(
            "INSERT INTO identities (region, hash, created_at) VALUES ('eu', $1, 1)",
            &[&&hash("hid")[..]],
        )
        .await
        .unwrap();
    drop(client);
    let _ = driver.await;

    let s = db.open().await;
    let zones = s.zones().await.unwrap();
    assert_eq!(
        (zones.len(), zones[0].zone.as_str(), zones[0].has_identity),
        (1, "paris", true)
    );
    assert_eq!(s.session("eu", "paris").await.unwrap().unwrap().conn, "c1");
    assert_eq!(s.request("q1").await.unwrap().unwrap().zone, "paris");
    match s.check(&hash("hid"), now_ms()).await.unwrap() {
        Ok(Credential::Identity { zone, .. }) => assert_eq!(zone, "paris"),
        other => panic!("{other:?}"),
    }
    // Sessions are keyed by (region, zone) now: a second zone's row sits beside the first.
    s.add_zone("eu", "lyon").await.unwrap();
    assert!(s.session_open(&session("lyon", "c2", 5)).await.unwrap());
    assert_eq!(s.sessions().await.unwrap().len(), 2);
    // A second replica starting on the upgraded schema changes nothing.
    let again = db.open().await;
    assert_eq!(again.sessions().await.unwrap().len(), 2);
}
