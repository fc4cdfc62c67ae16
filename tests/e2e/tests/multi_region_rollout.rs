//! `RegionAgentRolloutScore` against a real control plane and a real kube-apiserver reached
//! through its direct kubeconfig (a `RegionSiteTopology`: the site plus the admin client). The fixture has no kubelet, so the test plays one: it starts
//! the agent process from the ConfigMap and Secret the Score applied, with the identity kept in
//! a Secret of the agent's namespace (the in-cluster path).

mod rollout_support;

use std::sync::Arc;
use std::time::Duration;

use harmony::domain::{ChangeAction, ScoreStatus};
use harmony::types::{Dns1123Label, RegionId, ZoneId};
use harmony_e2e::world::{World, WorldOptions};
use harmony_modules::region::{IDENTITY_SECRET, MANAGED_CLUSTER_ROLE, RegionAgentRolloutScore};
use rollout_support::{kubectl_json, kubelet, run};

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn rollout_applies_hardened_manifests_waits_until_healthy_and_mints_no_second_token() {
    let w = Arc::new(World::start(harmony_e2e::bins!(), WorldOptions::default()));
    let server = &w.server;
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
    let (agent, token) = kubelet(&w, server, "agent").await;

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
