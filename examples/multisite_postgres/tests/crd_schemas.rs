//! Every manifest the PostgreSQL Scores generate, validated offline against the real
//! CloudNativePG `Cluster` and OpenShift `Route` CRD schemas in `tests/crds`.

use serde_json::Value;
use std::path::{Path, PathBuf};

use example_multisite_postgres::{SITES, finance_db};
use harmony::domain::{Inventory, Maestro, RunContext, RunOptions, Score, ScoreStatus};
use harmony::infra::multi_site::MultiSiteTopology;
use harmony::infra::render::RenderTopology;
use harmony_modules::postgresql::{Exposure, MultisitePostgreSQLScore, PostgreSQLScore};

fn crds_dir() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../../tests/crds")
}

/// Drops keywords whose value is null (`anyOf: null` in the Route CRD): Kubernetes reads them as
/// absent, JSON Schema as malformed.
fn without_nulls(v: Value) -> Value {
    match v {
        Value::Object(map) => Value::Object(
            map.into_iter()
                .filter(|(_, v)| !v.is_null())
                .map(|(k, v)| (k, without_nulls(v)))
                .collect(),
        ),
        Value::Array(items) => Value::Array(items.into_iter().map(without_nulls).collect()),
        other => other,
    }
}

/// The `openAPIV3Schema` of the CRD in `file` for version `v1`.
fn schema(file: &str) -> Value {
    let path = crds_dir().join(file);
    let text = std::fs::read_to_string(&path).unwrap_or_else(|e| {
        panic!(
            "{}: {e} (the CRDs live in tests/crds of the repository)",
            path.display()
        )
    });
    let crd: Value = serde_yaml::from_str(&text).unwrap();
    crd["spec"]["versions"]
        .as_array()
        .unwrap()
        .iter()
        .find(|v| v["name"] == "v1")
        .map(|v| without_nulls(v["schema"]["openAPIV3Schema"].clone()))
        .unwrap()
}

/// Keys the schema does not declare: the API server would drop them (or refuse them with
/// strict field validation), so a typo must fail here.
fn unknown_fields(value: &Value, schema: &Value, path: &str, out: &mut Vec<String>) {
    if schema.get("x-kubernetes-preserve-unknown-fields") == Some(&Value::Bool(true)) {
        return;
    }
    match value {
        Value::Object(map) => {
            let props = schema.get("properties").and_then(Value::as_object);
            let additional = schema.get("additionalProperties");
            for (k, v) in map {
                // The API server validates metadata itself; CRD schemas leave it open.
                if path.is_empty() && k == "metadata" {
                    continue;
                }
                let child = format!("{path}.{k}");
                match (props.and_then(|p| p.get(k)), additional) {
                    (Some(s), _) => unknown_fields(v, s, &child, out),
                    (None, Some(s)) if s.is_object() => unknown_fields(v, s, &child, out),
                    (None, Some(Value::Bool(true))) => {}
                    _ => out.push(child),
                }
            }
        }
        Value::Array(items) => {
            if let Some(s) = schema.get("items") {
                for (i, v) in items.iter().enumerate() {
                    unknown_fields(v, s, &format!("{path}[{i}]"), out);
                }
            }
        }
        _ => {}
    }
}

fn check(manifest: &Value, schema: &Value, file: &Path) {
    let validator = jsonschema::validator_for(schema).expect("the CRD schema compiles");
    let errors: Vec<String> = validator
        .iter_errors(manifest)
        .map(|e| format!("{}: {e}", e.instance_path()))
        .collect();
    assert!(
        errors.is_empty(),
        "{} violates its CRD schema:\n{}",
        file.display(),
        errors.join("\n")
    );
    let mut unknown = Vec::new();
    unknown_fields(manifest, schema, "", &mut unknown);
    assert!(
        unknown.is_empty(),
        "{} has fields its CRD does not declare: {unknown:?}",
        file.display()
    );
}

fn yaml_files(dir: &Path, out: &mut Vec<PathBuf>) {
    for e in std::fs::read_dir(dir).unwrap().flatten() {
        let p = e.path();
        if p.is_dir() {
            yaml_files(&p, out);
        } else if p.extension().is_some_and(|x| x == "yaml") {
            out.push(p);
        }
    }
}

/// Renders `scores` into a temp folder and checks every Cluster and Route; returns the kinds seen.
async fn render_and_check(
    scores: Vec<Box<dyn Score<MultiSiteTopology<RenderTopology>>>>,
) -> Vec<String> {
    let dir = tempfile::tempdir().unwrap();
    let ctx = RunContext {
        out_dir: dir.path().to_path_buf(),
        ..RunContext::default()
    };
    let sites = SITES.iter().chain(&["site-tokyo"]).map(|s| {
        (
            s.parse().unwrap(),
            RenderTopology::from_context(&ctx).with_site(*s),
        )
    });
    let mut maestro = Maestro::new(Inventory::empty(), MultiSiteTopology::new("schemas", sites));
    maestro.register(scores);
    let all: Vec<usize> = (0..maestro.scores().len()).collect();
    assert!(
        maestro.validate(&all).is_empty(),
        "{:?}",
        maestro.validate(&all)
    );
    let reports = maestro.run_all(RunOptions::default()).await.unwrap();
    for r in &reports {
        assert_eq!(r.status, ScoreStatus::Success, "{r:?}");
    }
    let (cluster, route) = (
        schema("postgresql.cnpg.io_clusters.yaml"),
        schema("route.openshift.io_routes.yaml"),
    );
    let mut files = Vec::new();
    yaml_files(dir.path(), &mut files);
    let mut kinds = Vec::new();
    for f in files {
        let manifest: Value = serde_yaml::from_str(&std::fs::read_to_string(&f).unwrap()).unwrap();
        let kind = manifest["kind"].as_str().unwrap().to_string();
        match kind.as_str() {
            "Cluster" => check(&manifest, &cluster, &f),
            "Route" => check(&manifest, &route, &f),
            _ => {}
        }
        kinds.push(kind);
    }
    kinds.sort();
    kinds
}

#[tokio::test(flavor = "multi_thread")]
async fn route_exposure_manifests_match_the_real_crd_schemas() {
    let mut two_replicas = finance_db("18");
    two_replicas.name = "ledger".into();
    two_replicas
        .spec
        .topology
        .replicas
        .push(harmony_modules::postgresql::ReplicaSite {
            site: "site-tokyo".into(),
        });
    two_replicas.spec.cluster.resources.limits.cpu = Some("2".into());
    two_replicas
        .spec
        .cluster
        .image_catalog
        .insert("18".into(), "registry.example.com/postgresql:18.1".into());
    let kinds = render_and_check(vec![Box::new(finance_db("17")), Box::new(two_replicas)]).await;
    assert_eq!(
        kinds,
        [
            "Cluster", "Cluster", "Cluster", "Cluster", "Cluster", "Route", "Route"
        ]
    );
}

#[tokio::test(flavor = "multi_thread")]
async fn load_balancer_exposure_and_single_site_manifests_match_the_real_crd_schemas() {
    let mut lb = MultisitePostgreSQLScore::new(
        "orders",
        "shop",
        "5Gi",
        "site-paris",
        "orders-db.paris.example.com",
        &["site-newyork"],
    );
    lb.spec.exposure = Exposure::LoadBalancer;
    lb.spec.cluster.version = "15".into();
    lb.spec.cluster.instances = 3;
    let single = PostgreSQLScore::new("inventory", "shop", "1Gi");
    // A single-site Score runs on any site; render it through one of them.
    let kinds = render_and_check(vec![Box::new(lb)]).await;
    assert_eq!(kinds, ["Cluster", "Cluster", "Service"]);

    let dir = tempfile::tempdir().unwrap();
    let ctx = RunContext {
        out_dir: dir.path().to_path_buf(),
        ..RunContext::default()
    };
    let mut maestro = Maestro::new(Inventory::empty(), RenderTopology::from_context(&ctx));
    maestro.register(vec![Box::new(single)]);
    let reports = maestro.run_all(RunOptions::default()).await.unwrap();
    assert_eq!(reports[0].status, ScoreStatus::Success, "{reports:?}");
    let mut files = Vec::new();
    yaml_files(dir.path(), &mut files);
    assert_eq!(files.len(), 1);
    let manifest: Value =
        serde_yaml::from_str(&std::fs::read_to_string(&files[0]).unwrap()).unwrap();
    check(
        &manifest,
        &schema("postgresql.cnpg.io_clusters.yaml"),
        &files[0],
    );
}

#[test]
fn the_unknown_field_check_catches_a_typo() {
    let cluster = schema("postgresql.cnpg.io_clusters.yaml");
    let typo = serde_json::json!({"apiVersion": "postgresql.cnpg.io/v1", "kind": "Cluster",
        "metadata": {"name": "x"}, "spec": {"instances": 1, "certificates": {"serverAltDnsNames": ["a"]}}});
    let mut unknown = Vec::new();
    unknown_fields(&typo, &cluster, "", &mut unknown);
    assert_eq!(unknown, [".spec.certificates.serverAltDnsNames"]);
    let wrong_type = serde_json::json!({"apiVersion": "postgresql.cnpg.io/v1", "kind": "Cluster",
        "metadata": {"name": "x"}, "spec": {"instances": "three"}});
    let validator = jsonschema::validator_for(&cluster).unwrap();
    assert!(
        validator
            .iter_errors(&wrong_type)
            .any(|e| e.instance_path().to_string() == "/spec/instances")
    );
}
