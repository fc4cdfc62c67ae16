//! Unit and property tests of the host types: names, disks, MACs and discovery reports.

use super::*;

fn host() -> PhysicalHost {
    PhysicalHost {
        id: Id::parse("4c4c4544-0042-3510-8051-b7c04f4e3232").unwrap(),
        hostname: None,
        serial: Some("CZJ1234567".into()),
        macs: vec![MacAddress::parse("52:54:00:00:00:31").unwrap()],
        cpu_count: 4,
        memory_bytes: 8 << 30,
        disks: vec![Disk {
            name: "sda".into(),
            size_bytes: 100 << 30,
            rotational: false,
            ..Default::default()
        }],
    }
}

fn report(h: PhysicalHost) -> DiscoveryReport {
    DiscoveryReport {
        host: h,
        uuid: Some("4c4c4544-0042-3510-8051-b7c04f4e3232".into()),
        boot_mac: None,
    }
}

/// The report with `change` applied is refused, naming `field`.
#[track_caller]
fn refused(change: impl FnOnce(&mut DiscoveryReport), field: &str) -> InvalidReport {
    let mut r = report(host());
    change(&mut r);
    let e = r.validate().expect_err("accepted");
    assert_eq!(e.field, field, "{e}");
    assert!(
        e.to_string().starts_with(&format!("field {field}: ")),
        "{e}"
    );
    e
}

#[test]
fn the_boot_mac_is_one_of_the_macs_and_comes_first() {
    let mut r = report(host());
    let other = MacAddress::parse("52:54:00:00:00:32").unwrap();
    r.host.macs.push(other);
    r.boot_mac = Some(other);
    r.validate().unwrap();
    assert_eq!(r.clone().into_host().macs[0], other);
    refused(
        |r| r.boot_mac = Some(MacAddress::parse("52:54:00:00:00:99").unwrap()),
        "boot_mac",
    );
}

#[test]
fn a_real_report_is_accepted() {
    report(host()).validate().unwrap();
    let mut h = host();
    h.serial = None;
    h.disks.clear();
    DiscoveryReport {
        host: h,
        uuid: None,
        boot_mac: None,
    }
    .validate()
    .unwrap();
}

#[test]
fn disk_names_are_kernel_whole_disk_names() {
    for ok in [
        "sda",
        "sdzzz",
        "vdb",
        "xvda",
        "hdc",
        "nvme0n1",
        "nvme12n345",
        "mmcblk0",
    ] {
        assert_eq!(
            DiskName::parse(ok).unwrap().dev_path(),
            format!("/dev/{ok}")
        );
    }
    for bad in [
        "",
        "sd",
        "sdA",
        "sda1",
        "sdaaaa",
        "hdab",
        "nvme0",
        "nvme0n",
        "nvme0n1p1",
        "nvmen1",
        "nvme1234n1",
        "mmcblk",
        "mmcblk0p1",
        "loop0",
        "dm-0",
        "sda\nchain x",
        "sda ",
        " sda",
        "../sda",
        "sda${x}",
        "ｓda",
    ] {
        let e = DiskName::parse(bad).unwrap_err();
        assert!(e.to_string().contains("kernel block device name"), "{e}");
    }
    let e = refused(
        |r| r.host.disks[0].name = "sda\nchain http://192.0.2.66/pwn.ipxe".into(),
        "disks[0].name",
    );
    assert!(
        e.problem.contains("\\n"),
        "the reported text is escaped: {e}"
    );
    assert!(!e.to_string().contains('\n'), "{e}");
}

#[test]
fn disks_are_bounded_unique_and_whole_sectors() {
    refused(
        |r| {
            r.host.disks = (0..5000)
                .map(|i| Disk {
                    name: format!("sd{}", ["a", "b"][i % 2]),
                    size_bytes: 512,
                    rotational: false,
                    ..Default::default()
                })
                .collect()
        },
        "disks",
    );
    refused(
        |r| r.host.disks.push(r.host.disks[0].clone()),
        "disks[1].name",
    );
    refused(|r| r.host.disks[0].size_bytes = 0, "disks[0].size_bytes");
    refused(|r| r.host.disks[0].size_bytes = 1000, "disks[0].size_bytes");
    refused(
        |r| r.host.disks[0].size_bytes = u64::MAX,
        "disks[0].size_bytes",
    );
    let mut h = host();
    h.disks = (0..MAX_DISKS)
        .map(|i| Disk {
            name: format!("nvme{i}n1"),
            size_bytes: MAX_DISK_BYTES,
            rotational: false,
            ..Default::default()
        })
        .collect();
    h.validate().unwrap();
    // Identity text is printable and bounded like the serial.
    refused(
        |r| r.host.disks[0].model = Some("x\ny".into()),
        "disks[0].model",
    );
    refused(
        |r| r.host.disks[0].serial = Some("s".repeat(129)),
        "disks[0].serial",
    );
    refused(
        |r| r.host.disks[0].wwn = Some(String::new()),
        "disks[0].wwn",
    );
}

#[test]
fn macs_are_one_to_64_unique_unicast() {
    refused(|r| r.host.macs.clear(), "macs");
    refused(
        |r| {
            r.host.macs = (0..=MAX_MACS as u8)
                .map(|i| MacAddress::parse(&format!("52:54:00:00:01:{i:02x}")).unwrap())
                .collect()
        },
        "macs",
    );
    refused(|r| r.host.macs.push(r.host.macs[0]), "macs[1]");
    refused(
        |r| {
            r.host
                .macs
                .push(MacAddress::parse("00:00:00:00:00:00").unwrap())
        },
        "macs[1]",
    );
    refused(
        |r| {
            r.host
                .macs
                .push(MacAddress::parse("ff:ff:ff:ff:ff:ff").unwrap())
        },
        "macs[1]",
    );
    refused(
        |r| {
            r.host
                .macs
                .push(MacAddress::parse("01:00:5e:00:00:01").unwrap())
        },
        "macs[1]",
    );
}

#[test]
fn cpus_and_memory_are_what_hardware_has() {
    refused(|r| r.host.cpu_count = 0, "cpu_count");
    refused(|r| r.host.cpu_count = MAX_CPUS + 1, "cpu_count");
    refused(|r| r.host.memory_bytes = 0, "memory_bytes");
    refused(
        |r| r.host.memory_bytes = MIN_MEMORY_BYTES - 1,
        "memory_bytes",
    );
    refused(
        |r| r.host.memory_bytes = MAX_MEMORY_BYTES + 1,
        "memory_bytes",
    );
    let e = refused(|r| r.host.memory_bytes = u64::MAX, "memory_bytes");
    assert!(e.fix.contains("64 TiB"), "{e}");
    assert!(i64::try_from(MAX_MEMORY_BYTES).is_ok());
    let mut h = host();
    h.cpu_count = MAX_CPUS;
    h.memory_bytes = MAX_MEMORY_BYTES;
    h.validate().unwrap();
    h.cpu_count = 1;
    h.memory_bytes = MIN_MEMORY_BYTES;
    h.validate().unwrap();
}

#[test]
fn serial_is_short_printable_ascii() {
    refused(|r| r.host.serial = Some(String::new()), "serial");
    refused(|r| r.host.serial = Some("x".repeat(900 * 1024)), "serial");
    refused(|r| r.host.serial = Some("x".repeat(MAX_TEXT + 1)), "serial");
    let e = refused(
        |r| r.host.serial = Some("CZJ1\nINFO discovery: host evil approved".into()),
        "serial",
    );
    assert!(!e.to_string().contains('\n'), "{e}");
    refused(|r| r.host.serial = Some("CZJ\u{1b}[2J".into()), "serial");
    refused(|r| r.host.serial = Some("CZJ\u{7f}".into()), "serial");
    refused(|r| r.host.serial = Some("séríal".into()), "serial");
    let mut h = host();
    h.serial = Some("SN 12-34/AB~".into());
    h.validate().unwrap();
    h.serial = Some("x".repeat(MAX_TEXT));
    h.validate().unwrap();
}

#[test]
fn uuid_is_a_uuid() {
    for bad in [
        "",
        "not-a-uuid",
        "4c4c4544-0042-3510-8051-b7c04f4e323",
        "4c4c4544-0042-3510-8051-b7c04f4e3232\n",
        "4c4c4544004235108051b7c04f4e3232",
        "4c4c4544-0042-3510-8051-b7c04f4e323g",
    ] {
        refused(|r| r.uuid = Some(bad.into()), "uuid");
    }
    let mut r = report(host());
    r.uuid = Some("4C4C4544-0042-3510-8051-B7C04F4E3232".into());
    r.validate().unwrap();
}

#[test]
fn the_wire_form_round_trips_and_types_refuse_bad_ids_and_macs() {
    let r = report(host());
    let json = serde_json::to_value(&r).unwrap();
    assert_eq!(json["uuid"], "4c4c4544-0042-3510-8051-b7c04f4e3232");
    assert_eq!(json["serial"], "CZJ1234567");
    assert_eq!(
        serde_json::from_value::<DiscoveryReport>(json.clone()).unwrap(),
        r
    );
    let mut no_uuid = json.clone();
    no_uuid.as_object_mut().unwrap().remove("uuid");
    assert_eq!(
        serde_json::from_value::<DiscoveryReport>(no_uuid)
            .unwrap()
            .uuid,
        None
    );
    let mut bad_id = json.clone();
    bad_id["id"] = "a\nb".into();
    assert!(serde_json::from_value::<DiscoveryReport>(bad_id).is_err());
    let mut bad_mac = json;
    bad_mac["macs"] = serde_json::json!(["52:54:00:00:00:31\nchain x"]);
    assert!(serde_json::from_value::<DiscoveryReport>(bad_mac).is_err());
}

#[test]
fn summary_escapes_reported_text() {
    let mut r = report(host());
    assert!(
        r.summary().contains("serial CZJ1234567, UUID 4c4c4544-"),
        "{}",
        r.summary()
    );
    r.host.serial = Some("a\nb".into());
    r.host.disks[0].name = "sda\rx".into();
    let s = r.summary();
    assert!(!s.contains('\n') && !s.contains('\r'), "{s}");
    assert!(s.contains("serial a\\nb") && s.contains("sda\\rx"), "{s}");
}
