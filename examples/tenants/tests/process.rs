//! The example as a user runs it: a real process, no terminal, no control plane reachable.
//! Without `--control-plane` it prints the declaration and says nothing was sent; bad flags
//! exit 2 naming the flag, before anything is sent. (Against a real control plane:
//! `tests/e2e/tests/example_tenants.rs`.)

use std::path::Path;
use std::process::{Command, Output, Stdio};

const TOKEN: &str = "admin-example-only-not-a-real-token";

fn run(cwd: &Path, args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_example-tenants"))
        .args(args)
        .current_dir(cwd)
        .env_remove("HARMONY_CP_URL")
        .env_remove("HARMONY_ADMIN_TOKEN_FILE")
        .stdin(Stdio::null())
        .output()
        .expect("example binary starts")
}

fn text(out: &Output) -> (String, String) {
    let (o, e) = (
        String::from_utf8_lossy(&out.stdout).into_owned(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    );
    assert!(
        !o.contains(TOKEN) && !e.contains(TOKEN),
        "token shown:\n{o}{e}"
    );
    (o, e)
}

#[test]
fn without_a_control_plane_it_prints_the_declaration_and_sends_nothing() {
    let dir = tempfile::tempdir().unwrap();
    let out = run(dir.path(), &[]);
    let (stdout, stderr) = text(&out);
    assert_eq!(out.status.code(), Some(0), "{stdout}{stderr}");
    let tenant: serde_yaml::Value = serde_yaml::from_str(&stdout).expect(&stdout);
    assert_eq!(tenant["kind"], "Tenant");
    assert_eq!(tenant["metadata"]["name"], "acme");
    assert_eq!(tenant["spec"]["caps"]["eu-west"]["cpu"], "8");
    let projects = tenant["spec"]["projects"].as_sequence().unwrap();
    let names: Vec<&str> = projects.iter().filter_map(|p| p["name"].as_str()).collect();
    assert_eq!(names, ["shop", "analytics"]);
    assert_eq!(projects[0]["quotas"]["eu-west"]["memory"], "8Gi");
    assert!(stderr.contains("--control-plane"), "{stderr}");
    assert!(stderr.contains("nothing was sent"), "{stderr}");
    assert!(
        !stdout.contains("success") && !stderr.contains("success"),
        "claims success for something not done:\n{stdout}{stderr}"
    );
    assert_eq!(
        std::fs::read_dir(dir.path()).unwrap().count(),
        0,
        "no file written"
    );

    // Two regions, as JSON: caps and `shop` in both, `analytics` in the first only.
    let out = run(
        dir.path(),
        &["--regions", "eu-west,us-east", "--output", "json"],
    );
    let (stdout, stderr) = text(&out);
    assert_eq!(out.status.code(), Some(0), "{stderr}");
    let tenant: serde_json::Value = serde_json::from_str(&stdout).expect(&stdout);
    assert_eq!(tenant["spec"]["caps"]["us-east"]["objects"]["pods"], 100);
    assert_eq!(
        tenant["spec"]["projects"][0]["quotas"]["us-east"]["cpu"],
        "4"
    );
    assert!(tenant["spec"]["projects"][1]["quotas"]["us-east"].is_null());
}

#[test]
fn plan_or_yes_without_a_control_plane_is_refused_not_pretended() {
    let dir = tempfile::tempdir().unwrap();
    for flag in ["--plan", "--yes"] {
        let out = run(dir.path(), &[flag]);
        let (stdout, stderr) = text(&out);
        assert_eq!(out.status.code(), Some(2), "{flag}: {stdout}{stderr}");
        assert!(stdout.is_empty(), "{flag}: {stdout}");
        assert!(stderr.contains(flag), "{stderr}");
        assert!(stderr.contains("--control-plane"), "{stderr}");
        assert!(stderr.contains("nothing was sent"), "{stderr}");
    }
}

#[test]
fn bad_flag_values_exit_2_naming_the_flag() {
    let dir = tempfile::tempdir().unwrap();
    let token = dir.path().join("admin-token");
    std::fs::write(&token, format!("{TOKEN}\n")).unwrap();
    let token = token.to_str().unwrap();
    let not_pem = dir.path().join("not-a-ca.pem");
    std::fs::write(&not_pem, "hello").unwrap();
    let not_pem = not_pem.to_str().unwrap();
    // A port nothing listens on: none of these may get as far as calling it.
    let cp = "https://127.0.0.1:9";
    let cases: &[(&[&str], &str, &str)] = &[
        (&["--regions", "EU"], "--regions", "\"EU\""),
        (&["--regions", "eu-west,eu-west"], "--regions", "twice"),
        (
            &["--control-plane", cp],
            "--admin-token-file",
            "HARMONY_ADMIN_TOKEN_FILE",
        ),
        (
            &[
                "--control-plane",
                cp,
                "--admin-token-file",
                "/nonexistent/token",
            ],
            "--admin-token-file",
            "/nonexistent/token",
        ),
        (
            &[
                "--control-plane",
                "http://127.0.0.1:9",
                "--admin-token-file",
                token,
            ],
            "--control-plane",
            "https://",
        ),
        (
            &[
                "--control-plane",
                cp,
                "--admin-token-file",
                token,
                "--ca-file",
                not_pem,
            ],
            "--ca-file",
            "CERTIFICATE",
        ),
        (
            &["--kubeconfig", "kc"],
            "--kubeconfig",
            "does not apply to this program",
        ),
        (&["--no-such-flag"], "--no-such-flag", "unexpected argument"),
    ];
    for (args, flag, detail) in cases {
        let out = run(dir.path(), args);
        let (stdout, stderr) = text(&out);
        assert_eq!(out.status.code(), Some(2), "{args:?}: {stdout}{stderr}");
        assert!(stderr.contains(flag), "{args:?} must name {flag}: {stderr}");
        assert!(stderr.contains(detail), "{args:?}: {stderr}");
        assert!(!stdout.contains("Harmony report"), "{args:?} ran: {stdout}");
    }
}
