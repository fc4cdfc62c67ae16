//! `examples/tenants` as a user runs it, against a real control-plane process: `--plan` shows
//! what it would create and changes nothing; `--yes` declares tenant `acme`, its caps, projects
//! and quotas (read back with the admin client); a second run finds everything unchanged.

use std::process::{Command, Output, Stdio};

use harmony_e2e::multi_region::{ControlPlane, ControlPlaneOptions, Pki};
use serde_json::Value;

/// Runs the example (the same entry point as `example-tenants`) with `args` and `env`.
fn example(args: &[&str], env: &[(&str, &str)], token: &str) -> (Output, Value) {
    let out = Command::new(env!("CARGO_BIN_EXE_e2e-example-tenants"))
        .args(["--regions", "eu-west,us-east", "--output", "json"])
        .args(args)
        .env_remove("HARMONY_CP_URL")
        .env_remove("HARMONY_ADMIN_TOKEN_FILE")
        .envs(env.iter().copied())
        .stdin(Stdio::null())
        .output()
        .expect("example binary starts");
    let (stdout, stderr) = (
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr),
    );
    assert!(
        !stdout.contains(token) && !stderr.contains(token),
        "admin token shown:\n{stdout}{stderr}"
    );
    assert_eq!(out.status.code(), Some(0), "{stdout}{stderr}");
    let report = serde_json::from_str(&stdout).unwrap_or_else(|e| panic!("{e}: {stdout}"));
    (out, report)
}

/// The report's one Score: its status and each object's action.
fn changes(report: &Value) -> (String, Vec<(String, String)>) {
    let score = &report["scores"][0];
    let changes = score["changes"]
        .as_array()
        .unwrap()
        .iter()
        .map(|c| {
            (
                c["object"].as_str().unwrap().to_string(),
                c["action"].as_str().unwrap().to_string(),
            )
        })
        .collect();
    (score["status"].as_str().unwrap().to_string(), changes)
}

fn cpu(q: Option<&harmony_agent_protocol::tenancy::ProjectQuota>) -> Option<&str> {
    q.and_then(|q| q.cpu.as_deref())
}

#[tokio::test(flavor = "multi_thread")]
async fn the_example_declares_acme_on_a_real_control_plane_and_rerunning_changes_nothing() {
    let pki = Pki::new().unwrap();
    let cp = ControlPlane::start(
        harmony_e2e::bins!().control_plane(),
        &pki,
        ControlPlaneOptions::default(),
    )
    .unwrap();
    let admin = cp.client();
    let url = cp.url();
    let token_file = cp.dir().join("admin-token");
    let (token_file, ca) = (token_file.to_str().unwrap(), pki.ca());
    let ca = ca.to_str().unwrap();
    let flags = [
        "--control-plane",
        &url,
        "--admin-token-file",
        token_file,
        "--ca-file",
        ca,
    ];
    let token = cp.admin_token.clone();

    // 1. --plan: everything would be created, and nothing is.
    let (_, plan) = example(&[&flags[..], &["--plan"]].concat(), &[], &token);
    assert_eq!(plan["mode"], "plan");
    let (_, planned) = changes(&plan);
    // The tenant, 2 caps, 2 projects, 3 quotas (shop in both regions, analytics in eu-west).
    assert_eq!(planned.len(), 8, "{planned:?}");
    assert!(planned.iter().all(|(_, a)| a == "create"), "{planned:?}");
    assert!(
        admin.tenants().await.unwrap().is_empty(),
        "--plan created something"
    );

    // 2. --yes: declared; read back through the admin client.
    let (_, applied) = example(&[&flags[..], &["--yes"]].concat(), &[], &token);
    assert_eq!(applied["mode"], "apply");
    let (status, done) = changes(&applied);
    assert_eq!(status, "success");
    assert_eq!(done, planned, "applied what was planned");
    let tenants = admin.tenants().await.unwrap();
    let acme = tenants
        .iter()
        .find(|t| t.tenant == "acme")
        .expect("tenant acme on the control plane");
    for region in ["eu-west", "us-east"] {
        let cap = &acme.caps[region];
        assert_eq!(
            (
                cap.cpu.as_deref(),
                cap.memory.as_deref(),
                cap.objects["pods"]
            ),
            (Some("8"), Some("16Gi"), 100),
            "{region}"
        );
    }
    let projects = admin.projects().await.unwrap();
    let project = |name: &str| {
        projects
            .iter()
            .find(|p| p.tenant == "acme" && p.project == name)
            .unwrap_or_else(|| panic!("project {name} in {projects:?}"))
    };
    let (shop, analytics) = (project("shop"), project("analytics"));
    assert_eq!(shop.namespace, "acme-shop");
    assert_eq!(analytics.namespace, "acme-analytics");
    assert_eq!(cpu(shop.quotas.get("eu-west")), Some("4"));
    assert_eq!(cpu(shop.quotas.get("us-east")), Some("4"));
    assert_eq!(shop.quotas["us-east"].storage.as_deref(), Some("100Gi"));
    assert_eq!(cpu(analytics.quotas.get("eu-west")), Some("2"));
    assert_eq!(analytics.quotas.get("us-east"), None);

    // 3. Again, the control plane and token from the environment: everything unchanged.
    let (_, again) = example(
        &["--yes", "--ca-file", ca],
        &[
            ("HARMONY_CP_URL", url.as_str()),
            ("HARMONY_ADMIN_TOKEN_FILE", token_file),
        ],
        &token,
    );
    let (status, same) = changes(&again);
    assert_eq!(status, "noop", "{again}");
    assert_eq!(same.len(), 8, "{same:?}");
    assert!(same.iter().all(|(_, a)| a == "unchanged"), "{same:?}");
    assert_eq!(admin.tenants().await.unwrap(), tenants);
    assert_eq!(admin.projects().await.unwrap(), projects);
}
