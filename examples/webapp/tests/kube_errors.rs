//! What the example prints when the API server refuses: the object, the server's reason and
//! message, the fix where there is one; once on stderr, and never in Rust debug formatting.

use std::path::Path;
use std::process::{Command, Output, Stdio};

use harmony_e2e::ApiServer;

/// What Rust's debug formatting of kube-rs's types leaves in a message.
const DEBUG_MARKERS: [&str; 6] = [
    "Status {",
    "ErrorResponse {",
    "Api(",
    "Some(",
    "\\\"",
    "'\"",
];

fn run(kubeconfig: &Path) -> (Output, String) {
    let out = Command::new(env!("CARGO_BIN_EXE_example-webapp"))
        .arg("--kubeconfig")
        .arg(kubeconfig)
        .arg("--yes")
        .stdin(Stdio::null())
        .output()
        .expect("example binary starts");
    let stderr = String::from_utf8_lossy(&out.stderr).into_owned();
    let all = format!("{}{stderr}", String::from_utf8_lossy(&out.stdout));
    for marker in DEBUG_MARKERS {
        assert!(!all.contains(marker), "{marker} in:\n{all}");
    }
    assert_eq!(out.status.code(), Some(1), "{all}");
    (out, stderr)
}

/// The one stderr line saying `needle`, failing when there are none or several.
fn once<'a>(stderr: &'a str, needle: &str) -> &'a str {
    let lines: Vec<&str> = stderr.lines().filter(|l| l.contains(needle)).collect();
    assert_eq!(lines.len(), 1, "{needle} once on stderr:\n{stderr}");
    lines[0]
}

/// A copy of the fixture's admin kubeconfig, edited by `edit`.
fn kubeconfig(
    server: &ApiServer,
    dir: &Path,
    name: &str,
    edit: impl Fn(&str) -> String,
) -> std::path::PathBuf {
    let text = std::fs::read_to_string(server.kubeconfig()).unwrap();
    let path = dir.join(name);
    std::fs::write(&path, edit(&text)).unwrap();
    path
}

#[test]
fn refusals_name_the_object_the_reason_and_the_message_once() {
    let server = ApiServer::start().unwrap_or_else(|e| panic!("{e}"));
    let dir = tempfile::tempdir().unwrap();

    // Refused as written: an admission policy allows one replica, the example declares two.
    let policy = dir.path().join("policy.yaml");
    std::fs::write(
        &policy,
        "apiVersion: admissionregistration.k8s.io/v1
kind: ValidatingAdmissionPolicy
metadata: {name: one-replica}
spec:
  failurePolicy: Fail
  matchConstraints:
    resourceRules:
    - {apiGroups: [apps], apiVersions: [v1], operations: [CREATE, UPDATE], resources: [deployments]}
  validations:
  - {expression: 'object.spec.replicas <= 1', message: at most one replica here, reason: Invalid}
---
apiVersion: admissionregistration.k8s.io/v1
kind: ValidatingAdmissionPolicyBinding
metadata: {name: one-replica}
spec: {policyName: one-replica, validationActions: [Deny]}
",
    )
    .unwrap();
    let applied = server.kubectl(&["apply", "-f", policy.to_str().unwrap()]);
    assert!(applied.status.success(), "{applied:?}");
    // The server enforces a new policy once its informer has it: wait until a probe is denied.
    let denied = (0..120).any(|_| {
        let probe = server.kubectl(&[
            "create",
            "deployment",
            "probe",
            "--image=x",
            "--replicas=2",
            "--dry-run=server",
        ]);
        if probe.status.success() {
            std::thread::sleep(std::time::Duration::from_millis(500));
        }
        !probe.status.success()
    });
    assert!(
        denied,
        "the policy never took effect:\n{}",
        server.log_tail()
    );

    let (_, stderr) = run(&server.kubeconfig());
    let line = once(&stderr, "at most one replica here");
    for part in [
        "apps/v1 Deployment webshop/web",
        "rejected by https://127.0.0.1:",
        "Invalid (422): ",
        "denied request: at most one replica here",
    ] {
        assert!(line.contains(part), "{part} missing from: {line}");
    }

    // Not allowed: the same admin, impersonating a user no Role grants anything.
    let alice = kubeconfig(&server, dir.path(), "alice", |t| {
        t.replacen(
            "    client-key-data:",
            "    as: alice\n    client-key-data:",
            1,
        )
    });
    let (_, stderr) = run(&alice);
    let line = once(&stderr, "User \"alice\" cannot");
    for part in [
        "v1 ConfigMap harmony-system/harmony-namespace-webshop",
        "forbidden by https://127.0.0.1:",
        "Role or ClusterRole",
    ] {
        assert!(line.contains(part), "{part} missing from: {line}");
    }

    // Not even authenticated: credentials the server does not know.
    let stranger = kubeconfig(&server, dir.path(), "stranger", |t| {
        let kept: Vec<&str> = t
            .lines()
            .filter(|l| !l.trim_start().starts_with("client-"))
            .collect();
        format!("{}\n    token: not-a-real-token\n", kept.join("\n"))
    });
    let (_, stderr) = run(&stranger);
    let line = once(&stderr, "refused the credentials");
    assert!(line.contains("Unauthorized (401)"), "{line}");
    assert!(
        line.contains("kubeconfig"),
        "the fix names the kubeconfig: {line}"
    );
    assert!(!stderr.contains("not-a-real-token"), "{stderr}");

    // A server certificate the kubeconfig does not trust: the verdict, then the fix.
    let untrusting = kubeconfig(&server, dir.path(), "untrusting", |t| {
        let kept: Vec<&str> = t
            .lines()
            .filter(|l| !l.trim_start().starts_with("certificate-authority-data"))
            .collect();
        kept.join("\n")
    });
    let (_, stderr) = run(&untrusting);
    let line = once(&stderr, "set its certificate-authority-data");
    assert!(
        line.contains("cannot reach API server https://127.0.0.1:"),
        "{line}"
    );
    assert!(
        line.contains("invalid peer certificate: UnknownIssuer"),
        "{line}"
    );
}

#[test]
fn an_unreachable_server_is_reported_once_on_stderr_at_every_verbosity() {
    // Nothing listens on port 1: the connection is refused at once.
    let dir = tempfile::tempdir().unwrap();
    let kubeconfig = dir.path().join("kubeconfig");
    std::fs::write(
        &kubeconfig,
        "apiVersion: v1\nkind: Config\nclusters:\n- name: c\n  cluster:\n    server: https://127.0.0.1:1\n    insecure-skip-tls-verify: true\ncontexts:\n- name: c\n  context: {cluster: c, user: u}\ncurrent-context: c\nusers:\n- name: u\n  user: {token: not-a-real-token}\n",
    )
    .unwrap();
    for verbosity in [None, Some("-v")] {
        let out = Command::new(env!("CARGO_BIN_EXE_example-webapp"))
            .arg("--kubeconfig")
            .arg(&kubeconfig)
            .arg("--yes")
            .args(verbosity)
            .stdin(Stdio::null())
            .output()
            .expect("example binary starts");
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(1), "{stderr}");
        // kube-rs logs the same failure at error level (`failed with error client error
        // (Connect)`): the program's logger must keep it out below -vv.
        let line = once(&stderr, "client error (Connect)");
        assert!(
            line.contains("cannot reach API server https://127.0.0.1:1/"),
            "{line}"
        );
        assert!(line.contains("Connection refused"), "the cause: {line}");
        assert!(!stderr.contains("not-a-real-token"), "{stderr}");
    }
}
