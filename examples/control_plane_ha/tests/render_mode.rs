//! The example as a user runs it: a real process, no terminal, render mode. What it renders is
//! what `--kubeconfig` would apply, so these checks are about the deployment's shape: the
//! database before the replicas, the replicas reading the URL CloudNativePG writes.

use std::path::Path;
use std::process::{Command, Output, Stdio};

use harmony_e2e::files::read_tree;

fn run(cwd: &Path) -> Output {
    Command::new(env!("CARGO_BIN_EXE_example-control-plane-ha"))
        .current_dir(cwd)
        .stdin(Stdio::null())
        .output()
        .expect("example binary starts")
}

fn yaml(bytes: &[u8]) -> serde_yaml::Value {
    serde_yaml::from_slice(bytes).expect("rendered YAML parses")
}

#[test]
fn renders_the_database_then_replicas_that_read_its_uri() {
    let dir = tempfile::tempdir().unwrap();
    let out = run(dir.path());
    let report = String::from_utf8_lossy(&out.stdout).into_owned();
    assert_eq!(
        out.status.code(),
        Some(0),
        "{report}{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let db_line = report.find("harmony-control-plane-db").expect(&report);
    let replicas_line = report
        .find("success   harmony-control-plane:")
        .expect(&report);
    assert!(
        db_line < replicas_line,
        "the database runs first:\n{report}"
    );

    let files = read_tree(&dir.path().join("harmony-out"));
    let find = |suffix: &str| {
        files
            .iter()
            .find(|(name, _)| name.ends_with(suffix))
            .map(|(_, bytes)| yaml(bytes))
            .unwrap_or_else(|| panic!("no {suffix} in {:?}", files.keys()))
    };
    let cluster = find("cluster.postgresql.cnpg.io_harmony-control-plane-db.yaml");
    assert_eq!(cluster["kind"], "Cluster");
    assert_eq!(cluster["spec"]["instances"], 3);

    let deployment = find("deployment.apps_harmony-control-plane.yaml");
    assert_eq!(deployment["spec"]["replicas"], 3);
    let container = &deployment["spec"]["template"]["spec"]["containers"][0];
    let url = container["env"]
        .as_sequence()
        .unwrap()
        .iter()
        .find(|e| e["name"] == "HARMONY_CP_DATABASE_URL")
        .expect("the replicas get the database URL");
    assert_eq!(
        url["valueFrom"]["secretKeyRef"]["name"],
        "harmony-control-plane-db-app"
    );
    assert_eq!(url["valueFrom"]["secretKeyRef"]["key"], "uri");
    let ca = container["env"]
        .as_sequence()
        .unwrap()
        .iter()
        .find(|e| e["name"] == "HARMONY_CP_DATABASE_CA_FILE")
        .expect("the replicas verify the database's certificate");
    assert_eq!(ca["value"], "/etc/harmony/db-ca/ca.crt");
    let volumes = deployment["spec"]["template"]["spec"]["volumes"]
        .as_sequence()
        .unwrap();
    let db_ca = volumes
        .iter()
        .find(|v| v["name"] == "db-ca")
        .expect("a volume for the database CA");
    assert_eq!(db_ca["secret"]["secretName"], "harmony-control-plane-db-ca");
    assert_eq!(
        db_ca["secret"]["items"].as_sequence().unwrap().len(),
        1,
        "only ca.crt is mounted, never the CA's key: {db_ca:?}"
    );
    let args: Vec<&str> = container["args"]
        .as_sequence()
        .unwrap()
        .iter()
        .filter_map(|a| a.as_str())
        .collect();
    assert!(args.contains(&"--replica-id=$(POD_NAME)"), "{args:?}");
    assert!(
        !args.iter().any(|a| a.starts_with("--db")),
        "no SQLite file: {args:?}"
    );

    let pdb = find("poddisruptionbudget.policy_harmony-control-plane.yaml");
    assert_eq!(pdb["spec"]["maxUnavailable"], 1);
    let service = find("service_harmony-control-plane.yaml");
    assert_eq!(service["spec"]["ports"][0]["targetPort"], 8443);
}
