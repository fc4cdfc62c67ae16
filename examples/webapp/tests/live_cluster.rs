//! The example as a process against a real kube-apiserver fixture: apply, re-apply, plan.

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

#[test]
fn applies_to_a_real_api_server_and_reapplies_as_unchanged() {
    let server = ApiServer::start().unwrap_or_else(|e| panic!("{e}"));
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
    let got = server.kubectl(&[
        "get",
        "deployment",
        "web",
        "-n",
        "webshop",
        "-o",
        "jsonpath={.spec.replicas}",
    ]);
    assert_eq!(String::from_utf8_lossy(&got.stdout), "2");

    let second = run(&server, &["--yes"]);
    assert_eq!(statuses(&second), ["noop"; 5]);
    let plan = run(&server, &["--plan"]);
    assert_eq!(plan.status.code(), Some(0), "plan needs no confirmation");
    assert_eq!(statuses(&plan), ["noop"; 5]);
}
