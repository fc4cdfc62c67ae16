//! The connection the Score generates for a replica, used for real: the replica `Cluster`'s
//! `externalClusters` entry (rendered by MultisitePostgreSQLScore) drives a libpq >= 17 client
//! through an haproxy that routes by SNI like the OpenShift router's passthrough frontend, to a
//! real PostgreSQL 18 with TLS, running `IDENTIFY_SYSTEM` on a replication connection.

use serde_json::Value;
use std::collections::BTreeMap;

use harmony::domain::{Inventory, Maestro, RunContext, RunOptions, Score, ScoreStatus};
use harmony::infra::multi_site::MultiSiteTopology;
use harmony::infra::render::RenderTopology;
use harmony_e2e::DataPath;
use harmony_modules::postgresql::MultisitePostgreSQLScore;

type Sites = MultiSiteTopology<RenderTopology>;

/// Renders the Score and returns the replica's `externalClusters` entry for the primary (the one
/// its `spec.replica.source` names).
async fn generated_external_cluster(score: MultisitePostgreSQLScore) -> Value {
    let dir = tempfile::tempdir().unwrap();
    let ctx = RunContext {
        out_dir: dir.path().to_path_buf(),
        ..RunContext::default()
    };
    let sites = ["site-paris", "site-newyork"].map(|s| {
        (
            s.parse().unwrap(),
            RenderTopology::from_context(&ctx).with_site(s),
        )
    });
    let mut maestro = Maestro::new(Inventory::empty(), MultiSiteTopology::new("pg", sites));
    let scores: Vec<Box<dyn Score<Sites>>> = vec![Box::new(score)];
    maestro.register(scores);
    assert!(maestro.validate(&[0]).is_empty());
    let reports = maestro.run_all(RunOptions::default()).await.unwrap();
    assert_eq!(reports[0].status, ScoreStatus::Success, "{reports:?}");
    let file = dir.path().join(
        "site-newyork/kubernetes/namespaces/tenant-a/cluster.postgresql.cnpg.io_finance-db.yaml",
    );
    let replica: Value = serde_yaml::from_str(&std::fs::read_to_string(&file).unwrap()).unwrap();
    let source = &replica["spec"]["replica"]["source"];
    replica["spec"]["externalClusters"]
        .as_array()
        .unwrap()
        .iter()
        .find(|e| &e["name"] == source)
        .unwrap_or_else(|| panic!("no entry named by spec.replica.source: {replica}"))
        .clone()
}

/// libpq parameters from the entry, as the operator builds them: `connectionParameters` as they
/// are, plus the files of `sslCert`/`sslKey`/`sslRootCert` (here the data path's files, which
/// play the copied secrets). The only transport substitutions: `hostaddr` (the Route host does
/// not resolve on this machine) and haproxy's port instead of 443.
fn libpq_params(entry: &Value, dp: &DataPath) -> BTreeMap<String, String> {
    let mut params: BTreeMap<String, String> = entry["connectionParameters"]
        .as_object()
        .unwrap()
        .iter()
        .map(|(k, v)| (k.clone(), v.as_str().unwrap().to_string()))
        .collect();
    assert_eq!(
        params["port"], "443",
        "the Score targets the router's TLS port"
    );
    params.insert("port".into(), dp.haproxy_port().to_string());
    params.insert("hostaddr".into(), "127.0.0.1".into());
    let file = |p: std::path::PathBuf| p.display().to_string();
    assert_eq!(entry["sslCert"]["key"], "tls.crt");
    assert_eq!(entry["sslKey"]["key"], "tls.key");
    assert_eq!(entry["sslRootCert"]["key"], "ca.crt");
    params.insert("sslcert".into(), file(dp.client_cert_path()));
    params.insert("sslkey".into(), file(dp.client_key_path()));
    params.insert("sslrootcert".into(), file(dp.ca_cert_path()));
    params
}

#[tokio::test(flavor = "multi_thread")]
async fn the_generated_replica_connection_replicates_through_an_sni_router_and_needs_direct_tls() {
    let mut score = MultisitePostgreSQLScore::new(
        "finance-db",
        "tenant-a",
        "10Gi",
        "site-paris",
        "",
        &["site-newyork"],
    );
    score.spec.topology.primary.host = None;
    score.spec.topology.primary.apps_domain = Some("apps.site-paris.example.com".into());
    let entry = generated_external_cluster(score).await;
    let host = entry["connectionParameters"]["host"]
        .as_str()
        .unwrap()
        .to_string();
    assert_eq!(host, "finance-db-tenant-a.apps.site-paris.example.com");

    // The data path's server certificate carries the Route host, as serverAltDNSNames makes
    // the operator's certificate do.
    let dp = tokio::task::block_in_place(|| DataPath::start(&host))
        .unwrap_or_else(|e| panic!("cannot start the data path: {e}"));
    let params = libpq_params(&entry, &dp);
    assert_eq!(params["sslmode"], "verify-full");
    assert_eq!(params["sslnegotiation"], "direct");
    assert_eq!(params["user"], "streaming_replica");

    let ok = tokio::task::block_in_place(|| dp.connect(&params)).unwrap();
    assert_eq!(ok["ok"], true, "{ok}\n{}", dp.logs());
    assert!(
        ok["systemid"]
            .as_str()
            .is_some_and(|s| !s.is_empty() && s.chars().all(|c| c.is_ascii_digit())),
        "{ok}"
    );
    assert!(ok["libpq"].as_u64().unwrap_or_default() >= 170000, "{ok}");

    // The validation rule, proven: the same parameters with classic negotiation (an SSLRequest
    // first, which carries no SNI) cannot pass the router.
    let mut classic = params.clone();
    classic.remove("sslnegotiation");
    let refused = tokio::task::block_in_place(|| dp.connect(&classic)).unwrap();
    assert_eq!(refused["ok"], false, "{refused}\n{}", dp.logs());
}
