//! `example-okd-workers --apply` run as docs/modules/okd.md shows it, without a terminal:
//! inside a lab namespace holding the example's services address (192.168.50.2) it starts
//! dnsmasq, haproxy and the HTTP boot server; removes the bootstrap host from the load
//! balancer once the control plane is Ready; then its workers phase waits for discovery while
//! three machines boot (each takes a real DHCP lease from its dnsmasq and reports from that
//! address, as the discovery image does). `--assign worker=min-memory:32GiB` gives the role to
//! the two large machines once discovery settles; each is reserved and scripted to install to
//! the disk the default root-device rule picks. The installed cluster is the API-server
//! fixture (no controllers): the test registers the five Nodes Ready, playing the kubelets.

use std::process::Stdio;
use std::time::Duration;

use harmony::domain::inventory::{Disk, PhysicalHost};
use harmony_e2e::ApiServer;
use harmony_e2e::eventually::eventually_blocking;
use harmony_e2e::netns::{Lab, available};
use harmony_types::{Id, MacAddress};

const SERVICES: &str = "192.168.50.2";

fn machine(id: &str, mac: &str, memory_gib: u64, disks: &[(&str, u64, bool)]) -> PhysicalHost {
    PhysicalHost {
        id: Id::parse(id).unwrap(),
        hostname: None,
        serial: None,
        macs: vec![MacAddress::parse(mac).unwrap()],
        cpu_count: 8,
        memory_bytes: memory_gib << 30,
        disks: disks
            .iter()
            .map(|(name, gb, rotational)| Disk {
                name: (*name).into(),
                size_bytes: gb * 1_000_000_000,
                rotational: *rotational,
                ..Default::default()
            })
            .collect(),
    }
}

/// Registers Node `name` and marks it Ready, as its kubelet would (the fixture runs no
/// kubelet and no node controller, so the condition stays).
fn ready_node(server: &ApiServer, name: &str) {
    let node = serde_json::json!({"apiVersion": "v1", "kind": "Node", "metadata": {"name": name}});
    let out = server.kubectl_stdin(&["create", "-f", "-"], &node.to_string());
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let status = serde_json::json!({"status": {"conditions": [{
        "type": "Ready", "status": "True", "reason": "KubeletReady",
        "message": "kubelet is posting ready status",
        "lastHeartbeatTime": "2026-01-01T00:00:00Z", "lastTransitionTime": "2026-01-01T00:00:00Z"
    }]}});
    let out = server.kubectl(&[
        "patch",
        "node",
        name,
        "--subresource=status",
        "--type=merge",
        "-p",
        &status.to_string(),
    ]);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
}

#[test]
fn the_guides_flow_discovery_assign_rules_and_install_disk_without_a_terminal() {
    if let Err(e) = available() {
        panic!("{e}");
    }
    let server = ApiServer::start().unwrap();
    for node in ["cp0", "cp1", "cp2", "worker0", "worker1"] {
        ready_node(&server, node);
    }
    let mut lab = Lab::new("exokd", &[&format!("{SERVICES}/24")]).unwrap();
    let port: u16 = server.url().rsplit(':').next().unwrap().parse().unwrap();
    lab.services.forward_loopback(port).unwrap();

    let dir = tempfile::tempdir().unwrap();
    let ignition = dir.path().join("ignition");
    std::fs::create_dir_all(&ignition).unwrap();
    for f in ["bootstrap.ign", "master.ign", "worker.ign"] {
        std::fs::write(ignition.join(f), "{\"ignition\":{\"version\":\"3.2.0\"}}").unwrap();
    }
    let services = dir.path().join("services");
    let mut child = lab
        .services
        .command(env!("CARGO_BIN_EXE_e2e-example-okd-workers"))
        .args([
            "--apply",
            "--yes",
            "--discovery-timeout",
            "180",
            "--node-timeout",
            "120",
        ])
        .arg("--ignition-dir")
        .arg(&ignition)
        .arg("--services-dir")
        .arg(&services)
        .arg("--cluster-kubeconfig")
        .arg(server.kubeconfig())
        .args(["--assign", "worker=min-memory:32GiB"])
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();

    // Three machines boot into discovery while the workers phase waits: two large ones the
    // rule matches (one with an HDD, an NVMe and a small SSD) and a small one it does not.
    let url = format!("http://{SERVICES}:8080/discovery");
    let leases = dir.path().join("leases");
    std::fs::create_dir_all(&leases).unwrap();
    let machines = [
        machine(
            "rack14-u10",
            "52:54:00:50:01:10",
            64,
            &[
                ("sda", 2000, true),
                ("nvme0n1", 480, false),
                ("sdb", 64, false),
            ],
        ),
        machine(
            "rack14-u12",
            "52:54:00:50:01:12",
            64,
            &[("vda", 500, false)],
        ),
        machine("rack14-u14", "52:54:00:50:01:14", 8, &[("vda", 500, false)]),
    ];
    for (i, host) in machines.iter().enumerate() {
        let ns = lab
            .client(&format!("x{i}"), &host.macs[0].to_string())
            .unwrap();
        let ip = eventually_blocking(
            Duration::from_secs(120),
            format!("a DHCP lease for {}", host.id),
            || ns.lease(&leases),
        )
        .unwrap_or_else(|w| panic!("{} got no lease from the example's dnsmasq: {w}", host.id));
        assert!(
            ip.starts_with("192.168.50.2"),
            "a discovery-range address: {ip}"
        );
        let said = eventually_blocking(
            Duration::from_secs(60),
            format!("an HTTP answer to {}'s report", host.id),
            || {
                let said = ns.post(&url, &serde_json::to_string(host).unwrap());
                if said.starts_with("000") {
                    Err(said)
                } else {
                    Ok(said)
                }
            },
        )
        .unwrap_or_else(|w| panic!("{w}"));
        assert!(said.starts_with("201"), "{}: {said}", host.id);
    }

    let done = eventually_blocking(Duration::from_secs(240), "the example to exit", || {
        child.try_wait().ok().flatten()
    })
    .ok();
    if done.is_none() {
        let _ = child.kill();
    }
    let out = child.wait_with_output().unwrap();
    let said = format!(
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(done.is_some(), "the example did not finish:\n{said}");
    assert_eq!(out.status.code(), Some(0), "{said}");
    let hosts = std::fs::read_to_string(services.join("dnsmasq/dhcp-hosts")).unwrap();
    assert_eq!(
        hosts, "52:54:00:50:01:10,192.168.50.21,worker0\n52:54:00:50:01:12,192.168.50.22,worker1\n",
        "the two machines the rule matches, by host id:\n{said}"
    );
    let scripts = harmony::infra::http_boot::ScriptTable::in_dir(&services.join("http"))
        .read()
        .unwrap();
    let script = |mac: &str| scripts[&format!("{mac}.ipxe")].clone();
    assert!(
        script("52-54-00-50-01-10").contains("coreos.inst.install_dev=/dev/nvme0n1 "),
        "the default install disk: the smallest SSD of at least 100 GB"
    );
    assert!(script("52-54-00-50-01-12").contains("coreos.inst.install_dev=/dev/vda "));
    assert!(
        !scripts.contains_key("52-54-00-50-01-14.ipxe"),
        "the small machine got no role"
    );
    assert!(
        said.contains("2 of 2 worker node(s) Ready"),
        "the join phase saw the workers Ready:\n{said}"
    );
    drop(lab);
}
