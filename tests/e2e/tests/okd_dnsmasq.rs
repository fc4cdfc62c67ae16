//! dnsmasq as Harmony configures it, serving real clients in network namespaces: a real DHCP
//! client (busybox udhcpc) with a worker's MAC gets exactly its reservation, an unknown MAC
//! gets a lease from the discovery range (and no reserved name), a new reservation is picked up without a restart (leases kept), and a real
//! resolver query (dig) resolves the cluster names to the load balancer. Runs as root.

use harmony::domain::ScoreStatus;
use harmony::domain::capability::{DhcpHostBinding, DhcpServer};
use harmony::domain::inventory::HostRole;
use harmony::types::{HostName, IpAddress, MacAddress};
use harmony_e2e::netns::{Netns, available};
use harmony_e2e::okd_lab::{LOAD_BALANCER, OkdLab, SERVICES, WORKER0, worker_inventory};
use harmony_modules::okd::{OkdHostsScore, OkdPrepareScore};

fn udhcpc(ns: &Netns, dir: &std::path::Path) -> (bool, String) {
    ns.udhcpc(dir, false)
}

fn require_root() {
    if let Err(e) = available() {
        panic!("{e}");
    }
}

#[tokio::test(flavor = "multi_thread")]
async fn dhcp_gives_a_worker_exactly_its_reservation_and_unknown_macs_a_discovery_lease() {
    require_root();
    let mut lab = OkdLab::new("dhcp", &[], worker_inventory().unwrap()).unwrap();
    let install = lab.installation().unwrap();
    let reports = lab
        .run(vec![
            Box::new(OkdPrepareScore::new(install.clone())),
            Box::new(OkdHostsScore::new(HostRole::Worker, install)),
        ])
        .await
        .unwrap();
    for r in &reports {
        assert_eq!(r.status, ScoreStatus::Success, "{r:#?}");
    }
    let dnsmasq = lab.topology().dnsmasq().daemon();
    let pid = dnsmasq.running_pid().expect("dnsmasq runs");

    let dir = lab.dir.path().to_path_buf();
    let worker = lab.lab.client("w0", WORKER0.2).unwrap();
    let (ok, seen) = tokio::task::block_in_place(|| udhcpc(worker, &dir));
    assert!(ok, "worker0's MAC got no lease: {seen}");
    let bound = seen
        .lines()
        .find(|l| l.starts_with("bound"))
        .unwrap_or_default();
    assert_eq!(
        bound,
        format!(
            "bound ip={} hostname={} router=10.77.0.1 dns={SERVICES} domain=okd.e2e.test",
            WORKER0.1, WORKER0.0
        ),
        "{seen}"
    );

    let stranger = lab.lab.client("unk", "52:54:00:77:00:99").unwrap();
    let (ok, seen) = tokio::task::block_in_place(|| udhcpc(stranger, &dir));
    assert!(ok, "an unknown MAC got no discovery lease: {seen}");
    let bound = seen
        .lines()
        .find(|l| l.starts_with("bound"))
        .unwrap_or_default();
    let ip = bound
        .strip_prefix("bound ip=")
        .and_then(|r| r.split_whitespace().next())
        .unwrap_or_default();
    let last: u8 = ip
        .rsplit('.')
        .next()
        .unwrap_or_default()
        .parse()
        .unwrap_or(0);
    assert!(
        ip.starts_with("10.77.0.") && (205..=254).contains(&last),
        "the unknown MAC's address is not from the discovery range 10.77.0.205-254: {seen}"
    );
    assert!(
        bound.contains("hostname= "),
        "an unknown MAC gets no reserved name: {seen}"
    );
    let leases =
        std::fs::read_to_string(lab.services_dir().join("dnsmasq/dnsmasq.leases")).unwrap();
    assert!(
        leases.contains(WORKER0.2) && leases.contains("52:54:00:77:00:99"),
        "{leases}"
    );

    // A reservation added while dnsmasq runs is picked up by SIGHUP: same process, leases kept.
    let late = DhcpHostBinding {
        mac: MacAddress::parse("52:54:00:77:00:23").unwrap(),
        ip: IpAddress::parse("10.77.0.23").unwrap(),
        hostname: HostName::parse("worker2").unwrap(),
        other_macs: Vec::new(),
    };
    lab.topology().ensure_bindings(&[late]).await.unwrap();
    assert_eq!(
        dnsmasq.running_pid(),
        Some(pid),
        "dnsmasq was restarted instead of reloaded"
    );
    let after = lab.lab.client("w2", "52:54:00:77:00:23").unwrap();
    let (ok, seen) = tokio::task::block_in_place(|| udhcpc(after, &dir));
    assert!(
        ok && seen.contains("bound ip=10.77.0.23 hostname=worker2"),
        "{seen}"
    );
    let leases =
        std::fs::read_to_string(lab.services_dir().join("dnsmasq/dnsmasq.leases")).unwrap();
    assert!(
        leases.contains(WORKER0.2),
        "worker0's lease was dropped by the reload: {leases}"
    );

    // Re-running changes nothing and duplicates nothing.
    let install = lab.installation().unwrap();
    let again = lab
        .run(vec![Box::new(OkdHostsScore::new(
            HostRole::Worker,
            install,
        ))])
        .await
        .unwrap();
    assert_eq!(again[0].status, ScoreStatus::Noop, "{:#?}", again[0]);
    let hosts = std::fs::read_to_string(lab.services_dir().join("dnsmasq/dhcp-hosts")).unwrap();
    assert_eq!(hosts.matches(WORKER0.2).count(), 1, "{hosts}");
    assert_eq!(dnsmasq.running_pid(), Some(pid));
}

#[tokio::test(flavor = "multi_thread")]
async fn dig_resolves_api_and_apps_names_to_the_load_balancer() {
    require_root();
    let mut lab = OkdLab::new("dns", &[], worker_inventory().unwrap()).unwrap();
    let install = lab.installation().unwrap();
    let reports = lab
        .run(vec![Box::new(OkdPrepareScore::new(install))])
        .await
        .unwrap();
    assert_eq!(reports[0].status, ScoreStatus::Success, "{:#?}", reports[0]);
    let ns = &lab.lab.services;
    let dig = |name: &str| -> String {
        let out = ns
            .run(&[
                "dig",
                "+short",
                "+time=2",
                "+tries=2",
                &format!("@{SERVICES}"),
                name,
                "A",
            ])
            .unwrap_or_else(|e| panic!("{e}"));
        String::from_utf8_lossy(&out.stdout).trim().to_string()
    };
    tokio::task::block_in_place(|| {
        assert_eq!(dig("api.okd.e2e.test"), LOAD_BALANCER);
        assert_eq!(dig("api-int.okd.e2e.test"), LOAD_BALANCER);
        assert_eq!(
            dig("console-openshift-console.apps.okd.e2e.test"),
            LOAD_BALANCER
        );
        assert_eq!(dig("oauth.apps.okd.e2e.test"), LOAD_BALANCER);
        assert_eq!(dig("worker0.okd.e2e.test"), WORKER0.1);
        assert_eq!(dig("cp1.okd.e2e.test"), "10.77.0.12");
        assert_eq!(
            dig("nobody.okd.e2e.test"),
            "",
            "unknown names are not answered with an address"
        );
    });
}
