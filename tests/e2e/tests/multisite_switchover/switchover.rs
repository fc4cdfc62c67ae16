//! Switchover: the lag refusal, the plan, the token handshake, the re-run; refusals that change
//! nothing.

use base64::Engine;
use base64::engine::general_purpose::STANDARD;
use serde_json::json;
use std::time::Duration;

use harmony::domain::capability::{ApplyOptions, K8sClient, K8sObject};
use harmony::domain::{ChangeAction, RunContext, ScoreStatus, Topology};
use harmony_modules::postgresql::{
    LivePrimary, MultisitePostgreSQLScore, PostgreSQLSwitchoverScore, live_primary,
};

use super::*;

/// A demotion token as CloudNativePG writes it: base64 of pg_controldata's checkpoint fields,
/// here read from the real primary.
fn demotion_token(pg: &Replicated) -> String {
    let row = pg
        .sql(0, "SELECT (SELECT system_identifier FROM pg_control_system()), timeline_id, redo_lsn, redo_wal_file, checkpoint_time FROM pg_control_checkpoint()")
        .unwrap();
    let f: Vec<&str> = row.split('|').collect();
    STANDARD.encode(
        json!({"databaseSystemIdentifier": f[0], "latestCheckpointTimelineID": f[1],
        "latestCheckpointREDOLocation": f[2], "latestCheckpointREDOWALFile": f[3],
        "timeOfLatestCheckpoint": f[4], "operatorVersion": "1.30.0"})
        .to_string(),
    )
}

#[tokio::test(flavor = "multi_thread")]
async fn switchover_refuses_a_lagging_target_then_hands_over_with_the_demotion_token_with_the_test_playing_cnpg()
 {
    let mut pg = start_pg();
    let (paris, newyork) = (site("site-paris", PARIS), site("site-newyork", NEWYORK));
    let sites = [&paris, &newyork];
    prepare(&sites, Some(&pg)).await;
    let before = (
        cluster(&paris)["spec"].clone(),
        cluster(&newyork)["spec"].clone(),
    );
    let mut score = PostgreSQLSwitchoverScore::new(&multisite(&sites), "site-newyork");
    score.status_connect_to = connect_to(&pg);
    score.poll_interval = Duration::from_millis(100);
    score.spec.max_replica_lag_bytes = 1024 * 1024;

    // A real lag: the standby streams but holds back a commit, and the WAL after it, for an hour.
    pg.sql(1, "ALTER SYSTEM SET recovery_min_apply_delay = '1h'")
        .unwrap();
    pg.sql(1, "SELECT pg_reload_conf()").unwrap();
    pg.sql(0, "CREATE TABLE before_switchover (id int, pad text)")
        .unwrap();
    pg.sql(
        0,
        "INSERT INTO before_switchover SELECT g, repeat('x', 200) FROM generate_series(1, 20000) g",
    )
    .unwrap();
    let report = run(topology(&sites, &RunContext::default()), score.clone()).await;
    assert_eq!(report.status, ScoreStatus::Failed, "{report:?}");
    let message = text(&report);
    for part in [
        "maxReplicaLagBytes",
        "site-newyork is ",
        "MiB) behind site-paris",
        "1048576 bytes (1.0 MiB) allowed",
        "nothing was changed",
    ] {
        assert!(message.contains(part), "{part}: {message}");
    }
    assert_eq!(
        (
            cluster(&paris)["spec"].clone(),
            cluster(&newyork)["spec"].clone()
        ),
        before,
        "a refusal changes nothing"
    );

    pg.sql(1, "ALTER SYSTEM RESET recovery_min_apply_delay")
        .unwrap();
    pg.sql(1, "SELECT pg_reload_conf()").unwrap();
    caught_up(&pg).await;

    // A plan shows the first step only, and changes nothing.
    let plan = RunContext {
        plan: true,
        ..RunContext::default()
    };
    let report = run(topology(&sites, &plan), score.clone()).await;
    assert_eq!(report.status, ScoreStatus::Success, "{report:?}");
    assert!(
        report
            .details
            .iter()
            .any(|d| d.starts_with("plan: once site-paris is demoted")),
        "{report:?}"
    );
    let planned: Vec<_> = report
        .changes
        .iter()
        .filter(|c| c.action != ChangeAction::Unchanged)
        .collect();
    assert_eq!(planned.len(), 1, "{report:?}");
    assert_eq!(
        planned[0].object,
        "postgresql.cnpg.io/v1 Cluster tenant-a/finance-db"
    );
    assert!(
        planned[0]
            .location
            .as_deref()
            .unwrap()
            .starts_with("site-paris")
    );
    let diff: Vec<(&str, Option<&str>)> = planned[0]
        .diff
        .iter()
        .map(|d| (d.path.as_str(), d.new.as_deref()))
        .collect();
    assert_eq!(
        diff,
        [("spec.replica.primary", Some("\"finance-db-site-newyork\""))]
    );
    assert_eq!(
        (
            cluster(&paris)["spec"].clone(),
            cluster(&newyork)["spec"].clone()
        ),
        before
    );

    assert_eq!(
        live(&sites).await,
        LivePrimary::Primary("site-paris".into())
    );
    let t = topology(&sites, &RunContext::default());
    let running = tokio::spawn(run(t, score.clone()));
    // 1. Demotion: site-paris's Cluster names site-newyork; nothing else changes anywhere.
    let demoted = wait_primary_named(&paris, "site-newyork").await;
    assert_eq!(
        demoted["spec"]["replica"],
        replica("site-newyork", "site-paris", "site-newyork")
    );
    assert_eq!(rest(&demoted["spec"]), rest(&before.0));
    assert_eq!(
        cluster(&newyork)["spec"],
        before.1,
        "site-newyork waits for the token"
    );
    // THE TEST PLAYS CLOUDNATIVE-PG: the transition runs, then the token is published.
    status(
        &paris,
        json!({"switchReplicaClusterStatus": {"inProgress": true}}),
    );
    let switching = LivePrimary::Switching {
        from: Some("site-paris".into()),
        to: Some("site-newyork".into()),
    };
    assert_eq!(live(&sites).await, switching);
    let token = demotion_token(&pg);
    status(
        &paris,
        json!({"switchReplicaClusterStatus": {"inProgress": false}, "demotionToken": token,
        "conditions": [{"type": "ReplicaClusterSwitch", "status": "True", "reason": "ReplicaEnabledSetTrue",
                        "message": "Completed the Replica cluster transition", "lastTransitionTime": "2026-01-01T00:00:00Z"}]}),
    );
    // 2. Promotion: site-newyork names itself with the token; site-paris stays as demoted.
    let promoted = wait_primary_named(&newyork, "site-newyork").await;
    let mut expected = replica("site-newyork", "site-newyork", "site-paris");
    expected["promotionToken"] = json!(token);
    assert_eq!(promoted["spec"]["replica"], expected);
    assert_eq!(rest(&promoted["spec"]), rest(&before.1));
    assert_eq!(cluster(&paris)["spec"], demoted["spec"]);
    // THE TEST PLAYS CLOUDNATIVE-PG's instance managers: promote the standby, rewind the former
    // primary into a standby of it, and report the promotion.
    pg.switch_over().unwrap_or_else(|e| panic!("{e}"));
    status(
        &newyork,
        json!({"lastPromotionToken": token, "timelineID": 2}),
    );
    status(&paris, json!({"timelineID": 2}));

    let report = running.await.unwrap();
    assert_eq!(report.status, ScoreStatus::Success, "{report:?}");
    let details = report.details.join("\n");
    for part in [
        "site-newyork is the primary",
        "no write was lost",
        "site-paris streams from site-newyork",
        "set topology.primary.site to \"site-newyork\"",
    ] {
        assert!(details.contains(part), "{part}: {details}");
    }
    // The rows written on site-paris before are on site-newyork, which takes writes now.
    assert_eq!(
        pg.sql(1, "SELECT count(*) FROM before_switchover").unwrap(),
        "20000"
    );
    pg.sql(1, "INSERT INTO before_switchover VALUES (0, 'after')")
        .unwrap();

    // Done: a re-run changes nothing.
    let after = (
        cluster(&paris)["spec"].clone(),
        cluster(&newyork)["spec"].clone(),
    );
    let report = run(topology(&sites, &RunContext::default()), score).await;
    assert_eq!(report.status, ScoreStatus::Noop, "{report:?}");
    assert_eq!(report.message, "site-newyork is already the primary");
    assert_eq!(
        live(&sites).await,
        LivePrimary::Primary("site-newyork".into())
    );
    assert_eq!(
        (
            cluster(&paris)["spec"].clone(),
            cluster(&newyork)["spec"].clone()
        ),
        after
    );

    // The old declaration is refused (it would promote site-paris without a token); the new one
    // applies, dropping only the used promotion token.
    let mut old = multisite(&sites);
    old.spec.wait_for_streaming = false;
    let report = run(topology(&sites, &RunContext::default()), old).await;
    assert_eq!(report.status, ScoreStatus::Failed, "{report:?}");
    let message = &report.message;
    assert!(
        message.contains("the live primary is site-newyork"),
        "{message}"
    );
    assert!(
        message.contains("set topology.primary.site to \"site-newyork\""),
        "{message}"
    );
    assert_eq!(
        (
            cluster(&paris)["spec"].clone(),
            cluster(&newyork)["spec"].clone()
        ),
        after
    );
    let mut declared = MultisitePostgreSQLScore::new(
        "finance-db",
        "tenant-a",
        "10Gi",
        "site-newyork",
        NEWYORK,
        &["site-paris"],
    );
    declared
        .spec
        .topology
        .replica_hosts
        .insert("site-paris".into(), PARIS.into());
    declared.spec.wait_for_streaming = false;
    let report = run(topology(&sites, &RunContext::default()), declared).await;
    assert_eq!(report.status, ScoreStatus::Success, "{report:?}");
    assert_eq!(cluster(&paris)["spec"], after.0);
    let mut expected = after.1.clone();
    expected["replica"]
        .as_object_mut()
        .unwrap()
        .remove("promotionToken");
    assert_eq!(cluster(&newyork)["spec"], expected);
}

#[tokio::test(flavor = "multi_thread")]
async fn switchover_refuses_standalone_replica_clusters_and_an_unmeasured_lag_changing_nothing() {
    let (paris, newyork) = (site("site-paris", PARIS), site("site-newyork", NEWYORK));
    let sites = [&paris, &newyork];
    // The old shape (`spec.replica.enabled`), as MultisitePostgreSQLScore rendered it before.
    let mut old = multisite(&sites);
    old.spec.wait_for_streaming = false;
    old.spec.credentials_timeout_seconds = 0;
    let mut switchover = PostgreSQLSwitchoverScore::new(&old, "site-newyork");
    switchover.poll_interval = Duration::from_millis(100);
    for s in &sites {
        let k8s = s.server.topology("cnpg", &RunContext::default());
        k8s.ensure_ready().await.unwrap();
        let c = json!({"apiVersion": "postgresql.cnpg.io/v1", "kind": "Cluster",
            "metadata": {"name": "finance-db", "namespace": "tenant-a"},
            "spec": {"instances": 1, "storage": {"size": "10Gi"},
                     "replica": {"enabled": s.name != "site-paris", "source": "finance-db-site-paris"},
                     "externalClusters": [{"name": "finance-db-site-paris", "connectionParameters": {"host": PARIS}}]}});
        k8s.apply(&[K8sObject::new(c).unwrap()], &ApplyOptions::default())
            .await
            .unwrap();
    }
    let before = cluster(&newyork)["spec"].clone();
    assert_eq!(live(&sites).await, LivePrimary::NotDistributed);
    let report = run(topology(&sites, &RunContext::default()), switchover.clone()).await;
    assert_eq!(report.status, ScoreStatus::Failed, "{report:?}");
    let message = text(&report);
    assert!(
        message.contains("not in CloudNativePG's distributed topology"),
        "{message}"
    );
    assert!(
        message.contains("apply MultisitePostgreSQLScore first"),
        "{message}"
    );
    assert_eq!(cluster(&newyork)["spec"], before);

    // The distributed shape, but nothing measurable behind the hosts: no figure, no switchover.
    let (paris, newyork) = (site("site-paris", PARIS), site("site-newyork", NEWYORK));
    let sites = [&paris, &newyork];
    prepare(&sites, None).await;
    let before = (
        cluster(&paris)["spec"].clone(),
        cluster(&newyork)["spec"].clone(),
    );
    let report = run(topology(&sites, &RunContext::default()), switchover).await;
    assert_eq!(report.status, ScoreStatus::Failed, "{report:?}");
    let message = text(&report);
    assert!(
        message.contains("the lag of site-newyork behind site-paris cannot be measured"),
        "{message}"
    );
    assert!(message.contains("nothing was changed"), "{message}");
    assert_eq!(
        (
            cluster(&paris)["spec"].clone(),
            cluster(&newyork)["spec"].clone()
        ),
        before
    );
}

/// Where `live_primary` (what the operator reads before each apply) sees the primary now.
async fn live(sites: &[&Site]) -> LivePrimary {
    let t = topology(sites, &RunContext::default());
    t.ensure_ready().await.unwrap();
    live_primary(&multisite(sites), &t)
        .await
        .unwrap_or_else(|e| panic!("{e}"))
}
