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
    s.install_crds().unwrap_or_else(|e| panic!("{e}"));
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
    // No PostgreSQL runs behind these API servers: nothing could ever stream.
    s.spec.wait_for_streaming = false;
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
            ..ApplyOptions::default()
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

/// The namespaces of a site: everything the Score applies is a namespace or lives in one (the
/// API server refuses objects in a namespace that does not exist), so an unchanged list means
/// nothing was applied there.
fn namespaces(server: &ApiServer) -> Vec<String> {
    let list = get_json(server, &["namespaces"]);
    list["items"]
        .as_array()
        .unwrap()
        .iter()
        .map(|n| n["metadata"]["name"].as_str().unwrap().to_string())
        .collect()
}

/// Fails unless every site still has exactly the namespaces it had `before`, and no `tenant-a`.
fn assert_nothing_applied(sites: &[(&str, &ApiServer, Vec<String>)], why: &str) {
    for (name, server, before) in sites {
        let now = namespaces(server);
        assert_eq!(&now, before, "{why}: site {name} changed");
        assert!(
            !now.iter().any(|n| n == "tenant-a"),
            "{why}: site {name} has the namespace tenant-a"
        );
    }
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
    // CloudNativePG's distributed topology: the replica names the primary and streams from it.
    let external = replica["spec"]["externalClusters"]
        .as_array()
        .unwrap()
        .iter()
        .find(|e| e["name"] == "finance-db-site-paris")
        .unwrap_or_else(|| panic!("no entry for the primary: {replica}"));
    assert_eq!(external["connectionParameters"]["host"], HOST);
    assert_eq!(external["connectionParameters"]["sslnegotiation"], "direct");
    assert_eq!(external["sslRootCert"]["name"], "finance-db-site-paris-ca");
    assert_eq!(
        replica["spec"]["replica"],
        json!({"primary": "finance-db-site-paris", "self": "finance-db-site-newyork", "source": "finance-db-site-paris"})
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
    let before = [
        ("site-paris", &paris, namespaces(&paris)),
        ("site-newyork", &newyork, namespaces(&newyork)),
    ];
    let report = run(sites(&paris, &newyork, &RunContext::default()), score(5)).await;
    assert_eq!(report.status, ScoreStatus::Failed, "{report:?}");
    let message = format!("{report:?}");
    assert!(message.contains("no OpenShift Route API"), "{message}");
    assert!(message.contains("loadBalancer"), "{message}");
    assert_nothing_applied(
        &before,
        "a failed exposure check must come before any apply",
    );
}

#[tokio::test(flavor = "multi_thread")]
async fn plan_before_the_operator_ran_shows_creates_and_says_why_secrets_are_not_copied() {
    let (paris, newyork) = (start_with_crds(), start_with_crds());
    let plan = RunContext {
        plan: true,
        ..RunContext::default()
    };
    let before = [
        ("site-paris", &paris, namespaces(&paris)),
        ("site-newyork", &newyork, namespaces(&newyork)),
    ];
    let report = run(sites(&paris, &newyork, &plan), score(1)).await;
    assert_eq!(report.status, ScoreStatus::Success, "{report:?}");
    // The objects the Score makes, each planned as a Create on its site.
    for (object, site) in [
        ("v1 Namespace tenant-a", "site-paris"),
        (
            "postgresql.cnpg.io/v1 Cluster tenant-a/finance-db",
            "site-paris",
        ),
        (
            "route.openshift.io/v1 Route tenant-a/finance-db",
            "site-paris",
        ),
        ("v1 Namespace tenant-a", "site-newyork"),
        (
            "postgresql.cnpg.io/v1 Cluster tenant-a/finance-db",
            "site-newyork",
        ),
    ] {
        assert_eq!(
            change(&report, object, site).action,
            ChangeAction::Create,
            "{object} on {site}"
        );
    }
    assert!(
        report
            .changes
            .iter()
            .all(|c| c.action == ChangeAction::Create),
        "{report:?}"
    );
    // The operator has not run: no secret to copy, and the report says why.
    assert!(
        !report.changes.iter().any(|c| c.object.contains("Secret")),
        "{report:?}"
    );
    assert!(
        report
            .details
            .iter()
            .any(|d| d.contains("does not exist yet")),
        "{report:?}"
    );
    assert_nothing_applied(&before, "a plan applies nothing");
}

#[tokio::test(flavor = "multi_thread")]
async fn a_minor_upgrade_shows_in_plan_as_an_image_update_on_every_site() {
    let (paris, newyork) = (start_with_crds(), start_with_crds());
    operator_secrets(&paris, "CLIENT-CERT-V1").await;
    let at = |version: &str| {
        let mut s = score(30);
        s.spec.cluster.version = version.into();
        s
    };
    let report = run(sites(&paris, &newyork, &RunContext::default()), at("17.4")).await;
    assert_eq!(report.status, ScoreStatus::Success, "{report:?}");
    for server in [&paris, &newyork] {
        let cluster = get_json(
            server,
            &[
                "clusters.postgresql.cnpg.io",
                "finance-db",
                "-n",
                "tenant-a",
            ],
        );
        assert_eq!(
            cluster["spec"]["imageName"],
            "ghcr.io/cloudnative-pg/postgresql:17.4"
        );
    }

    let plan = RunContext {
        plan: true,
        ..RunContext::default()
    };
    let report = run(sites(&paris, &newyork, &plan), at("17.11")).await;
    assert_eq!(report.status, ScoreStatus::Success, "{report:?}");
    for site in ["site-paris", "site-newyork"] {
        let cluster = change(
            &report,
            "postgresql.cnpg.io/v1 Cluster tenant-a/finance-db",
            site,
        );
        assert_eq!(cluster.action, ChangeAction::Update, "{cluster:?}");
        let image: Vec<_> = cluster
            .diff
            .iter()
            .map(|d| (d.path.as_str(), d.old.as_deref(), d.new.as_deref()))
            .collect();
        assert_eq!(
            image,
            [(
                "spec.imageName",
                Some("\"ghcr.io/cloudnative-pg/postgresql:17.4\""),
                Some("\"ghcr.io/cloudnative-pg/postgresql:17.11\"")
            )],
            "only the image changes on {site}"
        );
    }
    // A plan changes nothing.
    let cluster = get_json(
        &newyork,
        &[
            "clusters.postgresql.cnpg.io",
            "finance-db",
            "-n",
            "tenant-a",
        ],
    );
    assert_eq!(
        cluster["spec"]["imageName"],
        "ghcr.io/cloudnative-pg/postgresql:17.4"
    );
}

/// A stand-in for OpenShift's `ingresses.config.openshift.io` (kind `Ingress`, cluster-scoped):
/// tests/crds has no such CRD, so this one declares its group, version and kind with an open
/// spec. Enough for the Score to read `cluster`'s `.spec.domain`; not OpenShift's own schema.
const STAND_IN_INGRESS_CONFIG_CRD: &str = r#"{"apiVersion": "apiextensions.k8s.io/v1", "kind": "CustomResourceDefinition",
 "metadata": {"name": "ingresses.config.openshift.io"},
 "spec": {"group": "config.openshift.io", "scope": "Cluster",
  "names": {"plural": "ingresses", "singular": "ingress", "kind": "Ingress"},
  "versions": [{"name": "v1", "served": true, "storage": true,
   "schema": {"openAPIV3Schema": {"type": "object", "properties": {"spec": {
    "type": "object", "x-kubernetes-preserve-unknown-fields": true}}}}}]}}"#;

/// Installs the stand-in CRD on `server` and creates `cluster` with `spec.domain`.
fn stand_in_ingress_config(server: &ApiServer, domain: &str) {
    let dir = tempfile::tempdir().unwrap();
    let crd = dir.path().join("ingress-config-crd.json");
    std::fs::write(&crd, STAND_IN_INGRESS_CONFIG_CRD).unwrap();
    let config = dir.path().join("ingress-config.json");
    std::fs::write(
        &config,
        json!({"apiVersion": "config.openshift.io/v1", "kind": "Ingress",
               "metadata": {"name": "cluster"}, "spec": {"domain": domain}})
        .to_string(),
    )
    .unwrap();
    for args in [
        vec!["apply", "-f", crd.to_str().unwrap()],
        vec![
            "wait",
            "--for=condition=Established",
            "--timeout=60s",
            "crd/ingresses.config.openshift.io",
        ],
        vec!["apply", "-f", config.to_str().unwrap()],
    ] {
        let out = server.kubectl(&args);
        assert!(
            out.status.success(),
            "kubectl {args:?}: {}",
            String::from_utf8_lossy(&out.stderr)
        );
    }
}

#[tokio::test(flavor = "multi_thread")]
async fn the_route_host_defaults_from_a_stand_in_openshift_ingress_config_and_an_explicit_host_wins()
 {
    let (paris, newyork) = (start_with_crds(), start_with_crds());
    stand_in_ingress_config(&paris, "apps.paris.example.com");
    operator_secrets(&paris, "CLIENT-CERT-V1").await;
    let derived = "finance-db-tenant-a.apps.paris.example.com";
    let no_host = || {
        let mut s = score(30);
        s.spec.topology.primary.host = None;
        s
    };

    let report = run(sites(&paris, &newyork, &RunContext::default()), no_host()).await;
    assert_eq!(report.status, ScoreStatus::Success, "{report:?}");
    assert!(
        report.details.iter().any(|d| d
            == &format!("Route host {derived} derived from the ingress domain of site site-paris (ingresses.config.openshift.io/cluster)")),
        "{report:?}"
    );
    let route = get_json(
        &paris,
        &["routes.route.openshift.io", "finance-db", "-n", "tenant-a"],
    );
    assert_eq!(route["spec"]["host"], derived);
    let cluster = |server: &ApiServer| {
        get_json(
            server,
            &[
                "clusters.postgresql.cnpg.io",
                "finance-db",
                "-n",
                "tenant-a",
            ],
        )
    };
    assert_eq!(
        cluster(&paris)["spec"]["certificates"]["serverAltDNSNames"],
        json!([derived])
    );
    let replica = cluster(&newyork);
    let primary_entry = replica["spec"]["externalClusters"]
        .as_array()
        .unwrap()
        .iter()
        .find(|e| e["name"] == "finance-db-site-paris")
        .unwrap_or_else(|| panic!("no entry for the primary in {replica}"));
    assert_eq!(primary_entry["connectionParameters"]["host"], derived);

    // An explicit host still wins: the plan moves the Route to it.
    let plan = RunContext {
        plan: true,
        ..RunContext::default()
    };
    let mut explicit = no_host();
    explicit.spec.topology.primary.host = Some("db.paris.example.org".into());
    let report = run(sites(&paris, &newyork, &plan), explicit).await;
    assert_eq!(report.status, ScoreStatus::Success, "{report:?}");
    let moved = change(
        &report,
        "route.openshift.io/v1 Route tenant-a/finance-db",
        "site-paris",
    );
    assert_eq!(moved.action, ChangeAction::Update, "{moved:?}");
    assert!(
        moved
            .diff
            .iter()
            .any(|d| d.path == "spec.host" && d.new.as_deref() == Some("\"db.paris.example.org\"")),
        "{moved:?}"
    );

    // Neither a host nor an ingress domain: the field is named and nothing is applied.
    let out = paris.kubectl(&["delete", "ingresses.config.openshift.io", "cluster"]);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let report = run(sites(&paris, &newyork, &RunContext::default()), no_host()).await;
    assert_eq!(report.status, ScoreStatus::Failed, "{report:?}");
    assert!(
        report.message.contains("topology.primary.host"),
        "{report:?}"
    );
    assert!(report.message.contains("appsDomain"), "{report:?}");
    assert!(report.changes.is_empty(), "{report:?}");
}
