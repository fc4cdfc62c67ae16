//! The operator against three real kube-apiserver fixtures: the control plane's own API server
//! (where the resources live) and two site API servers with the real CloudNativePG and Route
//! CRDs. No CNPG operator runs: the test plays its part by creating `<name>-ca` and
//! `<name>-replication` on the primary site.

use base64::Engine;
use base64::engine::general_purpose::STANDARD;
use serde_json::{Value, json};
use std::time::Duration;

use harmony_e2e::ApiServer;
use harmony_e2e::eventually::eventually;
use harmony_operator::OperatorConfig;
use operator_support::{apply_ok, condition, declare_site, get_json, kubectl_ok, start, wait_for};

mod operator_support;

const HOST: &str = "finance-db-tenant-a.apps.site-paris.example.com";

fn apply_yaml(server: &ApiServer, yaml: &str) -> std::process::Output {
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("manifest.yaml");
    std::fs::write(&file, yaml).unwrap();
    server.kubectl(&["apply", "--server-side", "-f", &file.display().to_string()])
}

/// Installs the operator's CRDs and waits until the API server serves them.
fn install_operator_crds(server: &ApiServer) {
    apply_ok(server, &harmony_operator::crds_yaml().unwrap());
    kubectl_ok(
        server,
        &[
            "wait",
            "--for=condition=Established",
            "--timeout=60s",
            "crd/multisitepostgresqls.harmony.io",
            "crd/postgresqls.harmony.io",
            "crd/regionagents.harmony.io",
            "crd/sites.harmony.io",
        ],
    );
}

/// What the agent rollout applies on a site for namespace `harmony-agent` (see
/// `modules/src/region/manifests.rs`), but the Namespace and the bootstrap Secret: kind, name,
/// namespace (none for cluster-scoped objects).
const AGENT_OBJECTS: [(&str, &str, Option<&str>); 9] = [
    ("deployments.apps", "harmony-agent", Some("harmony-agent")),
    ("configmap", "harmony-agent", Some("harmony-agent")),
    ("serviceaccount", "harmony-agent", Some("harmony-agent")),
    (
        "roles.rbac.authorization.k8s.io",
        "harmony-agent",
        Some("harmony-agent"),
    ),
    (
        "rolebindings.rbac.authorization.k8s.io",
        "harmony-agent",
        Some("harmony-agent"),
    ),
    (
        "clusterroles.rbac.authorization.k8s.io",
        "harmony-agent-harmony-agent-inventory",
        None,
    ),
    (
        "clusterrolebindings.rbac.authorization.k8s.io",
        "harmony-agent-harmony-agent-inventory",
        None,
    ),
    (
        "clusterroles.rbac.authorization.k8s.io",
        "harmony-agent-harmony-agent-projects",
        None,
    ),
    (
        "clusterrolebindings.rbac.authorization.k8s.io",
        "harmony-agent-harmony-agent-projects",
        None,
    ),
];

/// Whether `kind`/`name` exists; a kubectl failure (other than not found) fails the test.
fn exists(server: &ApiServer, kind: &str, name: &str, namespace: Option<&str>) -> bool {
    let mut args = vec!["get", kind, name, "--ignore-not-found", "-o", "name"];
    if let Some(ns) = namespace {
        args.extend(["-n", ns]);
    }
    !kubectl_ok(server, &args).trim().is_empty()
}

fn decoded(secret: &Value, key: &str) -> String {
    String::from_utf8(
        STANDARD
            .decode(secret["data"][key].as_str().unwrap())
            .unwrap(),
    )
    .unwrap()
}

/// Plays the CNPG operator on the primary site.
fn operator_secrets(paris: &ApiServer, client_cert: &str) {
    let b64 = |s: &str| STANDARD.encode(s);
    let yaml = format!(
        "apiVersion: v1\nkind: Namespace\nmetadata: {{name: tenant-a}}\n---\n\
         apiVersion: v1\nkind: Secret\nmetadata: {{name: finance-db-ca, namespace: tenant-a}}\ndata: {{ca.crt: {}, ca.key: {}}}\n---\n\
         apiVersion: v1\nkind: Secret\nmetadata: {{name: finance-db-replication, namespace: tenant-a}}\ntype: kubernetes.io/tls\ndata: {{tls.crt: {}, tls.key: {}}}\n",
        b64("CA-CERT"),
        b64("CA-KEY-NEVER-COPIED"),
        b64(client_cert),
        b64("CLIENT-KEY")
    );
    apply_ok(paris, &yaml);
}

fn finance_db(storage: &str, replica_site: &str, version: &str) -> String {
    format!(
        "apiVersion: harmony.io/v1alpha1\nkind: MultisitePostgreSQL\nmetadata: {{name: finance-db, namespace: tenant-a}}\n\
         spec:\n  version: \"{version}\"\n  storage: {storage}\n  resources: {{requests: {{cpu: 500m, memory: 1Gi}}}}\n  credentialsTimeoutSeconds: 3\n\
         \x20 topology:\n    primary: {{site: site-paris, host: {HOST}}}\n    replicas: [{{site: {replica_site}}}]\n"
    )
}

async fn client_for(server: &ApiServer) -> kube::Client {
    let kc = kube::config::Kubeconfig::read_from(server.kubeconfig()).unwrap();
    let config = kube::Config::from_custom_kubeconfig(kc, &Default::default())
        .await
        .unwrap();
    kube::Client::try_from(config).unwrap()
}

/// Runs the operator against `cp` with quick resyncs and backoffs, reaching region sites through
/// `control_plane` when given.
async fn spawn_operator(
    cp: &ApiServer,
    control_plane: Option<harmony::infra::control_plane::ControlPlaneClient>,
) -> tokio::task::JoinHandle<()> {
    tokio::spawn(harmony_operator::run(
        client_for(cp).await,
        OperatorConfig {
            resync: Duration::from_secs(2),
            backoff_base: Duration::from_millis(500),
            backoff_max: Duration::from_secs(5),
            control_plane,
            ..OperatorConfig::default()
        },
    ))
}

#[tokio::test(flavor = "multi_thread")]
async fn a_multisite_postgresql_resource_is_reconciled_kept_in_sync_and_cleaned_up() {
    let cp = start(false);
    let (paris, newyork) = (start(true), start(true));
    install_operator_crds(&cp);
    kubectl_ok(&cp, &["create", "namespace", "harmony-system"]);
    kubectl_ok(&cp, &["create", "namespace", "tenant-a"]);
    declare_site(&cp, "site-paris", &paris);
    declare_site(&cp, "site-newyork", &newyork);

    // The API server itself refuses what the Score would refuse, with a readable message.
    let refused = apply_yaml(&cp, &finance_db("10Gi", "site-newyork", "15"));
    assert!(!refused.status.success());
    let err = String::from_utf8_lossy(&refused.stderr);
    assert!(
        err.contains(
            "PostgreSQL before 17 cannot replicate through an OpenShift passthrough Route"
        ),
        "{err}"
    );
    let refused = apply_yaml(&cp, &finance_db("10Gi", "site-paris", "17"));
    assert!(
        String::from_utf8_lossy(&refused.stderr)
            .contains("a replica site must not be the primary's site")
    );

    operator_secrets(&paris, "CERT-V1");
    let controller = spawn_operator(&cp, None).await;

    // An unknown site is a condition, not a crash; it names the declared sites.
    apply_ok(&cp, &finance_db("10Gi", "site-tokyo", "17"));
    let (_, reason, message) =
        wait_for("the UnknownSite condition", Duration::from_secs(60), || {
            let r = get_json(
                &cp,
                &[
                    "multisitepostgresqls.harmony.io",
                    "finance-db",
                    "-n",
                    "tenant-a",
                ],
            )
            .unwrap_or_default();
            let c = condition(&r, "Ready");
            ((c.1 == "UnknownSite").then(|| c.clone()), format!("{c:?}"))
        });
    assert_eq!(reason, "UnknownSite");
    assert!(message.contains("site-newyork, site-paris"), "{message}");

    // Fixed: everything on the right sites. The replica has no host of its own
    // (topology.replicaHosts), so nobody can tell whether it streams: applied, but not Ready,
    // and the condition says which replica and the fix (operator_health.rs measures a real
    // standby).
    apply_ok(&cp, &finance_db("10Gi", "site-newyork", "17"));
    let resource = wait_for(
        "applied, not Ready: ReplicaUnmeasured",
        Duration::from_secs(90),
        || {
            let r = get_json(
                &cp,
                &[
                    "multisitepostgresqls.harmony.io",
                    "finance-db",
                    "-n",
                    "tenant-a",
                ],
            )
            .unwrap_or_default();
            let c = condition(&r, "Ready");
            let done = c.1 == "ReplicaUnmeasured"
                && r["status"]["observedGeneration"] == r["metadata"]["generation"];
            (done.then(|| r.clone()), format!("{c:?}"))
        },
    );
    let (ready, _, message) = condition(&resource, "Ready");
    assert_eq!(ready, "False");
    assert!(
        message.contains("set topology.replicaHosts.site-newyork"),
        "{message}"
    );
    let (streaming, reason, figures) = condition(&resource, "ReplicasStreaming");
    assert_eq!(
        (streaming.as_str(), reason.as_str()),
        ("False", "ReplicaUnmeasured")
    );
    assert!(figures.contains("site-newyork: "), "{figures}");
    assert_eq!(condition(&resource, "Degraded").0, "True");
    assert!(
        resource["metadata"]["finalizers"]
            .to_string()
            .contains("harmony.io/cleanup")
    );
    assert!(
        resource["status"]["lastCertificateSync"].is_string(),
        "{resource}"
    );
    assert_eq!(
        resource["status"]["sites"][0]["state"], "Synced",
        "{resource}"
    );
    let primary = get_json(
        &paris,
        &[
            "clusters.postgresql.cnpg.io",
            "finance-db",
            "-n",
            "tenant-a",
        ],
    )
    .unwrap();
    assert_eq!(
        primary["spec"]["certificates"]["serverAltDNSNames"],
        json!([HOST])
    );
    assert!(
        get_json(
            &paris,
            &["routes.route.openshift.io", "finance-db", "-n", "tenant-a"]
        )
        .is_some()
    );
    assert!(
        get_json(
            &newyork,
            &["routes.route.openshift.io", "finance-db", "-n", "tenant-a"]
        )
        .is_none()
    );
    let copy = get_json(
        &newyork,
        &[
            "secret",
            "finance-db-site-paris-replication",
            "-n",
            "tenant-a",
        ],
    )
    .unwrap();
    assert_eq!(decoded(&copy, "tls.crt"), "CERT-V1");
    let ca = get_json(
        &newyork,
        &["secret", "finance-db-site-paris-ca", "-n", "tenant-a"],
    )
    .unwrap();
    assert!(
        ca["data"].get("ca.key").is_none(),
        "the CA key never leaves the primary site"
    );

    // The CNPG operator rotates the certificate: the controller re-syncs it, no user action.
    operator_secrets(&paris, "CERT-V2");
    wait_for(
        "the rotated certificate on site-newyork",
        Duration::from_secs(60),
        || {
            let s = get_json(
                &newyork,
                &[
                    "secret",
                    "finance-db-site-paris-replication",
                    "-n",
                    "tenant-a",
                ],
            )
            .unwrap();
            let v = decoded(&s, "tls.crt");
            ((v == "CERT-V2").then_some(()), v)
        },
    );

    // Editing the spec updates every site.
    kubectl_ok(
        &cp,
        &[
            "patch",
            "multisitepostgresqls.harmony.io",
            "finance-db",
            "-n",
            "tenant-a",
            "--type",
            "merge",
            "-p",
            r#"{"spec":{"storage":"20Gi"}}"#,
        ],
    );
    for site in [&paris, &newyork] {
        wait_for(
            "storage 20Gi on both sites",
            Duration::from_secs(60),
            || {
                let c = get_json(
                    site,
                    &[
                        "clusters.postgresql.cnpg.io",
                        "finance-db",
                        "-n",
                        "tenant-a",
                    ],
                )
                .unwrap();
                let size = c["spec"]["storage"]["size"]
                    .as_str()
                    .unwrap_or_default()
                    .to_string();
                ((size == "20Gi").then_some(()), size)
            },
        );
    }

    // Deleting the resource removes what it created on each site, and nothing else.
    kubectl_ok(
        &cp,
        &[
            "delete",
            "multisitepostgresqls.harmony.io",
            "finance-db",
            "-n",
            "tenant-a",
            "--wait=true",
            "--timeout=60s",
        ],
    );
    for (site, objects) in [
        (
            &paris,
            vec![
                "clusters.postgresql.cnpg.io/finance-db",
                "routes.route.openshift.io/finance-db",
            ],
        ),
        (
            &newyork,
            vec![
                "clusters.postgresql.cnpg.io/finance-db",
                "secret/finance-db-site-paris-replication",
                "secret/finance-db-site-paris-ca",
            ],
        ),
    ] {
        for object in objects {
            assert!(
                !site
                    .kubectl(&["get", object, "-n", "tenant-a"])
                    .status
                    .success(),
                "{object} survived the deletion"
            );
        }
    }
    for kept in [
        "secret/finance-db-ca",
        "secret/finance-db-replication",
        "namespace/tenant-a",
    ] {
        assert!(
            paris
                .kubectl(&["get", kept, "-n", "tenant-a"])
                .status
                .success(),
            "{kept} is not ours and must stay"
        );
    }
    controller.abort();
}

#[tokio::test(flavor = "multi_thread")]
async fn the_control_plane_binary_runs_the_controller() {
    use harmony_e2e::multi_region::{ControlPlane, ControlPlaneOptions, Pki};

    let api = start(false);
    install_operator_crds(&api);
    kubectl_ok(&api, &["create", "namespace", "tenant-a"]);

    let pki = Pki::new().unwrap();
    let kubeconfig = api.kubeconfig().display().to_string();
    let mut control_plane = ControlPlane::start(
        harmony_e2e::bins!().control_plane(),
        &pki,
        ControlPlaneOptions {
            extra_args: vec![
                "--operator-kubeconfig".into(),
                kubeconfig,
                "--operator-resync-s".into(),
                "1".into(),
                "--operator-ca".into(),
                pki.ca().display().to_string(),
            ],
            ..ControlPlaneOptions::default()
        },
    )
    .unwrap();

    // No Site is declared: the resources get conditions saying why they are not Ready.
    apply_ok(&api, &finance_db("10Gi", "site-newyork", "17"));
    let single = "apiVersion: harmony.io/v1alpha1\nkind: PostgreSQL\nmetadata: {name: inventory, namespace: tenant-a}\nspec: {version: \"17\", storage: 1Gi}\n";
    apply_ok(&api, single);
    let (_, _, message) = wait_for(
        "UnknownSite from the control plane's controller",
        Duration::from_secs(60),
        || {
            let r = get_json(
                &api,
                &[
                    "multisitepostgresqls.harmony.io",
                    "finance-db",
                    "-n",
                    "tenant-a",
                ],
            )
            .unwrap_or_default();
            let c = condition(&r, "Ready");
            (
                (c.1 == "UnknownSite").then(|| c.clone()),
                format!("{c:?}\n{}", control_plane.logs()),
            )
        },
    );
    assert!(message.contains("declared sites: none"), "{message}");
    let (_, _, message) = wait_for(
        "InvalidSpec for a PostgreSQL without a site",
        Duration::from_secs(60),
        || {
            let r = get_json(
                &api,
                &["postgresqls.harmony.io", "inventory", "-n", "tenant-a"],
            )
            .unwrap_or_default();
            let c = condition(&r, "Ready");
            ((c.1 == "InvalidSpec").then(|| c.clone()), format!("{c:?}"))
        },
    );
    assert!(message.contains("spec.site"), "{message}");

    // The embedded operator reaches region sites through its own control plane: a Site whose
    // region was never created is reported as unreachable there, naming the region.
    let site = "apiVersion: harmony.io/v1alpha1\nkind: Site\nmetadata: {name: site-newyork}\nspec: {region: newyork}\n";
    apply_ok(&api, site);
    let ledger = "apiVersion: harmony.io/v1alpha1\nkind: PostgreSQL\nmetadata: {name: ledger, namespace: tenant-a}\nspec: {version: \"17\", storage: 1Gi, site: site-newyork}\n";
    apply_ok(&api, ledger);
    let (_, _, message) = wait_for(
        "SiteUnreachable for a region that does not exist",
        Duration::from_secs(60),
        || {
            let r = get_json(
                &api,
                &["postgresqls.harmony.io", "ledger", "-n", "tenant-a"],
            )
            .unwrap_or_default();
            let c = condition(&r, "Ready");
            (
                (c.1 == "SiteUnreachable").then(|| c.clone()),
                format!("{c:?}\n{}", control_plane.logs()),
            )
        },
    );
    assert!(message.contains("has no region newyork"), "{message}");
    control_plane.kill9();
}

#[tokio::test(flavor = "multi_thread")]
async fn a_replica_site_reached_only_through_its_region_agent_is_reconciled_and_cleaned_up() {
    use harmony::types::{RegionId, ZoneId};
    use harmony_e2e::multi_region::{Agent, AgentOptions, ControlPlane, ControlPlaneOptions, Pki};

    let cp = start(false);
    let (paris, newyork) = (start(true), start(true));
    install_operator_crds(&cp);
    kubectl_ok(&cp, &["create", "namespace", "harmony-system"]);
    kubectl_ok(&cp, &["create", "namespace", "tenant-a"]);
    declare_site(&cp, "site-paris", &paris);

    // site-newyork is reached only through its region's agent: the operator holds no
    // credentials for it.
    let pki = Pki::new().unwrap();
    let control_plane = ControlPlane::start(
        harmony_e2e::bins!().control_plane(),
        &pki,
        ControlPlaneOptions::default(),
    )
    .unwrap();
    let admin = control_plane.client();
    let created = admin
        .create_region(
            &RegionId::parse("newyork").unwrap(),
            &ZoneId::parse("newyork-a").unwrap(),
        )
        .await
        .unwrap()
        .expect("a new region");
    let dir = tempfile::tempdir().unwrap();
    let token_file = dir.path().join("bootstrap-token");
    std::fs::write(&token_file, created.bootstrap_token.expose()).unwrap();
    let mut agent = Agent::start(
        harmony_e2e::bins!().agent(),
        &AgentOptions {
            bootstrap_token_file: Some(token_file),
            ..AgentOptions::new(
                &control_plane.url(),
                "newyork",
                "newyork-a",
                pki.ca(),
                newyork.kubeconfig(),
                dir.path().join("identity"),
            )
        },
        &dir.path().join("agent.log"),
    )
    .unwrap();
    eventually(
        Duration::from_secs(60),
        "region newyork healthy",
        || async {
            admin
                .region("newyork")
                .await
                .unwrap()
                .is_some_and(|r| r.is_healthy())
                .then_some(())
        },
    )
    .await
    .unwrap_or_else(|w| panic!("agent not healthy: {w}\n{}", agent.log()));
    apply_ok(
        &cp,
        "apiVersion: harmony.io/v1alpha1\nkind: Site\nmetadata: {name: site-newyork}\nspec: {region: newyork}\n",
    );

    operator_secrets(&paris, "CERT-V1");
    let controller = spawn_operator(&cp, Some(admin.clone())).await;
    apply_ok(&cp, &finance_db("10Gi", "site-newyork", "17"));
    // Applied through the agent (its replica has no host of its own: not measurable).
    wait_for(
        "applied through the agent: ReplicaUnmeasured",
        Duration::from_secs(90),
        || {
            let r = get_json(
                &cp,
                &[
                    "multisitepostgresqls.harmony.io",
                    "finance-db",
                    "-n",
                    "tenant-a",
                ],
            )
            .unwrap_or_default();
            let c = condition(&r, "Ready");
            ((c.1 == "ReplicaUnmeasured").then_some(()), format!("{c:?}"))
        },
    );
    let replica = get_json(
        &newyork,
        &[
            "clusters.postgresql.cnpg.io",
            "finance-db",
            "-n",
            "tenant-a",
            "--show-managed-fields",
        ],
    )
    .unwrap();
    // CloudNativePG's distributed topology: the replica names the primary and streams from it.
    assert_eq!(
        replica["spec"]["replica"],
        serde_json::json!({"primary": "finance-db-site-paris", "self": "finance-db-site-newyork",
            "source": "finance-db-site-paris"})
    );
    assert!(
        replica["metadata"]["managedFields"]
            .to_string()
            .contains("harmony-agent"),
        "applied by the agent"
    );
    let copy = get_json(
        &newyork,
        &[
            "secret",
            "finance-db-site-paris-replication",
            "-n",
            "tenant-a",
        ],
    )
    .unwrap();
    assert_eq!(decoded(&copy, "tls.crt"), "CERT-V1");

    kubectl_ok(
        &cp,
        &[
            "delete",
            "multisitepostgresqls.harmony.io",
            "finance-db",
            "-n",
            "tenant-a",
            "--wait=true",
            "--timeout=60s",
        ],
    );
    for object in [
        "clusters.postgresql.cnpg.io/finance-db",
        "secret/finance-db-site-paris-replication",
        "secret/finance-db-site-paris-ca",
    ] {
        assert!(
            !newyork
                .kubectl(&["get", object, "-n", "tenant-a"])
                .status
                .success(),
            "{object} survived on the agent's site"
        );
    }
    controller.abort();
    agent.kill9();
}

#[tokio::test(flavor = "multi_thread")]
async fn a_region_agent_resource_rolls_out_the_agent_until_the_region_is_healthy() {
    use harmony_e2e::multi_region::{Agent, AgentOptions, ControlPlane, ControlPlaneOptions, Pki};

    let cp = start(false);
    let site = start(false);
    install_operator_crds(&cp);
    kubectl_ok(&cp, &["create", "namespace", "harmony-system"]);
    declare_site(&cp, "site-eu", &site);

    let pki = Pki::new().unwrap();
    let control_plane = ControlPlane::start(
        harmony_e2e::bins!().control_plane(),
        &pki,
        ControlPlaneOptions::default(),
    )
    .unwrap();
    let admin = control_plane.client();
    let controller = spawn_operator(&cp, Some(admin.clone())).await;
    let ca = std::fs::read_to_string(pki.ca()).unwrap();
    let resource = json!({
        "apiVersion": "harmony.io/v1alpha1", "kind": "RegionAgent",
        "metadata": {"name": "eu-west", "namespace": "harmony-system"},
        "spec": {"region": "eu-west", "zone": "paris-1", "site": "site-eu",
                 "image": "registry.example.com/harmony-agent:test", "caPem": ca, "waitSeconds": 60,
                 "clusterRules": [{"apiGroups": ["apiextensions.k8s.io"],
                                   "resources": ["customresourcedefinitions"],
                                   "verbs": ["get", "create", "patch"]}]}
    });
    apply_ok(&cp, &serde_yaml::to_string(&resource).unwrap());
    // A RegionAgent asking for Secrets cluster-wide is refused before anything is created.
    let greedy = json!({
        "apiVersion": "harmony.io/v1alpha1", "kind": "RegionAgent",
        "metadata": {"name": "greedy", "namespace": "harmony-system"},
        "spec": {"region": "greedy", "zone": "z", "site": "site-eu",
                 "image": "registry.example.com/harmony-agent:test",
                 "clusterRules": [{"apiGroups": [""], "resources": ["secrets"], "verbs": ["get"]}]}
    });
    apply_ok(&cp, &serde_yaml::to_string(&greedy).unwrap());

    // The kubelet's part (the fixture has none): start the agent from what the rollout applied.
    let dir = tempfile::tempdir().unwrap();
    let (config, token) = wait_for(
        "the agent's ConfigMap and bootstrap Secret on the site",
        Duration::from_secs(60),
        || {
            let cm = get_json(
                &site,
                &["configmap", "harmony-agent", "-n", "harmony-agent"],
            );
            let secret = get_json(
                &site,
                &["secret", "harmony-agent-bootstrap", "-n", "harmony-agent"],
            );
            match (cm, secret) {
                (Some(cm), Some(secret)) => (
                    Some((cm["data"].clone(), decoded(&secret, "token"))),
                    String::new(),
                ),
                _ => (None, "not applied yet".into()),
            }
        },
    );
    std::fs::write(
        dir.path().join("ca.crt"),
        config["ca.crt"].as_str().unwrap(),
    )
    .unwrap();
    std::fs::write(dir.path().join("token"), &token).unwrap();
    let mut agent = Agent::start(
        harmony_e2e::bins!().agent(),
        &AgentOptions {
            bootstrap_token_file: Some(dir.path().join("token")),
            ..AgentOptions::new(
                config["HARMONY_CONTROL_PLANE_URL"].as_str().unwrap(),
                config["HARMONY_REGION"].as_str().unwrap(),
                config["HARMONY_ZONE"].as_str().unwrap(),
                dir.path().join("ca.crt"),
                site.kubeconfig(),
                dir.path().join("identity"),
            )
        },
        &dir.path().join("agent.log"),
    )
    .unwrap();

    let resource = wait_for("RegionAgent Ready=True", Duration::from_secs(90), || {
        let r = get_json(
            &cp,
            &["regionagents.harmony.io", "eu-west", "-n", "harmony-system"],
        )
        .unwrap_or_default();
        let c = condition(&r, "Ready");
        (
            (c.0 == "True").then(|| r.clone()),
            format!("{c:?}\n{}", agent.log()),
        )
    });
    assert_eq!(resource["status"]["sites"][0]["site"], "site-eu");
    // clusterRules became the agent's cluster-scoped ClusterRole, exactly as written.
    let cluster_role = get_json(
        &site,
        &[
            "clusterroles.rbac.authorization.k8s.io",
            "harmony-agent-harmony-agent-cluster",
        ],
    )
    .expect("the ClusterRole of spec.clusterRules");
    assert_eq!(
        cluster_role["rules"],
        json!([{"apiGroups": ["apiextensions.k8s.io"],
                "resources": ["customresourcedefinitions"],
                "verbs": ["get", "create", "patch"]}])
    );
    let (_, _, message) = wait_for(
        "InvalidSpec for a RegionAgent asking for Secrets",
        Duration::from_secs(60),
        || {
            let r = get_json(
                &cp,
                &["regionagents.harmony.io", "greedy", "-n", "harmony-system"],
            )
            .unwrap_or_default();
            let c = condition(&r, "Ready");
            ((c.1 == "InvalidSpec").then(|| c.clone()), format!("{c:?}"))
        },
    );
    assert!(
        message.contains("spec.clusterRules[0].resources") && message.contains("Secrets"),
        "{message}"
    );
    assert!(
        admin.region("greedy").await.unwrap().is_none(),
        "an invalid RegionAgent created its region"
    );
    let region = admin
        .region("eu-west")
        .await
        .unwrap()
        .expect("the region exists");
    assert!(region.is_healthy() && region.bootstrapped, "{region:?}");
    assert!(
        !control_plane.logs().contains(&token),
        "the bootstrap token is never logged"
    );

    // Deleting the resource removes the agent's manifests from the site: first, they are there
    // (the bootstrap Secret was read above; the rollout may prune it once the agent holds an
    // identity).
    assert!(!token.is_empty(), "the bootstrap Secret held no token");
    for (kind, name, namespace) in AGENT_OBJECTS {
        assert!(
            exists(&site, kind, name, namespace),
            "{kind} {name} should be on the site before the resource is deleted"
        );
    }
    kubectl_ok(
        &cp,
        &[
            "delete",
            "regionagents.harmony.io",
            "eu-west",
            "-n",
            "harmony-system",
            "--wait=true",
            "--timeout=60s",
        ],
    );
    let survivors: Vec<String> = AGENT_OBJECTS
        .iter()
        .chain(&[
            ("secret", "harmony-agent-bootstrap", Some("harmony-agent")),
            (
                "clusterroles.rbac.authorization.k8s.io",
                "harmony-agent-harmony-agent-cluster",
                None,
            ),
        ])
        .filter(|(kind, name, namespace)| exists(&site, kind, name, *namespace))
        .map(|(kind, name, _)| format!("{kind} {name}"))
        .collect();
    assert!(
        survivors.is_empty(),
        "deleting the RegionAgent left its objects on the site: {survivors:?}"
    );
    agent.kill9();
    controller.abort();
}
