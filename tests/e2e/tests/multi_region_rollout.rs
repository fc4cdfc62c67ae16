//! `RegionAgentRolloutScore` against a real control plane and a real kube-apiserver reached
//! through its direct kubeconfig (a `RegionSiteTopology`: the site plus the admin client). The fixture has no kubelet, so the test plays one: it starts
//! the agent process from the ConfigMap and Secret the Score applied, with the identity kept in
//! a Secret of the agent's namespace (the in-cluster path).

use base64::Engine;
use serde_json::Value;
use std::sync::Arc;
use std::time::Duration;

use harmony::domain::{
    ChangeAction, Inventory, Maestro, RunContext, RunOptions, ScoreReport, ScoreStatus, WaitPolicy,
};
use harmony::infra::control_plane::ControlPlaneClient;
use harmony::infra::region_site::RegionSiteTopology;
use harmony::types::{Dns1123Label, RegionId, ZoneId};
use harmony_e2e::ApiServer;
use harmony_e2e::eventually::eventually;
use harmony_e2e::multi_region::AgentOptions;
use harmony_e2e::world::{World, WorldOptions};
use harmony_modules::region::{IDENTITY_SECRET, MANAGED_CLUSTER_ROLE, RegionAgentRolloutScore};

async fn run(
    server: &ApiServer,
    control_plane: ControlPlaneClient,
    score: RegionAgentRolloutScore,
) -> ScoreReport {
    // The agent runs here as a local process, not as the Deployment's pod (and this fixture
    // runs no controllers): waiting for the Deployment to roll out would wait for nothing.
    let site = server
        .topology("region-direct", &RunContext::default())
        .with_wait(WaitPolicy::disabled());
    let topology = RegionSiteTopology::new(site, control_plane);
    let mut maestro = Maestro::new(Inventory::empty(), topology);
    maestro.register(vec![Box::new(score)]);
    let mut reports = maestro
        .run_all(RunOptions::default())
        .await
        .unwrap_or_else(|e| panic!("{e}"));
    reports.remove(0)
}

fn kubectl_json(server: &ApiServer, args: &[&str]) -> Option<Value> {
    let out = server.kubectl(args);
    out.status
        .success()
        .then(|| serde_json::from_slice(&out.stdout).ok())
        .flatten()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn rollout_applies_hardened_manifests_waits_until_healthy_and_mints_no_second_token() {
    let w = Arc::new(World::start(harmony_e2e::bins!(), WorldOptions::default()));
    let (server, dir) = (&w.server, &w.dir);
    let score = RegionAgentRolloutScore::new(
        RegionId::parse("eu-west").unwrap(),
        ZoneId::parse("paris-1").unwrap(),
        "registry.example.com/harmony-agent:test",
    )
    .with_ca_pem(w.pki().ca_pem.clone())
    .with_wait(Duration::from_secs(90));

    let rollout = {
        let (w, score) = (w.clone(), score.clone());
        tokio::spawn(async move { run(&w.server, w.client.clone(), score).await })
    };
    // The kubelet's part: once the Score applied the ConfigMap and the bootstrap Secret, start
    // the agent exactly as the Deployment would (same values, identity in a Secret).
    let applied = eventually(
        Duration::from_secs(60),
        "the agent's configuration",
        || async {
            let cm = kubectl_json(
                server,
                &[
                    "get",
                    "configmap",
                    "harmony-agent",
                    "-n",
                    "harmony-agent",
                    "-o",
                    "json",
                ],
            );
            let secret = kubectl_json(
                server,
                &[
                    "get",
                    "secret",
                    "harmony-agent-bootstrap",
                    "-n",
                    "harmony-agent",
                    "-o",
                    "json",
                ],
            );
            let (cm, secret) = cm.zip(secret)?;
            let token = base64::engine::general_purpose::STANDARD
                .decode(secret["data"]["token"].as_str().unwrap())
                .unwrap();
            Some((cm["data"].clone(), String::from_utf8(token).unwrap()))
        },
    )
    .await;
    let (config, token) =
        applied.unwrap_or_else(|e| panic!("the Score applied no agent configuration: {e}"));
    assert!(token.starts_with("hbt_"));
    std::fs::write(
        dir.path().join("ca.crt"),
        config["ca.crt"].as_str().unwrap(),
    )
    .unwrap();
    std::fs::write(dir.path().join("token"), &token).unwrap();
    let options = AgentOptions {
        bootstrap_token_file: Some(dir.path().join("token")),
        identity_secret: Some(("harmony-agent".into(), IDENTITY_SECRET.into())),
        ..AgentOptions::new(
            config["HARMONY_CONTROL_PLANE_URL"].as_str().unwrap(),
            config["HARMONY_REGION"].as_str().unwrap(),
            config["HARMONY_ZONE"].as_str().unwrap(),
            dir.path().join("ca.crt"),
            server.kubeconfig(),
            dir.path().join("unused"),
        )
    };
    let agent = w.agent("agent", &options);

    let report = rollout.await.unwrap();
    assert_eq!(
        report.status,
        ScoreStatus::Success,
        "{report:#?}\n{}",
        agent.log()
    );
    let created: Vec<&str> = report
        .changes
        .iter()
        .filter(|c| c.action == ChangeAction::Create)
        .map(|c| c.object.as_str())
        .collect();
    for expected in [
        "control-plane Region eu-west",
        "v1 Namespace harmony-agent",
        "v1 ServiceAccount harmony-agent/harmony-agent",
        "v1 Secret harmony-agent/harmony-agent-bootstrap",
        "apps/v1 Deployment harmony-agent/harmony-agent",
    ] {
        assert!(
            created.contains(&expected),
            "{expected} not created: {created:?}"
        );
    }
    assert!(
        report.details.iter().any(|d| d.contains("healthy")),
        "{:?}",
        report.details
    );
    // The token never shows in the report (Secrets are redacted).
    assert!(!format!("{report:?}").contains(&token[4..]));

    // What the Deployment looks like on the server.
    let d = kubectl_json(
        server,
        &[
            "get",
            "deployment",
            "harmony-agent",
            "-n",
            "harmony-agent",
            "-o",
            "json",
        ],
    )
    .unwrap();
    let pod = &d["spec"]["template"]["spec"];
    let c = &pod["containers"][0];
    assert_eq!(pod["securityContext"]["runAsNonRoot"], true);
    assert_eq!(c["securityContext"]["readOnlyRootFilesystem"], true);
    assert_eq!(c["securityContext"]["capabilities"]["drop"][0], "ALL");
    assert!(
        c["resources"]["requests"]["cpu"].is_string()
            && c["resources"]["limits"]["memory"].is_string()
    );
    assert_eq!(c["livenessProbe"]["httpGet"]["path"], "/healthz");
    assert_eq!(c["readinessProbe"]["httpGet"]["path"], "/readyz");
    let roles = kubectl_json(
        server,
        &[
            "get",
            "clusterroles",
            "-l",
            "app.kubernetes.io/name=harmony-agent",
            "-o",
            "json",
        ],
    )
    .unwrap();
    let verbs: Vec<&str> = roles["items"]
        .as_array()
        .unwrap()
        .iter()
        .flat_map(|r| r["rules"].as_array().unwrap())
        .flat_map(|rule| rule["verbs"].as_array().unwrap())
        .map(|v| v.as_str().unwrap())
        .collect();
    assert!(verbs.contains(&"patch"), "{verbs:?}");
    for forbidden in ["escalate", "impersonate", "*"] {
        assert!(
            !verbs.contains(&forbidden),
            "{forbidden} granted: {verbs:?}"
        );
    }
    // `bind` only on the managed-namespace ClusterRole, by name (the agent binds it in the
    // project namespaces it creates), and that role is bound by no ClusterRoleBinding.
    for rule in roles["items"]
        .as_array()
        .unwrap()
        .iter()
        .flat_map(|r| r["rules"].as_array().unwrap())
    {
        if rule["verbs"].to_string().contains("bind") {
            assert_eq!(
                rule["resourceNames"],
                serde_json::json!([MANAGED_CLUSTER_ROLE]),
                "{rule}"
            );
        }
    }
    let bindings = kubectl_json(server, &["get", "clusterrolebindings", "-o", "json"]).unwrap();
    assert!(
        bindings["items"]
            .as_array()
            .unwrap()
            .iter()
            .all(|b| b["roleRef"]["name"] != MANAGED_CLUSTER_ROLE),
        "{bindings}"
    );
    // The agent kept its identity in a Secret of its namespace, through its K8sClient.
    let identity = kubectl_json(
        server,
        &[
            "get",
            "secret",
            IDENTITY_SECRET,
            "-n",
            "harmony-agent",
            "-o",
            "json",
        ],
    )
    .unwrap_or_else(|| panic!("no identity Secret:\n{}", agent.log()));
    assert!(identity["data"]["identity"].is_string());

    // Idempotent: a second run mints no token and changes nothing.
    let again = run(server, w.client.clone(), score.clone()).await;
    assert_eq!(again.status, ScoreStatus::Noop, "{again:#?}");
    assert!(
        again
            .changes
            .iter()
            .all(|c| c.action == ChangeAction::Unchanged),
        "{:#?}",
        again.changes
    );
    assert_eq!(
        w.cp()
            .logs()
            .matches("minted a bootstrap token for region eu-west")
            .count(),
        1
    );

    // A region whose agent never comes: the wait ends with a message naming what it waited for.
    let never = RegionAgentRolloutScore::new(
        RegionId::parse("never").unwrap(),
        ZoneId::parse("z").unwrap(),
        "registry.example.com/harmony-agent:test",
    )
    .in_namespace(Dns1123Label::parse("never-agent").unwrap())
    .with_wait(Duration::from_secs(2));
    let failed = run(server, w.client.clone(), never).await;
    assert_eq!(failed.status, ScoreStatus::Failed);
    assert!(
        failed
            .message
            .contains("timed out after 2s waiting for region never to report healthy")
            && failed.message.contains("never-agent/harmony-agent"),
        "{}",
        failed.message
    );
    // What was applied before the wait is still reported.
    assert!(
        failed
            .changes
            .iter()
            .any(|c| c.object == "apps/v1 Deployment never-agent/harmony-agent")
    );
    drop(agent);
}
