//! Upgrading a database of schema version 1 (one zone per region) to zones in place: every
//! agent-level row takes its region's zone.

use rusqlite::{Connection, params};

use super::SqliteStore;
use crate::store::{Credential, Store, now_ms, request_body_hash};

/// Schema version 1, as that release created it.
const RELEASE_1: &str = "
CREATE TABLE schema_version (version INTEGER NOT NULL);
CREATE TABLE regions (
    name TEXT PRIMARY KEY,
    zone TEXT NOT NULL,
    created_at INTEGER NOT NULL,
    decommissioned_at INTEGER
);
CREATE TABLE bootstrap_tokens (
    id INTEGER PRIMARY KEY,
    region TEXT NOT NULL REFERENCES regions(name),
    hash BLOB NOT NULL UNIQUE,
    created_at INTEGER NOT NULL,
    expires_at INTEGER NOT NULL,
    used_at INTEGER,
    revoked_at INTEGER,
    salt BLOB
);
CREATE TABLE identities (
    id INTEGER PRIMARY KEY,
    region TEXT NOT NULL REFERENCES regions(name),
    hash BLOB NOT NULL UNIQUE,
    created_at INTEGER NOT NULL,
    revoked_at INTEGER,
    expires_at INTEGER,
    first_used_at INTEGER,
    valid_until INTEGER,
    bootstrap_id INTEGER
);
CREATE TABLE service_instances (
    id TEXT PRIMARY KEY,
    service_type TEXT NOT NULL,
    region TEXT NOT NULL,
    state TEXT NOT NULL,
    detail TEXT NOT NULL DEFAULT '',
    provider TEXT,
    outputs TEXT NOT NULL DEFAULT '{}',
    spec TEXT NOT NULL DEFAULT '{}',
    attempts INTEGER NOT NULL DEFAULT 0,
    created_at INTEGER NOT NULL,
    updated_at INTEGER NOT NULL
);
CREATE TABLE sessions (
    region TEXT PRIMARY KEY,
    replica TEXT NOT NULL,
    conn TEXT NOT NULL,
    connected INTEGER NOT NULL,
    connected_at INTEGER NOT NULL,
    disconnected_at INTEGER,
    last_heartbeat_at INTEGER NOT NULL,
    hello_json TEXT NOT NULL,
    status_json TEXT,
    services_json TEXT,
    max_frame_bytes INTEGER NOT NULL
);
CREATE TABLE requests (
    seq INTEGER PRIMARY KEY AUTOINCREMENT,
    id TEXT NOT NULL UNIQUE,
    region TEXT NOT NULL,
    op TEXT NOT NULL,
    params TEXT NOT NULL,
    body_hash BLOB NOT NULL,
    state TEXT NOT NULL,
    res TEXT,
    created_at INTEGER NOT NULL,
    sent_at INTEGER,
    completed_at INTEGER,
    deliveries INTEGER NOT NULL DEFAULT 0
);
";

fn hash(tag: &str) -> [u8; 32] {
    request_body_hash("test", tag)
}

#[tokio::test]
async fn a_version_1_database_gets_zones_and_keeps_its_sessions_requests_and_identities() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("cp.sqlite");
    {
        let c = Connection::open(&path).unwrap();
        c.execute_batch(RELEASE_1).unwrap();
        c.execute_batch(
            "INSERT INTO schema_version (version) VALUES (1);
             INSERT INTO regions (name, zone, created_at) VALUES ('eu', 'paris', 1);
             INSERT INTO sessions (region, replica, conn, connected, connected_at,
                 last_heartbeat_at, hello_json, max_frame_bytes)
                 VALUES ('eu', 'r1', 'c1', 0, 1, 1, '{}', 1024);
             INSERT INTO requests (id, region, op, params, body_hash, state, created_at)
                 VALUES ('q1', 'eu', 'op', '{}', zeroblob(32), 'queued', 1);
             INSERT INTO service_instances (id, service_type, region, state, created_at,
                 updated_at) VALUES ('svc-1', 'queue', 'eu', 'ready', 1, 1);",
        )
        .unwrap();
        c.execute(
            "INSERT INTO identities (region, hash, created_at) VALUES ('eu', ?1, 1)",
            params![&hash("hid")[..]],
        )
        .unwrap();
    }
    let store = SqliteStore::open(&path).unwrap();
    let zones = store.zones().await.unwrap();
    assert_eq!(
        (zones.len(), zones[0].zone.as_str(), zones[0].has_identity),
        (1, "paris", true)
    );
    let session = store.session("eu", "paris").await.unwrap().expect("kept");
    assert_eq!(session.conn, "c1");
    assert_eq!(store.request("q1").await.unwrap().unwrap().zone, "paris");
    assert_eq!(store.unanswered("eu", "paris").await.unwrap().len(), 1);
    assert_eq!(store.service("svc-1").await.unwrap().unwrap().zone, "paris");
    match store.check(&hash("hid"), now_ms()).await.unwrap() {
        Ok(Credential::Identity { zone, .. }) => assert_eq!(zone, "paris"),
        other => panic!("{other:?}"),
    }
    // A second zone's session now sits beside the first one's.
    store.add_zone("eu", "lyon").await.unwrap();
    let mut second = session.clone();
    (second.zone, second.conn) = ("lyon".into(), "c2".into());
    assert!(store.session_open(&second).await.unwrap());
    assert_eq!(store.sessions().await.unwrap().len(), 2);
    drop(store);
    // Opening again changes nothing.
    let store = SqliteStore::open(&path).unwrap();
    assert_eq!(store.sessions().await.unwrap().len(), 2);
    assert_eq!(store.zones().await.unwrap().len(), 2);
}
