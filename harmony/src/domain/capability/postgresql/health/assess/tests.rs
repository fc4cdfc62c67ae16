use super::super::{ClusterStatus, Lsn};
use super::*;

fn cluster(replica_mode: bool) -> Reading<ClusterStatus> {
    Reading::Read(ClusterStatus {
        phase: Some("Cluster in healthy state".into()),
        ready_instances: Some(1),
        instances: Some(1),
        replica_mode,
        current_primary: Some("finance-db-1".into()),
        system_id: Some("7711".into()),
    })
}

fn primary_at(lsn: u64) -> SiteObservation {
    SiteObservation {
        cluster: cluster(false),
        sql: Reading::Read(SqlReading {
            system_id: "7711".into(),
            clock_epoch: 1000.0,
            current_lsn: Some(Lsn(lsn)),
            wal_senders: 1,
            ..SqlReading::default()
        }),
        exposed: true,
    }
}

fn replica_at(lsn: u64, edit: impl FnOnce(&mut SqlReading)) -> SiteObservation {
    let mut r = SqlReading {
        in_recovery: true,
        system_id: "7711".into(),
        clock_epoch: 1003.0,
        receive_lsn: Some(Lsn(lsn)),
        replay_lsn: Some(Lsn(lsn)),
        replay_pause_state: Some("not paused".into()),
        last_replayed_commit_epoch: Some(990.0),
        wal_receiver_running: true,
        ..SqlReading::default()
    };
    edit(&mut r);
    SiteObservation {
        cluster: cluster(true),
        sql: Reading::Read(r),
        exposed: true,
    }
}

fn one(max: u64, p: SiteObservation, r: SiteObservation) -> ReplicationReport {
    ReplicationReport::assess(max, ("site-paris", &p), &[("site-newyork".into(), r)])
}

#[test]
fn lsn_reads_and_prints_postgresql_text() {
    let l = Lsn::parse("16/B374D848").unwrap();
    assert_eq!(l.0, 0x16_B374_D848);
    assert_eq!(l.to_string(), "16/B374D848");
    assert_eq!(Lsn::parse("0/0").unwrap(), Lsn(0));
    assert!(
        Lsn::parse("B374D848")
            .unwrap_err()
            .contains("not a WAL position")
    );
    assert!(Lsn::parse("1/G").is_err());
    assert_eq!(Lsn(10).bytes_after(Lsn(4)), 6);
    assert_eq!(Lsn(4).bytes_after(Lsn(10)), 0);
}

#[test]
fn a_caught_up_replica_lags_zero_bytes_and_zero_seconds_even_when_idle() {
    let report = one(0, primary_at(5000), replica_at(5000, |_| {}));
    let r = &report.sites[1];
    assert_eq!(r.streaming, Some(Streaming::Streaming));
    assert_eq!((r.lag_bytes, r.lag_seconds), (Some(0), Some(0.0)));
    assert!(report.replicas_ready(), "{:?}", report.shortfalls());
}

#[test]
fn a_lagging_replica_counts_bytes_and_seconds_since_its_last_replayed_commit() {
    let report = one(100, primary_at(5000), replica_at(4000, |_| {}));
    let r = &report.sites[1];
    assert_eq!(r.lag_bytes, Some(1000));
    // The primary's clock (1000) minus the last replayed commit (990), not the replica's clock.
    assert_eq!(r.lag_seconds, Some(10.0));
    let short = report.shortfalls();
    assert_eq!(short.len(), 1);
    assert!(
        short[0].starts_with("site-newyork: streams but lags 1000 bytes, more than the 100"),
        "{short:?}"
    );
    assert!(one(1000, primary_at(5000), replica_at(4000, |_| {})).replicas_ready());
}

#[test]
fn paused_replay_no_receiver_promotion_and_another_system_do_not_stream() {
    type Edit = fn(&mut SqlReading);
    let cases: [(Edit, &str); 4] = [
        (
            |r| r.replay_pause_state = Some("paused".into()),
            "WAL replay is paused",
        ),
        (|r| r.wal_receiver_running = false, "no WAL receiver runs"),
        (|r| r.in_recovery = false, "pg_is_in_recovery() is false"),
        (
            |r| r.system_id = "42".into(),
            "differs from the primary's 7711",
        ),
    ];
    for (edit, expected) in cases {
        let report = one(u64::MAX, primary_at(5000), replica_at(5000, edit));
        match &report.sites[1].streaming {
            Some(Streaming::NotStreaming(why)) => assert!(why.contains(expected), "{why}"),
            other => panic!("expected not streaming ({expected}), got {other:?}"),
        }
        assert!(report.shortfalls()[0].starts_with("site-newyork: not streaming: "));
    }
}

#[test]
fn what_was_not_read_is_unknown_and_says_why_never_ready() {
    let unexposed = SiteObservation {
        cluster: cluster(true),
        sql: Reading::NotRead("the replica on this site is not exposed".into()),
        exposed: false,
    };
    let report = one(u64::MAX, primary_at(5000), unexposed);
    let r = &report.sites[1];
    assert_eq!(r.phase.as_deref(), Some("Cluster in healthy state"));
    assert_eq!(
        r.streaming,
        Some(Streaming::Unknown(
            "the replica on this site is not exposed".into()
        ))
    );
    assert_eq!(r.lag_bytes, None);
    assert!(!report.replicas_ready());
    // An apply settles for a healthy Cluster there, and names the replica as unverified.
    assert!(report.settled(), "{:?}", report.unsettled());
    assert_eq!(report.unverified(), ["site-newyork"]);
    let mut starting = report.clone();
    starting.sites[1].ready_instances = Some(0);
    assert!(!starting.settled());
    assert!(
        starting.unsettled()[0].contains("0 of 1 instances ready"),
        "{:?}",
        starting.unsettled()
    );

    let mut primary = primary_at(5000);
    primary.sql = Reading::NotRead("cannot reach finance-db.example.com:443".into());
    let report = one(u64::MAX, primary, replica_at(5000, |_| {}));
    let short = report.shortfalls();
    assert!(
        short[0].contains("its lag is unknown")
            && short[0].contains("cannot reach finance-db.example.com:443"),
        "{short:?}"
    );
}

#[test]
fn a_primary_in_recovery_is_named() {
    let mut p = primary_at(5000);
    if let Reading::Read(r) = &mut p.sql {
        r.in_recovery = true;
    }
    let report = one(u64::MAX, p, replica_at(5000, |_| {}));
    assert!(
        report.shortfalls()[0].starts_with("site-paris (primary): not a primary"),
        "{:?}",
        report.shortfalls()
    );
}

#[test]
fn the_table_is_aligned_and_carries_the_figures() {
    let report = one(100, primary_at(5000), replica_at(4000, |_| {}));
    let t = report.table();
    assert_eq!(
        t[0],
        "SITE          ROLE     PHASE                     READY  STREAMING  LAG BYTES  LAG S  WAL LSN"
    );
    assert_eq!(
        t[1],
        "site-paris    primary  Cluster in healthy state  1/1    -          -          -      0/1388"
    );
    assert_eq!(
        t[2],
        "site-newyork  replica  Cluster in healthy state  1/1    yes        1000       10.0   0/FA0"
    );
    let json = serde_json::to_value(&report).unwrap();
    assert_eq!(json["sites"][1]["lag_bytes"], 1000);
    assert_eq!(json["sites"][1]["streaming"]["state"], "streaming");
    assert_eq!(json["sites"][1]["lsn"], "0/FA0");
}
