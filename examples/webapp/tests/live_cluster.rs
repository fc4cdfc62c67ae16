//! The example as a process against a real kube-apiserver fixture with its controllers (the
//! Deployment really rolls out, on kwok nodes): apply waits until it is available, re-apply,
//! plan, `--no-wait`.

use std::process::{Command, Output, Stdio};

use harmony_e2e::ApiServer;

const PASSWORD: &str = "example-only-not-a-real-password";

fn run(server: &ApiServer, args: &[&str]) -> Output {
    let kubeconfig = server.kubeconfig().display().to_string();
    let out = Command::new(env!("CARGO_BIN_EXE_example-webapp"))
        .args(["--kubeconfig", &kubeconfig, "--output", "json"])
        .args(args)
        .stdin(Stdio::null())
        .output()
        .expect("example binary starts");
    let all = format!(
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(!all.contains(PASSWORD), "secret value shown:\n{all}");
    out
}

fn statuses(out: &Output) -> Vec<String> {
    let report: serde_json::Value = serde_json::from_slice(&out.stdout)
        .unwrap_or_else(|e| panic!("{e}: {}", String::from_utf8_lossy(&out.stderr)));
    report["scores"]
        .as_array()
        .unwrap()
        .iter()
        .map(|s| s["status"].as_str().unwrap().to_string())
        .collect()
}

/// The `status` the report gives `object` (`null` when nothing waited for it).
fn object_status(out: &Output, object: &str) -> serde_json::Value {
    let report: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    report["scores"]
        .as_array()
        .unwrap()
        .iter()
        .flat_map(|s| s["changes"].as_array().cloned().unwrap_or_default())
        .find(|c| c["object"] == object)
        .unwrap_or_else(|| panic!("no change for {object}"))["status"]
        .clone()
}

#[test]
fn applies_to_a_real_api_server_waits_for_the_rollout_and_reapplies_as_unchanged() {
    let server = ApiServer::start_with_controllers().unwrap_or_else(|e| panic!("{e}"));
    let refused = run(&server, &[]);
    assert_eq!(
        refused.status.code(),
        Some(2),
        "no terminal and no --yes must refuse"
    );
    assert!(String::from_utf8_lossy(&refused.stderr).contains("--yes"));

    let first = run(&server, &["--yes"]);
    assert_eq!(
        first.status.code(),
        Some(0),
        "{}",
        String::from_utf8_lossy(&first.stderr)
    );
    assert_eq!(statuses(&first), ["success"; 5]);
    // The run ended when the Deployment was available, and said so.
    let web = object_status(&first, "apps/v1 Deployment webshop/web");
    assert_eq!(web["state"], "current", "{web}");
    assert_eq!(web["reason"], "Available", "{web}");
    assert!(web["time_to_current_s"].as_f64().is_some(), "{web}");
    let stderr = String::from_utf8_lossy(&first.stderr);
    assert!(stderr.contains("to be current"), "{stderr}");
    let got = server.kubectl(&[
        "get",
        "deployment",
        "web",
        "-n",
        "webshop",
        "-o",
        "jsonpath={.spec.replicas} {.status.availableReplicas}",
    ]);
    assert_eq!(String::from_utf8_lossy(&got.stdout), "2 2");

    let second = run(&server, &["--yes"]);
    assert_eq!(statuses(&second), ["noop"; 5]);
    // An unchanged Deployment is still checked: it is current.
    assert_eq!(
        object_status(&second, "apps/v1 Deployment webshop/web")["state"],
        "current"
    );

    let no_wait = run(&server, &["--yes", "--no-wait"]);
    assert_eq!(no_wait.status.code(), Some(0));
    assert!(
        object_status(&no_wait, "apps/v1 Deployment webshop/web").is_null(),
        "--no-wait reports no status: nothing waited"
    );
    assert!(!String::from_utf8_lossy(&no_wait.stderr).contains("to be current"));
    let plan = run(&server, &["--plan"]);
    assert_eq!(plan.status.code(), Some(0), "plan needs no confirmation");
    assert_eq!(statuses(&plan), ["noop"; 5]);
}
