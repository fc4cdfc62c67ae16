//! A machine nobody declared, booted for real: QEMU (software emulation) with Debian's iPXE
//! ROM, two NICs of which only the second can PXE-boot, and three disks (virtio 8 GiB, SATA
//! 20 GiB, NVMe 4 GiB). Its MACs have no reservation: it gets a lease
//! from the discovery range of Harmony's dnsmasq, boots the discovery image
//! (`discovery-image/build.sh`: a Debian kernel and an initramfs running
//! `harmony-discovery-agent`) over HTTP, and reports itself from its leased address. The test
//! finds it in the SQLite inventory with exactly the MACs (the boot NIC first), vCPUs, memory,
//! disks with their serials, DMI serial and UUID QEMU was given. Given the worker role and bound
//! by the workers phase, it is reserved by both MACs and scripted by the boot NIC's, installing
//! to the disk `--root-device worker=min-size:16GiB` names. Then, with the HTTP boot server
//! stopped as between runs, the machine boots again: it waits in dnsmasq's TFTP script until
//! the server is back, then fetches its per-MAC script from its reserved address, and the
//! kernel that script boots fetches the worker ignition URL from its command line (a stand-in
//! for the OKD installer, which is not run). Every boot's console is kept in
//! `$CARGO_TARGET_TMPDIR/okd_discovery_qemu/`.

use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::process::Stdio;
use std::time::Duration;

use harmony::domain::ScoreStatus;
use harmony::domain::capability::{HaCluster, HostInventory, HttpServer, RootDeviceRule};
use harmony::domain::inventory::{HostRole, RoleAssignment};
use harmony::types::MacAddress;
use harmony_e2e::discovery_boot::{
    self, build_image, console_text, hit, print_kernel_banner, stand_in_installer,
};
use harmony_e2e::netns::available;
use harmony_e2e::okd_lab::{HTTP_PORT, OkdLab, SERVICES, WORKER1, machine};
use harmony_modules::okd::{OkdHostsScore, OkdPrepareScore};

/// The machine: two NICs no inventory, roles file or reservation names. It PXE-boots from
/// the second (the first has no boot ROM), so it must be bound by that one.
const MAC: &str = "52:54:00:77:00:99";
const FIRST_NIC: &str = "52:54:00:77:00:98";
const MEMORY_MIB: u64 = 1536;
const CPUS: u32 = 3;
/// Its disks: virtio 8 GiB, SATA 20 GiB, NVMe 4 GiB (sparse files), each with a serial.
const DISKS: [(&str, u64, &str); 3] = [
    ("vda", 8 << 30, "VIRTIO-8G"),
    ("sda", 20 << 30, "SATA-20G"),
    ("nvme0n1", 4 << 30, "NVME-4G"),
];
/// The rule the workers phase installs by: only the SATA disk is at least 16 GiB.
const ROOT_DEVICE: &str = "worker=min-size:16GiB";
const SERIAL: &str = "HARMONY-E2E-0099";
const UUID: &str = "6a1f0c2e-77a0-4d4b-9a51-000000000099";
/// Software emulation on a loaded machine is slow: generous, and never asserted on.
const BOOT_TIMEOUT: Duration = Duration::from_secs(20 * 60);

/// Kills QEMU when dropped, however the test ends.
struct Qemu(std::process::Child);

impl Drop for Qemu {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

/// Where the consoles are kept after the test.
fn log_dir() -> PathBuf {
    let dir = Path::new(env!("CARGO_TARGET_TMPDIR")).join("okd_discovery_qemu");
    std::fs::create_dir_all(&dir).unwrap();
    dir
}

/// Starts QEMU in the lab's services namespace, its console (the serial port) in `console`,
/// under KVM when a guest runs under it, else software emulation ([`harmony_e2e::accel`]).
fn boot(lab: &mut OkdLab, taps: &[String; 2], disks: &Path, console: &Path) -> Qemu {
    let drive = |name: &str| disks.join(format!("{name}.raw")).display().to_string();
    let out = std::fs::File::create(console).unwrap();
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
                &MEMORY_MIB.to_string(),
                "-smp",
                &CPUS.to_string(),
                "-nographic",
                "-no-reboot",
                "-nodefaults",
                "-serial",
                "stdio",
                "-boot",
                "n",
                "-smbios",
                &format!("type=1,serial={SERIAL},uuid={UUID}"),
                "-drive",
                &format!("file={},format=raw,if=none,id=d0", drive("vda")),
                "-device",
                &format!("virtio-blk-pci,drive=d0,serial={}", DISKS[0].2),
                "-device",
                "ahci,id=ahci",
                "-drive",
                &format!("file={},format=raw,if=none,id=d1", drive("sda")),
                "-device",
                &format!("ide-hd,drive=d1,bus=ahci.0,serial={}", DISKS[1].2),
                "-drive",
                &format!("file={},format=raw,if=none,id=d2", drive("nvme0n1")),
                "-device",
                &format!("nvme,drive=d2,serial={}", DISKS[2].2),
                "-netdev",
                &format!("tap,id=n0,ifname={},script=no,downscript=no", taps[0]),
                // Both NICs on the same network; only the second has a boot ROM.
                "-device",
                &format!("virtio-net-pci,netdev=n0,mac={FIRST_NIC},romfile="),
                "-netdev",
                &format!("tap,id=n1,ifname={},script=no,downscript=no", taps[1]),
                "-device",
                &format!("virtio-net-pci,netdev=n1,mac={MAC}"),
            ],
            Stdio::from(out),
            Stdio::from(err),
        )
        .unwrap();
    Qemu(child)
}

/// Polls `check` every second until it gives a value, failing with the console if QEMU exits
/// or `BOOT_TIMEOUT` passes.
async fn until<T, F, Fut>(what: &str, qemu: &mut Qemu, console: &Path, mut check: F) -> T
where
    F: FnMut() -> Fut,
    Fut: std::future::Future<Output = Option<T>>,
{
    let waited = discovery_boot::until(what, BOOT_TIMEOUT, || {
        let exited = match qemu.0.try_wait() {
            Ok(Some(status)) => Some(format!("QEMU exited ({status})")),
            _ => None,
        };
        let next = check();
        async move {
            match (next.await, exited) {
                (None, Some(e)) => Err(e),
                (v, _) => Ok(v),
            }
        }
    })
    .await;
    waited.unwrap_or_else(|e| {
        panic!(
            "{e}; console ({}):\n{}",
            console.display(),
            console_text(console)
        )
    })
}

#[tokio::test(flavor = "multi_thread")]
async fn an_unknown_machine_discovers_itself_then_boots_as_a_worker() {
    if let Err(e) = available() {
        panic!("{e}");
    }
    let image = build_image().unwrap_or_else(|e| panic!("{e}"));
    // worker1's machine is declared; the second worker is whatever discovery finds.
    let declared = machine("machine-b", WORKER1.2).unwrap();
    let inventory = harmony::domain::Inventory {
        location: None,
        hosts: vec![declared.clone()],
        assignments: vec![RoleAssignment {
            host: declared.id.clone(),
            role: HostRole::Worker,
        }],
    };
    let mut lab = OkdLab::with_root_device(
        "disc",
        &[],
        inventory,
        Some(image.clone()),
        vec![RootDeviceRule::parse(ROOT_DEVICE).unwrap()],
    )
    .unwrap();
    let addr: SocketAddr = format!("{SERVICES}:{HTTP_PORT}").parse().unwrap();
    let listener = lab.lab.services.bind_tcp(addr).unwrap();
    lab.topology().serve_http_on(listener).unwrap();
    let install = lab.installation().unwrap();
    let reports = lab
        .run(vec![Box::new(OkdPrepareScore::new(install.clone()))])
        .await
        .unwrap();
    assert_eq!(reports[0].status, ScoreStatus::Success, "{:#?}", reports[0]);
    let conf = std::fs::read_to_string(lab.services_dir().join("dnsmasq/dnsmasq.conf")).unwrap();
    assert!(
        conf.contains("dhcp-range=set:discovery,10.77.0.205,10.77.0.254,"),
        "{conf}"
    );

    let disks = lab.dir.path().join("disks");
    std::fs::create_dir_all(&disks).unwrap();
    for (name, bytes, _) in DISKS {
        std::fs::File::create(disks.join(format!("{name}.raw")))
            .unwrap()
            .set_len(bytes)
            .unwrap();
    }
    let taps = [lab.lab.tap().unwrap(), lab.lab.tap().unwrap()];
    let logs = log_dir();

    // First boot: unknown MAC -> discovery range -> boot.ipxe -> discovery image -> report.
    let console = logs.join("console-discovery.log");
    let mut qemu = boot(&mut lab, &taps, &disks, &console);
    let mac = MacAddress::parse(MAC).unwrap();
    let topology = lab.topology();
    let host = until(
        "the machine reported itself",
        &mut qemu,
        &console,
        || async {
            topology
                .known_hosts()
                .await
                .unwrap()
                .into_iter()
                .find(|h| h.macs.contains(&mac))
        },
    )
    .await;
    // The agent's console lines follow its report; give them a moment, never a condition.
    until(
        "the agent's last console line",
        &mut qemu,
        &console,
        || async {
            console_text(&console)
                .contains("harmony-discovery: reported to")
                .then_some(())
        },
    )
    .await;
    drop(qemu);
    let log = topology.access_log().await.unwrap();
    let fail = |what: &str| -> String {
        format!(
            "{what}; HTTP log: {log:?}\nconsole ({}):\n{}",
            console.display(),
            console_text(&console)
        )
    };
    assert_eq!(host.id.as_str(), UUID, "{}", fail("the id is the DMI UUID"));
    let first_nic = MacAddress::parse(FIRST_NIC).unwrap();
    assert_eq!(
        host.macs,
        vec![mac, first_nic],
        "{}",
        fail("both MACs, the one it PXE-booted from first")
    );
    assert_eq!(host.cpu_count, CPUS, "{}", fail("vCPUs"));
    assert_eq!(
        host.serial.as_deref(),
        Some(SERIAL),
        "{}",
        fail("the DMI serial in the inventory")
    );
    assert_eq!(
        host.memory_bytes,
        MEMORY_MIB << 20,
        "{}",
        fail("memory as QEMU's -m")
    );
    let reported: Vec<(&str, u64)> = host
        .disks
        .iter()
        .map(|d| (d.name.as_str(), d.size_bytes))
        .collect();
    let mut expected: Vec<(&str, u64)> = DISKS.iter().map(|(n, b, _)| (*n, *b)).collect();
    expected.sort();
    assert_eq!(reported, expected, "{}", fail("disks"));
    let disk = |name: &str| host.disks.iter().find(|d| d.name == name).unwrap();
    assert_eq!(
        disk("vda").serial.as_deref(),
        Some(DISKS[0].2),
        "{}",
        fail("virtio serial")
    );
    assert_eq!(
        disk("nvme0n1").serial.as_deref(),
        Some(DISKS[2].2),
        "{}",
        fail("NVMe serial")
    );
    assert_eq!(
        disk("sda").model.as_deref(),
        Some("QEMU HARDDISK"),
        "{}",
        fail("SATA model")
    );
    assert!(
        !disk("nvme0n1").rotational,
        "{}",
        fail("NVMe is not rotational")
    );
    let text = console_text(&console);
    assert!(
        text.contains(&format!("serial {SERIAL}, UUID {UUID}")),
        "{}",
        fail("the agent reports the DMI serial and UUID")
    );
    for (method, path, status) in [
        ("GET", "/boot.ipxe", 200),
        ("GET", "/discovery/vmlinuz", 200),
        ("GET", "/discovery/initrd.img", 200),
        ("POST", "/discovery", 201),
    ] {
        let a = hit(&log, method, path).unwrap_or_else(|| panic!("{}", fail(path)));
        assert_eq!(a.status, status, "{}", fail(path));
        let last: u8 = a.client.rsplit('.').next().unwrap().parse().unwrap();
        assert!(
            a.client.starts_with("10.77.0.") && (205..=254).contains(&last),
            "{}",
            fail(&format!(
                "{path} from {}, outside the discovery range",
                a.client
            ))
        );
    }
    print_kernel_banner(&console);

    // The operator gives it the worker role; the workers phase binds and reserves it.
    topology
        .assign_role(&RoleAssignment {
            host: host.id.clone(),
            role: HostRole::Worker,
        })
        .await
        .unwrap();
    let reports = lab
        .run(vec![Box::new(OkdHostsScore::new(
            HostRole::Worker,
            install.clone(),
        ))])
        .await
        .unwrap();
    assert_eq!(reports[0].status, ScoreStatus::Success, "{:#?}", reports[0]);
    let topology = lab.topology();
    let binding = topology
        .host_bindings()
        .await
        .unwrap()
        .into_iter()
        .find(|b| b.host == host.id)
        .expect("the discovered machine is bound");
    assert_eq!(binding.role, HostRole::Worker);
    assert_eq!(binding.mac, mac, "bound by the NIC it PXE-boots from");
    let worker_ip = lab
        .topology()
        .layout()
        .workers
        .iter()
        .find(|w| w.name == binding.logical)
        .map(|w| w.ip.to_string())
        .expect("bound to a worker logical host");

    // What the per-MAC script boots: the discovery kernel and the stand-in installer.
    let www = lab.topology().http().root();
    std::fs::create_dir_all(www.join("images")).unwrap();
    std::fs::copy(image.join("vmlinuz"), www.join(&install.kernel)).unwrap();
    std::fs::write(
        www.join(&install.initramfs),
        stand_in_installer(&image, lab.dir.path()).unwrap(),
    )
    .unwrap();

    let hosts_file =
        std::fs::read_to_string(lab.services_dir().join("dnsmasq/dhcp-hosts")).unwrap();
    assert!(
        hosts_file.contains(&format!(
            "{MAC},{FIRST_NIC},{worker_ip},{}",
            binding.logical
        )),
        "both NICs share the reservation, the boot NIC first:\n{hosts_file}"
    );
    let script_text = lab.topology().http().scripts().read().unwrap()
        [&format!("{}.ipxe", mac.to_hyphenated())]
        .clone();
    assert!(
        script_text.contains("coreos.inst.install_dev=/dev/sda "),
        "the disk --root-device {ROOT_DEVICE} names (SATA 20 GiB), not the small NVMe:\n{script_text}"
    );

    // Between runs: the HTTP boot server is gone (a run serves it only while it runs), dnsmasq
    // still answers. The machine boots, gets the TFTP wait script and waits; when the next
    // run serves HTTP again it boots on by itself.
    lab.topology().http().stop();
    let console = logs.join("console-worker.log");
    let mut qemu = boot(&mut lab, &taps, &disks, &console);
    until(
        "the machine waited for the boot server",
        &mut qemu,
        &console,
        || async {
            console_text(&console)
                .contains("boot.ipxe does not answer.")
                .then_some(())
        },
    )
    .await;
    let listener = lab.lab.services.bind_tcp(addr).unwrap();
    lab.topology().serve_http_on(listener).unwrap();
    let topology = lab.topology();
    // The new server's log starts empty: everything in it is from this boot.
    let before = 0;
    let ignition = "/ignition/worker.ign";
    until(
        "the worker fetched its ignition URL",
        &mut qemu,
        &console,
        || async {
            let log = topology.access_log().await.unwrap();
            hit(&log[before..], "GET", ignition).map(|_| ())
        },
    )
    .await;
    until(
        "the stand-in installer's console line",
        &mut qemu,
        &console,
        || async {
            console_text(&console)
                .contains("stand-in installer: fetched")
                .then_some(())
        },
    )
    .await;
    drop(qemu);
    let text = console_text(&console);
    assert!(
        text.contains("coreos.inst.ignition_url=http://10.77.0.2:8080/ignition/worker.ign"),
        "the kernel booted with the per-MAC script's command line:\n{text}"
    );
    let log = topology.access_log().await.unwrap();
    let log = &log[before..];
    let script = format!("/ipxe/{}.ipxe", mac.to_hyphenated());
    for (path, status) in [
        ("/boot.ipxe", 200),
        (script.as_str(), 200),
        (install.kernel.as_str(), 200),
        (ignition, 200),
    ] {
        let path = if path.starts_with('/') {
            path.to_string()
        } else {
            format!("/{path}")
        };
        let a = hit(log, "GET", &path).unwrap_or_else(|| {
            panic!(
                "{path} was not fetched on the second boot; HTTP log: {log:?}\nconsole:\n{}",
                console_text(&console)
            )
        });
        assert_eq!(a.status, status, "{path}: {log:?}");
        assert_eq!(
            a.client, worker_ip,
            "{path} fetched from the worker's reserved address: {log:?}"
        );
    }
    assert!(
        hit(log, "GET", "/discovery/vmlinuz").is_none(),
        "a bound worker does not boot discovery again: {log:?}"
    );
    print_kernel_banner(&console);
}
