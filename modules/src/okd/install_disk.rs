//! The disk each host installs to, by root-device hints (`--root-device`, Metal3's
//! `rootDeviceHints`): the host's own rule, else its role's, else the default (the smallest
//! SSD, else HDD, of at least [`OKD_MIN_INSTALL_DISK_BYTES`]).

use harmony::domain::capability::{
    CapabilityError, OKD_MIN_INSTALL_DISK_BYTES, RootDeviceHints, RootDeviceRule, RootDeviceTarget,
};
use harmony::domain::inventory::{HostRole, PhysicalHost};
use harmony_types::DiskName;

use super::rules::describe_disk;
use crate::interpret_support::human;

/// The rule for `host` of `role`: its own (`host:ID`), else its role's; `None` for the default.
pub(super) fn rule_for<'a>(
    rules: &'a [RootDeviceRule],
    host: &PhysicalHost,
    role: HostRole,
) -> Option<&'a RootDeviceRule> {
    rules
        .iter()
        .find(|r| matches!(&r.target, RootDeviceTarget::Host(id) if *id == host.id))
        .or_else(|| {
            rules
                .iter()
                .find(|r| matches!(r.target, RootDeviceTarget::Role(x) if x == role))
        })
}

/// The device `host` installs to (`/dev/<name>`). A host that reported no disk (declared in
/// the program without disks) installs to `default`. Every disk name is checked to be a
/// [`DiskName`] first (an inventory written before reports were validated may hold anything),
/// and a host no disk of which satisfies its hints is an error naming the host, the hints and
/// each disk.
pub(super) fn install_disk(
    host: Option<&PhysicalHost>,
    role: HostRole,
    rules: &[RootDeviceRule],
    default: &str,
) -> Result<String, CapabilityError> {
    let Some(h) = host.filter(|h| !h.disks.is_empty()) else {
        return Ok(default.to_string());
    };
    let object = || format!("physical host {} in the inventory", h.id);
    for (i, d) in h.disks.iter().enumerate() {
        DiskName::parse(&d.name).map_err(|e| CapabilityError::InvalidObject {
            object: object(),
            problem: format!(
                "disks[{i}].name: {e}; reboot the host into discovery so that it reports again, \
                 or remove it from the inventory"
            ),
        })?;
    }
    let rule = rule_for(rules, h, role);
    let default_hints = RootDeviceHints::default();
    let hints = rule.map_or(&default_hints, |r| &r.hints);
    if let Some(d) = hints.select(h) {
        return Ok(format!("/dev/{}", d.name));
    }
    let disks: Vec<String> = h
        .disks
        .iter()
        .map(|d| {
            let mut s = describe_disk(d);
            for (k, v) in [("model", &d.model), ("serial", &d.serial), ("wwn", &d.wwn)] {
                if let Some(v) = v {
                    s.push_str(&format!(" {k} {}", v.escape_debug()));
                }
            }
            s
        })
        .collect();
    let asked = match rule {
        Some(r) => format!("{r} (min-size {})", human(hints.min_size())),
        None => format!(
            "the default (the smallest SSD, else HDD, of at least {} GB, the storage OKD requires)",
            OKD_MIN_INSTALL_DISK_BYTES / 1_000_000_000
        ),
    };
    Err(CapabilityError::InvalidObject {
        object: format!("install disk of physical host {} ({role})", h.id),
        problem: format!(
            "no disk satisfies {asked}; its disks: {}; give the host (--root-device host:{}=...) or its role (--root-device {role}=...) hints that name the disk to install to",
            disks.join(", "),
            h.id
        ),
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use harmony_types::{Disk, Id, MacAddress};

    fn machine() -> PhysicalHost {
        let disk = |name: &str, gib: u64, rotational: bool, serial: &str| Disk {
            name: name.into(),
            size_bytes: gib << 30,
            rotational,
            serial: Some(serial.into()),
            ..Default::default()
        };
        PhysicalHost {
            id: Id::parse("m3").unwrap(),
            hostname: None,
            serial: None,
            macs: vec![MacAddress::parse("52:54:00:00:00:01").unwrap()],
            cpu_count: 3,
            memory_bytes: 1536 << 20,
            disks: vec![
                disk("vda", 8, false, "VIRTIO-8G"),
                disk("sda", 20, true, "SATA-20G"),
                disk("nvme0n1", 4, false, "NVME-4G"),
            ],
        }
    }

    fn rules(texts: &[&str]) -> Vec<RootDeviceRule> {
        texts
            .iter()
            .map(|t| RootDeviceRule::parse(t).unwrap())
            .collect()
    }

    #[test]
    fn the_rule_names_the_disk_and_none_qualifying_names_every_disk() {
        let m = machine();
        let w = HostRole::Worker;
        // The tester's machine: the default never takes the 4 GiB NVMe (nor any: all < 100 GB).
        let e = install_disk(Some(&m), w, &[], "/dev/sda")
            .unwrap_err()
            .to_string();
        assert!(
            e.contains("m3")
                && e.contains("vda 8.0 GiB SSD serial VIRTIO-8G")
                && e.contains("sda 20.0 GiB HDD")
                && e.contains("nvme0n1 4.0 GiB SSD")
                && e.contains("--root-device host:m3="),
            "{e}"
        );
        let pick = |r: &[&str]| install_disk(Some(&m), w, &rules(r), "/dev/sda").unwrap();
        assert_eq!(pick(&["worker=min-size:16GiB"]), "/dev/sda");
        assert_eq!(pick(&["worker=min-size:5GiB"]), "/dev/vda");
        assert_eq!(
            pick(&["worker=serial:NVME-4G,min-size:1GiB"]),
            "/dev/nvme0n1"
        );
        // The host's own rule wins over its role's.
        assert_eq!(
            pick(&["worker=min-size:16GiB", "host:m3=name:vda,min-size:1GiB"]),
            "/dev/vda"
        );
        // A rule for another role or host does not apply.
        let e = install_disk(
            Some(&m),
            w,
            &rules(&["control-plane=min-size:1GiB"]),
            "/dev/sda",
        )
        .unwrap_err()
        .to_string();
        assert!(e.contains("the default"), "{e}");
        let e = install_disk(Some(&m), w, &rules(&["worker=min-size:30GiB"]), "/dev/sda")
            .unwrap_err()
            .to_string();
        assert!(e.contains("--root-device worker=min-size:30GiB"), "{e}");
        // A host declared without disks installs to the installation's default.
        assert_eq!(install_disk(None, w, &[], "/dev/sdz").unwrap(), "/dev/sdz");
    }
}
