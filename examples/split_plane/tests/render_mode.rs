//! The example as a user runs it: a real process, no terminal on stdin, render mode.

use std::collections::BTreeSet;
use std::path::Path;
use std::process::{Command, Output, Stdio};

use harmony_e2e::files::read_tree;

/// Secret values of the example: files hold them, the screen never does.
const SECRETS: [&str; 4] = [
    "example-only-not-a-real-token",
    "example-only-license",
    "example-only-db-password",
    "example-only-widget-token",
];

const CONTROL_PLANE: [&str; 10] = [
    "cluster/namespace_widgets.yaml",
    "namespaces/widgets/configmap_controller-config.yaml",
    "namespaces/widgets/deployment.apps_widget-controller.yaml",
    "namespaces/widgets/job.batch_widget-migrate.yaml",
    "namespaces/widgets/role.rbac.authorization.k8s.io_widget-controller.yaml",
    "namespaces/widgets/rolebinding.rbac.authorization.k8s.io_widget-controller.yaml",
    "namespaces/widgets/secret_controller-env.yaml",
    "namespaces/widgets/secret_data-plane-kubeconfig.yaml",
    "namespaces/widgets/secret_db-credentials.yaml",
    "namespaces/widgets/serviceaccount_widget-controller.yaml",
];

const DATA_PLANE: [&str; 5] = [
    "cluster/customresourcedefinition.apiextensions.k8s.io_widgets.example.com.yaml",
    "cluster/namespace_widgets.yaml",
    "namespaces/widgets/secret_db-credentials.yaml",
    "namespaces/widgets/secret_widget-token.yaml",
    "namespaces/widgets/widget.example.com_demo.yaml",
];

fn text(b: &[u8]) -> String {
    String::from_utf8_lossy(b).into_owned()
}

fn run(cwd: &Path, args: &[&str]) -> Output {
    let out = Command::new(env!("CARGO_BIN_EXE_example-split-plane"))
        .args(args)
        .current_dir(cwd)
        .stdin(Stdio::null())
        .output()
        .expect("example binary starts");
    let all = format!("{}{}", text(&out.stdout), text(&out.stderr));
    for secret in SECRETS {
        assert!(
            !all.contains(secret),
            "secret value shown on screen:\n{all}"
        );
    }
    out
}

fn expected_files() -> BTreeSet<String> {
    let under = |plane: &str, list: &[&str]| -> Vec<String> {
        list.iter()
            .map(|f| format!("{plane}/kubernetes/{f}"))
            .collect()
    };
    under("control-plane", &CONTROL_PLANE)
        .into_iter()
        .chain(under("data-plane", &DATA_PLANE))
        .collect()
}

#[test]
fn renders_one_folder_per_plane_and_twice_gives_identical_bytes() {
    let dir = tempfile::tempdir().unwrap();
    let first = run(dir.path(), &["--yes"]);
    assert_eq!(
        first.status.code(),
        Some(0),
        "{}{}",
        text(&first.stdout),
        text(&first.stderr)
    );
    let out = dir.path().join("harmony-out");
    let before = read_tree(&out);
    assert_eq!(
        before.keys().cloned().collect::<BTreeSet<_>>(),
        expected_files()
    );
    for (name, bytes) in &before {
        let doc: serde_yaml::Value =
            serde_yaml::from_slice(bytes).unwrap_or_else(|e| panic!("{name}: {e}"));
        assert!(
            doc.get("apiVersion").is_some() && doc.get("kind").is_some(),
            "{name}"
        );
    }
    let kubeconfig =
        &before["control-plane/kubernetes/namespaces/widgets/secret_data-plane-kubeconfig.yaml"];
    assert!(
        text(kubeconfig).contains("example-only-not-a-real-token"),
        "the file holds what would be applied"
    );

    let report = text(&first.stdout);
    for line in [
        "created    apps/v1 Deployment widgets/widget-controller -> control-plane: runnable @ harmony-out/control-plane/kubernetes/namespaces/widgets/deployment.apps_widget-controller.yaml",
        "created    v1 Secret widgets/widget-token -> data-plane: referenced by example.com/v1 Widget widgets/demo (spec.tokenSecretRef) @ ",
        "created    v1 Secret widgets/db-credentials -> both (control-plane): used by batch/v1 Job widgets/widget-migrate (env DB_PASSWORD); referenced by example.com/v1 Widget widgets/demo",
        "created    v1 Secret widgets/db-credentials -> both (data-plane): ",
        "created    v1 ConfigMap widgets/controller-config -> control-plane: used by apps/v1 Deployment widgets/widget-controller (volume \"config\") @ ",
    ] {
        assert!(report.contains(line), "{line}\nmissing from:\n{report}");
    }

    let second = run(dir.path(), &["--yes"]);
    assert_eq!(second.status.code(), Some(0));
    assert_eq!(read_tree(&out), before, "second run changed bytes");
    let report = text(&second.stdout);
    for score in ["Widget API", "Widget platform"] {
        assert!(
            report.contains(&format!("unchanged {score}:")),
            "{score} not unchanged:\n{report}"
        );
    }
}

#[test]
fn the_json_report_carries_each_plane_in_the_location() {
    let dir = tempfile::tempdir().unwrap();
    let out = run(dir.path(), &["--output", "json"]);
    assert_eq!(out.status.code(), Some(0), "{}", text(&out.stderr));
    let report: serde_json::Value =
        serde_json::from_slice(&out.stdout).expect("stdout is one JSON document");
    let locations: Vec<(String, String)> = report["scores"]
        .as_array()
        .unwrap()
        .iter()
        .flat_map(|s| s["changes"].as_array().unwrap().iter())
        .map(|c| {
            (
                c["object"].as_str().unwrap().to_string(),
                c["location"].as_str().unwrap().to_string(),
            )
        })
        .collect();
    assert_eq!(locations.len(), CONTROL_PLANE.len() + DATA_PLANE.len());
    for (object, location) in &locations {
        let plane = if location.starts_with("control-plane: ")
            || location.starts_with("both (control-plane): ")
        {
            "control-plane"
        } else if location.starts_with("data-plane: ")
            || location.starts_with("both (data-plane): ")
        {
            "data-plane"
        } else {
            panic!("{object}: location names no plane: {location}")
        };
        assert!(
            location.contains(&format!("@ harmony-out/{plane}/kubernetes/")),
            "{object}: {location}"
        );
    }
}

#[test]
fn plan_writes_nothing_and_naming_a_cluster_is_refused() {
    let dir = tempfile::tempdir().unwrap();
    let plan = run(dir.path(), &["--plan"]);
    assert_eq!(plan.status.code(), Some(0), "{}", text(&plan.stderr));
    let report = text(&plan.stdout);
    assert!(report.contains("(plan mode)"), "{report}");
    assert!(
        report.contains(
            "+ create   apps/v1 Deployment widgets/widget-controller -> control-plane: runnable"
        ),
        "{report}"
    );
    assert!(
        !dir.path().join("harmony-out").exists(),
        "plan must not write"
    );

    let live = run(dir.path(), &["--context", "prod", "--yes"]);
    assert_eq!(live.status.code(), Some(2));
    let err = text(&live.stderr);
    assert!(
        err.contains("--context does not apply to this program"),
        "{err}"
    );
    let help = run(dir.path(), &["--help"]);
    assert_eq!(help.status.code(), Some(0));
    let help = text(&help.stdout);
    assert!(help.contains("renders only"), "{help}");
    assert!(help.contains("docs/split-plane.md"), "{help}");
    assert!(!help.contains("--kubeconfig <FILE>"), "{help}");
}
