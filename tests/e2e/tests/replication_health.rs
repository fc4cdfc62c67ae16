//! Replication health measured for real: a PostgreSQL 18 primary and a real streaming standby
//! (`pg_basebackup -R` through haproxy with `sslnegotiation=direct`, see
//! `harmony_e2e::pg_datapath::replicated`), and Harmony's status read
//! (`harmony::infra::cnpg::replication::read_sql`, what the `PostgreSQL` capability's
//! `replication_status` runs) against both, each through its own Route host on the one haproxy
//! port, as `streaming_replica` with its client certificate, TLS first, verify-full.
//! Tools: `bash tests/pg-datapath/install.sh` (tests/setup.sh runs it).

use std::net::SocketAddr;
use std::time::Duration;

use harmony::domain::capability::ReplicationCredentials;
use harmony::domain::capability::SecretBytes;
use harmony::domain::capability::postgresql::{
    Reading, ReplicationReport, SiteObservation, Streaming,
};
use harmony::infra::cnpg::replication::{Endpoint, read_sql};
use harmony_e2e::eventually::{Seen, eventually};
use harmony_e2e::pg_datapath::replicated::Replicated;

const HOSTS: [&str; 2] = [
    "finance-db-tenant-a.apps.site-paris.example.com",
    "finance-db-tenant-a.apps.site-newyork.example.com",
];
const SITES: [&str; 2] = ["site-paris", "site-newyork"];
/// Generous bounds for a standby to catch up on loopback; only a hang reaches them.
const CATCH_UP: Duration = Duration::from_secs(90);

fn start() -> Replicated {
    Replicated::start(HOSTS).unwrap_or_else(|e| panic!("cannot start primary + standby: {e}"))
}

/// The CNPG secrets' contents: `<name>-replication` `tls.crt`/`tls.key` and `<name>-ca` `ca.crt`.
fn credentials(r: &Replicated) -> ReplicationCredentials {
    let dp = r.data_path();
    let read = |p: std::path::PathBuf| std::fs::read(&p).unwrap_or_else(|e| panic!("{p:?}: {e}"));
    ReplicationCredentials {
        client_cert: read(dp.client_cert_path()),
        client_key: SecretBytes::new(read(dp.client_key_path())),
        ca_cert: read(dp.ca_cert_path()),
    }
}

/// Site `i`'s Route as the status read uses it: its host on 443, TLS first. The host does not
/// resolve here, so the connection goes to haproxy's port (SNI and verify-full keep the host).
fn endpoint(r: &Replicated, i: usize) -> Endpoint {
    Endpoint {
        host: r.host(i).to_string(),
        port: 443,
        direct_tls: true,
        connect_to: Some(SocketAddr::from((
            [127, 0, 0, 1],
            r.data_path().haproxy_port(),
        ))),
    }
}

/// One status read of both sites (primary first), judged with a 0-byte threshold.
async fn measure(r: &Replicated) -> ReplicationReport {
    let creds = credentials(r);
    let observe = |i: usize| {
        let (ep, creds) = (endpoint(r, i), creds.clone());
        async move {
            SiteObservation {
                cluster: Reading::NotRead("no Kubernetes in this test".into()),
                sql: match read_sql(&ep, &creds, Duration::from_secs(10)).await {
                    Ok(v) => Reading::Read(v),
                    Err(e) => Reading::NotRead(e),
                },
                exposed: true,
            }
        }
    };
    let (p, s) = (r.primary(), 1 - r.primary());
    let primary = observe(p).await;
    let standby = observe(s).await;
    ReplicationReport::assess(0, (SITES[p], &primary), &[(SITES[s].into(), standby)])
}

/// Measures until the standby streams with 0 bytes of lag; panics with the last report and the
/// logs after [`CATCH_UP`].
async fn until_caught_up(r: &Replicated) -> ReplicationReport {
    eventually(CATCH_UP, "the standby to catch up", || async {
        let report = measure(r).await;
        if report.replicas_ready() {
            Ok(report)
        } else {
            Err(Seen(format!(
                "{:?}\n{}",
                report.shortfalls(),
                report.table().join("\n")
            )))
        }
    })
    .await
    .unwrap_or_else(|w| panic!("the standby did not catch up: {w}\n{}", r.logs()))
}

fn sql(r: &Replicated, i: usize, q: &str) -> String {
    r.sql(i, q).unwrap_or_else(|e| panic!("{e}\n{}", r.logs()))
}

#[tokio::test]
async fn a_caught_up_standby_lags_zero_bytes_and_zero_seconds_measured_through_its_route() {
    let r = start();
    sql(
        &r,
        0,
        "CREATE TABLE t (v text); INSERT INTO t VALUES ('one')",
    );
    let report = until_caught_up(&r).await;
    let standby = &report.sites[1];
    assert_eq!(standby.streaming, Some(Streaming::Streaming));
    assert_eq!(standby.lag_bytes, Some(0));
    assert_eq!(standby.lag_seconds, Some(0.0));
    // The replay position equals the primary's current position, both read through haproxy.
    assert_eq!(standby.lsn, report.sites[0].lsn);
    assert!(standby.lsn.is_some());
    // The standby really has the row (read on its own socket, not through the status read).
    assert_eq!(sql(&r, 1, "SELECT v FROM t"), "one");
    // Both status reads went through the router, each to its own site's backend.
    let log = r.data_path().haproxy_log();
    assert!(
        log.contains("be_tcp_tenant-a_finance-db/")
            && log.contains("be_tcp_tenant-a_finance-db-1/"),
        "haproxy routed no status read to one of the sites:\n{log}"
    );
    // The table carries the figures.
    let table = report.table();
    assert!(table[2].starts_with("site-newyork  replica"), "{table:?}");
    assert!(table[2].contains(" yes "), "{table:?}");
}

#[tokio::test]
async fn a_standby_whose_replay_is_paused_lags_above_zero_and_is_reported_not_streaming() {
    let r = start();
    sql(
        &r,
        0,
        "CREATE TABLE t (v text); INSERT INTO t VALUES ('before')",
    );
    until_caught_up(&r).await;
    sql(&r, 1, "SELECT pg_wal_replay_pause()");
    eventually(CATCH_UP, "replay paused on the standby", || async {
        let state = sql(&r, 1, "SELECT pg_get_wal_replay_pause_state()");
        if state == "paused" {
            Ok(())
        } else {
            Err(state)
        }
    })
    .await
    .unwrap_or_else(|w| panic!("replay never paused: {w}\n{}", r.logs()));
    sql(
        &r,
        0,
        "INSERT INTO t SELECT 'while paused ' || g FROM generate_series(1, 1000) g",
    );

    let report = measure(&r).await;
    let standby = &report.sites[1];
    let lag = standby.lag_bytes.expect("lag measured");
    assert!(lag > 0, "{:?}", report.table());
    // Seconds: the primary's clock minus the commit time of the last replayed transaction.
    assert!(standby.lag_seconds.expect("seconds measured") > 0.0);
    match &standby.streaming {
        Some(Streaming::NotStreaming(why)) => {
            assert!(why.contains("WAL replay is paused"), "{why}")
        }
        other => panic!("expected not streaming (paused), got {other:?}"),
    }
    let short = report.shortfalls();
    assert_eq!(short.len(), 1, "{short:?}");
    assert!(short[0].starts_with("site-newyork: not streaming: WAL replay is paused"));
    // Nothing the standby has not replayed is visible there.
    assert_eq!(sql(&r, 1, "SELECT count(*) FROM t"), "1");

    sql(&r, 1, "SELECT pg_wal_replay_resume()");
    let report = until_caught_up(&r).await;
    assert_eq!(report.sites[1].lag_bytes, Some(0));
    assert_eq!(sql(&r, 1, "SELECT count(*) FROM t"), "1001");
}

#[tokio::test]
async fn after_a_switchover_rows_survive_on_both_sites_and_the_old_primary_streams_from_the_new() {
    let mut r = start();
    sql(
        &r,
        0,
        "CREATE TABLE t (v text); INSERT INTO t VALUES ('before')",
    );
    until_caught_up(&r).await;

    r.switch_over()
        .unwrap_or_else(|e| panic!("switchover: {e}\n{}", r.logs()));
    assert_eq!(r.primary(), 1);
    assert_eq!(sql(&r, 1, "SELECT pg_is_in_recovery()"), "f");
    assert_eq!(sql(&r, 0, "SELECT pg_is_in_recovery()"), "t");
    assert_eq!(sql(&r, 1, "SELECT v FROM t"), "before");
    assert_eq!(sql(&r, 0, "SELECT v FROM t"), "before");

    // The new primary takes writes; the old one streams them through the new one's Route.
    sql(&r, 1, "INSERT INTO t VALUES ('after')");
    let report = until_caught_up(&r).await;
    assert_eq!(report.sites[0].site, "site-newyork");
    assert_eq!(report.sites[1].site, "site-paris");
    assert_eq!(report.sites[1].streaming, Some(Streaming::Streaming));
    assert_eq!(report.sites[1].lag_bytes, Some(0));
    assert_eq!(
        sql(&r, 0, "SELECT string_agg(v, ',' ORDER BY v) FROM t"),
        "after,before"
    );
    let conninfo = sql(&r, 0, "SHOW primary_conninfo");
    assert!(
        conninfo.contains(HOSTS[1]) && conninfo.contains("sslnegotiation=direct"),
        "{conninfo}"
    );
}

// --- The Score's wait: two kube-apiserver fixtures (the sites, real CNPG and Route CRDs) and
// the real primary + standby. No operator runs: the tests play its part by writing the secrets
// it would create on each site, holding the data path's real CA and client certificate.

mod score_wait {
    use super::*;
    use base64::Engine;
    use base64::engine::general_purpose::STANDARD;
    use serde_json::json;
    use std::collections::BTreeMap;

    use harmony::domain::capability::{ApplyOptions, K8sClient, K8sObject};
    use harmony::domain::{
        Inventory, Maestro, RunContext, RunOptions, Score, ScoreReport, ScoreStatus,
    };
    use harmony::infra::kube::K8sTopology;
    use harmony::infra::multi_site::MultiSiteTopology;
    use harmony_e2e::ApiServer;
    use harmony_modules::postgresql::MultisitePostgreSQLScore;

    type Sites = MultiSiteTopology<K8sTopology>;

    fn api_server() -> ApiServer {
        let s = ApiServer::start().unwrap_or_else(|e| panic!("{e}"));
        s.install_crds().unwrap_or_else(|e| panic!("{e}"));
        s
    }

    /// Plays the operator on one site: `<name>-ca` and `<name>-replication` with the data
    /// path's CA and `streaming_replica` certificate (the key only ever travels base64 to the
    /// fixture, as the operator's own Secret).
    async fn operator_secrets(server: &ApiServer, r: &Replicated) {
        let ctx = RunContext::default();
        let k8s = server.topology("operator", &ctx);
        harmony::domain::Topology::ensure_ready(&k8s).await.unwrap();
        let c = credentials(r);
        let b64 = |b: &[u8]| STANDARD.encode(b);
        let secrets = [
            json!({"apiVersion": "v1", "kind": "Secret",
                   "metadata": {"name": "finance-db-ca", "namespace": "tenant-a"},
                   "data": {"ca.crt": b64(&c.ca_cert)}}),
            json!({"apiVersion": "v1", "kind": "Secret", "type": "kubernetes.io/tls",
                   "metadata": {"name": "finance-db-replication", "namespace": "tenant-a"},
                   "data": {"tls.crt": b64(&c.client_cert), "tls.key": b64(c.client_key.expose())}}),
        ];
        let objects: Vec<K8sObject> = secrets
            .into_iter()
            .map(|v| K8sObject::new(v).unwrap())
            .collect();
        let options = ApplyOptions {
            force_conflicts: true,
            ..ApplyOptions::default()
        };
        k8s.apply(&objects, &options).await.unwrap();
    }

    /// Both sites exposed (the replica through `topology.replicaHosts`), both hosts connecting
    /// to haproxy's port (as if DNS sent them to each site's router).
    fn score(r: &Replicated, timeout_s: u64) -> MultisitePostgreSQLScore {
        let mut s = MultisitePostgreSQLScore::new(
            "finance-db",
            "tenant-a",
            "10Gi",
            SITES[0],
            HOSTS[0],
            &[SITES[1]],
        );
        s.spec.credentials_timeout_seconds = 5;
        s.spec.streaming_timeout_seconds = timeout_s;
        s.spec.topology.replica_hosts =
            BTreeMap::from([(SITES[1].to_string(), HOSTS[1].to_string())]);
        let haproxy = SocketAddr::from(([127, 0, 0, 1], r.data_path().haproxy_port()));
        s.status_connect_to = HOSTS.iter().map(|h| (h.to_string(), haproxy)).collect();
        s
    }

    async fn apply(servers: &[ApiServer; 2], score: MultisitePostgreSQLScore) -> ScoreReport {
        let ctx = RunContext::default();
        let sites: Sites = MultiSiteTopology::new(
            "finance",
            [0, 1].map(|i| {
                (
                    SITES[i].parse().unwrap(),
                    servers[i].topology(SITES[i], &ctx),
                )
            }),
        );
        let mut maestro = Maestro::new(Inventory::empty(), sites);
        let scores: Vec<Box<dyn Score<Sites>>> = vec![Box::new(score)];
        maestro.register(scores);
        assert!(
            maestro.validate(&[0]).is_empty(),
            "{:?}",
            maestro.validate(&[0])
        );
        maestro
            .run_all(RunOptions::default())
            .await
            .unwrap()
            .remove(0)
    }

    async fn setup() -> (Replicated, [ApiServer; 2]) {
        let r = start();
        let servers = [api_server(), api_server()];
        for s in &servers {
            operator_secrets(s, &r).await;
        }
        (r, servers)
    }

    #[tokio::test]
    async fn an_apply_waits_until_the_real_standby_streams_and_reports_the_figures() {
        let (r, servers) = setup().await;
        sql(
            &r,
            0,
            "CREATE TABLE t (v text); INSERT INTO t VALUES ('one')",
        );
        let report = apply(&servers, score(&r, 120)).await;
        assert_eq!(
            report.status,
            ScoreStatus::Success,
            "{report:#?}\n{}",
            r.logs()
        );
        let details = report.details.join("\n");
        assert!(
            details.contains(
                "replication verified: every replica streams within 16777216 bytes of the primary"
            ),
            "{details}"
        );
        let row = report
            .details
            .iter()
            .find(|l| l.starts_with("site-newyork  replica"))
            .unwrap_or_else(|| panic!("no table row for the replica:\n{details}"));
        let cells: Vec<&str> = row.split_whitespace().collect();
        // SITE ROLE PHASE(? : no operator writes status here) READY STREAMING LAG-BYTES ...
        assert_eq!(
            &cells[..5],
            ["site-newyork", "replica", "?", "?", "yes"],
            "{row}"
        );
        let lag: u64 = cells[5].parse().unwrap();
        assert!(lag <= 16 * 1024 * 1024, "{row}");
        // The same figures reach the JSON report as `data`, for machines.
        let data = report
            .data
            .as_ref()
            .expect("the report carries the figures");
        let sites = data["replication"]["sites"].as_array().expect("sites");
        assert_eq!(sites.len(), 2, "{data}");
        assert_eq!(sites[1]["site"], "site-newyork", "{data}");
        assert_eq!(sites[1]["lag_bytes"].as_u64(), Some(lag), "{data}");
        let json = serde_json::to_value(&report).unwrap();
        assert_eq!(
            json["data"]["replication"]["max_lag_bytes"],
            16 * 1024 * 1024
        );
        // The replica site got its own Route, and its host is in its server certificate.
        let route =
            servers[1].kubectl(&["get", "route", "-n", "tenant-a", "finance-db", "-o", "json"]);
        assert!(
            route.status.success(),
            "{}",
            String::from_utf8_lossy(&route.stderr)
        );
        let route: serde_json::Value = serde_json::from_slice(&route.stdout).unwrap();
        assert_eq!(route["spec"]["host"], HOSTS[1]);
        let cluster = servers[1].kubectl(&[
            "get",
            "cluster",
            "-n",
            "tenant-a",
            "finance-db",
            "-o",
            "json",
        ]);
        let cluster: serde_json::Value = serde_json::from_slice(&cluster.stdout).unwrap();
        assert_eq!(
            cluster["spec"]["certificates"]["serverAltDNSNames"],
            json!([HOSTS[1]])
        );
        // No secret value in the report.
        let text = format!("{report:?}");
        assert!(
            !text.contains("PRIVATE KEY"),
            "the report carries key material"
        );
    }

    #[tokio::test]
    async fn an_apply_whose_replica_does_not_stream_times_out_naming_it_and_why() {
        let (r, servers) = setup().await;
        sql(
            &r,
            0,
            "CREATE TABLE t (v text); INSERT INTO t VALUES ('one')",
        );
        until_caught_up(&r).await;
        sql(&r, 1, "SELECT pg_wal_replay_pause()");
        sql(&r, 0, "INSERT INTO t VALUES ('two')");
        let report = apply(&servers, score(&r, 3)).await;
        assert_eq!(report.status, ScoreStatus::Failed, "{report:#?}");
        assert!(
            report.message.starts_with("waiting for the replicas to stream: timed out after 3s waiting for every replica to stream within 16777216 bytes of the primary (maxReplicaLagBytes)"),
            "{}",
            report.message
        );
        assert!(
            report
                .message
                .contains("site-newyork: not streaming: WAL replay is paused"),
            "{}",
            report.message
        );
        // What was applied before the wait is listed, so a re-run converges from there.
        assert!(
            report.message.contains("(already applied: "),
            "{}",
            report.message
        );
    }

    #[tokio::test]
    async fn without_a_replica_host_the_wait_reads_the_cluster_status_and_says_streaming_is_unverified()
     {
        let (r, servers) = setup().await;
        let mut s = score(&r, 2);
        s.spec.topology.replica_hosts.clear();
        // Nobody writes the replica Cluster's status here: the wait cannot settle, and says why.
        let report = apply(&servers, s).await;
        assert_eq!(report.status, ScoreStatus::Failed, "{report:#?}");
        assert!(
            report.message.contains("site-newyork: its Cluster is not healthy yet (phase unknown, ? of 1 instances ready; its streaming cannot be measured: no endpoint)"),
            "{}",
            report.message
        );
        let route = servers[1].kubectl(&["get", "route", "-n", "tenant-a", "finance-db"]);
        assert!(!route.status.success(), "an unexposed replica got a Route");
    }
}
