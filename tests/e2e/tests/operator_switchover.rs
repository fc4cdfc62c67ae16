//! A switchover requested through the resource: `spec.topology.primary.site` names where the
//! primary should be, and when the live primary (read from the sites' CloudNativePG `Cluster`s)
//! is elsewhere the operator runs `PostgreSQLSwitchoverScore` before applying anything. Two
//! site API servers with the real CloudNativePG CRDs, where no operator runs: THE TEST PLAYS
//! CLOUDNATIVE-PG (the clusters' secrets, their distributed `Cluster`s, their status). No
//! PostgreSQL runs behind the hosts, so the target cannot be shown to stream and the switchover
//! is refused: the resource says so, and no `Cluster` changed.

mod operator_support;

use base64::Engine;
use base64::engine::general_purpose::STANDARD;
use serde_json::{Value, json};
use std::time::Duration;

use harmony::domain::RunContext;
use harmony::domain::Topology;
use harmony::domain::capability::{ApplyOptions, K8sClient, K8sObject};
use harmony_e2e::ApiServer;
use harmony_modules::postgresql::{
    DistributedCluster, DistributedPostgreSQL, MemberRole, MultisitePostgreSQLScore,
};
use harmony_operator::OperatorConfig;
use operator_support::{
    apply_ok, condition, control_plane, declare_site, finance_db, get_json, start, wait_for,
};

const PARIS: &str = "finance-db-tenant-a.apps.site-paris.example.com";
const NEWYORK: &str = "finance-db-tenant-a.apps.site-newyork.example.com";

/// THE TEST PLAYS CLOUDNATIVE-PG on `site`: the cluster's secrets, its `Cluster` in the
/// distributed topology naming site-paris primary (as `MultisitePostgreSQLScore` renders it),
/// and the status the operator would report.
async fn cnpg(site: &ApiServer, name: &str) {
    let mut declared = MultisitePostgreSQLScore::new(
        "finance-db",
        "tenant-a",
        "10Gi",
        "site-paris",
        PARIS,
        &["site-newyork"],
    );
    declared
        .spec
        .topology
        .replica_hosts
        .insert("site-newyork".into(), NEWYORK.into());
    let members = DistributedCluster::new(
        declared.resolved_cluster().unwrap(),
        declared.site_exposures().unwrap(),
    )
    .unwrap();
    let k8s = site.topology("cnpg", &RunContext::default());
    k8s.ensure_ready().await.unwrap();
    let pem = STANDARD.encode("NO-PEM");
    let secrets = [
        json!({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "tenant-a"}}),
        json!({"apiVersion": "v1", "kind": "Secret", "metadata": {"name": "finance-db-ca", "namespace": "tenant-a"},
               "data": {"ca.crt": pem}}),
        json!({"apiVersion": "v1", "kind": "Secret", "metadata": {"name": "finance-db-replication", "namespace": "tenant-a"},
               "type": "kubernetes.io/tls", "data": {"tls.crt": pem, "tls.key": pem}}),
    ];
    let objects: Vec<K8sObject> = secrets
        .into_iter()
        .map(|v| K8sObject::new(v).unwrap())
        .collect();
    k8s.apply(&objects, &ApplyOptions::default()).await.unwrap();
    let owner = declared.owners()[0].clone();
    k8s.apply_member(
        &members,
        name,
        &MemberRole::primary_is("site-paris"),
        None,
        &owner,
    )
    .await
    .unwrap_or_else(|e| panic!("{e}"));
    let status = json!({"status": {"phase": "Cluster in healthy state", "timelineID": 1,
        "currentPrimary": "finance-db-1", "readyInstances": 1}})
    .to_string();
    operator_support::kubectl_ok(
        site,
        &[
            "patch",
            "clusters.postgresql.cnpg.io",
            "finance-db",
            "-n",
            "tenant-a",
            "--subresource=status",
            "--type=merge",
            "-p",
            &status,
        ],
    );
}

fn cluster(site: &ApiServer) -> Value {
    get_json(
        site,
        &[
            "clusters.postgresql.cnpg.io",
            "finance-db",
            "-n",
            "tenant-a",
        ],
    )
    .expect("the Cluster")
}

#[test]
fn a_moved_primary_site_runs_a_switchover_refused_while_the_target_does_not_stream_with_the_test_playing_cnpg()
 {
    let cp = control_plane();
    let (paris, newyork) = (start(true), start(true));
    declare_site(&cp, "site-paris", &paris);
    declare_site(&cp, "site-newyork", &newyork);
    let runtime = tokio::runtime::Runtime::new().unwrap();
    runtime.block_on(async {
        cnpg(&paris, "site-paris").await;
        cnpg(&newyork, "site-newyork").await;
    });
    let before = [cluster(&paris), cluster(&newyork)];
    assert_eq!(
        before[1]["spec"]["replica"]["primary"], "finance-db-site-paris",
        "the live primary is site-paris"
    );

    let kubeconfig = kube::config::Kubeconfig::read_from(cp.kubeconfig()).unwrap();
    let client = runtime.block_on(async {
        let config = kube::Config::from_custom_kubeconfig(kubeconfig, &Default::default())
            .await
            .unwrap();
        kube::Client::try_from(config).unwrap()
    });
    let controller = runtime.spawn(harmony_operator::run(
        client,
        OperatorConfig {
            resync: Duration::from_secs(1),
            backoff_base: Duration::from_millis(500),
            backoff_max: Duration::from_secs(5),
            ..OperatorConfig::default()
        },
    ));

    // The resource wants the primary on site-newyork: a switchover.
    apply_ok(
        &cp,
        &format!(
            "apiVersion: harmony.io/v1alpha1\nkind: MultisitePostgreSQL\nmetadata: {{name: finance-db, namespace: tenant-a}}\n\
             spec:\n  version: \"17\"\n  storage: 10Gi\n\
             \x20 topology:\n    primary: {{site: site-newyork, host: {NEWYORK}}}\n    replicas: [{{site: site-paris}}]\n    replicaHosts: {{site-paris: {PARIS}}}\n"
        ),
    );
    let (_, _, message) = wait_for(
        "the switchover's refusal in the status",
        Duration::from_secs(90),
        || {
            let r = finance_db(&cp);
            let c = condition(&r, "Ready");
            (
                (c.1 == "SwitchoverRefused").then(|| c.clone()),
                format!("{c:?}"),
            )
        },
    );
    assert!(
        message.starts_with("switchover from site-paris to site-newyork refused"),
        "{message}"
    );
    assert!(message.contains("nothing was changed"), "{message}");

    // Refused before anything changed: every Cluster is as CloudNativePG left it.
    let after = [cluster(&paris), cluster(&newyork)];
    for (b, a) in before.iter().zip(&after) {
        assert_eq!(b["spec"], a["spec"], "a Cluster's spec changed");
        assert_eq!(b["metadata"]["generation"], a["metadata"]["generation"]);
    }
    controller.abort();
}

/// The `MultisitePostgreSQL` with its primary on `primary` (the other site its replica), each
/// site with its own host.
fn resource(primary: &str) -> String {
    let (replica, primary_host, replica_host) = match primary {
        "site-paris" => ("site-newyork", PARIS, NEWYORK),
        _ => ("site-paris", NEWYORK, PARIS),
    };
    format!(
        "apiVersion: harmony.io/v1alpha1\nkind: MultisitePostgreSQL\nmetadata: {{name: finance-db, namespace: tenant-a}}\n\
         spec:\n  version: \"17\"\n  storage: 10Gi\n  credentialsTimeoutSeconds: 3\n\
         \x20 topology:\n    primary: {{site: {primary}, host: {primary_host}}}\n    replicas: [{{site: {replica}}}]\n    replicaHosts: {{{replica}: {replica_host}}}\n"
    )
}

#[test]
fn moving_the_primary_of_clusters_without_the_distributed_topology_is_refused_with_the_test_playing_cnpg()
 {
    let cp = control_plane();
    let (paris, newyork) = (start(true), start(true));
    declare_site(&cp, "site-paris", &paris);
    declare_site(&cp, "site-newyork", &newyork);
    // THE TEST PLAYS AN EARLIER HARMONY RELEASE: the Clusters it applied before the distributed
    // topology, a standalone primary on site-paris and a `replica.enabled` replica on
    // site-newyork (today's Score renders the distributed shape, so it cannot make these).
    let old_cluster = |replica: bool| {
        let replica = if replica {
            concat!(
                "  replica: {enabled: true, source: finance-db-site-paris}\n",
                "  externalClusters:\n",
                "  - name: finance-db-site-paris\n",
                "    connectionParameters: {host: finance-db-tenant-a.apps.site-paris.example.com, ",
                "port: \"443\", user: streaming_replica, dbname: postgres, sslmode: verify-full}\n",
                "  bootstrap: {pg_basebackup: {source: finance-db-site-paris}}\n",
            )
        } else {
            ""
        };
        format!(
            concat!(
                "apiVersion: v1\nkind: Namespace\nmetadata: {{name: tenant-a}}\n---\n",
                "apiVersion: postgresql.cnpg.io/v1\nkind: Cluster\n",
                "metadata: {{name: finance-db, namespace: tenant-a}}\n",
                "spec:\n  instances: 1\n  imageName: ghcr.io/cloudnative-pg/postgresql:17\n",
                "  storage: {{size: 10Gi}}\n{}"
            ),
            replica
        )
    };
    apply_ok(&paris, &old_cluster(false));
    apply_ok(&newyork, &old_cluster(true));
    let runtime = tokio::runtime::Runtime::new().unwrap();
    let kubeconfig = kube::config::Kubeconfig::read_from(cp.kubeconfig()).unwrap();
    let client = runtime.block_on(async {
        let config = kube::Config::from_custom_kubeconfig(kubeconfig, &Default::default())
            .await
            .unwrap();
        kube::Client::try_from(config).unwrap()
    });
    let controller = runtime.spawn(harmony_operator::run(
        client,
        OperatorConfig {
            resync: Duration::from_secs(1),
            backoff_base: Duration::from_millis(500),
            backoff_max: Duration::from_secs(5),
            ..OperatorConfig::default()
        },
    ));
    let before = [cluster(&paris), cluster(&newyork)];
    assert_eq!(before[1]["spec"]["replica"]["enabled"], true);

    // Moving the primary would flip `replica.enabled` on both sites without CloudNativePG's
    // demotion handshake: refused, nothing changed.
    apply_ok(&cp, &resource("site-newyork"));
    let (_, _, message) = wait_for("the refusal", Duration::from_secs(90), || {
        let r = finance_db(&cp);
        let c = condition(&r, "Ready");
        let refused = c.1 == "SwitchoverRefused"
            && r["status"]["observedGeneration"] == r["metadata"]["generation"];
        (refused.then(|| c.clone()), format!("{c:?}"))
    });
    assert!(
        message.contains("spec.replica.enabled") && message.contains("nothing was changed"),
        "{message}"
    );
    assert!(
        message.contains(r#"set topology.primary.site back to "site-paris""#),
        "{message}"
    );
    let after = [cluster(&paris), cluster(&newyork)];
    for (b, a) in before.iter().zip(&after) {
        assert_eq!(b["spec"], a["spec"], "a Cluster's spec changed");
    }
    controller.abort();
}
