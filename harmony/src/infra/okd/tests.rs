use harmony_types::{Dns1123Label, HostName, Id, IpAddress, Ipv4Cidr, MacAddress};

use super::*;
use crate::domain::RunContext;
use crate::domain::capability::{
    BootEvent, BootPhase, ClusterLayout, HostInventory, LogicalHost, RoleRule,
};
use crate::domain::inventory::PhysicalHost;
use crate::infra::http_boot::{BootFetch, ReportOutcome, ReportRefused};

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
    let t = topology_in(dir.path());
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
    // dnsmasq leased 10.10.0.230 to the machine (this test writes the line dnsmasq would).
    lease(&t, "52:54:00:10:00:21 10.10.0.230");
    let client: std::net::IpAddr = "10.10.0.230".parse().unwrap();
    assert_eq!(
        (t.discovery_sink())(client, report(host)),
        Ok(ReportOutcome::Recorded)
    );
    assert_eq!(t.awaiting_boot(&[mac]).await.unwrap(), vec![]);
    t.record_boot_event(mac, BootEvent::RebootRequested)
        .await
        .unwrap();
    assert_eq!(t.awaiting_boot(&[mac]).await.unwrap(), vec![mac]);
    let fetch = |path: &str| BootFetch::of(client, path).expect("a boot file");
    (t.boot_sink())(fetch(&format!("/ipxe/{}.ipxe", mac.to_hyphenated())));
    assert_eq!(t.awaiting_boot(&[mac]).await.unwrap(), vec![]);
}

#[tokio::test]
async fn the_timeline_holds_each_phase_of_the_latest_boot_with_its_lease() {
    let dir = tempfile::tempdir().unwrap();
    let t = topology_in(dir.path());
    let mac = MacAddress::parse("52:54:00:10:00:21").unwrap();
    let client: std::net::IpAddr = "10.10.0.230".parse().unwrap();
    let start = crate::infra::inventory_sqlite::now_ms();
    t.record_boot_phase(mac, BootPhase::PowerOnRequested, start)
        .await
        .unwrap();
    // A discovery lease (10 minutes) granted now, as dnsmasq writes it.
    let expiry = start / 1000 + 600;
    let file = t.dnsmasq().lease_file();
    std::fs::create_dir_all(file.parent().unwrap()).unwrap();
    std::fs::write(&file, format!("{expiry} {mac} 10.10.0.230 * 01:{mac}\n")).unwrap();
    for path in [
        "/boot.ipxe",
        "/discovery/vmlinuz",
        "/discovery/initrd.img",
        "/index.html",
    ] {
        if let Some(f) = BootFetch::of(client, path) {
            (t.boot_sink())(f);
        }
    }
    let timeline = t.timelines(&[mac]).await.unwrap().remove(0);
    let phases: Vec<BootPhase> = timeline
        .latest()
        .unwrap()
        .phases
        .iter()
        .map(|p| p.phase)
        .collect();
    assert_eq!(
        phases,
        [
            BootPhase::PowerOnRequested,
            BootPhase::DhcpLease,
            BootPhase::ScriptFetched,
            BootPhase::KernelFetched,
            BootPhase::InitrdFetched
        ]
    );
    // A renewal later moves the lease's expiry; the recorded start stays.
    std::fs::write(
        &file,
        format!("{} {mac} 10.10.0.230 * 01:{mac}\n", expiry + 300),
    )
    .unwrap();
    let again = t.timelines(&[mac]).await.unwrap().remove(0);
    assert_eq!(
        again.latest().unwrap().at(BootPhase::DhcpLease),
        timeline.latest().unwrap().at(BootPhase::DhcpLease)
    );
    // A fetch from an address with no lease is in nobody's timeline.
    (t.boot_sink())(BootFetch::of("10.10.0.99".parse().unwrap(), "/boot.ipxe").unwrap());
    assert_eq!(t.timelines(&[mac]).await.unwrap().remove(0), again);
}

fn report(host: PhysicalHost) -> harmony_types::DiscoveryReport {
    harmony_types::DiscoveryReport {
        host,
        uuid: None,
        boot_mac: None,
    }
}

/// Writes lease lines (`MAC IP`) into the topology's dnsmasq lease file as dnsmasq writes them
/// (expiring in an hour).
fn lease(t: &HAClusterTopology, lines: &str) {
    let expiry = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .as_secs()
        + 3600;
    let text: String = lines
        .lines()
        .map(|l| format!("{expiry} {l} * 01:{}\n", l.split(' ').next().unwrap()))
        .collect();
    let file = t.dnsmasq().lease_file();
    std::fs::create_dir_all(file.parent().unwrap()).unwrap();
    std::fs::write(file, text).unwrap();
}

#[tokio::test]
async fn reports_come_only_from_leased_addresses_and_identity_changes_are_held() {
    let dir = tempfile::tempdir().unwrap();
    let t = topology_in(dir.path());
    let sink = t.discovery_sink();
    let mac = |s: &str| MacAddress::parse(s).unwrap();
    let machine = |id: &str, macs: &[&str]| PhysicalHost {
        id: Id::parse(id).unwrap(),
        hostname: None,
        serial: Some("SN-1".into()),
        macs: macs.iter().map(|m| mac(m)).collect(),
        cpu_count: 2,
        memory_bytes: 4 << 30,
        disks: vec![],
    };
    let ip = |s: &str| -> std::net::IpAddr { s.parse().unwrap() };
    lease(
        &t,
        "52:54:00:10:00:31 10.10.0.231\n52:54:00:10:00:32 10.10.0.232",
    );
    // No lease for this address, or a lease of this address to a MAC the report does not
    // name: refused, nothing recorded.
    for (from, macs) in [
        ("10.10.0.240", vec!["52:54:00:10:00:31"]),
        ("10.10.0.232", vec!["52:54:00:10:00:31"]),
    ] {
        let got = sink(ip(from), report(machine("m1", &macs)));
        assert!(
            matches!(&got, Err(ReportRefused::Forbidden(why)) if why.contains("no DHCP lease")),
            "{got:?}"
        );
    }
    assert!(t.known_hosts().await.unwrap().is_empty());
    // From its leased address, booted from its second NIC: recorded with that NIC first.
    let mut r = report(machine("m1", &["52:54:00:10:00:30", "52:54:00:10:00:31"]));
    r.boot_mac = Some(mac("52:54:00:10:00:31"));
    assert_eq!(sink(ip("10.10.0.231"), r), Ok(ReportOutcome::Recorded));
    let hosts = t.known_hosts().await.unwrap();
    assert_eq!(
        hosts[0].macs,
        [mac("52:54:00:10:00:31"), mac("52:54:00:10:00:30")]
    );
    // The same id with other MACs, and another id claiming m1's MAC: held, not applied.
    let got = sink(
        ip("10.10.0.231"),
        report(machine("m1", &["52:54:00:10:00:31"])),
    );
    assert!(
        matches!(&got, Ok(ReportOutcome::Held(d)) if d.starts_with("MACs [")),
        "{got:?}"
    );
    let got = sink(
        ip("10.10.0.232"),
        report(machine("m2", &["52:54:00:10:00:32", "52:54:00:10:00:30"])),
    );
    assert_eq!(
        got,
        Ok(ReportOutcome::Held(
            "MAC 52:54:00:10:00:30 belongs to host m1".into()
        ))
    );
    assert_eq!(t.known_hosts().await.unwrap(), hosts, "nothing applied");
    let held = t.held_reports().await.unwrap();
    assert_eq!(held.len(), 2, "{held:?}");
    assert_eq!(held[1].client, "10.10.0.232");
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

#[test]
fn bmcs_come_from_the_flags_and_the_roles_file_checked_together() {
    use crate::domain::capability::{HostBmc, PowerControl};
    let dir = tempfile::tempdir().unwrap();
    let roles = dir.path().join("roles.toml");
    let write = |text: &str| std::fs::write(&roles, text).unwrap();
    let build = |bmc: Vec<HostBmc>| {
        let ctx = RunContext {
            out_dir: dir.path().to_path_buf(),
            roles: Some(roles.clone()),
            bmc,
            ..RunContext::default()
        };
        HAClusterTopology::from_context(layout(), BareMetalServices::default(), &ctx)
    };
    let flag = HostBmc::parse(
        "52:54:00:10:00:21=redfish://10.0.0.5/redfish/v1/Systems/1,credentials=env:BMC_A",
    )
    .unwrap();
    write(
        "[[bmc]]\nmac = \"52:54:00:10:00:22\"\naddress = \"redfish://10.0.0.5/redfish/v1/Systems/2\"\ncredentials = \"file:/etc/harmony/bmc/b\"\n",
    );
    let t = build(vec![flag.clone()]).unwrap();
    let macs: Vec<String> = t.host_bmcs().iter().map(|b| b.mac.to_string()).collect();
    assert_eq!(macs, ["52:54:00:10:00:21", "52:54:00:10:00:22"]);

    // The same system for two hosts, one by flag and one by file: refused before anything runs.
    write(
        "[[bmc]]\nmac = \"52:54:00:10:00:22\"\naddress = \"redfish://10.0.0.5/redfish/v1/Systems/1\"\ncredentials = \"env:BMC_B\"\n",
    );
    let e = build(vec![flag]).unwrap_err().to_string();
    assert!(e.contains("a BMC system powers one host"), "{e}");

    write(
        "[[bmc]]\nmac = \"52:54:00:10:00:22\"\naddress = \"redfish://root:calvin@10.0.0.5\"\ncredentials = \"env:BMC_B\"\n",
    );
    let e = build(vec![]).unwrap_err().to_string();
    assert!(
        e.contains("bmc[0]") && e.contains("credentials never go in the address"),
        "{e}"
    );
    assert!(!e.contains("calvin"), "{e}");
}

/// The test layout's topology, rendering into `dir`.
fn topology_in(dir: &std::path::Path) -> HAClusterTopology {
    let ctx = RunContext {
        out_dir: dir.to_path_buf(),
        ..RunContext::default()
    };
    HAClusterTopology::from_context(layout(), BareMetalServices::default(), &ctx).unwrap()
}
