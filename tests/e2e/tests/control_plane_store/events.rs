//! Events between replicas, and what only PostgreSQL (N replicas) offers.

use super::{Db, hash};
use harmony_control_plane::store::{
    self, Event, Exchange, NewRequest, StoreConfig, Submitted, next_event, now_ms,
};
use harmony_e2e::eventually::eventually;
use std::time::Duration;
use tokio::sync::broadcast;

/// Upper bound for waiting on an event, only so a broken build fails instead of hanging.
const EVENT_WAIT: Duration = Duration::from_secs(60);

async fn recv(rx: &mut broadcast::Receiver<Event>) -> Event {
    tokio::time::timeout(EVENT_WAIT, next_event(rx))
        .await
        .expect("no event arrived")
        .expect("the event channel closed")
}

/// The next event that is not a `Resync` (a listener may reconnect at any time).
pub(super) async fn recv_skipping_resync(rx: &mut broadcast::Receiver<Event>) -> Event {
    loop {
        match recv(rx).await {
            Event::Resync => continue,
            e => return e,
        }
    }
}

pub(super) async fn published_events_reach_subscribers(db: Db) {
    let s = db.open().await;
    let mut rx = s.subscribe();
    let events = [
        Event::RequestQueued {
            region: "eu".into(),
            zone: Some("z1".into()),
        },
        Event::RequestDone { id: "r1".into() },
        Event::Progress {
            id: "r1".into(),
            stage: "applying".into(),
            detail: "3/45".into(),
        },
        Event::CloseRegion {
            region: "eu".into(),
            zone: Some("z1".into()),
            code: 4004,
            reason: "revoked".into(),
            conn: Some("c1".into()),
        },
        Event::InstanceChanged { id: "svc-1".into() },
    ];
    for e in &events {
        s.publish(e).await.unwrap();
    }
    for e in &events {
        assert_eq!(&recv_skipping_resync(&mut rx).await, e);
    }
    // A progress detail too large for one notification is truncated, never refused.
    let big = "é".repeat(50_000);
    s.publish(&Event::Progress {
        id: "r2".into(),
        stage: "s".into(),
        detail: big.clone(),
    })
    .await
    .unwrap();
    match recv_skipping_resync(&mut rx).await {
        Event::Progress { id, detail, .. } => {
            assert_eq!(id, "r2");
            assert!(!detail.is_empty() && big.starts_with(detail.trim_end_matches('…')));
        }
        e => panic!("expected the progress event, got {e:?}"),
    }
}

// --- PostgreSQL only: what N replicas on one database rely on ------------------------------

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn postgres_replicas_starting_together_share_one_schema_and_see_each_others_writes() {
    let db = Db::postgres();
    {
        let (a, b, c) = tokio::join!(db.open(), db.open(), db.open());
        assert!(a.create_region("eu", "paris").await.unwrap());
        assert!(!b.create_region("eu", "paris").await.unwrap());
        let req = NewRequest::new("r1", "eu", "op", "{}", 1);
        // The same request submitted to two replicas at once is stored once.
        let (x, y) = tokio::join!(a.submit_request(&req), b.submit_request(&req));
        let mut outcomes = [x.unwrap(), y.unwrap()].map(|o| matches!(o, Submitted::Created));
        outcomes.sort();
        assert_eq!(outcomes, [false, true]);
        assert!(c.complete_request("r1", r#"{"ok":true}"#, 2).await.unwrap());
        assert!(
            !a.complete_request("r1", r#"{"ok":false}"#, 3)
                .await
                .unwrap()
        );
        assert_eq!(
            b.request("r1").await.unwrap().unwrap().res.as_deref(),
            Some(r#"{"ok":true}"#)
        );
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn postgres_concurrent_exchanges_of_one_token_issue_one_identity() {
    let db = Db::postgres();
    {
        let (a, b) = tokio::join!(db.open(), db.open());
        let now = now_ms();
        a.create_region("eu", "paris").await.unwrap();
        let id = a
            .add_bootstrap("eu", "paris", &hash("hbt"), &hash("salt"), now + 60_000)
            .await
            .unwrap();
        let identity = hash("hid");
        let (x, y) = tokio::join!(
            a.exchange(id, "eu", &identity, now + 1),
            b.exchange(id, "eu", &identity, now + 1)
        );
        let mut got = [x.unwrap(), y.unwrap()];
        got.sort_by_key(|e| matches!(e, Exchange::Issued));
        assert_eq!(
            got,
            [
                Exchange::AlreadyIssuedUnused {
                    expires_at: Some(now + 1)
                },
                Exchange::Issued
            ]
        );
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn postgres_an_event_published_on_one_replica_reaches_another() {
    let db = Db::postgres();
    {
        let (a, b) = tokio::join!(db.open(), db.open());
        let mut on_b = b.subscribe();
        let mut on_a = a.subscribe();
        let e = Event::RequestQueued {
            region: "eu".into(),
            zone: Some("z1".into()),
        };
        a.publish(&e).await.unwrap();
        assert_eq!(recv_skipping_resync(&mut on_b).await, e);
        assert_eq!(
            recv_skipping_resync(&mut on_a).await,
            e,
            "the publisher's own subscribers too"
        );
        b.publish(&Event::RequestDone { id: "r1".into() })
            .await
            .unwrap();
        assert_eq!(
            recv_skipping_resync(&mut on_a).await,
            Event::RequestDone { id: "r1".into() }
        );
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn postgres_listener_reconnects_after_a_database_crash_and_asks_for_resync() {
    let Db::Postgres { mut server, url } = Db::postgres() else {
        unreachable!("Db::postgres gives a PostgreSQL database")
    };
    let config = StoreConfig::Postgres {
        url,
        pool_size: 2,
        pool_wait: std::time::Duration::from_secs(10),
        ca_file: None,
    };
    let (a, b) = (
        store::open(&config).await.unwrap(),
        store::open(&config).await.unwrap(),
    );
    a.submit_request(&NewRequest::new("before", "eu", "op", "{}", 1))
        .await
        .unwrap();
    let mut on_b = b.subscribe();

    tokio::task::block_in_place(|| {
        server.kill9().unwrap();
        server
            .restart()
            .unwrap_or_else(|e| panic!("restarting PostgreSQL: {e}"));
    });
    assert_eq!(
        recv(&mut on_b).await,
        Event::Resync,
        "a reconnected listener asks consumers to re-read"
    );

    // Pools replace their dead connections; a call may fail once while they do.
    let e = Event::RequestQueued {
        region: "eu".into(),
        zone: Some("z1".into()),
    };
    eventually(
        Duration::from_secs(5),
        "a publish after the restart",
        || a.publish(&e),
    )
    .await
    .unwrap_or_else(|w| {
        panic!(
            "publishing after the restart keeps failing: {w}\n{}",
            server.logs()
        )
    });
    assert_eq!(recv_skipping_resync(&mut on_b).await, e);
    // Committed data survived the crash.
    assert!(b.request("before").await.unwrap().is_some());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sqlite_a_lagging_subscriber_gets_resync() {
    let db = Db::sqlite();
    let s = db.open().await;
    let mut rx = s.subscribe();
    for i in 0..10_000 {
        s.publish(&Event::RequestDone {
            id: format!("r{i}"),
        })
        .await
        .unwrap();
    }
    assert_eq!(recv(&mut rx).await, Event::Resync);
    assert!(matches!(recv(&mut rx).await, Event::RequestDone { .. }));
}
