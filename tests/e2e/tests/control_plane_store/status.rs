//! What the status page reads: zone health transitions (written once per change, never by an
//! older observation, a bounded history), request summaries per zone and tenant with their
//! failure, and the last progress lines of unanswered requests.

use super::Db;
use harmony_api::Health;
use harmony_control_plane::store::status::{HISTORY_PER_ZONE, PROGRESS_PER_REQUEST};
use harmony_control_plane::store::{
    NewRequest, ProgressLine, RequestScope, RequestState, ZoneState,
};

fn state(zone: &str, health: Health, since: i64) -> ZoneState {
    ZoneState {
        region: "eu".into(),
        zone: zone.into(),
        health,
        reason: format!("{health} at {since}"),
        since,
    }
}

pub(super) async fn zone_states_change_once_and_never_to_an_older_observation(db: Db) {
    let s = db.open().await;
    assert!(s.zone_states().await.unwrap().is_empty());
    assert!(
        s.record_zone_state(&state("a", Health::Unavailable, 100))
            .await
            .unwrap()
    );
    // The same health again: nothing written, the start kept.
    assert!(
        !s.record_zone_state(&state("a", Health::Unavailable, 200))
            .await
            .unwrap()
    );
    // Observed before the stored change: refused.
    assert!(
        !s.record_zone_state(&state("a", Health::Healthy, 50))
            .await
            .unwrap()
    );
    assert!(
        s.record_zone_state(&state("a", Health::Healthy, 300))
            .await
            .unwrap()
    );
    assert!(
        s.record_zone_state(&state("b", Health::Unhealthy, 10))
            .await
            .unwrap()
    );
    assert_eq!(
        s.zone_states().await.unwrap(),
        [
            state("a", Health::Healthy, 300),
            state("b", Health::Unhealthy, 10)
        ]
    );

    // Two replicas seeing the same change at once: it is written once.
    let other = db.open().await;
    let change = state("a", Health::Unhealthy, 400);
    let (one, two) = tokio::join!(
        s.record_zone_state(&change),
        other.record_zone_state(&change)
    );
    assert!(one.unwrap() ^ two.unwrap(), "exactly one writes it");
    assert_eq!(other.zone_states().await.unwrap()[0], change);

    // The history: newest first, the last ones only.
    for i in 0..30i64 {
        let health = if i % 2 == 0 {
            Health::Healthy
        } else {
            Health::Unhealthy
        };
        assert!(
            s.record_zone_state(&state("a", health, 500 + i))
                .await
                .unwrap()
        );
    }
    let history = s.zone_history("a", "a", 100).await.unwrap();
    assert!(history.is_empty(), "no region a: {history:?}");
    let history = s.zone_history("eu", "a", 100).await.unwrap();
    assert_eq!(history.len() as i64, HISTORY_PER_ZONE);
    assert_eq!(history[0], state("a", Health::Unhealthy, 529));
    assert!(history.windows(2).all(|w| w[0].since > w[1].since));
    assert_eq!(s.zone_history("eu", "b", 5).await.unwrap().len(), 1);
}

pub(super) async fn zone_states_recorded_together_apply_as_one_after_the_other(db: Db) {
    let s = db.open().await;
    assert!(
        s.record_zone_state(&state("b", Health::Unhealthy, 10))
            .await
            .unwrap()
    );
    // Zone a twice more after its first (a new health, then the same again), b older than its
    // stored state, c new: what one call after the other would answer, in order.
    let batch = [
        state("a", Health::Unavailable, 100),
        state("c", Health::Healthy, 50),
        state("a", Health::Healthy, 300),
        state("b", Health::Healthy, 5),
        state("a", Health::Healthy, 350),
    ];
    assert_eq!(
        s.record_zone_states(&batch).await.unwrap(),
        [true, true, true, false, false]
    );
    assert_eq!(
        s.zone_states().await.unwrap(),
        [
            state("a", Health::Healthy, 300),
            state("b", Health::Unhealthy, 10),
            state("c", Health::Healthy, 50),
        ]
    );
    assert_eq!(
        s.zone_history("eu", "a", 100).await.unwrap(),
        [
            state("a", Health::Healthy, 300),
            state("a", Health::Unavailable, 100)
        ]
    );
    assert!(s.record_zone_states(&[]).await.unwrap().is_empty());

    // Many zones at once, each changing over and over (so calls meet in shared statements on
    // PostgreSQL): every change recorded, each history trimmed to its last ones.
    let zones: Vec<String> = (0..40).map(|i| format!("z{i}")).collect();
    let per_zone = HISTORY_PER_ZONE + 5;
    let writers = zones.iter().map(|zone| {
        let s = s.clone();
        async move {
            let mut written = 0;
            for i in 0..per_zone {
                let health = if i % 2 == 0 {
                    Health::Healthy
                } else {
                    Health::Unhealthy
                };
                written += usize::from(
                    s.record_zone_state(&state(zone, health, 1000 + i))
                        .await
                        .unwrap(),
                );
            }
            written
        }
    });
    let written = futures::future::join_all(writers).await;
    assert!(written.iter().all(|w| *w as i64 == per_zone), "{written:?}");
    let states = s.zone_states().await.unwrap();
    for zone in &zones {
        let last = states.iter().find(|z| &z.zone == zone).expect("recorded");
        assert_eq!(last.since, 1000 + per_zone - 1);
        let history = s.zone_history("eu", zone, 100).await.unwrap();
        assert_eq!(history.len() as i64, HISTORY_PER_ZONE, "{zone}");
        assert_eq!(history[0], *last);
    }
}

fn request(id: &str, zone: &str, tenant: Option<&str>, at: i64) -> NewRequest {
    let r = NewRequest::new(id, "eu", "apply_manifests", "{}", at).in_zone(zone);
    match tenant {
        Some(t) => r.scoped(RequestScope {
            tenant: t.into(),
            project: "p".into(),
            project_json: "{}".into(),
        }),
        None => r,
    }
}

fn failed(id: &str, message: &str) -> String {
    format!(
        r#"{{"id":"{id}","ok":false,"error":{{"code":"invalid_params","message":"{message}"}}}}"#
    )
}

pub(super) async fn request_summaries_are_listed_per_zone_and_tenant_with_their_failure(db: Db) {
    let s = db.open().await;
    for i in 0..4 {
        s.submit_request(&request(&format!("q{i}"), "a", None, 100 + i))
            .await
            .unwrap();
    }
    s.submit_request(&request("acme@r1", "b", Some("acme"), 110))
        .await
        .unwrap();
    s.submit_request(&request("acme@r2", "b", Some("acme"), 111))
        .await
        .unwrap();
    s.submit_request(&request("beta@r1", "b", Some("beta"), 112))
        .await
        .unwrap();
    s.submit_request(&request("acme@old", "b", Some("acme"), 1))
        .await
        .unwrap();
    s.mark_sent("q0", 150).await.unwrap();
    assert!(
        s.complete_request("acme@r1", &failed("acme@r1", "no kind"), 200)
            .await
            .unwrap()
    );
    assert!(
        s.complete_request("beta@r1", &failed("beta@r1", "beta's"), 210)
            .await
            .unwrap()
    );
    let ok = r#"{"id":"acme@r2","ok":true,"result":{}}"#;
    assert!(s.complete_request("acme@r2", ok, 220).await.unwrap());
    assert!(
        s.complete_request("acme@old", &failed("acme@old", "long ago"), 5)
            .await
            .unwrap()
    );

    let flight = s.unanswered_summaries(None, 2).await.unwrap();
    let ids: Vec<&str> = flight.iter().map(|r| r.id.as_str()).collect();
    assert_eq!(ids, ["q0", "q1"], "the oldest two of zone a");
    assert!(flight.iter().all(|r| r.zone_total == 4 && r.zone == "a"));
    assert_eq!(
        (flight[0].state, flight[0].sent_at),
        (RequestState::Sent, Some(150))
    );
    assert_eq!(flight[1].state, RequestState::Queued);
    assert!(
        s.unanswered_summaries(Some("acme"), 5)
            .await
            .unwrap()
            .is_empty()
    );

    let all = s.recent_failures(None, 100, 5).await.unwrap();
    let ids: Vec<&str> = all.iter().map(|r| r.id.as_str()).collect();
    assert_eq!(
        ids,
        ["beta@r1", "acme@r1"],
        "newest first, the window's only"
    );
    assert_eq!(all[1].error.as_deref(), Some("invalid_params: no kind"));
    assert_eq!(all[1].tenant.as_deref(), Some("acme"));
    assert_eq!((all[1].completed_at, all[1].zone_total), (Some(200), 2));
    let acme = s.recent_failures(Some("acme"), 0, 5).await.unwrap();
    let ids: Vec<&str> = acme.iter().map(|r| r.id.as_str()).collect();
    assert_eq!(ids, ["acme@r1", "acme@old"], "acme's only");
    assert_eq!(s.recent_failures(None, 0, 1).await.unwrap().len(), 1);

    // A cancelled request carries its error too; a pruned one is gone from the lists.
    s.submit_request(&request("q9", "c", None, 300))
        .await
        .unwrap();
    assert!(
        s.cancel_request("q9", &failed("q9", "decommissioned"), 310)
            .await
            .unwrap()
    );
    let c = s.recent_failures(None, 300, 5).await.unwrap();
    assert_eq!(c[0].state, RequestState::Cancelled);
    s.prune_requests(1_000).await.unwrap();
    assert!(s.recent_failures(None, 0, 5).await.unwrap().is_empty());
}

fn line(at: i64) -> ProgressLine {
    ProgressLine {
        at,
        stage: "applying".into(),
        detail: format!("line at {at}"),
    }
}

pub(super) async fn progress_keeps_the_last_lines_of_unanswered_requests_of_their_zone(db: Db) {
    let s = db.open().await;
    s.submit_request(&request("p1", "a", None, 1))
        .await
        .unwrap();
    for n in 0..8u64 {
        assert!(
            s.add_progress("p1", "eu", "a", n, &line(10 + n as i64))
                .await
                .unwrap()
        );
    }
    assert!(
        !s.add_progress("p1", "eu", "b", 8, &line(99)).await.unwrap(),
        "another zone's agent"
    );
    assert!(
        !s.add_progress("nope", "eu", "a", 0, &line(99))
            .await
            .unwrap(),
        "no such request"
    );
    let lines = s.progress("p1").await.unwrap();
    assert_eq!(lines.len() as u64, PROGRESS_PER_REQUEST);
    assert_eq!(
        lines,
        (13..18).map(line).collect::<Vec<_>>(),
        "the last five, oldest first"
    );

    assert!(
        s.complete_request("p1", r#"{"id":"p1","ok":true}"#, 50)
            .await
            .unwrap()
    );
    assert!(
        !s.add_progress("p1", "eu", "a", 9, &line(60)).await.unwrap(),
        "answered"
    );
    assert_eq!(
        s.progress("p1").await.unwrap().len(),
        5,
        "kept while the request is"
    );
    s.prune_requests(100).await.unwrap();
    assert!(
        s.progress("p1").await.unwrap().is_empty(),
        "pruned with its request"
    );
}

/// A turn (`take_turn`) is held by one holder at a time: kept and renewed by it, refused to
/// another while its lease runs, taken by another once it ran out; two replicas asking at once
/// get it once.
pub(super) async fn a_turn_is_held_by_one_holder_until_its_lease_runs_out(db: Db) {
    let s = db.open().await;
    let other = db.open().await;
    assert!(s.take_turn("sweep", "cp-0", 1_000, 100).await.unwrap());
    assert!(!other.take_turn("sweep", "cp-1", 1_050, 100).await.unwrap());
    // Renewed by its holder: until 1,160 now.
    assert!(s.take_turn("sweep", "cp-0", 1_060, 100).await.unwrap());
    assert!(!other.take_turn("sweep", "cp-1", 1_150, 100).await.unwrap());
    // Another job is another turn.
    assert!(other.take_turn("prune", "cp-1", 1_150, 100).await.unwrap());
    // The lease ran out: the other takes it, and the first no longer has it.
    assert!(other.take_turn("sweep", "cp-1", 1_160, 100).await.unwrap());
    assert!(!s.take_turn("sweep", "cp-0", 1_170, 100).await.unwrap());
    // Asked at once by two once free: one gets it.
    let (one, two) = tokio::join!(
        s.take_turn("sweep", "cp-0", 5_000, 100),
        other.take_turn("sweep", "cp-2", 5_000, 100)
    );
    assert!(one.unwrap() ^ two.unwrap(), "exactly one takes it");
}
