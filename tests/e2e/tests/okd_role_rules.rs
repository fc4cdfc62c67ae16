//! Roles without a terminal: `--assign ROLE=RULE` gives discovered hosts a role by MAC or by
//! minimum size, never by guessing. The program runs for real in a lab namespace (dnsmasq,
//! haproxy, the HTTP boot server); hosts are discovered by posting their hardware to the
//! discovery endpoint while the workers phase waits, as the discovery agent does.

use std::path::Path;
use std::process::{Command, Output, Stdio};
use std::time::Duration;

use harmony::domain::capability::HostInventory;
use harmony::domain::inventory::{Disk, HostRole, PhysicalHost};
use harmony::infra::inventory_sqlite::SqliteInventory;
use harmony_e2e::eventually::eventually_blocking;
use harmony_e2e::netns::{Lab, available};
use harmony_e2e::okd_lab::{HTTP_PORT, LOAD_BALANCER, SERVICES};
use harmony_types::{Id, MacAddress};

fn machine(id: &str, mac: &str, memory_gib: u64, disk_gb: u64) -> PhysicalHost {
    PhysicalHost {
        id: Id::parse(id).unwrap(),
        hostname: None,
        serial: None,
        macs: vec![MacAddress::parse(mac).unwrap()],
        cpu_count: 4,
        memory_bytes: memory_gib << 30,
        disks: vec![Disk {
            name: "vda".into(),
            size_bytes: disk_gb * 1_000_000_000,
            rotational: false,
            ..Default::default()
        }],
    }
}

fn text(out: &Output) -> String {
    format!(
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    )
}

/// Starts okd-operator in `lab`'s services namespace applying with `--yes`, the inventory at
/// `dir/inventory.sqlite`, waiting up to 120 s for discovery, with `assign` rules.
fn applying(lab: &Lab, dir: &Path, assign: &[&str]) -> std::process::Child {
    let mut command = lab.services.command(env!("CARGO_BIN_EXE_okd-operator"));
    command
        .args([
            "--apply",
            "--yes",
            "--discovery-timeout",
            "120",
            "--inventory",
        ])
        .arg(dir.join("inventory.sqlite"));
    for rule in assign {
        command.args(["--assign", rule]);
    }
    command
        .env("HARMONY_OKD_SERVICES_DIR", dir)
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap()
}

/// Runs okd-operator rendering into `dir/out` from the inventory file `dir/inventory.sqlite`
/// with `assign` rules, no terminal.
fn rendering(dir: &Path, assign: &[&str]) -> Output {
    let mut command = Command::new(env!("CARGO_BIN_EXE_okd-operator"));
    command
        .arg("--inventory")
        .arg(dir.join("inventory.sqlite"))
        .arg("--out")
        .arg(dir.join("out"));
    for rule in assign {
        command.args(["--assign", rule]);
    }
    command
        .env("HARMONY_OKD_SERVICES_DIR", dir)
        .stdin(Stdio::null())
        .output()
        .unwrap()
}

fn roles_in(path: &Path) -> Vec<(String, HostRole)> {
    let inv = SqliteInventory::open(path).unwrap();
    let rt = tokio::runtime::Builder::new_current_thread()
        .build()
        .unwrap();
    rt.block_on(inv.role_assignments())
        .unwrap()
        .into_iter()
        .map(|r| (r.host.to_string(), r.role))
        .collect()
}

#[test]
fn discovered_hosts_get_the_worker_role_by_mac_and_by_size_without_a_terminal() {
    if let Err(e) = available() {
        panic!("{e}");
    }
    let mut lab = Lab::new(
        "rules",
        &[&format!("{SERVICES}/24"), &format!("{LOAD_BALANCER}/24")],
    )
    .unwrap();
    let dir = tempfile::tempdir().unwrap();
    let inventory = dir.path().join("inventory.sqlite");
    let mut child = applying(
        &lab,
        dir.path(),
        &[
            "worker=mac:52:54:00:77:00:41",
            "worker=min-memory:24GiB,min-disk:200GB",
        ],
    );

    // Three machines boot into discovery while the workers phase waits: a small one named by
    // MAC, a large one the size rule matches, and one no rule matches (large disk, little
    // memory). Each takes a DHCP lease from Harmony's dnsmasq (discovery range) and reports
    // from that address, as the discovery image does.
    let url = format!("http://{SERVICES}:{HTTP_PORT}/discovery");
    let leases = dir.path().join("leases");
    std::fs::create_dir_all(&leases).unwrap();
    // A report from an address dnsmasq did not lease to it (here: the services address) is
    // refused with 403, nothing recorded.
    let forged = serde_json::to_string(&machine("forged", "52:54:00:77:00:49", 8, 100)).unwrap();
    let refused = eventually_blocking(
        Duration::from_secs(60),
        "the discovery endpoint to answer",
        || {
            let out = lab.services.post(&url, &forged);
            if out.starts_with("000") {
                Err(out)
            } else {
                Ok(out)
            }
        },
    )
    .unwrap_or_else(|w| panic!("the discovery endpoint answers: {w}"));
    assert!(
        refused.starts_with("403") && refused.contains("holds no DHCP lease"),
        "{refused}"
    );
    for (i, host) in [
        machine("small-named", "52:54:00:77:00:41", 8, 100),
        machine("large", "52:54:00:77:00:42", 32, 500),
        machine("low-memory", "52:54:00:77:00:43", 8, 500),
    ]
    .into_iter()
    .enumerate()
    {
        let ns = lab
            .client(&format!("m{i}"), &host.macs[0].to_string())
            .unwrap();
        let ip = eventually_blocking(
            Duration::from_secs(60),
            format!("a DHCP lease for {}", host.id),
            || ns.lease(&leases),
        )
        .unwrap_or_else(|w| panic!("{} got no lease from dnsmasq: {w}", host.id));
        assert!(
            ip.starts_with("10.77.0.2"),
            "a discovery-range address: {ip}"
        );
        let body = serde_json::to_string(&host).unwrap();
        let said = ns.post(&url, &body);
        assert!(said.starts_with("201"), "{}: {said}", host.id);
        if i == 0 {
            // The same id again from its leased address, now with another NIC's MAC: held
            // for the operator (202), not applied.
            let mut changed = host.clone();
            changed
                .macs
                .push(harmony_types::MacAddress::parse("52:54:00:77:00:4f").unwrap());
            let said = ns.post(&url, &serde_json::to_string(&changed).unwrap());
            assert!(
                said.starts_with("202") && said.contains("held for the operator"),
                "{said}"
            );
        }
    }

    let done = eventually_blocking(Duration::from_secs(120), "the program to exit", || {
        child.try_wait().ok().flatten()
    });
    if let Err(w) = done {
        let _ = child.kill();
        panic!("the program did not finish after the hosts were discovered: {w}");
    }
    let out = child.wait_with_output().unwrap();
    let said = text(&out);
    assert_eq!(out.status.code(), Some(0), "{said}");
    let hosts = std::fs::read_to_string(dir.path().join("services/dnsmasq/dhcp-hosts")).unwrap();
    let macs: Vec<&str> = hosts.lines().filter_map(|l| l.split(',').next()).collect();
    assert_eq!(macs.len(), 2, "two workers are reserved:\n{hosts}\n{said}");
    assert!(macs.contains(&"52:54:00:77:00:41"), "{hosts}");
    assert!(macs.contains(&"52:54:00:77:00:42"), "{hosts}");
    // Sorted by host id.
    let roles = roles_in(&inventory);
    assert_eq!(
        roles,
        [
            ("large".to_string(), HostRole::Worker),
            ("small-named".to_string(), HostRole::Worker)
        ],
        "the host no rule matches keeps no role"
    );
    assert!(
        said.contains("rebooting is the operator's job"),
        "--yes leaves the reboot to the operator:\n{said}"
    );
    let inv = SqliteInventory::open(&inventory).unwrap();
    let rt = tokio::runtime::Builder::new_current_thread()
        .build()
        .unwrap();
    let known = rt.block_on(inv.known_hosts()).unwrap();
    let ids: Vec<&str> = known.iter().map(|h| h.id.as_str()).collect();
    assert_eq!(
        ids,
        ["large", "low-memory", "small-named"],
        "the forged report was not recorded"
    );
    assert_eq!(
        known[2].macs.len(),
        1,
        "the held report was not applied: {known:?}"
    );
    let held = rt.block_on(inv.held_reports()).unwrap();
    assert_eq!(held.len(), 1, "{held:?}");
    assert!(held[0].difference.starts_with("MACs ["), "{held:?}");
    drop(lab);
}

#[test]
fn a_size_rule_matching_more_hosts_than_needed_picks_none_and_says_how_to_narrow_it() {
    // Render mode from an inventory file: no services, no terminal.
    let dir = tempfile::tempdir().unwrap();
    let inventory = dir.path().join("inventory.sqlite");
    {
        let inv = SqliteInventory::open(&inventory).unwrap();
        let rt = tokio::runtime::Builder::new_current_thread()
            .build()
            .unwrap();
        rt.block_on(async {
            for (id, mac) in [
                ("node-a", "52:54:00:77:00:51"),
                ("node-b", "52:54:00:77:00:52"),
                ("node-c", "52:54:00:77:00:53"),
            ] {
                inv.record_host(&machine(id, mac, 32, 500)).await.unwrap();
            }
        });
    }
    let out = rendering(dir.path(), &["worker=min-memory:16GiB"]);
    let said = text(&out);
    assert_eq!(out.status.code(), Some(1), "{said}");
    for host in ["node-a", "node-b", "node-c"] {
        assert!(said.contains(host), "{host} not listed:\n{said}");
    }
    assert!(
        said.contains("--assign worker=min-memory:16GiB matches 3 unassigned hosts but the worker role needs only 2 more"),
        "{said}"
    );
    assert!(said.contains("narrow the rule"), "{said}");
    assert!(
        said.contains("--assign worker=mac:52:54:00:77:00:51"),
        "{said}"
    );
    assert!(
        !dir.path().join("out/okd/http/ipxe-scripts.json").exists(),
        "a host was scripted"
    );
    // Three hosts named by MAC for a role of two slots: an error naming the hosts and the
    // slots, nothing written.
    let out = rendering(
        dir.path(),
        &[
            "worker=mac:52:54:00:77:00:51",
            "worker=mac:52:54:00:77:00:52",
            "worker=mac:52:54:00:77:00:53",
        ],
    );
    let said = text(&out);
    assert_eq!(out.status.code(), Some(1), "{said}");
    assert!(
        said.contains("--assign gives the worker role to host(s) node-a, node-b, node-c but the role has 2 free slot(s) of 2: worker0 (free), worker1 (free); nothing was written"),
        "{said}"
    );
    let reserved =
        std::fs::read_to_string(dir.path().join("out/okd/dnsmasq/dhcp-hosts")).unwrap_or_default();
    assert!(
        !dir.path().join("out/okd/http/www/ipxe").exists() && reserved.is_empty(),
        "nothing was written: {reserved}"
    );
    // The same hosts narrowed by MAC: exactly those two are workers.
    let out = rendering(
        dir.path(),
        &[
            "worker=mac:52:54:00:77:00:51",
            "worker=mac:52:54:00:77:00:53",
        ],
    );
    let said = text(&out);
    assert_eq!(out.status.code(), Some(0), "{said}");
    let hosts = std::fs::read_to_string(dir.path().join("out/okd/dnsmasq/dhcp-hosts")).unwrap();
    assert_eq!(
        hosts,
        "52:54:00:77:00:51,10.77.0.21,worker0\n52:54:00:77:00:53,10.77.0.22,worker1\n"
    );
}

#[test]
fn a_bad_assign_rule_exits_2_naming_the_flag_and_the_fix() {
    let dir = tempfile::tempdir().unwrap();
    for (rule, says) in [
        ("worker=min-memory:16", "no unit"),
        ("workers=mac:52:54:00:77:00:51", "unknown role"),
    ] {
        let out = Command::new(env!("CARGO_BIN_EXE_okd-operator"))
            .args([
                "--assign",
                rule,
                "--out",
                dir.path().join("out").to_str().unwrap(),
            ])
            .env("HARMONY_OKD_SERVICES_DIR", dir.path())
            .stdin(Stdio::null())
            .output()
            .unwrap();
        let said = text(&out);
        assert_eq!(out.status.code(), Some(2), "{said}");
        assert!(said.contains("--assign"), "{said}");
        assert!(said.contains(says), "{said}");
        assert!(
            said.contains("ROLE=mac:") || said.contains("16GiB"),
            "{said}"
        );
        assert!(!dir.path().join("out").exists());
    }
    // Two rules giving one MAC two roles.
    let out = Command::new(env!("CARGO_BIN_EXE_okd-operator"))
        .args([
            "--assign",
            "worker=mac:52:54:00:77:00:51",
            "--assign",
            "control-plane=mac:52:54:00:77:00:51",
            "--out",
            dir.path().join("out").to_str().unwrap(),
        ])
        .env("HARMONY_OKD_SERVICES_DIR", dir.path())
        .stdin(Stdio::null())
        .output()
        .unwrap();
    let said = text(&out);
    assert_eq!(out.status.code(), Some(2), "{said}");
    assert!(said.contains("both name MAC 52:54:00:77:00:51"), "{said}");
    assert!(!dir.path().join("out").exists());
}

#[test]
fn identical_machines_reporting_while_a_size_rule_waits_are_never_picked_by_arrival_order() {
    if let Err(e) = available() {
        panic!("{e}");
    }
    let mut lab = Lab::new(
        "twins",
        &[&format!("{SERVICES}/24"), &format!("{LOAD_BALANCER}/24")],
    )
    .unwrap();
    let dir = tempfile::tempdir().unwrap();
    let inventory = dir.path().join("inventory.sqlite");
    // One worker named by MAC, the other by a size rule that two identical machines match.
    let mut child = applying(
        &lab,
        dir.path(),
        &["worker=mac:52:54:00:77:00:61", "worker=min-memory:24GiB"],
    );
    let url = format!("http://{SERVICES}:{HTTP_PORT}/discovery");
    let leases = dir.path().join("leases");
    std::fs::create_dir_all(&leases).unwrap();
    let machines = [
        machine("named", "52:54:00:77:00:61", 8, 200),
        machine("twin-a", "52:54:00:77:00:62", 32, 500),
        machine("twin-b", "52:54:00:77:00:63", 32, 500),
    ];
    // All three boot (take their leases) before any reports, as machines powered on together
    // do; then they report one after the other.
    let mut namespaces = Vec::new();
    for (i, host) in machines.iter().enumerate() {
        let ns = lab
            .client(&format!("t{i}"), &host.macs[0].to_string())
            .unwrap();
        eventually_blocking(
            Duration::from_secs(60),
            format!("a DHCP lease for {}", host.id),
            || ns.lease(&leases),
        )
        .unwrap_or_else(|w| panic!("{} got no lease from dnsmasq: {w}", host.id));
        namespaces.push(ns.name().to_string());
    }
    for (i, host) in machines.iter().enumerate() {
        let ns = lab.client_named(&namespaces[i]).unwrap();
        let said = ns.post(&url, &serde_json::to_string(host).unwrap());
        assert!(said.starts_with("201"), "{}: {said}", host.id);
        if host.id.as_str() == "twin-a" {
            // Longer than the phase's 2 s poll: a phase that picks by arrival takes twin-a
            // here. twin-b holds a lease without having reported, so discovery has not
            // settled and the size rule must wait, however long this pause.
            std::thread::sleep(Duration::from_secs(5));
        }
    }
    let done = eventually_blocking(Duration::from_secs(120), "the program to exit", || {
        child.try_wait().ok().flatten()
    });
    if let Err(w) = done {
        let _ = child.kill();
        panic!("the program did not finish after the machines reported: {w}");
    }
    let out = child.wait_with_output().unwrap();
    let said = text(&out);
    assert_eq!(out.status.code(), Some(1), "{said}");
    assert!(
        said.contains("--assign worker=min-memory:24GiB matches 2 unassigned hosts but the worker role needs only 1 more")
            && said.contains("twin-a")
            && said.contains("twin-b"),
        "{said}"
    );
    // The MAC rule's host has the role only if it reported in an earlier poll than the twins.
    let roles = roles_in(&inventory);
    assert!(
        roles.iter().all(|(host, _)| host == "named"),
        "neither twin was given the role: {roles:?}"
    );
    let hosts =
        std::fs::read_to_string(dir.path().join("services/dnsmasq/dhcp-hosts")).unwrap_or_default();
    assert!(!hosts.contains(":62") && !hosts.contains(":63"), "{hosts}");
    drop(lab);
}
