//! What the two `RegionAgentRolloutScore` suites share (`multi_region_rollout.rs` and
//! `multi_region_rollout_zones.rs`): running the Score on a zone reached through a fixture's
//! direct kubeconfig, reading objects with kubectl, and the kubelet's part the test plays (the
//! fixture has no kubelet): starting the agent process from the ConfigMap and bootstrap Secret
//! the Score applied.

use base64::Engine;
use serde_json::Value;
use std::time::Duration;

use harmony::domain::{Inventory, Maestro, RunContext, RunOptions, ScoreReport, WaitPolicy};
use harmony::infra::control_plane::ControlPlaneClient;
use harmony::infra::region_site::RegionSiteTopology;
use harmony_e2e::ApiServer;
use harmony_e2e::eventually::eventually;
use harmony_e2e::multi_region::{Agent, AgentOptions};
use harmony_e2e::world::World;
use harmony_modules::region::{IDENTITY_SECRET, RegionAgentRolloutScore};

/// Runs `score` on the zone reached through `server`'s kubeconfig, administered by
/// `control_plane`.
pub(crate) async fn run(
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

/// `kubectl ARGS -o json` on `server`, parsed; `None` when kubectl fails.
pub(crate) fn kubectl_json(server: &ApiServer, args: &[&str]) -> Option<Value> {
    let out = server.kubectl(args);
    out.status
        .success()
        .then(|| serde_json::from_slice(&out.stdout).ok())
        .flatten()
}

/// The kubelet's part for the agent the Score applied to `server`: waits for its ConfigMap and
/// bootstrap Secret, then starts the agent process of `w` exactly as the Deployment would (same
/// values, identity in a Secret of its namespace). Returns the agent and the token it was given.
pub(crate) async fn kubelet(w: &World, server: &ApiServer, name: &str) -> (Agent, String) {
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
