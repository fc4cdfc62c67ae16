//! Agent sessions and durable requests.

use super::Db;
use harmony_control_plane::store::{
    self, Heartbeat, NewRequest, RequestState, SessionRecord, Submitted,
};

fn session(region: &str, replica: &str, conn: &str, at: i64) -> SessionRecord {
    SessionRecord {
        region: region.into(),
        zone: "z1".into(),
        replica: replica.into(),
        conn: conn.into(),
        connected: true,
        connected_at: at,
        disconnected_at: None,
        last_heartbeat_at: at,
        hello_json: format!(r#"{{"type":"hello","region":"{region}"}}"#),
        status_json: None,
        services_json: None,
        max_frame_bytes: 4 << 20,
    }
}

fn beat(region: &str, conn: &str, at: i64, status: Option<&str>) -> Heartbeat {
    Heartbeat {
        region: region.into(),
        conn: conn.into(),
        at,
        status_json: status.map(str::to_string),
    }
}

pub(super) async fn sessions_follow_the_current_connection_only(db: Db) {
    let s = db.open().await;
    assert!(
        s.session_open(&session("eu", "replica-a", "c1", 100))
            .await
            .unwrap()
    );
    s.session_open(&session("ap", "replica-a", "c2", 100))
        .await
        .unwrap();
    assert_eq!(
        s.session("eu", "z1").await.unwrap().unwrap(),
        session("eu", "replica-a", "c1", 100)
    );

    let n = s
        .session_heartbeats(&[
            beat("eu", "c1", 150, Some(r#"{"ok":true}"#)),
            beat("eu", "c1", 120, None),
            beat("ap", "stale", 150, None),
        ])
        .await
        .unwrap();
    assert_eq!(
        n, 1,
        "one current connection beat; the stale connection's beat is ignored"
    );
    let eu = s.session("eu", "z1").await.unwrap().unwrap();
    assert_eq!(
        (eu.last_heartbeat_at, eu.status_json.as_deref()),
        (150, Some(r#"{"ok":true}"#))
    );
    assert_eq!(
        s.session("ap", "z1")
            .await
            .unwrap()
            .unwrap()
            .last_heartbeat_at,
        100
    );
    assert_eq!(s.session_heartbeats(&[]).await.unwrap(), 0);

    assert!(
        s.session_services("eu", "c1", r#"{"queue":{}}"#)
            .await
            .unwrap()
    );
    assert!(!s.session_services("eu", "old", "{}").await.unwrap());
    assert_eq!(
        s.session("eu", "z1")
            .await
            .unwrap()
            .unwrap()
            .services_json
            .as_deref(),
        Some(r#"{"queue":{}}"#)
    );

    // A new connection (on another replica) replaces the row; the old one's close is ignored,
    // and so is a late open of a connection made earlier (it is stale).
    assert!(
        s.session_open(&session("eu", "replica-b", "c3", 200))
            .await
            .unwrap()
    );
    assert!(
        !s.session_open(&session("eu", "replica-a", "c0", 190))
            .await
            .unwrap()
    );
    assert!(!s.session_close("eu", "c1", 210).await.unwrap());
    let eu = s.session("eu", "z1").await.unwrap().unwrap();
    assert_eq!(
        (eu.replica.as_str(), eu.connected, eu.services_json),
        ("replica-b", true, None)
    );
    assert!(s.session_close("eu", "c3", 220).await.unwrap());
    let eu = s.session("eu", "z1").await.unwrap().unwrap();
    assert_eq!((eu.connected, eu.disconnected_at), (false, Some(220)));
    assert_eq!(
        s.session_heartbeats(&[beat("eu", "c3", 230, None)])
            .await
            .unwrap(),
        0,
        "a closed session takes no heartbeat"
    );

    assert_eq!(s.sessions_close_replica("replica-a", 300).await.unwrap(), 1);
    let all = s.sessions().await.unwrap();
    assert_eq!(
        all.iter()
            .map(|r| (r.region.as_str(), r.connected))
            .collect::<Vec<_>>(),
        [("ap", false), ("eu", false)]
    );
}

pub(super) async fn heartbeats_of_many_regions_apply_in_one_call(db: Db) {
    let s = db.open().await;
    let regions: Vec<String> = (0..500).map(|i| format!("r{i:03}")).collect();
    for r in &regions {
        s.session_open(&session(r, "replica-a", &format!("c-{r}"), 1))
            .await
            .unwrap();
    }
    let beats: Vec<Heartbeat> = regions
        .iter()
        .map(|r| beat(r, &format!("c-{r}"), 2, None))
        .collect();
    assert_eq!(s.session_heartbeats(&beats).await.unwrap(), 500);
    assert!(
        s.sessions()
            .await
            .unwrap()
            .iter()
            .all(|r| r.last_heartbeat_at == 2)
    );
}

pub(super) async fn durable_request_ids_are_idempotency_keys(db: Db) {
    let s = db.open().await;
    // Raw params are stored byte for byte: `1e2` stays `1e2`, spacing and key order stay.
    let params = r#"{ "n": 1e2, "b": "é\u00e9",  "a": [1,2] }"#;
    let req = NewRequest::new("req-1", "eu", "apply_manifests", params, 1_000);
    assert_eq!(s.submit_request(&req).await.unwrap(), Submitted::Created);

    let Submitted::Existing(stored) = s.submit_request(&req).await.unwrap() else {
        panic!("the same id and body is not the same request");
    };
    assert_eq!(
        (stored.params.as_str(), stored.state, stored.body_hash),
        (params, RequestState::Queued, req.body_hash)
    );
    assert_eq!(
        (
            stored.op.as_str(),
            stored.region.as_str(),
            stored.created_at
        ),
        ("apply_manifests", "eu", 1_000)
    );

    for other in [
        NewRequest::new(
            "req-1",
            "eu",
            "apply_manifests",
            r#"{ "n": 100, "b": "é\u00e9",  "a": [1,2] }"#,
            2,
        ),
        NewRequest::new("req-1", "eu", "delete_manifests", params, 2),
        NewRequest::new("req-1", "ap", "apply_manifests", params, 2),
    ] {
        match s.submit_request(&other).await.unwrap() {
            Submitted::Mismatch(stored) => assert_eq!(stored.params, params, "the first body wins"),
            got => panic!("same id, different region/op/params must be a mismatch, got {got:?}"),
        }
    }
    // Still the same once finished: a retry joins the stored result.
    assert!(
        s.complete_request("req-1", r#"{"type":"res","id":"req-1","ok":true}"#, 5)
            .await
            .unwrap()
    );
    let Submitted::Existing(done) = s.submit_request(&req).await.unwrap() else {
        panic!("a finished request is still the same request");
    };
    assert_eq!(
        (done.state, done.res.as_deref()),
        (
            RequestState::Done,
            Some(r#"{"type":"res","id":"req-1","ok":true}"#)
        )
    );
}

pub(super) async fn unanswered_requests_keep_submit_order_and_finish_once(db: Db) {
    let s = db.open().await;
    for (id, region) in [("a", "eu"), ("b", "eu"), ("x", "ap"), ("c", "eu")] {
        s.submit_request(&NewRequest::new(id, region, "op", "{}", 10))
            .await
            .unwrap();
    }
    let ids = |v: Vec<store::RequestRecord>| v.into_iter().map(|r| r.id).collect::<Vec<_>>();
    assert_eq!(ids(s.unanswered("eu", "").await.unwrap()), ["a", "b", "c"]);
    let counts = s.unanswered_counts().await.unwrap();
    let count = |r: &str| counts[&(r.to_string(), String::new())];
    assert_eq!((count("eu"), count("ap"), counts.len()), (3, 1, 2));
    assert_eq!(
        s.queued_zones().await.unwrap(),
        [("ap".into(), String::new()), ("eu".into(), String::new())],
        "requests of regions without zones are kept under the empty zone"
    );

    assert!(s.mark_sent("a", 20).await.unwrap());
    assert!(
        s.mark_sent("a", 30).await.unwrap(),
        "a redelivery counts again"
    );
    let a = s.request("a").await.unwrap().unwrap();
    assert_eq!(
        (a.state, a.sent_at, a.deliveries),
        (RequestState::Sent, Some(30), 2)
    );
    assert!(a.seq < s.request("b").await.unwrap().unwrap().seq);

    assert!(
        s.complete_request("a", r#"{"first":true}"#, 40)
            .await
            .unwrap()
    );
    assert!(
        !s.complete_request("a", r#"{"second":true}"#, 41)
            .await
            .unwrap(),
        "only the first result wins"
    );
    assert!(
        !s.cancel_request("a", r#"{"cancelled":true}"#, 42)
            .await
            .unwrap()
    );
    assert!(
        !s.mark_sent("a", 43).await.unwrap(),
        "a finished request is not delivered again"
    );
    let a = s.request("a").await.unwrap().unwrap();
    assert_eq!(
        (a.state, a.res.as_deref(), a.completed_at),
        (RequestState::Done, Some(r#"{"first":true}"#), Some(40))
    );

    assert!(
        s.cancel_request("b", r#"{"error":"region decommissioned"}"#, 50)
            .await
            .unwrap()
    );
    assert!(!s.complete_request("b", "{}", 51).await.unwrap());
    assert_eq!(
        s.request("b").await.unwrap().unwrap().state,
        RequestState::Cancelled
    );
    assert_eq!(ids(s.unanswered("eu", "").await.unwrap()), ["c"]);
    assert!(!s.mark_sent("nope", 1).await.unwrap());
    assert!(s.request("nope").await.unwrap().is_none());

    // Pruning drops finished requests completed before the cut, never unanswered ones.
    assert_eq!(s.prune_requests(45).await.unwrap(), 1);
    assert!(s.request("a").await.unwrap().is_none());
    assert!(s.request("b").await.unwrap().is_some());
    assert_eq!(s.prune_requests(i64::MAX).await.unwrap(), 1);
    assert_eq!(ids(s.unanswered("eu", "").await.unwrap()), ["c"]);
    // A pruned id can be used again.
    assert_eq!(
        s.submit_request(&NewRequest::new("a", "eu", "op2", "[]", 60))
            .await
            .unwrap(),
        Submitted::Created
    );
    assert_eq!(ids(s.unanswered("eu", "").await.unwrap()), ["c", "a"]);
}

pub(super) async fn requests_survive_reopening_the_store(db: Db) {
    {
        let s = db.open().await;
        s.submit_request(&NewRequest::new("r1", "eu", "op", r#"{"k":1}"#, 1))
            .await
            .unwrap();
        s.submit_request(&NewRequest::new("r2", "eu", "op", r#"{"k":2}"#, 2))
            .await
            .unwrap();
        s.mark_sent("r1", 3).await.unwrap();
    }
    let s = db.open().await;
    let pending = s.unanswered("eu", "").await.unwrap();
    assert_eq!(
        pending
            .iter()
            .map(|r| (r.id.as_str(), r.state))
            .collect::<Vec<_>>(),
        [("r1", RequestState::Sent), ("r2", RequestState::Queued)]
    );
    assert_eq!(pending[0].params, r#"{"k":1}"#);
    assert!(s.complete_request("r1", "{}", 4).await.unwrap());
    drop(s);
    let s = db.open().await;
    assert_eq!(
        s.request("r1").await.unwrap().unwrap().state,
        RequestState::Done
    );
    assert!(matches!(
        s.submit_request(&NewRequest::new("r2", "eu", "op", r#"{"k":2}"#, 9))
            .await
            .unwrap(),
        Submitted::Existing(_)
    ));
}

/// Hundreds of calls at once, as a burst of callers makes them (the PostgreSQL adapter then
/// sends each kind as one statement per batch): each answers exactly as it would alone. Repeats
/// of an id within the burst, with the same body or another, join or are refused as a later
/// call would be; of two answers to one request, exactly one is stored.
pub(super) async fn concurrent_calls_each_get_the_answer_they_would_get_alone(db: Db) {
    use futures::future::join_all;
    let s = db.open().await;
    assert!(s.create_region("burst", "z1").await.unwrap());
    assert!(s.create_region("other", "z1").await.unwrap());
    // Reads of regions and their zones at once: each gets its own.
    let names = ["burst", "other", "missing"];
    let regions = join_all((0..60).map(|i| {
        let s = s.clone();
        let name = names[i % 3];
        async move {
            (
                name,
                s.region(name).await.unwrap(),
                s.region_zones(name).await.unwrap(),
            )
        }
    }))
    .await;
    for (name, region, zones) in regions {
        assert_eq!(
            region.map(|r| r.name),
            (name != "missing").then(|| name.to_string())
        );
        let zones: Vec<String> = zones.into_iter().map(|z| z.zone).collect();
        assert_eq!(
            zones,
            if name == "missing" {
                vec![]
            } else {
                vec!["z1".to_string()]
            }
        );
    }
    const N: usize = 300;
    let fresh = |i: usize| NewRequest::new(&format!("b-{i}"), "burst", "get_inventory", "{}", 10);
    // N fresh ids, each sent twice with the same body and once with another, all at once.
    let calls = (0..N).flat_map(|i| {
        [
            (i, 0, fresh(i)),
            (i, 1, fresh(i)),
            (
                i,
                2,
                NewRequest::new(
                    &format!("b-{i}"),
                    "burst",
                    "get_inventory",
                    r#"{"x":1}"#,
                    10,
                ),
            ),
        ]
    });
    let answers = join_all(calls.map(|(i, kind, r)| {
        let s = s.clone();
        async move { (i, kind, s.submit_request(&r).await.unwrap()) }
    }))
    .await;
    for i in 0..N {
        let mine: Vec<&Submitted> = answers
            .iter()
            .filter(|(j, _, _)| *j == i)
            .map(|(_, _, a)| a)
            .collect();
        let created = mine
            .iter()
            .filter(|a| matches!(a, Submitted::Created))
            .count();
        assert_eq!(created, 1, "request b-{i} created exactly once: {mine:?}");
        let stored = s.request(&format!("b-{i}")).await.unwrap().unwrap();
        for (_, kind, a) in answers.iter().filter(|(j, _, _)| *j == i) {
            let same_body = stored.params == fresh(i).params;
            match a {
                Submitted::Created => {}
                Submitted::Existing(_) => assert!(
                    (*kind == 2) != same_body,
                    "b-{i}: joined although its body differs from the stored one"
                ),
                Submitted::Mismatch(_) => assert!(
                    (*kind == 2) == same_body,
                    "b-{i}: refused although its body is the stored one"
                ),
            }
        }
    }
    // Reads at once, each its own request; unanswered, in submit order.
    let reads = join_all((0..N).map(|i| {
        let s = s.clone();
        async move { s.request(&format!("b-{i}")).await.unwrap().map(|r| r.id) }
    }))
    .await;
    assert!(
        reads
            .iter()
            .enumerate()
            .all(|(i, id)| id.as_deref() == Some(format!("b-{i}").as_str()))
    );
    let unanswered = s.unanswered("burst", "z1").await.unwrap();
    assert_eq!(unanswered.len(), N);
    assert!(unanswered.windows(2).all(|w| w[0].seq < w[1].seq));
    // Marked sent at once; then two answers per request at once: one wins each.
    let marked = join_all((0..N).map(|i| {
        let s = s.clone();
        async move { s.mark_sent(&format!("b-{i}"), 20).await.unwrap() }
    }))
    .await;
    assert!(marked.iter().all(|m| *m));
    let finished = join_all((0..N).flat_map(|i| {
        [1, 2].map(|k| {
            let s = s.clone();
            async move {
                let won = s
                    .complete_request(&format!("b-{i}"), &format!(r#"{{"answer":{k}}}"#), 30)
                    .await
                    .unwrap();
                (i, k, won)
            }
        })
    }))
    .await;
    for i in 0..N {
        let winners: Vec<i32> = finished
            .iter()
            .filter(|(j, _, won)| *j == i && *won)
            .map(|(_, k, _)| *k)
            .collect();
        assert_eq!(winners.len(), 1, "b-{i}: {winners:?} answers stored");
        let stored = s.request(&format!("b-{i}")).await.unwrap().unwrap();
        assert_eq!(stored.state, RequestState::Done);
        assert_eq!(stored.deliveries, 1);
        assert_eq!(
            stored.res.as_deref(),
            Some(format!(r#"{{"answer":{}}}"#, winners[0]).as_str()),
            "b-{i}: the stored answer is the one that won"
        );
    }
    assert!(s.unanswered("burst", "z1").await.unwrap().is_empty());
}

/// The periodic heartbeat write has a connection of its own: while the pool's only connection
/// is held by a call waiting on a lock, `flush_session_heartbeats` is written at once. Through
/// the pool it waited until that call gave up (its lock wait, up to the pool wait), as every
/// zone's heartbeats queued behind a reconnect storm's calls.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn postgres_heartbeat_flushes_do_not_queue_behind_a_busy_pool() {
    use harmony_e2e::eventually::eventually;
    use std::time::Duration;
    let db = Db::postgres();
    let s = db.open_one_connection().await;
    s.session_open(&session("eu", "replica-a", "c1", 100))
        .await
        .unwrap();

    let (c, driver) = db.connect().await;
    c.batch_execute("BEGIN; LOCK TABLE regions IN ACCESS EXCLUSIVE MODE")
        .await
        .unwrap();
    // A call that waits on the lock, holding the pool's only connection.
    let waiting = tokio::spawn({
        let s = s.clone();
        async move { s.create_region("ap", "z1").await }
    });
    let lock_waiters = || async {
        let n: i64 = c
            .query_one(
                "SELECT count(*) FROM pg_stat_activity
                 WHERE application_name = 'harmony-control-plane' AND wait_event_type = 'Lock'",
                &[],
            )
            .await
            .unwrap()
            .get(0);
        n
    };
    eventually(
        Duration::from_secs(20),
        "the pooled call to wait on the lock",
        || async {
            match lock_waiters().await {
                1 => Ok(()),
                n => Err(n),
            }
        },
    )
    .await
    .unwrap_or_else(|e| panic!("{e}"));

    let written = s
        .flush_session_heartbeats(&[beat("eu", "c1", 160, Some(r#"{"ok":true}"#))])
        .await
        .unwrap();
    assert_eq!(written, 1);
    // Written while that call still waited: not on its connection.
    assert_eq!(lock_waiters().await, 1, "the flush waited for the pool");
    c.batch_execute("ROLLBACK").await.unwrap();
    waiting.await.unwrap().unwrap();
    let eu = s.session("eu", "z1").await.unwrap().unwrap();
    assert_eq!(
        (eu.last_heartbeat_at, eu.status_json.as_deref()),
        (160, Some(r#"{"ok":true}"#))
    );
    driver.abort();
}
