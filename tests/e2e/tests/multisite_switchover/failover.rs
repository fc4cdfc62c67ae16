//! Failover: refused without --yes and no terminal, the plan, the promotion of the most advanced
//! replica with the data-loss sentence, and the fencing of the former primary when it returns.

use serde_json::{Value, json};
use std::time::Duration;

use harmony::domain::operator::{OperatorHandle, Unattended};
use harmony::domain::{RunContext, ScoreStatus};
use harmony_modules::postgresql::PostgreSQLFailoverScore;

use super::*;

#[tokio::test(flavor = "multi_thread")]
async fn failover_promotes_the_most_advanced_replica_names_the_lost_writes_and_fences_the_old_primary_with_the_test_playing_cnpg()
 {
    let pg = start_pg();
    let (paris, newyork, tokyo) = (
        site("site-paris", PARIS),
        site("site-newyork", NEWYORK),
        site("site-tokyo", TOKYO),
    );
    let all = [&paris, &newyork, &tokyo];
    prepare(&all, Some(&pg)).await;
    pg.sql(0, "CREATE TABLE before_failover AS SELECT 1 AS id")
        .unwrap();
    caught_up(&pg).await;
    let replayed = pg.sql(1, "SELECT pg_last_wal_replay_lsn()").unwrap();
    let before: Vec<Value> = all.iter().map(|s| cluster(s)["spec"].clone()).collect();
    let mut score = PostgreSQLFailoverScore::new(&multisite(&all));
    score.status_connect_to = connect_to(&pg);
    score.poll_interval = Duration::from_millis(100);
    // site-paris is lost: the topology has only the sites that can still be reached.
    let reachable = [&newyork, &tokyo];

    // No terminal and no --yes: refused before anything changes, naming the flag.
    let report = run(topology(&reachable, &RunContext::default()), score.clone()).await;
    assert_eq!(report.status, ScoreStatus::Failed, "{report:?}");
    let message = text(&report);
    assert!(
        message.contains("--yes") && message.contains("nothing was changed"),
        "{message}"
    );
    reported(&message, "up to ", &replayed);
    let now: Vec<Value> = all.iter().map(|s| cluster(s)["spec"].clone()).collect();
    assert_eq!(now, before);

    // A plan names the replica, the position and the loss, and changes nothing.
    let plan = RunContext {
        plan: true,
        ..RunContext::default()
    };
    let report = run(topology(&reachable, &plan), score.clone()).await;
    assert_eq!(report.status, ScoreStatus::Success, "{report:?}");
    let details = report.details.join("\n");
    let at = reported(&details, "site-paris accepted after ", &replayed);
    assert!(details.contains(&format!("plan: site-newyork would be promoted; writes that site-paris accepted after {at} (the last position site-newyork had replayed) may be lost")), "{details}");
    assert!(details.contains("not chosen: site-tokyo:"), "{details}");
    let now: Vec<Value> = all.iter().map(|s| cluster(s)["spec"].clone()).collect();
    assert_eq!(now, before);

    // --yes: site-newyork is promoted without a token, site-tokyo follows it.
    let yes = OperatorHandle::new(Unattended { assume_yes: true });
    let score = score.with_operator(yes);
    let running = tokio::spawn(run(
        topology(&reachable, &RunContext::default()),
        score.clone(),
    ));
    let promoted = wait_primary_named(&newyork, "site-newyork").await;
    assert_eq!(
        promoted["spec"]["replica"],
        replica("site-newyork", "site-newyork", "site-paris")
    );
    assert_eq!(rest(&promoted["spec"]), rest(&before[1]));
    // THE TEST PLAYS CLOUDNATIVE-PG: the instance manager promotes, the operator reports it.
    assert_eq!(pg.sql(1, "SELECT pg_promote(true, 60)").unwrap(), "t");
    status(&newyork, json!({"timelineID": 2}));
    let report = running.await.unwrap();
    assert_eq!(report.status, ScoreStatus::Success, "{report:?}");
    let details = report.details.join("\n");
    let at = reported(&details, "site-paris accepted after ", &replayed);
    for part in [
        format!(
            "DATA LOSS WARNING: writes that site-paris accepted after {at} (the last position site-newyork had replayed) may be lost"
        ),
        "site-paris is NOT fenced: it cannot be reached (not in the topology)".to_string(),
        "set topology.primary.site to \"site-newyork\"".to_string(),
    ] {
        assert!(details.contains(&part), "{part}: {details}");
    }
    let followed = cluster(&tokyo);
    assert_eq!(
        followed["spec"]["replica"],
        replica("site-newyork", "site-tokyo", "site-newyork")
    );
    assert_eq!(rest(&followed["spec"]), rest(&before[2]));
    assert_eq!(
        cluster(&paris)["spec"],
        before[0],
        "site-paris was out of reach"
    );

    // site-paris comes back still naming itself primary: the newer timeline wins and it is fenced.
    let report = run(topology(&all, &RunContext::default()), score.clone()).await;
    assert_eq!(report.status, ScoreStatus::Success, "{report:?}");
    let fenced = cluster(&paris);
    assert_eq!(
        fenced["spec"]["replica"],
        replica("site-newyork", "site-paris", "site-newyork")
    );
    assert_eq!(rest(&fenced["spec"]), rest(&before[0]));
    assert!(
        report
            .details
            .join("\n")
            .contains("site-paris named another primary: it now follows site-newyork"),
        "{report:?}"
    );
    let report = run(topology(&all, &RunContext::default()), score).await;
    assert_eq!(report.status, ScoreStatus::Noop, "{report:?}");
    assert!(
        report
            .message
            .contains("site-newyork is the primary and answers"),
        "{report:?}"
    );
    assert_eq!(
        pg.sql(1, "SELECT count(*) FROM before_failover").unwrap(),
        "1"
    );
}

/// A WAL position (`X/Y`, hexadecimal) as one number.
fn lsn(text: &str) -> u64 {
    let (hi, lo) = text
        .split_once('/')
        .unwrap_or_else(|| panic!("{text:?} is not a WAL position"));
    (u64::from_str_radix(hi, 16).unwrap() << 32) | u64::from_str_radix(lo, 16).unwrap()
}

/// The WAL position `text` names right after `after`, checked to be at least `measured` (what
/// the test read from the replica before the Score ran: the replica goes on replaying, e.g. a
/// checkpoint's records, so the Score's own later measurement may be further).
fn reported(text: &str, after: &str, measured: &str) -> String {
    let start = text
        .find(after)
        .unwrap_or_else(|| panic!("no {after:?} in: {text}"))
        + after.len();
    let position: String = text[start..]
        .chars()
        .take_while(|c| c.is_ascii_hexdigit() || *c == '/')
        .collect();
    assert!(
        lsn(&position) >= lsn(measured),
        "the Score names {position}, before the {measured} the replica had already replayed: {text}"
    );
    position
}
