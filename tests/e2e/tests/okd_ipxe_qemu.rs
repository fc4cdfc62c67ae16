//! Real iPXE firmware (Debian's ipxe-qemu ROM) in QEMU under software emulation, with a tap
//! NIC carrying a worker's MAC: it gets its lease from Harmony's dnsmasq, chains to Harmony's
//! HTTP boot server and fetches that worker's per-MAC script, as the server's log shows.
//! The kernel the script points to is absent on purpose: the boot chain is the point.

use std::net::SocketAddr;
use std::process::Stdio;
use std::time::Duration;

use harmony::domain::ScoreStatus;
use harmony::domain::capability::HttpServer;
use harmony::domain::inventory::HostRole;
use harmony::types::MacAddress;
use harmony_e2e::eventually::eventually;
use harmony_e2e::netns::available;
use harmony_e2e::okd_lab::{HTTP_PORT, OkdLab, SERVICES, WORKER0, worker_inventory};
use harmony_modules::okd::{OkdHostsScore, OkdPrepareScore};

/// Kills QEMU when the test ends, however it ends.
struct Qemu(std::process::Child);

impl Drop for Qemu {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

#[tokio::test(flavor = "multi_thread")]
async fn ipxe_firmware_fetches_the_workers_per_mac_script() {
    if let Err(e) = available() {
        panic!("{e}");
    }
    let mut lab = OkdLab::new("qemu", &[], worker_inventory().unwrap()).unwrap();
    let addr: SocketAddr = format!("{SERVICES}:{HTTP_PORT}").parse().unwrap();
    let listener = lab.lab.services.bind_tcp(addr).unwrap();
    lab.topology().serve_http_on(listener).unwrap();
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
    let tap = lab.lab.tap().unwrap();
    let console = lab.dir.path().join("qemu-console.log");
    let out = std::fs::File::create(&console).unwrap();
    let err = out.try_clone().unwrap();
    let child = lab
        .lab
        .services
        .spawn(
            &[
                "qemu-system-x86_64",
                "-accel",
                harmony_e2e::accel::qemu_accel().name,
                "-m",
                "128",
                "-nographic",
                "-no-reboot",
                "-nodefaults",
                "-serial",
                "stdio",
                "-boot",
                "n",
                "-netdev",
                &format!("tap,id=n0,ifname={tap},script=no,downscript=no"),
                "-device",
                &format!("virtio-net-pci,netdev=n0,mac={}", WORKER0.2),
            ],
            Stdio::from(out),
            Stdio::from(err),
        )
        .unwrap();
    let mut qemu = Qemu(child);

    let script = format!(
        "/ipxe/{}.ipxe",
        MacAddress::parse(WORKER0.2).unwrap().to_hyphenated()
    );
    let topology = lab.topology();
    let served = eventually(
        Duration::from_secs(180),
        format!("the machine to fetch {script}"),
        || {
            // Read before the log: an exit is reported only if the log does not have the
            // script, as it would be after.
            let exited = qemu.0.try_wait().ok().flatten();
            let (script, console) = (&script, &console);
            async move {
                let log = topology.access_log().await.unwrap();
                if let Some(a) = log.iter().find(|a| a.path == *script) {
                    return Some(a.clone());
                }
                if let Some(status) = exited {
                    panic!(
                        "QEMU exited ({status}) before fetching {script}:\n{}",
                        std::fs::read_to_string(console).unwrap_or_default()
                    );
                }
                None
            }
        },
    )
    .await
    .ok();
    drop(qemu);
    let log = topology.access_log().await.unwrap();
    let served = served.unwrap_or_else(|| {
        panic!(
            "{script} was not requested within 180 s. HTTP log: {log:?}\nconsole:\n{}",
            std::fs::read_to_string(&console).unwrap_or_default()
        )
    });
    assert_eq!(served.status, 200, "{log:?}");
    assert_eq!(
        served.client, WORKER0.1,
        "fetched from the reserved address: {log:?}"
    );
    assert_eq!(
        log[0].path, "/boot.ipxe",
        "iPXE chained through boot.ipxe first: {log:?}"
    );
    let file = std::fs::read_to_string(topology.http().access_log_path()).unwrap();
    assert!(
        file.contains(&format!("{} GET {script} 200", WORKER0.1)),
        "access log file:\n{file}"
    );
}
