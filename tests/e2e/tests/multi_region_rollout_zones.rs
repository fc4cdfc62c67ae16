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

use base64::Engine;
use serde_json::Value;
use std::sync::Arc;
use std::time::Duration;

use harmony::domain::{
    ChangeAction, Inventory, Maestro, RunContext, RunOptions, ScoreReport, ScoreStatus, WaitPolicy,
};
use harmony::infra::control_plane::{ControlPlaneClient, Health};
use harmony::infra::region_site::RegionSiteTopology;
use harmony::types::{Dns1123Label, RegionId, ZoneId};
use harmony_e2e::ApiServer;
use harmony_e2e::eventually::eventually;
use harmony_e2e::multi_region::{Agent, AgentOptions, ControlPlaneOptions};
use harmony_e2e::world::{World, WorldOptions};
use harmony_modules::region::{IDENTITY_SECRET, RegionAgentRolloutScore};

const IMAGE: &str = "registry.example.com/harmony-agent:test";
const WAIT: Duration = Duration::from_secs(90);

/// Runs `score` on the zone reached through `server`'s kubeconfig, administered by
/// `control_plane`.
async fn run(
    server: &ApiServer,
    control_plane: ControlPlaneClient,
    score: RegionAgentRolloutScore,
) -> ScoreReport {
    // The agent runs here as a local process, not as the Deployment's pod (and this fixture
    // runs no controllers): waiting for the Deployment to roll out would wait for nothing.
    let site = server
        .topology("zone-direct", &RunContext::default())
        .with_wait(WaitPolicy::disabled());
    let mut maestro = Maestro::new(
        Inventory::empty(),
        RegionSiteTopology::new(site, control_plane),
    );
    maestro.register(vec![Box::new(score)]);
    maestro
        .run_all(RunOptions::default())
        .await
        .unwrap_or_else(|e| panic!("{e}"))
        .remove(0)
}

fn kubectl_json(server: &ApiServer, args: &[&str]) -> Option<Value> {
    let out = server.kubectl(args);
    out.status
        .success()
        .then(|| serde_json::from_slice(&out.stdout).ok())
        .flatten()
}

fn score(zone: &str) -> RegionAgentRolloutScore {
    RegionAgentRolloutScore::new(
        RegionId::parse("eu").unwrap(),
        ZoneId::parse(zone).unwrap(),
        IMAGE,
    )
}

/// The kubelet's part for the agent the Score applied to `server`: waits for its ConfigMap and
/// bootstrap Secret, then starts the agent process of `w` exactly as the Deployment would (same
/// values, identity in a Secret of its namespace). Returns the agent and the token it was given.
async fn kubelet(w: &World, server: &ApiServer, name: &str) -> (Agent, String) {
    let dir = w.dir.path();
    let get = |kind: &str, object: &str| {
        kubectl_json(
            server,
            &["get", kind, object, "-n", "harmony-agent", "-o", "json"],
        )
    };
    let applied = eventually(
        Duration::from_secs(60),
        "the agent's configuration",
        || async {
            let cm = get("configmap", "harmony-agent");
            let secret = get("secret", "harmony-agent-bootstrap");
            let (cm, secret) = cm.zip(secret)?;
            let token = base64::engine::general_purpose::STANDARD
                .decode(secret["data"]["token"].as_str().unwrap())
                .unwrap();
            Some((cm["data"].clone(), String::from_utf8(token).unwrap()))
        },
    )
    .await;
    let (config, token) = applied.unwrap_or_else(|e| {
        panic!("the Score applied no agent configuration or no bootstrap Secret for {name}: {e}")
    });
    assert!(token.starts_with("hbt_"), "{name}");
    let ca = dir.join(format!("{name}.ca.crt"));
    let token_file = dir.join(format!("{name}.token"));
    std::fs::write(&ca, config["ca.crt"].as_str().unwrap()).unwrap();
    std::fs::write(&token_file, &token).unwrap();
    let options = AgentOptions {
        bootstrap_token_file: Some(token_file),
        identity_secret: Some(("harmony-agent".into(), IDENTITY_SECRET.into())),
        ..AgentOptions::new(
            config["HARMONY_CONTROL_PLANE_URL"].as_str().unwrap(),
            config["HARMONY_REGION"].as_str().unwrap(),
            config["HARMONY_ZONE"].as_str().unwrap(),
            ca,
            server.kubeconfig(),
            dir.join(format!("{name}.unused")),
        )
    };
    (w.agent(name, &options), token)
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
