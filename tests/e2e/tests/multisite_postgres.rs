//! MultisitePostgreSQLScore across two real kube-apiserver fixtures (the two sites), with the
//! real CloudNativePG and OpenShift Route CRDs installed. No operator runs: the test plays its
//! part by creating `<name>-ca` and `<name>-replication` on the primary site.

use base64::Engine;
use base64::engine::general_purpose::STANDARD;
use serde_json::{Value, json};

use harmony::domain::capability::{ApplyOptions, K8sClient, K8sObject};
use harmony::domain::{
    ChangeAction, Inventory, Maestro, RunContext, RunOptions, Score, ScoreReport, ScoreStatus,
};
use harmony::infra::kube::K8sTopology;
use harmony::infra::multi_site::MultiSiteTopology;
use harmony_e2e::ApiServer;
use harmony_modules::postgresql::MultisitePostgreSQLScore;

const CA_KEY: &str = "-----BEGIN PRIVATE KEY-----\nCA-PRIVATE-KEY-MUST-NEVER-LEAVE-PARIS\n-----END PRIVATE KEY-----\n";
const HOST: &str = "finance-db-tenant-a.apps.site-paris.example.com";

type Sites = MultiSiteTopology<K8sTopology>;

fn start_with_crds() -> ApiServer {
    let s = ApiServer::start().unwrap_or_else(|e| panic!("{e}"));
    s.install_shared_crds().unwrap_or_else(|e| panic!("{e}"));
    s
}

fn sites(paris: &ApiServer, newyork: &ApiServer, ctx: &RunContext) -> Sites {
    MultiSiteTopology::new(
        "finance",
        [
            (
                "site-paris".parse().unwrap(),
                paris.topology("site-paris", ctx),
            ),
            (
                "site-newyork".parse().unwrap(),
                newyork.topology("site-newyork", ctx),
            ),
        ],
    )
}

fn score(timeout_s: u64) -> MultisitePostgreSQLScore {
    let mut s = MultisitePostgreSQLScore::new(
        "finance-db",
        "tenant-a",
        "10Gi",
        "site-paris",
        HOST,
        &["site-newyork"],
    );
    s.spec.cluster.resources.requests.cpu = Some("500m".into());
    s.spec.cluster.resources.requests.memory = Some("1Gi".into());
    s.spec.credentials_timeout_seconds = timeout_s;
    s
}

async fn run(topology: Sites, score: MultisitePostgreSQLScore) -> ScoreReport {
    let mut maestro = Maestro::new(Inventory::empty(), topology);
    let scores: Vec<Box<dyn Score<Sites>>> = vec![Box::new(score)];
    maestro.register(scores);
    assert!(
        maestro.validate(&[0]).is_empty(),
        "{:?}",
        maestro.validate(&[0])
    );
    let mut reports = maestro.run_all(RunOptions::default()).await.unwrap();
    reports.remove(0)
}

/// Plays the operator: `<name>-ca` (ca.crt and ca.key) and `<name>-replication` on the primary.
async fn operator_secrets(paris: &ApiServer, client_cert: &str) {
    let ctx = RunContext::default();
    let k8s = paris.topology("operator", &ctx);
    harmony::domain::Topology::ensure_ready(&k8s).await.unwrap();
    let b64 = |s: &str| STANDARD.encode(s);
    let secrets = [
        json!({"apiVersion": "v1", "kind": "Secret", "metadata": {"name": "finance-db-ca", "namespace": "tenant-a"},
               "data": {"ca.crt": b64("CA-CERT-PEM"), "ca.key": b64(CA_KEY)}}),
        json!({"apiVersion": "v1", "kind": "Secret", "metadata": {"name": "finance-db-replication", "namespace": "tenant-a"},
               "type": "kubernetes.io/tls", "data": {"tls.crt": b64(client_cert), "tls.key": b64("CLIENT-KEY-PEM")}}),
    ];
    let objects: Vec<K8sObject> = secrets
        .into_iter()
        .map(|v| K8sObject::new(v).unwrap())
        .collect();
    // A field manager of its own, as the operator has.
    k8s.apply(
        &objects,
        &ApplyOptions {
            force_conflicts: true,
            owner: None,
        },
    )
    .await
    .unwrap();
}

fn get_json(server: &ApiServer, args: &[&str]) -> Value {
    let mut full = vec!["get"];
    full.extend_from_slice(args);
    full.extend_from_slice(&["-o", "json"]);
    let out = server.kubectl(&full);
    assert!(
        out.status.success(),
        "kubectl {full:?}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    serde_json::from_slice(&out.stdout).unwrap()
}

fn decoded(secret: &Value, key: &str) -> String {
    String::from_utf8(
        STANDARD
            .decode(secret["data"][key].as_str().unwrap())
            .unwrap(),
    )
    .unwrap()
}

fn change<'a>(
    report: &'a ScoreReport,
    object: &str,
    site: &str,
) -> &'a harmony::domain::ObjectChange {
    report
        .changes
        .iter()
        .find(|c| c.object == object && c.location.as_deref().is_some_and(|l| l.starts_with(site)))
        .unwrap_or_else(|| panic!("no change for {object} on {site} in {:#?}", report.changes))
}

#[tokio::test(flavor = "multi_thread")]
async fn replicates_across_two_api_servers_copying_only_the_ca_certificate_and_resyncing_rotations()
{
    let (paris, newyork) = (start_with_crds(), start_with_crds());
    let ctx = RunContext::default();

    // Without the operator the secrets never appear: the timeout names the missing one, and
    // what was applied before it (primary Cluster and Route) is reported.
    let report = run(sites(&paris, &newyork, &ctx), score(1)).await;
    assert_eq!(report.status, ScoreStatus::Failed, "{report:?}");
    let message = format!("{report:?}");
    assert!(
        message.contains("v1 Secret tenant-a/finance-db-replication"),
        "{message}"
    );
    assert!(message.contains("Cluster tenant-a/finance-db"), "{message}");

    operator_secrets(&paris, "CLIENT-CERT-V1").await;
    let report = run(sites(&paris, &newyork, &ctx), score(30)).await;
    assert_eq!(report.status, ScoreStatus::Success, "{report:?}");

    // The primary: serverAltDNSNames holds the Route host, WAL is kept, the Route passes TLS through.
    let primary = get_json(
        &paris,
        &[
            "clusters.postgresql.cnpg.io",
            "finance-db",
            "-n",
            "tenant-a",
        ],
    );
    assert_eq!(
        primary["spec"]["certificates"]["serverAltDNSNames"],
        json!([HOST])
    );
    assert_eq!(
        primary["spec"]["postgresql"]["parameters"]["wal_keep_size"],
        "2GB"
    );
    let route = get_json(
        &paris,
        &["routes.route.openshift.io", "finance-db", "-n", "tenant-a"],
    );
    assert_eq!(
        route["spec"]["tls"],
        json!({"termination": "passthrough", "insecureEdgeTerminationPolicy": "None"})
    );
    assert_eq!(route["spec"]["to"]["name"], "finance-db-rw");
    assert_eq!(route["spec"]["host"], HOST);

    // The replica site: the client certificate and key, and a CA secret with ca.crt only.
    let replication = get_json(
        &newyork,
        &[
            "secret",
            "finance-db-site-paris-replication",
            "-n",
            "tenant-a",
        ],
    );
    assert_eq!(replication["type"], "kubernetes.io/tls");
    assert_eq!(decoded(&replication, "tls.crt"), "CLIENT-CERT-V1");
    assert_eq!(decoded(&replication, "tls.key"), "CLIENT-KEY-PEM");
    let ca = get_json(
        &newyork,
        &["secret", "finance-db-site-paris-ca", "-n", "tenant-a"],
    );
    assert_eq!(decoded(&ca, "ca.crt"), "CA-CERT-PEM");
    assert_eq!(
        ca["data"].as_object().unwrap().keys().collect::<Vec<_>>(),
        ["ca.crt"]
    );
    let replica = get_json(
        &newyork,
        &[
            "clusters.postgresql.cnpg.io",
            "finance-db",
            "-n",
            "tenant-a",
        ],
    );
    let external = &replica["spec"]["externalClusters"][0];
    assert_eq!(external["connectionParameters"]["host"], HOST);
    assert_eq!(external["connectionParameters"]["sslnegotiation"], "direct");
    assert_eq!(external["sslRootCert"]["name"], "finance-db-site-paris-ca");
    assert_eq!(
        replica["spec"]["replica"],
        json!({"enabled": true, "source": "finance-db-site-paris"})
    );
    assert!(
        replica["spec"].get("certificates").is_none(),
        "the replica's own certificate needs no Route host"
    );

    // No CA private key anywhere on the replica site, nor in the report.
    let all = get_json(&newyork, &["secrets", "--all-namespaces"]);
    let text = all.to_string();
    assert!(
        !text.contains(&STANDARD.encode(CA_KEY)) && !text.contains("ca.key"),
        "CA key leaked to the replica site"
    );
    assert!(
        !format!("{report:?}").contains("CA-PRIVATE-KEY"),
        "CA key in the report"
    );

    // Nothing changed: every object unchanged.
    let report = run(sites(&paris, &newyork, &ctx), score(30)).await;
    assert_eq!(report.status, ScoreStatus::Noop, "{report:?}");

    // The operator rotates the client certificate: the next run re-syncs it, and only it.
    operator_secrets(&paris, "CLIENT-CERT-V2").await;
    let report = run(sites(&paris, &newyork, &ctx), score(30)).await;
    assert_eq!(report.status, ScoreStatus::Success, "{report:?}");
    let rotated = change(
        &report,
        "v1 Secret tenant-a/finance-db-site-paris-replication",
        "site-newyork",
    );
    assert_eq!(rotated.action, ChangeAction::Update);
    assert!(
        rotated
            .diff
            .iter()
            .all(|d| d.new.as_deref() == Some("<redacted>")),
        "{rotated:?}"
    );
    assert!(
        !format!("{report:?}").contains("CLIENT-CERT-V2"),
        "secret value in the report"
    );
    assert_eq!(
        change(
            &report,
            "v1 Secret tenant-a/finance-db-site-paris-ca",
            "site-newyork"
        )
        .action,
        ChangeAction::Unchanged
    );
    let replication = get_json(
        &newyork,
        &[
            "secret",
            "finance-db-site-paris-replication",
            "-n",
            "tenant-a",
        ],
    );
    assert_eq!(decoded(&replication, "tls.crt"), "CLIENT-CERT-V2");
}

#[tokio::test(flavor = "multi_thread")]
async fn a_primary_site_without_the_route_api_fails_before_anything_is_applied() {
    let paris = ApiServer::start().unwrap_or_else(|e| panic!("{e}"));
    let newyork = start_with_crds();
    let report = run(sites(&paris, &newyork, &RunContext::default()), score(5)).await;
    assert_eq!(report.status, ScoreStatus::Failed, "{report:?}");
    let message = format!("{report:?}");
    assert!(message.contains("no OpenShift Route API"), "{message}");
    assert!(message.contains("loadBalancer"), "{message}");
    let out = paris.kubectl(&["get", "namespace", "tenant-a"]);
    assert!(
        !out.status.success(),
        "nothing may be applied on the primary site"
    );
}

#[tokio::test(flavor = "multi_thread")]
async fn plan_before_the_operator_ran_shows_creates_and_says_why_secrets_are_not_copied() {
    let (paris, newyork) = (start_with_crds(), start_with_crds());
    let plan = RunContext {
        plan: true,
        ..RunContext::default()
    };
    let report = run(sites(&paris, &newyork, &plan), score(1)).await;
    assert_eq!(report.status, ScoreStatus::Success, "{report:?}");
    assert!(
        report
            .changes
            .iter()
            .all(|c| c.action == ChangeAction::Create),
        "{report:?}"
    );
    assert!(
        report
            .details
            .iter()
            .any(|d| d.contains("does not exist yet")),
        "{report:?}"
    );
    let out = paris.kubectl(&["get", "namespace", "tenant-a"]);
    assert!(!out.status.success(), "a plan applies nothing");
}
