//! PostgreSQL's plans for the batched reads (`store/postgres/batched.rs`): index lookups
//! whatever the planner knows of the tables. Connections keep one generic plan per statement,
//! made at its first call, and a table can grow by tens of thousands of rows before autovacuum
//! analyses it (a fleet bootstrapping); a plan that scans a whole table then costs a scan of
//! every region per call (12.9 ms at 12,000 regions, docs/benchmarks.md).

use super::Db;
use harmony_control_plane::store::{Credential, now_ms};
use harmony_e2e::eventually::eventually;
use std::collections::HashMap;
use std::time::Duration;

/// Regions in the tables (each with one zone, identity, session and finished request).
const ROWS: i64 = 5_000;

/// The tables the batched reads read.
const TABLES: [&str; 5] = ["regions", "zones", "identities", "sessions", "requests"];

/// (sequential scans, index scans) per table of [`TABLES`], from `pg_stat_user_tables`.
async fn scans(c: &tokio_postgres::Client) -> HashMap<String, (i64, i64)> {
    // A fresh view of the statistics, not the one this session read last.
    c.batch_execute("SELECT pg_stat_clear_snapshot()")
        .await
        .unwrap();
    let rows = c
        .query(
            "SELECT relname::text, COALESCE(seq_scan, 0), COALESCE(idx_scan, 0)
             FROM pg_stat_user_tables WHERE relname::text = ANY($1)",
            &[&&TABLES[..]],
        )
        .await
        .unwrap();
    rows.iter()
        .map(|r| (r.get(0), (r.get(1), r.get(2))))
        .collect()
}

/// Waits until every store connection has ended: a backend reports its statistics at the
/// latest when it exits.
async fn store_backends_gone(c: &tokio_postgres::Client) {
    eventually(
        Duration::from_secs(20),
        "the store's connections to end",
        || async {
            let n: i64 = c
                .query_one(
                    "SELECT count(*) FROM pg_stat_activity
                     WHERE application_name = 'harmony-control-plane'",
                    &[],
                )
                .await
                .unwrap()
                .get(0);
            if n == 0 { Ok(()) } else { Err(n) }
        },
    )
    .await
    .unwrap_or_else(|e| panic!("{e}"));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn postgres_batched_reads_never_scan_whole_tables_even_without_statistics() {
    let db = Db::postgres();
    // The schema, from a first store.
    drop(db.open().await);
    let (c, driver) = db.connect().await;
    store_backends_gone(&c).await;
    // Thousands of rows the planner has no statistics for, as after a fleet's bootstrap.
    let mut fill = String::new();
    for t in TABLES {
        fill.push_str(&format!(
            "ALTER TABLE {t} SET (autovacuum_enabled = false);\n"
        ));
    }
    fill.push_str(&format!(
        "INSERT INTO regions (name, zone, created_at) SELECT 'r' || g, 'z', 1
             FROM generate_series(1, {ROWS}) g;
         INSERT INTO zones (region, zone, created_at) SELECT 'r' || g, 'z', 1
             FROM generate_series(1, {ROWS}) g;
         INSERT INTO identities (region, zone, hash, created_at)
             SELECT 'r' || g, 'z', decode(lpad(to_hex(g), 64, '0'), 'hex'), 1
             FROM generate_series(1, {ROWS}) g;
         INSERT INTO sessions (region, zone, replica, conn, connected, connected_at,
                 last_heartbeat_at, hello_json, max_frame_bytes)
             SELECT 'r' || g, 'z', 'replica', 'c' || g, TRUE, 1, 1, '{{}}', 1024
             FROM generate_series(1, {ROWS}) g;
         INSERT INTO requests (id, region, zone, op, params, body_hash, state, created_at)
             SELECT 'q' || g, 'r' || g, 'z', 'op', '{{}}', decode(repeat('00', 32), 'hex'), 'done', 1
             FROM generate_series(1, {ROWS}) g;"
    ));
    c.batch_execute(&fill).await.unwrap();
    // Region `r<g>`'s identity hash: `g`, big-endian, in 32 bytes (as the SQL above).
    let hash_of = |region: &str| -> [u8; 32] {
        let g: u64 = region[1..].parse().unwrap();
        let mut h = [0u8; 32];
        h[24..].copy_from_slice(&g.to_be_bytes());
        h
    };
    let before = scans(&c).await;

    let s = db.open().await;
    // Every batched read of region `r`, with what the fill above stored.
    let read = |r: String| {
        let s = s.clone();
        async move {
            let region = s.region(&r).await.unwrap().unwrap();
            assert!(region.has_identity, "{r}: {region:?}");
            let zones = s.region_zones(&r).await.unwrap();
            assert_eq!(zones.len(), 1, "{r}");
            assert!(zones[0].has_identity && zones[0].live_identity, "{r}");
            assert_eq!(s.region_sessions(&r).await.unwrap().len(), 1, "{r}");
            assert!(s.session(&r, "z").await.unwrap().is_some(), "{r}");
            let q = format!("q{}", &r[1..]);
            assert_eq!(s.request(&q).await.unwrap().unwrap().region, r);
            assert!(s.unanswered(&r, "z").await.unwrap().is_empty(), "{r}");
            match s.check(&hash_of(&r), now_ms()).await.unwrap() {
                Ok(Credential::Identity { region, .. }) => assert_eq!(region, r),
                other => panic!("{r}: {other:?}"),
            }
        }
    };
    // Each read alone, then many at once (combined into one statement of several keys).
    for i in 1..=40 {
        read(format!("r{}", i * 97)).await;
    }
    futures::future::join_all((1..=40).map(|i| read(format!("r{}", i * 97 + 1)))).await;
    drop(s);
    store_backends_gone(&c).await;
    let after = scans(&c).await;
    for t in TABLES {
        let (seq0, idx0) = before[t];
        let (seq1, idx1) = after[t];
        assert_eq!(
            seq1 - seq0,
            0,
            "the batched reads scanned table {t} whole {} times (index scans: {})",
            seq1 - seq0,
            idx1 - idx0
        );
    }
    assert!(after["zones"].1 > before["zones"].1, "{before:?} {after:?}");
    drop(c);
    let _ = driver.await;
}

/// Queued requests `q<g>` of regions `r<g>` (zone `z`), [`ROWS`] of them, that autovacuum
/// leaves alone.
async fn queue_requests(c: &tokio_postgres::Client) {
    c.batch_execute(&format!(
        "ALTER TABLE requests SET (autovacuum_enabled = false);
         INSERT INTO requests (id, region, zone, op, params, body_hash, state, created_at)
             SELECT 'q' || g, 'r' || g, 'z', 'op', '{{}}', decode(repeat('00', 32), 'hex'),
                 'queued', 1
             FROM generate_series(1, {ROWS}) g;"
    ))
    .await
    .unwrap();
}

/// Index entries `requests`' indexes returned, from `pg_stat_user_indexes`.
async fn request_index_reads(c: &tokio_postgres::Client) -> i64 {
    c.batch_execute("SELECT pg_stat_clear_snapshot()")
        .await
        .unwrap();
    c.query_one(
        "SELECT COALESCE(sum(idx_tup_read), 0)::int8 FROM pg_stat_user_indexes
         WHERE relname = 'requests'",
        &[],
    )
    .await
    .unwrap()
    .get(0)
}

/// A zone's unanswered requests are found through the index, one lookup per zone, even on a
/// connection whose plan was made while `requests` was empty (as at a replica's first
/// delivery). Flattened into a join, the generic plan made then read every entry of the
/// partial index `requests_unanswered_by_zone` on each call, and answered requests keep their
/// entries there until a vacuum: 7,500 entries a call after 9,000 requests in a burst.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn postgres_unanswered_requests_are_looked_up_per_zone_on_a_plan_made_when_empty() {
    let db = Db::postgres();
    // The plan its first call makes, on empty tables, is the one kept.
    let s = db.open_one_connection().await;
    assert!(s.unanswered("r1", "z").await.unwrap().is_empty());

    let (c, driver) = db.connect().await;
    queue_requests(&c).await;
    let before = request_index_reads(&c).await;
    let calls = 20;
    for i in 1..=calls {
        let r = format!("r{}", i * 97);
        let found = s.unanswered(&r, "z").await.unwrap();
        assert_eq!(found.len(), 1, "{r}: {found:?}");
        assert_eq!(found[0].region, r);
    }
    drop(s);
    store_backends_gone(&c).await;
    let read = request_index_reads(&c).await - before;
    assert!(
        read <= calls * 4,
        "{read} index entries read for {calls} zones' unanswered requests, each zone holding one"
    );
    drop(c);
    let _ = driver.await;
}

/// Marking requests sent and storing their results find each row by its key, even on a
/// connection whose plans were made while `requests` was empty. Those plans joined the ids
/// with a scan of the whole partial index of unanswered requests, on every call.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn postgres_request_writes_find_rows_by_key_on_a_plan_made_when_empty() {
    let db = Db::postgres();
    // The plans its first calls make, on empty tables, are the ones kept.
    let s = db.open_one_connection().await;
    let res = r#"{"type":"res","id":"x","ok":true}"#;
    assert!(!s.mark_sent("none", 1).await.unwrap());
    assert!(!s.complete_request("none", res, 1).await.unwrap());

    let (c, driver) = db.connect().await;
    queue_requests(&c).await;
    let before = request_index_reads(&c).await;
    let calls = 20;
    for i in 1..=calls {
        let id = format!("q{}", i * 97);
        assert!(s.mark_sent(&id, 2).await.unwrap(), "{id}");
        assert!(s.complete_request(&id, res, 3).await.unwrap(), "{id}");
        assert!(
            !s.complete_request(&id, res, 4).await.unwrap(),
            "{id}: answered twice"
        );
    }
    let done = s.request("q97").await.unwrap().unwrap();
    assert_eq!((done.sent_at, done.completed_at), (Some(2), Some(3)));
    drop(s);
    store_backends_gone(&c).await;
    let read = request_index_reads(&c).await - before;
    // Three writes and a read per id, each a primary-key lookup of one entry.
    assert!(
        read <= calls * 4 * 4,
        "{read} index entries read to mark {calls} requests sent and store their results"
    );
    drop(c);
    let _ = driver.await;
}
