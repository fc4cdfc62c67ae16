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
#[path = "host_tests.rs"]
mod tests;
