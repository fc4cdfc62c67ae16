//! Unit tests of the discovery agent: facts read from prepared trees, the command line, the
//! memory-device parser and the post.

use super::*;

fn write(root: &Path, rel: &str, text: &str) {
    let p = root.join(rel);
    std::fs::create_dir_all(p.parent().unwrap()).unwrap();
    std::fs::write(p, text).unwrap();
}

#[test]
fn reads_a_prepared_tree() {
    let dir = tempfile::tempdir().unwrap();
    let r = dir.path();
    write(
        r,
        "proc/cpuinfo",
        "processor\t: 0\nmodel name: x\n\nprocessor\t: 1\n",
    );
    write(
        r,
        "proc/meminfo",
        "MemTotal:       16384 kB\nMemFree: 1 kB\n",
    );
    write(r, "proc/sys/kernel/hostname", "node-a\n");
    write(r, "sys/class/net/eth0/address", "52:54:00:AA:00:01\n");
    write(r, "sys/class/net/eth0/device/vendor", "0x1af4\n");
    write(r, "sys/class/net/lo/address", "00:00:00:00:00:00\n");
    write(r, "sys/block/vda/size", "2097152\n");
    write(r, "sys/block/vda/queue/rotational", "0\n");
    write(r, "sys/block/vda/serial", "VIRTIO-0042\n");
    write(r, "sys/block/sda/size", "4194304\n");
    write(r, "sys/block/sda/device/model", "QEMU HARDDISK   \n");
    write(r, "sys/block/sda/device/wwid", "naa.5000c500a1b2c3d4\n");
    write(r, "sys/block/sdb/size", "4194304\n");
    write(r, "sys/block/sdb/device/model", "bad\u{1b}[2Jmodel\n");
    write(r, "sys/block/loop0/size", "10\n");
    let report = Facts::under(r).report().unwrap();
    assert_eq!(report.id.as_str(), "52-54-00-aa-00-01");
    assert_eq!(report.cpu_count, 2);
    assert_eq!(report.memory_bytes, 16384 * 1024);
    assert_eq!(report.macs.len(), 1);
    assert_eq!(
        report.disks,
        vec![
            Disk {
                name: "sda".into(),
                size_bytes: 2 << 30,
                model: Some("QEMU HARDDISK".into()),
                wwn: Some("naa.5000c500a1b2c3d4".into()),
                ..Default::default()
            },
            // A model the endpoint would refuse (an escape sequence) is left out.
            Disk {
                name: "sdb".into(),
                size_bytes: 2 << 30,
                ..Default::default()
            },
            Disk {
                name: "vda".into(),
                size_bytes: 1 << 30,
                serial: Some("VIRTIO-0042".into()),
                ..Default::default()
            }
        ]
    );
    let json = serde_json::to_value(&report).unwrap();
    assert_eq!(json["macs"][0], "52:54:00:aa:00:01");
    assert_eq!(json["hostname"], "node-a");
}

/// An SMBIOS type 17 structure (length 0x28) with `size` in its Size word and `ext` in
/// its Extended Size dword.
fn type17(size: u16, ext: u32) -> Vec<u8> {
    let mut raw = vec![0u8; 0x28];
    raw[0] = 17;
    raw[1] = 0x28;
    raw[0x0C..0x0E].copy_from_slice(&size.to_le_bytes());
    raw[0x1C..0x20].copy_from_slice(&ext.to_le_bytes());
    raw
}

#[test]
fn memory_device_sizes_follow_smbios() {
    assert_eq!(memory_device_size(&type17(512, 0)), Some(512 << 20));
    assert_eq!(
        memory_device_size(&type17(0x8000 | 768, 0)),
        Some(768 << 10)
    );
    assert_eq!(
        memory_device_size(&type17(0x7FFF, 65536)),
        Some(65536u64 << 20)
    );
    assert_eq!(memory_device_size(&type17(0, 0)), None, "empty slot");
    assert_eq!(memory_device_size(&type17(0xFFFF, 0)), None, "unknown");
    let mut other = type17(512, 0);
    other[0] = 16;
    assert_eq!(memory_device_size(&other), None, "not a memory device");
    assert_eq!(memory_device_size(&[17, 4, 0, 0]), None, "truncated");
}

#[test]
fn memory_is_what_was_installed_not_mem_total() {
    let dir = tempfile::tempdir().unwrap();
    let r = dir.path();
    // MemTotal is below the installed 512 MiB, as on every machine.
    write(r, "proc/meminfo", "MemTotal:       492000 kB\n");
    assert_eq!(Facts::under(r).memory_bytes().unwrap(), 492000 * 1024);
    // Memory blocks of 128 MiB: four online, one offline, plus non-block entries.
    write(r, "sys/devices/system/memory/block_size_bytes", "8000000\n");
    for (i, online) in [(0, "1"), (1, "1"), (2, "1"), (3, "1"), (4, "0")] {
        write(
            r,
            &format!("sys/devices/system/memory/memory{i}/online"),
            online,
        );
    }
    write(
        r,
        "sys/devices/system/memory/auto_online_blocks",
        "online\n",
    );
    assert_eq!(Facts::under(r).memory_bytes().unwrap(), 512 << 20);
    // DMI memory devices win: two DIMMs and an empty slot.
    let dmi = "sys/firmware/dmi/entries";
    std::fs::create_dir_all(r.join(dmi)).unwrap();
    for (name, raw) in [
        ("17-0", type17(256, 0)),
        ("17-1", type17(0x7FFF, 512)),
        ("17-2", type17(0, 0)),
        ("16-0", type17(9999, 0)),
    ] {
        std::fs::create_dir_all(r.join(dmi).join(name)).unwrap();
        std::fs::write(r.join(dmi).join(name).join("raw"), raw).unwrap();
    }
    assert_eq!(Facts::under(r).memory_bytes().unwrap(), 768 << 20);
}

#[test]
fn the_report_carries_the_dmi_serial_and_uuid() {
    let dir = tempfile::tempdir().unwrap();
    let r = dir.path();
    write(r, "proc/cpuinfo", "processor\t: 0\n");
    write(r, "proc/meminfo", "MemTotal: 1024 kB\n");
    write(r, "sys/class/net/eth0/address", "52:54:00:aa:00:02\n");
    write(r, "sys/class/net/eth0/device/vendor", "0x1af4\n");
    std::fs::create_dir_all(r.join("sys/block")).unwrap();
    write(
        r,
        "sys/class/dmi/id/product_uuid",
        "4C4C4544-0042-3510-8052-B4C04F4E3232\n",
    );
    write(r, "sys/class/dmi/id/product_serial", "CZJ1234567\n");
    let report = Facts::under(r).discovery_report().unwrap();
    assert_eq!(
        report.host.id.as_str(),
        "4c4c4544-0042-3510-8052-b4c04f4e3232"
    );
    assert_eq!(report.host.serial.as_deref(), Some("CZJ1234567"));
    assert_eq!(
        report.uuid.as_deref(),
        Some("4c4c4544-0042-3510-8052-b4c04f4e3232")
    );
    let json = serde_json::to_value(&report).unwrap();
    assert_eq!(json["serial"], "CZJ1234567");
    assert_eq!(json["macs"][0], "52:54:00:aa:00:02");
    // The server reads the same JSON as a PhysicalHost, ignoring the extra fields.
    let host: PhysicalHost = serde_json::from_value(json).unwrap();
    assert_eq!(host, report.host);
    assert!(
        report.summary().contains("serial CZJ1234567"),
        "{}",
        report.summary()
    );
    write(
        r,
        "sys/class/dmi/id/product_serial",
        "To Be Filled By O.E.M.\n",
    );
    assert_eq!(Facts::under(r).product_serial(), None);
}

#[test]
fn the_boot_mac_comes_from_the_kernel_command_line_and_is_listed_first() {
    let dir = tempfile::tempdir().unwrap();
    let r = dir.path();
    write(r, "proc/cpuinfo", "processor\t: 0\n");
    write(r, "proc/meminfo", "MemTotal:       16384 kB\n");
    for (nic, mac) in [("eth0", "52:54:00:aa:00:01"), ("eth1", "52:54:00:aa:00:02")] {
        write(r, &format!("sys/class/net/{nic}/address"), mac);
        write(r, &format!("sys/class/net/{nic}/device/vendor"), "0x1af4");
    }
    write(r, "sys/block/vda/size", "2097152\n");
    write(
        r,
        "proc/cmdline",
        "initrd=initrd.img harmony.discovery=http://x/discovery harmony.bootmac=52:54:00:aa:00:02\n",
    );
    let report = Facts::under(r).discovery_report().unwrap();
    report.validate().unwrap();
    let boot = MacAddress::parse("52:54:00:aa:00:02").unwrap();
    assert_eq!(report.boot_mac, Some(boot));
    assert_eq!(report.host.macs[0].to_string(), "52:54:00:aa:00:01");
    assert_eq!(
        report.into_host().macs[0],
        boot,
        "the boot MAC is listed first"
    );
    // A MAC that is not one of the host's NICs is not reported as its boot MAC.
    write(r, "proc/cmdline", "harmony.bootmac=52:54:00:aa:00:09\n");
    assert_eq!(Facts::under(r).discovery_report().unwrap().boot_mac, None);
    assert_eq!(boot_mac_from_cmdline("harmony.bootmac=${mac}"), None);
}

#[test]
fn the_url_comes_from_the_kernel_command_line() {
    let url = url_from_cmdline(
        "BOOT_IMAGE=vmlinuz console=ttyS0 harmony.discovery=http://10.77.0.2:8080/discovery quiet",
    )
    .unwrap();
    assert_eq!(url.as_str(), "http://10.77.0.2:8080/discovery");
    let e = url_from_cmdline("console=ttyS0 harmony.discoveryx=1").unwrap_err();
    assert!(e.to_string().contains("no harmony.discovery=URL"), "{e}");
    let e = url_from_cmdline("harmony.discovery=not-a-url").unwrap_err();
    assert!(
        e.to_string().starts_with("harmony.discovery=not-a-url"),
        "{e}"
    );
}

/// A one-shot HTTP server on loopback answering `status`; returns its URL and, once a
/// request came, the request's head and body.
fn one_shot(status: &'static str) -> (Url, std::thread::JoinHandle<(String, String)>) {
    use std::io::{BufRead, BufReader, Read, Write};
    let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let url = Url::parse(&format!(
        "http://127.0.0.1:{}/discovery",
        listener.local_addr().unwrap().port()
    ))
    .unwrap();
    let server = std::thread::spawn(move || {
        let (stream, _) = listener.accept().unwrap();
        let mut reader = BufReader::new(stream.try_clone().unwrap());
        let mut head = String::new();
        let mut length = 0;
        loop {
            let mut line = String::new();
            reader.read_line(&mut line).unwrap();
            if let Some(v) = line.to_ascii_lowercase().strip_prefix("content-length:") {
                length = v.trim().parse().unwrap();
            }
            if line == "\r\n" {
                break;
            }
            head.push_str(&line);
        }
        let mut body = vec![0; length];
        reader.read_exact(&mut body).unwrap();
        let words = if status.starts_with('2') {
            ""
        } else {
            "GET, HEAD or POST /discovery"
        };
        let answer = format!(
            "HTTP/1.1 {status}\r\ncontent-length: {}\r\nconnection: close\r\n\r\n{words}",
            words.len()
        );
        (&stream).write_all(answer.as_bytes()).unwrap();
        (head, String::from_utf8(body).unwrap())
    });
    (url, server)
}

fn sample() -> PhysicalHost {
    PhysicalHost {
        id: Id::parse("52-54-00-aa-00-01").unwrap(),
        hostname: None,
        serial: None,
        macs: vec![MacAddress::parse("52:54:00:aa:00:01").unwrap()],
        cpu_count: 2,
        memory_bytes: 1 << 30,
        disks: Vec::new(),
    }
}

#[test]
fn posts_the_report_as_json_over_real_http() {
    let (url, server) = one_shot("204 No Content");
    post(&url, &sample(), Duration::from_secs(5)).unwrap();
    let (head, body) = server.join().unwrap();
    assert!(head.starts_with("POST /discovery HTTP/1.1"), "{head}");
    assert!(
        head.to_ascii_lowercase()
            .contains("content-type: application/json")
    );
    let sent: serde_json::Value = serde_json::from_str(&body).unwrap();
    assert_eq!(sent["macs"][0], "52:54:00:aa:00:01");
    assert_eq!(sent["cpu_count"], 2);
}

/// Async callers (the okd discovery e2e test) use `post` from `spawn_blocking`, where it
/// runs its own runtime.
#[tokio::test]
async fn posting_from_a_blocking_task_of_a_runtime_works() {
    let (url, server) = one_shot("204 No Content");
    tokio::task::spawn_blocking(move || post(&url, &sample(), Duration::from_secs(5)))
        .await
        .unwrap()
        .unwrap();
    server.join().unwrap();
}

#[test]
fn a_refusal_names_the_status_and_the_servers_words() {
    let (url, server) = one_shot("405 Method Not Allowed");
    let e = post(&url, &sample(), Duration::from_secs(5)).unwrap_err();
    server.join().unwrap();
    let text = e.to_string();
    assert!(
        text.contains("405") && text.contains("POST /discovery"),
        "{text}"
    );
}

#[test]
fn an_unreachable_endpoint_and_a_wrong_scheme_are_errors() {
    let port = std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port();
    let url = Url::parse(&format!("http://127.0.0.1:{port}/discovery")).unwrap();
    let e = post(&url, &sample(), Duration::from_secs(2)).unwrap_err();
    assert!(
        e.to_string().starts_with("posting to http://127.0.0.1"),
        "{e}"
    );
    let ftp = Url::parse("ftp://127.0.0.1/discovery").unwrap();
    let e = post(&ftp, &sample(), Duration::from_secs(2)).unwrap_err();
    assert!(e.to_string().contains("scheme \"ftp\""), "{e}");
}

#[test]
fn this_machine_has_cpus_and_memory() {
    let facts = Facts::system();
    assert!(facts.cpu_count().unwrap() >= 1);
    assert!(facts.memory_bytes().unwrap() > 0);
}
