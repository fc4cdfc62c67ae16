//! The example as a user runs it: a real process, no terminal, render mode; golden files.

use std::path::{Path, PathBuf};
use std::process::{Command, Output, Stdio};

use harmony_e2e::files::read_tree;

fn run(cwd: &Path, args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_example-multisite-postgres"))
        .args(args)
        .current_dir(cwd)
        .stdin(Stdio::null())
        .output()
        .expect("example binary starts")
}

fn text(b: &[u8]) -> String {
    String::from_utf8_lossy(b).into_owned()
}

/// `CI`'s value when this is a CI run: `CI` set to anything but empty, `0` or `false` (the
/// rule tests/run.sh applies too).
fn ci() -> Option<String> {
    std::env::var("CI")
        .ok()
        .filter(|v| !matches!(v.trim().to_ascii_lowercase().as_str(), "" | "0" | "false"))
}

fn golden_dir() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/golden")
}

#[test]
fn renders_both_sites_matching_the_golden_files_and_twice_identically() {
    let dir = tempfile::tempdir().unwrap();
    let first = run(dir.path(), &["--yes"]);
    assert_eq!(first.status.code(), Some(0), "{}", text(&first.stderr));
    let out = dir.path().join("harmony-out");
    let rendered = read_tree(&out);
    let names: Vec<&str> = rendered.keys().map(String::as_str).collect();
    assert_eq!(
        names,
        [
            "site-newyork/kubernetes/namespaces/tenant-a/cluster.postgresql.cnpg.io_finance-db.yaml",
            "site-paris/kubernetes/namespaces/tenant-a/cluster.postgresql.cnpg.io_finance-db.yaml",
            "site-paris/kubernetes/namespaces/tenant-a/route.route.openshift.io_finance-db.yaml",
        ]
    );
    for bytes in rendered.values() {
        serde_yaml::from_slice::<serde_yaml::Value>(bytes).expect("rendered YAML parses");
    }
    let report = text(&first.stdout);
    assert!(
        report.contains("success   MultisitePostgreSQL tenant-a/finance-db"),
        "{report}"
    );
    assert!(
        report.contains("replication secrets not copied: render mode"),
        "{report}"
    );

    // UPDATE_GOLDEN=1 rewrites the golden files after an intended change; review the diff.
    // Never in CI: a blessed run passes whatever the output.
    let bless = std::env::var_os("UPDATE_GOLDEN").is_some();
    if let (true, Some(ci)) = (bless, ci()) {
        panic!(
            "UPDATE_GOLDEN is set in CI (CI={ci}): a blessed run rewrites the golden files \
             instead of comparing with them, so it can never fail; unset UPDATE_GOLDEN (bless \
             locally and commit the reviewed golden files)"
        );
    }
    if bless {
        let _ = std::fs::remove_dir_all(golden_dir());
        for (rel, bytes) in &rendered {
            let path = golden_dir().join(rel);
            std::fs::create_dir_all(path.parent().unwrap()).unwrap();
            std::fs::write(path, bytes).unwrap();
        }
    }
    let golden = read_tree(&golden_dir());
    assert_eq!(
        golden.keys().collect::<Vec<_>>(),
        rendered.keys().collect::<Vec<_>>(),
        "golden file set differs; run with UPDATE_GOLDEN=1 after an intended change"
    );
    for (rel, bytes) in &rendered {
        assert_eq!(
            text(&golden[rel]),
            text(bytes),
            "{rel} differs from tests/golden; run with UPDATE_GOLDEN=1 after an intended change"
        );
    }

    let second = run(dir.path(), &["--yes", "--output", "json"]);
    assert_eq!(second.status.code(), Some(0), "{}", text(&second.stderr));
    assert_eq!(
        read_tree(&out),
        rendered,
        "a second render must write identical bytes"
    );
    let report: serde_json::Value = serde_json::from_slice(&second.stdout).unwrap();
    assert_eq!(
        report["scores"][0]["name"],
        "MultisitePostgreSQL tenant-a/finance-db"
    );
    assert_eq!(report["scores"][0]["status"], "noop");
}

#[test]
fn version_15_over_a_passthrough_route_exits_2_with_the_reason_before_anything_is_written() {
    let dir = tempfile::tempdir().unwrap();
    let out = run(dir.path(), &["--yes", "--pg-version", "15"]);
    assert_eq!(out.status.code(), Some(2), "{}", text(&out.stderr));
    let err = text(&out.stderr);
    for needle in [
        "--pg-version '15'",
        "PostgreSQL 15",
        "SNI",
        "SSLRequest",
        "give --pg-version 17 or newer",
        "sslnegotiation=direct",
        "loadBalancer",
    ] {
        assert!(err.contains(needle), "{needle:?} missing from:\n{err}");
    }
    assert!(
        !dir.path().join("harmony-out").exists(),
        "validation must fail before any file is written"
    );
}

#[test]
fn a_bad_version_flag_value_is_a_usage_error() {
    let dir = tempfile::tempdir().unwrap();
    let out = run(dir.path(), &["--yes", "--pg-version", "twelve"]);
    assert_eq!(out.status.code(), Some(2));
    assert!(
        text(&out.stderr).contains("--pg-version 'twelve': \"twelve\" is not a version number"),
        "{}",
        text(&out.stderr)
    );
    let out = run(dir.path(), &["--yes", "--pg-version"]);
    assert_eq!(out.status.code(), Some(2));
    let err = text(&out.stderr);
    assert!(
        err.contains("--pg-version") && err.contains("a value is required"),
        "{err}"
    );
}

#[test]
fn one_context_for_several_sites_is_refused() {
    let dir = tempfile::tempdir().unwrap();
    let out = run(dir.path(), &["--yes", "--context", "site-paris"]);
    assert_eq!(out.status.code(), Some(2));
    let err = text(&out.stderr);
    assert!(
        err.contains("--context site-paris") && err.contains("--kubeconfig"),
        "{err}"
    );
    assert!(!dir.path().join("harmony-out").exists());
}
