use harmony_types::{Dns1123Label, HostName, Id, IpAddress, Ipv4Cidr, MacAddress};

use super::*;
use crate::domain::capability::LogicalHost;

fn layout() -> ClusterLayout {
    let host = |n: &str, ip: &str| {
        LogicalHost::new(HostName::parse(n).unwrap(), IpAddress::parse(ip).unwrap())
    };
    ClusterLayout {
        cluster_name: Dns1123Label::parse("okd").unwrap(),
        base_domain: HostName::parse("example.com").unwrap(),
        network: Ipv4Cidr::parse("10.10.0.0/24").unwrap(),
        gateway: IpAddress::parse("10.10.0.1").unwrap(),
        load_balancer: IpAddress::parse("10.10.0.2").unwrap(),
        services: IpAddress::parse("10.10.0.2").unwrap(),
        bootstrap: host("bootstrap", "10.10.0.10"),
        control_plane: vec![
            host("cp0", "10.10.0.11"),
            host("cp1", "10.10.0.12"),
            host("cp2", "10.10.0.13"),
        ],
        workers: vec![host("worker0", "10.10.0.21")],
    }
}

#[tokio::test]
async fn a_discovery_report_or_a_script_fetch_proves_a_requested_reboot_happened() {
    let dir = tempfile::tempdir().unwrap();
    let ctx = RunContext {
        out_dir: dir.path().to_path_buf(),
        ..RunContext::default()
    };
    let t = HAClusterTopology::from_context(layout(), BareMetalServices::default(), &ctx).unwrap();
    let mac = MacAddress::parse("52:54:00:10:00:21").unwrap();
    let host = PhysicalHost {
        id: Id::parse("m1").unwrap(),
        hostname: None,
        serial: None,
        macs: vec![mac],
        cpu_count: 2,
        memory_bytes: 4 << 30,
        disks: vec![],
    };
    t.record_boot_event(mac, BootEvent::RebootRequested)
        .await
        .unwrap();
    assert_eq!(t.awaiting_boot(&[mac]).await.unwrap(), vec![mac]);
    (t.discovery_sink())(host).unwrap();
    assert_eq!(t.awaiting_boot(&[mac]).await.unwrap(), vec![]);
    t.record_boot_event(mac, BootEvent::RebootRequested)
        .await
        .unwrap();
    assert_eq!(t.awaiting_boot(&[mac]).await.unwrap(), vec![mac]);
    (t.boot_sink())(mac);
    assert_eq!(t.awaiting_boot(&[mac]).await.unwrap(), vec![]);
}

#[test]
fn assign_rules_for_a_role_without_hosts_or_one_mac_twice_are_refused() {
    let dir = tempfile::tempdir().unwrap();
    let rule = |s: &str| RoleRule::parse(s).unwrap();
    let mut l = layout();
    l.workers.clear();
    for (assign, says) in [
        (
            vec![rule("worker=min-memory:8GiB")],
            "the cluster declares no worker hosts",
        ),
        (
            vec![
                rule("bootstrap=mac:52:54:00:10:00:21"),
                rule("control-plane=mac:52:54:00:10:00:21"),
            ],
            "both name MAC 52:54:00:10:00:21",
        ),
    ] {
        let ctx = RunContext {
            out_dir: dir.path().to_path_buf(),
            assign,
            ..RunContext::default()
        };
        let e = HAClusterTopology::from_context(l.clone(), BareMetalServices::default(), &ctx)
            .unwrap_err()
            .to_string();
        assert!(e.contains("--assign") && e.contains(says), "{e}");
    }
}
