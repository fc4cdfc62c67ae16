//! `RegionAgentRolloutScore` for a region with two zones: each zone a real kube-apiserver
//! fixture reached through its direct kubeconfig (a `RegionSiteTopology`), one real control
//! plane. Zone a's rollout creates the region; zone b's rollout, on the existing and
//! bootstrapped region, adds zone b and delivers zone b's own bootstrap token, then waits on zone
//! b's health (not the region's, which zone a keeps healthy). The fixture has no kubelet, so the
//! test plays one, as `multi_region_rollout.rs` does: it starts each agent process from the
//! ConfigMap and Secret the Score applied, with the identity kept in a Secret of the agent's
//! namespace.
//!
//! Run: `cargo test -p harmony_e2e --test multi_region_rollout_zones` (needs the kube-apiserver
//! fixture: `HARMONY_KUBE_FIXTURE=$(bash tests/kube-fixture/build.sh | tail -n 1)`).

mod rollout_support;

use std::sync::Arc;
use std::time::Duration;

use harmony::domain::{ChangeAction, ScoreReport, ScoreStatus};
use harmony::infra::control_plane::Health;
use harmony::types::{Dns1123Label, RegionId, ZoneId};
use harmony_e2e::ApiServer;
use harmony_e2e::eventually::eventually;
use harmony_e2e::multi_region::ControlPlaneOptions;
use harmony_e2e::world::{World, WorldOptions};
use harmony_modules::region::{IDENTITY_SECRET, RegionAgentRolloutScore};
use rollout_support::{kubectl_json, kubelet, run};

const IMAGE: &str = "registry.example.com/harmony-agent:test";
const WAIT: Duration = Duration::from_secs(90);

fn score(zone: &str) -> RegionAgentRolloutScore {
    RegionAgentRolloutScore::new(
        RegionId::parse("eu").unwrap(),
        ZoneId::parse(zone).unwrap(),
        IMAGE,
    )
}

/// The control-plane changes of a report (object, action).
fn control_plane_changes(report: &ScoreReport) -> Vec<(&str, ChangeAction)> {
    report
        .changes
        .iter()
        .filter(|c| c.object.starts_with("control-plane "))
        .map(|c| (c.object.as_str(), c.action))
        .collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_second_zone_of_a_bootstrapped_region_gets_its_own_token_and_is_waited_for() {
    // Zone a's cluster is the world's API server; zone b's, a second one (a world has one).
    let w = Arc::new(World::start(
        harmony_e2e::bins!(),
        WorldOptions {
            // Generous health thresholds: a busy machine must not make a live agent look late.
            control_plane: ControlPlaneOptions {
                unhealthy_after_ms: 5_000,
                unavailable_after_ms: 10_000,
                ..ControlPlaneOptions::default()
            },
            ..WorldOptions::default()
        },
    ));
    let server_a = &w.server;
    let server_b = Arc::new(ApiServer::start().unwrap_or_else(|e| panic!("{e}")));
    let zone = |z: &str| score(z).with_ca_pem(w.pki().ca_pem.clone()).with_wait(WAIT);

    // Zone a: the region does not exist; the rollout creates it with zone a.
    let rollout_a = {
        let (w, score) = (w.clone(), zone("a"));
        tokio::spawn(async move { run(&w.server, w.client.clone(), score).await })
    };
    let (agent_a, token_a) = kubelet(&w, server_a, "eu-a").await;
    let report_a = rollout_a.await.unwrap();
    assert_eq!(
        report_a.status,
        ScoreStatus::Success,
        "{report_a:#?}\n{}",
        agent_a.log()
    );
    assert_eq!(
        control_plane_changes(&report_a),
        [("control-plane Region eu", ChangeAction::Create)]
    );

    // Zone b: the region exists and zone a's agent holds an identity. The rollout adds zone b
    // and delivers zone b's own token (the kubelet finds a bootstrap Secret on server b).
    let rollout_b = {
        let (server, client, score) = (server_b.clone(), w.client.clone(), zone("b"));
        tokio::spawn(async move { run(&server, client, score).await })
    };
    let (agent_b, token_b) = kubelet(&w, &server_b, "eu-b").await;
    assert_ne!(token_a, token_b, "zone b was given zone a's token");
    let report_b = rollout_b.await.unwrap();
    assert_eq!(
        report_b.status,
        ScoreStatus::Success,
        "{report_b:#?}\n{}",
        agent_b.log()
    );
    assert_eq!(
        control_plane_changes(&report_b),
        [("control-plane Zone eu/b", ChangeAction::Create)]
    );
    assert!(
        report_b
            .details
            .iter()
            .any(|d| d.contains("region eu zone b healthy")),
        "{:?}",
        report_b.details
    );
    assert!(!format!("{report_b:?}").contains(&token_b[4..]));
    // Zone b's agent keeps its identity in its own cluster.
    assert!(
        kubectl_json(
            &server_b,
            &[
                "get",
                "secret",
                IDENTITY_SECRET,
                "-n",
                "harmony-agent",
                "-o",
                "json"
            ],
        )
        .is_some(),
        "no identity Secret on zone b's server:\n{}",
        agent_b.log()
    );

    // Both zones end healthy in GET /v1/regions, each through its own agent.
    let admin = &w.client;
    let eu = eventually(WAIT, "zones a and b both healthy", || async {
        let regions = admin.regions().await.unwrap_or_else(|e| panic!("{e}"));
        let eu = regions
            .iter()
            .find(|r| r.region == "eu")
            .cloned()
            .unwrap_or_else(|| panic!("no region eu in {regions:#?}"));
        let health = |z: &str| eu.zone(z).map(|v| v.health);
        if health("a") == Some(Health::Healthy) && health("b") == Some(Health::Healthy) {
            Ok(eu)
        } else {
            Err(eu)
        }
    })
    .await
    .unwrap_or_else(|e| panic!("{e}\n{}", w.cp().logs()));
    assert_eq!(eu.health, Health::Healthy);
    let b = eu.zone("b").unwrap();
    assert_eq!(b.bootstrapped, Some(true), "{eu:#?}");
    assert!(b.agent_version.is_some(), "{eu:#?}");

    // Idempotent: a second run of zone b's rollout mints no token and changes nothing.
    let again = run(&server_b, w.client.clone(), zone("b")).await;
    assert_eq!(again.status, ScoreStatus::Noop, "{again:#?}");
    assert!(
        again
            .changes
            .iter()
            .all(|c| c.action == ChangeAction::Unchanged),
        "{:#?}",
        again.changes
    );
    let logs = w.cp().logs();
    assert_eq!(
        logs.matches("minted a bootstrap token for region eu zone b ")
            .count(),
        1,
        "{logs}"
    );
    assert_eq!(
        logs.matches("minted a bootstrap token for region eu zone a ")
            .count(),
        1,
        "{logs}"
    );

    // The wait is the zone's: a zone c whose agent never comes times out while the region is
    // healthy (through zones a and b), naming region, zone and what it saw of zone c.
    let never = zone("c")
        .in_namespace(Dns1123Label::parse("zone-c-agent").unwrap())
        .with_wait(Duration::from_secs(2));
    let failed = run(&server_b, w.client.clone(), never).await;
    assert_eq!(failed.status, ScoreStatus::Failed, "{failed:#?}");
    assert!(
        failed
            .message
            .contains("waiting for region eu to report healthy in zone c")
            && failed.message.contains("zone-c-agent/harmony-agent")
            && failed.message.contains("for region eu zone c"),
        "{}",
        failed.message
    );
    assert_eq!(
        control_plane_changes(&failed),
        [("control-plane Zone eu/c", ChangeAction::Create)]
    );
    let eu = admin.region("eu").await.unwrap().unwrap();
    assert_ne!(
        eu.zone("c").map(|z| z.health),
        Some(Health::Healthy),
        "{eu:#?}"
    );
    drop((agent_a, agent_b));
}
