//! The example as a user runs it: a real process, no terminal on stdin, render mode.

use std::path::Path;
use std::process::{Command, Output, Stdio};

use harmony_e2e::files::read_tree;

const PASSWORD: &str = "example-only-not-a-real-password";
const SCORES: [&str; 5] = [
    "Namespace webshop",
    "ConfigMap web-config",
    "Secret db-credentials",
    "Deployment web",
    "Service web",
];

fn run(cwd: &Path, args: &[&str]) -> Output {
    let out = Command::new(env!("CARGO_BIN_EXE_example-webapp"))
        .args(args)
        .current_dir(cwd)
        .stdin(Stdio::null())
        .output()
        .expect("example binary starts");
    let all = format!(
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(
        !all.contains(PASSWORD),
        "secret value shown on screen:\n{all}"
    );
    out
}

fn text(b: &[u8]) -> String {
    String::from_utf8_lossy(b).into_owned()
}

#[test]
fn renders_without_prompting_and_twice_gives_identical_bytes() {
    let dir = tempfile::tempdir().unwrap();
    let first = run(dir.path(), &[]);
    assert_eq!(
        first.status.code(),
        Some(0),
        "{}{}",
        text(&first.stdout),
        text(&first.stderr)
    );
    let report = text(&first.stdout);
    for score in SCORES {
        assert!(
            report.contains(&format!("success   {score}:")),
            "{score} missing from:\n{report}"
        );
    }
    let out = dir.path().join("harmony-out");
    let before = read_tree(&out);
    assert_eq!(before.len(), 5, "{:?}", before.keys());
    for (name, bytes) in &before {
        let doc: serde_yaml::Value =
            serde_yaml::from_slice(bytes).unwrap_or_else(|e| panic!("{name}: {e}"));
        assert!(
            doc.get("apiVersion").is_some() && doc.get("kind").is_some(),
            "{name}"
        );
    }
    let secret = &before["local/kubernetes/namespaces/webshop/secret_db-credentials.yaml"];
    assert!(
        text(secret).contains(PASSWORD),
        "the file holds what would be applied"
    );

    let second = run(dir.path(), &[]);
    assert_eq!(second.status.code(), Some(0));
    assert_eq!(read_tree(&out), before, "second run changed bytes");
    let report = text(&second.stdout);
    for score in SCORES {
        assert!(
            report.contains(&format!("unchanged {score}:")),
            "{score} not unchanged:\n{report}"
        );
    }
}

#[test]
fn json_report_parses_with_names_and_statuses() {
    let dir = tempfile::tempdir().unwrap();
    let out = run(dir.path(), &["--output", "json", "--out", "rendered"]);
    assert_eq!(out.status.code(), Some(0), "{}", text(&out.stderr));
    let report: serde_json::Value =
        serde_json::from_slice(&out.stdout).expect("stdout is one JSON document");
    assert_eq!(report["format_version"], 1);
    assert_eq!(report["mode"], "render");
    assert_eq!(report["exit_code"], 0);
    let scores: Vec<(String, String)> = report["scores"]
        .as_array()
        .unwrap()
        .iter()
        .map(|s| {
            (
                s["name"].as_str().unwrap().to_string(),
                s["status"].as_str().unwrap().to_string(),
            )
        })
        .collect();
    let expected: Vec<(String, String)> = SCORES
        .iter()
        .map(|s| (s.to_string(), "success".to_string()))
        .collect();
    assert_eq!(scores, expected);
    assert!(
        dir.path()
            .join("rendered/local/kubernetes/namespaces/webshop/service_web.yaml")
            .is_file()
    );
    assert_eq!(report["summary"]["success"], 5);
}

#[test]
fn plan_shows_a_field_diff_and_writes_nothing() {
    let dir = tempfile::tempdir().unwrap();
    assert_eq!(run(dir.path(), &["-q"]).status.code(), Some(0));
    let cm = dir
        .path()
        .join("harmony-out/local/kubernetes/namespaces/webshop/configmap_web-config.yaml");
    let edited = std::fs::read_to_string(&cm)
        .unwrap()
        .replace("8080", "9090");
    std::fs::write(&cm, &edited).unwrap();
    let secret = dir
        .path()
        .join("harmony-out/local/kubernetes/namespaces/webshop/secret_db-credentials.yaml");
    std::fs::write(
        &secret,
        std::fs::read_to_string(&secret)
            .unwrap()
            .replace(PASSWORD, "old-password-value"),
    )
    .unwrap();

    let plan = run(dir.path(), &["--plan"]);
    assert_eq!(plan.status.code(), Some(0), "{}", text(&plan.stderr));
    let report = text(&plan.stdout);
    assert!(report.contains("(plan mode)"), "{report}");
    assert!(
        report.contains("~ data.LISTEN_PORT: \"9090\" -> \"8080\""),
        "{report}"
    );
    assert!(
        report.contains("~ stringData.password: <redacted> -> <redacted>"),
        "{report}"
    );
    assert!(!report.contains("old-password-value"), "{report}");
    assert!(report.contains("unchanged Deployment web:"), "{report}");
    assert_eq!(
        std::fs::read_to_string(&cm).unwrap(),
        edited,
        "plan must not write"
    );
}

#[test]
fn filters_select_and_unknown_filters_fail_with_known_names() {
    let dir = tempfile::tempdir().unwrap();
    let out = run(dir.path(), &["--filter", "CONFIGMAP"]);
    assert_eq!(out.status.code(), Some(0));
    let report = text(&out.stdout);
    assert!(
        report.contains("ConfigMap web-config") && !report.contains("Deployment web"),
        "{report}"
    );

    let out = run(dir.path(), &["--filter", "postgres"]);
    assert_eq!(out.status.code(), Some(2));
    let err = text(&out.stderr);
    assert!(
        err.contains("\"postgres\" matched no Score") && err.contains("\"Deployment web\""),
        "{err}"
    );

    let list = run(dir.path(), &["--list"]);
    assert_eq!(text(&list.stdout).lines().collect::<Vec<_>>(), SCORES);
    let bad_flag = run(dir.path(), &["--output", "xml"]);
    assert_eq!(bad_flag.status.code(), Some(2));
}

#[test]
fn render_progress_says_rendering_to_the_folder_and_plan_says_comparing() {
    let dir = tempfile::tempdir().unwrap();
    let out = run(dir.path(), &["--out", "rendered"]);
    assert_eq!(out.status.code(), Some(0), "{}", text(&out.stderr));
    let all = format!("{}{}", text(&out.stdout), text(&out.stderr));
    let folder = Path::new("rendered").join("local");
    assert!(
        all.contains(&format!("rendering 1 object(s) to {}", folder.display())),
        "{all}"
    );
    assert!(
        !all.contains("applying"),
        "render mode applies nothing:\n{all}"
    );

    let plan = run(dir.path(), &["--out", "rendered", "--plan"]);
    assert_eq!(plan.status.code(), Some(0), "{}", text(&plan.stderr));
    let all = format!("{}{}", text(&plan.stdout), text(&plan.stderr));
    assert!(
        all.contains(&format!(
            "comparing 1 object(s) with the files in {} (nothing is written)",
            folder.display()
        )),
        "{all}"
    );
    assert!(
        !all.contains("applying"),
        "plan mode applies nothing:\n{all}"
    );
}

#[test]
fn an_unknown_context_names_the_contexts_the_kubeconfig_has() {
    let dir = tempfile::tempdir().unwrap();
    let kubeconfig = dir.path().join("kubeconfig");
    std::fs::write(
        &kubeconfig,
        "apiVersion: v1
kind: Config
current-context: staging
clusters:
- name: c
  cluster: {server: 'https://127.0.0.1:1'}
contexts:
- name: staging
  context: {cluster: c, user: u}
- name: prod-eu
  context: {cluster: c, user: u}
users:
- name: u
  user: {token: not-a-real-token}
",
    )
    .unwrap();
    let out = run(
        dir.path(),
        &[
            "--kubeconfig",
            kubeconfig.to_str().unwrap(),
            "--context",
            "prod",
            "--yes",
        ],
    );
    let all = format!("{}{}", text(&out.stdout), text(&out.stderr));
    assert_ne!(out.status.code(), Some(0), "{all}");
    assert!(
        all.contains(&format!(
            "--context prod: no such context in {}; it has: staging, prod-eu",
            kubeconfig.display()
        )),
        "{all}"
    );
    assert!(all.contains("leave --context out"), "{all}");
    assert!(!all.contains("not-a-real-token"), "{all}");
    assert!(!dir.path().join("harmony-out").exists(), "{all}");
}
