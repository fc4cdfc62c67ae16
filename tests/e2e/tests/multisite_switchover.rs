//! Switchover and failover of a multi-site PostgreSQL cluster, with real parts on both sides:
//! - each site is a real kube-apiserver fixture with the real CloudNativePG `Cluster` CRD (strict
//!   field validation), where no operator runs: THE TEST PLAYS CLOUDNATIVE-PG. It creates the
//!   operator's secrets and writes the status fields the operator would write (`demotionToken`,
//!   `lastPromotionToken`, `timelineID`, ...), as the test names say;
//! - behind the sites' Route hosts run a real PostgreSQL 18 primary and a real streaming standby
//!   (`harmony_e2e::pg_datapath::replicated`, through haproxy with `sslnegotiation=direct`), which
//!   Harmony's status read measures (lag, streaming); the test promotes and rewinds them where the
//!   operator's instance manager would.
//!
//! Every `Cluster` starts in CloudNativePG's distributed topology, as `MultisitePostgreSQLScore`
//! applies it; switchover and failover re-apply the same render with another primary. Every spec change Harmony makes is compared field by field. Tools:
//! `bash tests/pg-datapath/install.sh` (tests/setup.sh runs it).

use base64::Engine;
use base64::engine::general_purpose::STANDARD;
use serde_json::{Value, json};
use std::net::SocketAddr;
use std::time::Duration;

use harmony::domain::capability::{ApplyOptions, K8sClient, K8sObject};
use harmony::domain::{
    Inventory, Maestro, RunContext, RunOptions, Score, ScoreReport, ScoreStatus, Topology,
};
use harmony::infra::kube::K8sTopology;
use harmony::infra::multi_site::MultiSiteTopology;
use harmony_e2e::ApiServer;
use harmony_e2e::eventually::{Seen, eventually};
use harmony_e2e::pg_datapath::replicated::Replicated;
use harmony_modules::postgresql::MultisitePostgreSQLScore;

const PARIS: &str = "finance-db-tenant-a.apps.site-paris.example.com";
const NEWYORK: &str = "finance-db-tenant-a.apps.site-newyork.example.com";
const TOKYO: &str = "finance-db-tenant-a.apps.site-tokyo.example.com";
/// Only a hang reaches these bounds; nothing asserts how long a step takes.
const PATIENCE: Duration = Duration::from_secs(120);

type Sites = MultiSiteTopology<K8sTopology>;

struct Site {
    name: &'static str,
    host: &'static str,
    server: ApiServer,
}

fn site(name: &'static str, host: &'static str) -> Site {
    let server = ApiServer::start().unwrap_or_else(|e| panic!("{e}"));
    server.install_crds().unwrap_or_else(|e| panic!("{e}"));
    Site { name, host, server }
}

fn topology(sites: &[&Site], ctx: &RunContext) -> Sites {
    MultiSiteTopology::new(
        "finance",
        sites
            .iter()
            .map(|s| (s.name.parse().unwrap(), s.server.topology(s.name, ctx))),
    )
}

/// The cluster as declared: primary on site-paris, every other site with its own host.
fn multisite(sites: &[&Site]) -> MultisitePostgreSQLScore {
    let replicas: Vec<&str> = sites[1..].iter().map(|s| s.name).collect();
    let mut m = MultisitePostgreSQLScore::new(
        "finance-db",
        "tenant-a",
        "10Gi",
        "site-paris",
        PARIS,
        &replicas,
    );
    for s in &sites[1..] {
        m.spec
            .topology
            .replica_hosts
            .insert(s.name.into(), s.host.into());
    }
    m
}

/// Every host's status read goes to the one haproxy (SNI and verify-full keep the host).
fn connect_to(pg: &Replicated) -> std::collections::BTreeMap<String, SocketAddr> {
    let addr = SocketAddr::from(([127, 0, 0, 1], pg.data_path().haproxy_port()));
    [PARIS, NEWYORK, TOKYO]
        .iter()
        .map(|h| (h.to_string(), addr))
        .collect()
}

/// THE TEST PLAYS CLOUDNATIVE-PG: the operator's secrets on every site (the data path's
/// certificates, or placeholders without one); then `MultisitePostgreSQLScore` applies the
/// distributed topology (site-paris primary) and the test writes the status the operator would.
async fn prepare(sites: &[&Site], pg: Option<&Replicated>) {
    let b64 = |p: Option<std::path::PathBuf>| {
        STANDARD.encode(p.map_or(b"NO-PEM".to_vec(), |p| std::fs::read(&p).unwrap()))
    };
    let dp = pg.map(|pg| pg.data_path());
    for s in sites {
        let k8s = s.server.topology("cnpg", &RunContext::default());
        k8s.ensure_ready().await.unwrap();
        let secrets = [
            json!({"apiVersion": "v1", "kind": "Secret", "metadata": {"name": "finance-db-ca", "namespace": "tenant-a"},
                   "data": {"ca.crt": b64(dp.map(|d| d.ca_cert_path()))}}),
            json!({"apiVersion": "v1", "kind": "Secret", "metadata": {"name": "finance-db-replication", "namespace": "tenant-a"},
                   "type": "kubernetes.io/tls", "data": {"tls.crt": b64(dp.map(|d| d.client_cert_path())),
                                                     "tls.key": b64(dp.map(|d| d.client_key_path()))}}),
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
    let mut m = multisite(sites);
    // The operator is played below, after the apply: the Score does not wait for streaming.
    m.spec.wait_for_streaming = false;
    if let Some(pg) = pg {
        m.status_connect_to = connect_to(pg);
    }
    let report = run(topology(sites, &RunContext::default()), m).await;
    assert_eq!(report.status, ScoreStatus::Success, "{report:?}");
    for s in sites {
        status(
            s,
            json!({"phase": "Cluster in healthy state", "timelineID": 1,
            "currentPrimary": "finance-db-1", "readyInstances": 1, "instances": 1}),
        );
    }
}

fn cluster(s: &Site) -> Value {
    let out = s.server.kubectl(&[
        "get",
        "clusters.postgresql.cnpg.io",
        "finance-db",
        "-n",
        "tenant-a",
        "-o",
        "json",
    ]);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    serde_json::from_slice(&out.stdout).unwrap()
}

/// THE TEST PLAYS CLOUDNATIVE-PG: merges `fields` into the `Cluster`'s status.
fn status(s: &Site, fields: Value) {
    let patch = json!({"status": fields}).to_string();
    let out = s.server.kubectl(&[
        "patch",
        "clusters.postgresql.cnpg.io",
        "finance-db",
        "-n",
        "tenant-a",
        "--subresource=status",
        "--type=merge",
        "-p",
        &patch,
    ]);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
}

/// Waits until `spec.replica.primary` on `s` names `site`; returns the `Cluster`.
async fn wait_primary_named(s: &Site, site: &str) -> Value {
    eventually(
        PATIENCE,
        format!("{} to name finance-db-{site} primary", s.name),
        || async {
            let c = cluster(s);
            if c["spec"]["replica"]["primary"] == format!("finance-db-{site}") {
                Ok(c)
            } else {
                Err(Seen(c.to_string()))
            }
        },
    )
    .await
    .unwrap_or_else(|w| panic!("{} never named {site}: {w}", s.name))
}

/// `spec` without `replica`: what a switchover must leave as it was.
fn rest(spec: &Value) -> Value {
    let mut s = spec.clone();
    s.as_object_mut().unwrap().remove("replica");
    s
}

fn replica(primary: &str, me: &str, source: &str) -> Value {
    json!({"primary": format!("finance-db-{primary}"), "self": format!("finance-db-{me}"),
           "source": format!("finance-db-{source}")})
}

async fn run<S: Score<Sites> + 'static>(t: Sites, score: S) -> ScoreReport {
    let mut maestro = Maestro::new(Inventory::empty(), t);
    maestro.register(vec![Box::new(score) as Box<dyn Score<Sites>>]);
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

/// Waits until the standby has replayed everything the primary wrote.
async fn caught_up(pg: &Replicated) {
    eventually(
        PATIENCE,
        "the standby to replay the primary's WAL",
        || async {
            let (p, s) = (pg.primary(), 1 - pg.primary());
            let current = pg.sql(p, "SELECT pg_current_wal_lsn()").unwrap();
            let replayed = pg.sql(s, "SELECT pg_last_wal_replay_lsn()").unwrap();
            if current == replayed {
                Ok(())
            } else {
                Err(format!("primary at {current}, standby replayed {replayed}"))
            }
        },
    )
    .await
    .unwrap_or_else(|w| panic!("standby never caught up: {w}\n{}", pg.logs()));
}

fn text(report: &ScoreReport) -> String {
    format!("{report:?}")
}

fn start_pg() -> Replicated {
    Replicated::start([PARIS, NEWYORK]).unwrap_or_else(|e| panic!("primary + standby: {e}"))
}

#[path = "multisite_switchover/failover.rs"]
mod failover;
#[path = "multisite_switchover/switchover.rs"]
mod switchover;
