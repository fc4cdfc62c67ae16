//! Discovery end to end: the agent reads this machine's real facts from /proc and /sys and
//! posts them to the HTTP boot server of an `HAClusterTopology`, which records them in its
//! SQLite inventory.

use std::time::Duration;

use harmony::domain::RunContext;
use harmony::domain::capability::HostInventory;
use harmony::infra::okd::{BareMetalServices, HAClusterTopology};
use harmony::types::Url;
use harmony_discovery_agent::{Facts, post};
use harmony_e2e::okd_lab::layout;

#[tokio::test(flavor = "multi_thread")]
async fn the_agent_reports_this_machine_into_the_inventory() {
    let dir = tempfile::tempdir().unwrap();
    let ctx = RunContext {
        out_dir: dir.path().to_path_buf(),
        inventory: None,
        ..RunContext::default()
    };
    let topology =
        HAClusterTopology::from_context(layout().unwrap(), BareMetalServices::default(), &ctx)
            .unwrap();
    let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let addr = topology.serve_http_on(listener).unwrap();

    let facts = Facts::system();
    let report = match facts.report() {
        Ok(r) => r,
        Err(e) => panic!("this machine's facts cannot be read: {e}"),
    };
    let url = Url::parse(&format!("http://{addr}/discovery")).unwrap();
    let sent = report.clone();
    tokio::task::spawn_blocking(move || post(&url, &sent, Duration::from_secs(10)))
        .await
        .unwrap()
        .unwrap();

    let hosts = topology.known_hosts().await.unwrap();
    assert_eq!(hosts.len(), 1, "{hosts:?}");
    let h = &hosts[0];
    assert_eq!(h.id, report.id);
    assert_eq!(h.macs, report.macs);
    assert_eq!(h.cpu_count, facts.cpu_count().unwrap());
    assert_eq!(h.memory_bytes, facts.memory_bytes().unwrap());
    assert_eq!(h.disks.len(), report.disks.len());

    let bad = Url::parse(&format!("http://{addr}/nope")).unwrap();
    let err = tokio::task::spawn_blocking(move || post(&bad, &report, Duration::from_secs(10)))
        .await
        .unwrap()
        .unwrap_err();
    assert!(err.to_string().contains("405"), "{err}");
}
