//! The operator's `Ready` follows the replicas: a real PostgreSQL 18 primary and a real
//! streaming standby (`harmony_e2e::pg_datapath::replicated`, each behind its own Route host on
//! one haproxy port, TLS first, verify-full), two site API servers with the real CloudNativePG
//! CRDs, and the operator measuring them through the hosts. No CNPG operator runs: the test
//! writes what it would write (the clusters' certificates, their status). Tools:
//! `bash tests/pg-datapath/install.sh` (tests/setup.sh runs it).

mod operator_support;

use base64::Engine;
use base64::engine::general_purpose::STANDARD;
use std::collections::BTreeMap;
use std::net::SocketAddr;
use std::time::Duration;

use harmony_e2e::ApiServer;
use harmony_e2e::pg_datapath::replicated::Replicated;
use harmony_operator::OperatorConfig;
use operator_support::{
    apply_ok, condition, control_plane, declare_site, finance_db, kubectl_ok, start, wait_for,
};

const HOSTS: [&str; 2] = [
    "finance-db-tenant-a.apps.site-paris.example.com",
    "finance-db-tenant-a.apps.site-newyork.example.com",
];
/// Generous: a standby catching up on loopback, a reconcile every second.
const TIMEOUT: Duration = Duration::from_secs(120);

/// Plays the CNPG operator on a site: the cluster's own `<name>-replication` client
/// certificate and `<name>-ca`, which the status read authenticates with.
fn cnpg_secrets(site: &ApiServer, r: &Replicated) {
    let dp = r.data_path();
    let b64 = |p: std::path::PathBuf| STANDARD.encode(std::fs::read(p).unwrap());
    let yaml = format!(
        "apiVersion: v1\nkind: Namespace\nmetadata: {{name: tenant-a}}\n---\n\
         apiVersion: v1\nkind: Secret\nmetadata: {{name: finance-db-ca, namespace: tenant-a}}\ndata: {{ca.crt: {}}}\n---\n\
         apiVersion: v1\nkind: Secret\nmetadata: {{name: finance-db-replication, namespace: tenant-a}}\ntype: kubernetes.io/tls\ndata: {{tls.crt: {}, tls.key: {}}}\n",
        b64(dp.ca_cert_path()),
        b64(dp.client_cert_path()),
        b64(dp.client_key_path()),
    );
    apply_ok(site, &yaml);
}

/// Plays the CNPG operator's status write once the operator applied the `Cluster`.
fn cnpg_status(site: &ApiServer) {
    wait_for("the Cluster on the site", TIMEOUT, || {
        let out = site.kubectl(&[
            "get",
            "clusters.postgresql.cnpg.io",
            "finance-db",
            "-n",
            "tenant-a",
        ]);
        (out.status.success().then_some(()), "not applied yet".into())
    });
    kubectl_ok(
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
            r#"{"status":{"phase":"Cluster in healthy state","readyInstances":1}}"#,
        ],
    );
}

fn sql(r: &Replicated, i: usize, q: &str) -> String {
    r.sql(i, q).unwrap_or_else(|e| panic!("{e}\n{}", r.logs()))
}

/// Waits until `Ready` has `reason`, returning the resource.
fn until_ready_reason(cp: &ApiServer, r: &Replicated, reason: &str) -> serde_json::Value {
    wait_for(&format!("Ready reason {reason}"), TIMEOUT, || {
        let res = finance_db(cp);
        let c = condition(&res, "Ready");
        let current = res["status"]["observedGeneration"] == res["metadata"]["generation"];
        (
            (c.1 == reason && current).then(|| res.clone()),
            format!("{c:?}\n{}", r.logs()),
        )
    })
}

#[test]
fn ready_follows_the_real_standby_streaming_with_the_test_writing_cnpg_secrets_and_status() {
    let r =
        Replicated::start(HOSTS).unwrap_or_else(|e| panic!("cannot start primary + standby: {e}"));
    sql(
        &r,
        0,
        "CREATE TABLE t (v text); INSERT INTO t VALUES ('one')",
    );
    let cp = control_plane();
    let (paris, newyork) = (start(true), start(true));
    declare_site(&cp, "site-paris", &paris);
    declare_site(&cp, "site-newyork", &newyork);
    cnpg_secrets(&paris, &r);
    cnpg_secrets(&newyork, &r);

    // The hosts do not resolve here: the operator connects to haproxy for both (SNI and
    // verify-full still use the hosts).
    let haproxy = SocketAddr::from(([127, 0, 0, 1], r.data_path().haproxy_port()));
    let kubeconfig = kube::config::Kubeconfig::read_from(cp.kubeconfig()).unwrap();
    let runtime = tokio::runtime::Runtime::new().unwrap();
    let config = runtime
        .block_on(kube::Config::from_custom_kubeconfig(
            kubeconfig,
            &Default::default(),
        ))
        .unwrap();
    let client = runtime
        .block_on(async { kube::Client::try_from(config) })
        .unwrap();
    let controller = runtime.spawn(harmony_operator::run(
        client,
        OperatorConfig {
            resync: Duration::from_secs(1),
            backoff_base: Duration::from_millis(500),
            backoff_max: Duration::from_secs(5),
            status_connect_to: BTreeMap::from(HOSTS.map(|h| (h.to_string(), haproxy))),
            ..OperatorConfig::default()
        },
    ));
    apply_ok(
        &cp,
        &format!(
            "apiVersion: harmony.io/v1alpha1\nkind: MultisitePostgreSQL\nmetadata: {{name: finance-db, namespace: tenant-a}}\n\
             spec:\n  version: \"17\"\n  storage: 1Gi\n  credentialsTimeoutSeconds: 30\n\
             \x20 topology:\n    primary: {{site: site-paris, host: {}}}\n    replicas: [{{site: site-newyork}}]\n    replicaHosts: {{site-newyork: {}}}\n",
            HOSTS[0], HOSTS[1]
        ),
    );
    cnpg_status(&paris);
    cnpg_status(&newyork);

    // Streaming, caught up: Ready, with the figures per site.
    let caught_up = "site-newyork: streaming, lag 0 B (0.0 s), 1/1 instances ready";
    let res = wait_for("Ready with the replica caught up", TIMEOUT, || {
        let res = finance_db(&cp);
        let (ready, figures) = (
            condition(&res, "Ready"),
            condition(&res, "ReplicasStreaming"),
        );
        let done = ready.0 == "True" && figures.2.contains(caught_up);
        (
            done.then(|| res.clone()),
            format!("{ready:?}\n{figures:?}\n{}", r.logs()),
        )
    });
    let (streaming, reason, _) = condition(&res, "ReplicasStreaming");
    assert_eq!((streaming.as_str(), reason.as_str()), ("True", "Streaming"));
    assert!(
        !res["status"].to_string().contains("PRIVATE KEY"),
        "no secret in the status"
    );
    let sites = res["status"]["sites"].to_string();
    assert!(sites.contains("streaming, lag 0 B"), "{sites}");

    // Replay paused on the standby while the primary takes writes: not Ready, and the
    // condition names the replica, why, and how far behind it is.
    sql(&r, 1, "SELECT pg_wal_replay_pause()");
    wait_for("replay paused", TIMEOUT, || {
        let state = sql(&r, 1, "SELECT pg_get_wal_replay_pause_state()");
        ((state == "paused").then_some(()), state)
    });
    sql(
        &r,
        0,
        "INSERT INTO t SELECT 'while paused ' || g FROM generate_series(1, 1000) g",
    );
    let res = until_ready_reason(&cp, &r, "ReplicaNotStreaming");
    let (ready, _, message) = condition(&res, "Ready");
    assert_eq!(ready, "False");
    assert!(
        message.contains("site-newyork: not streaming: WAL replay is paused"),
        "{message}"
    );
    let (streaming, _, figures) = condition(&res, "ReplicasStreaming");
    assert_eq!(streaming, "False");
    assert!(
        figures.contains("site-newyork: not streaming") && !figures.contains("lag 0 B"),
        "{figures}"
    );
    assert_eq!(condition(&res, "Degraded").0, "True");

    // Resumed: it catches up and the resource is Ready again, with no user action.
    sql(&r, 1, "SELECT pg_wal_replay_resume()");
    let res = until_ready_reason(&cp, &r, "Reconciled");
    assert_eq!(condition(&res, "ReplicasStreaming").0, "True");
    assert_eq!(sql(&r, 1, "SELECT count(*) FROM t"), "1001");
    controller.abort();
}
