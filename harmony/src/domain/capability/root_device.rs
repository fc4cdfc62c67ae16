//! Root-device hints: which disk a bare-metal host installs to, as Metal3's `rootDeviceHints`
//! choose it (`--root-device TARGET=HINTS`, e.g. `worker=min-size:200GB,rotational:false`,
//! `host:rack14-u10=serial:S4EVNX0R123456`). A host that matches no disk is an error naming it
//! and its disks; nothing is ever installed to a disk below the installer's minimum unless a
//! rule says so.

use std::fmt;

use harmony_types::{Disk, Id};

use super::role_rule::parse_size;
use crate::domain::inventory::{HostRole, PhysicalHost};

/// The smallest disk an OKD node installs to when no rule gives `min-size`: 100 GB, the
/// storage OKD documents as the minimum for bootstrap, control-plane and compute machines.
pub const OKD_MIN_INSTALL_DISK_BYTES: u64 = 100_000_000_000;

/// What a disk must be to be installed to. Every hint given must hold; among the disks that
/// qualify, a non-rotational one is preferred (unless `rotational` is given), then the
/// smallest, then the first by name, so large data disks stay free (as Ironic does).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct RootDeviceHints {
    /// The kernel name (`sdb`, `nvme0n1`; `/dev/` may be written before it).
    pub name: Option<String>,
    /// At least this many bytes; `None` means [`OKD_MIN_INSTALL_DISK_BYTES`].
    pub min_size_bytes: Option<u64>,
    /// Rotational (HDD, `true`) or not (SSD, NVMe: `false`).
    pub rotational: Option<bool>,
    /// A substring of the model the device reports.
    pub model: Option<String>,
    /// The device's serial number, exactly.
    pub serial: Option<String>,
    /// The device's World Wide Name, exactly.
    pub wwn: Option<String>,
}

/// Which hosts a rule is for.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum RootDeviceTarget {
    /// Every host of the role.
    Role(HostRole),
    /// The host with this inventory id.
    Host(Id),
}

/// One `--root-device TARGET=HINTS`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RootDeviceRule {
    /// Which hosts.
    pub target: RootDeviceTarget,
    /// Which disk.
    pub hints: RootDeviceHints,
    /// The rule as the operator wrote it, for messages.
    pub text: String,
}

const FORMS: &str = "write TARGET=HINT[,HINT...], TARGET a role (bootstrap, control-plane, worker) or host:ID, HINT one of name:sdb, min-size:200GB, rotational:true|false, model:TEXT, serial:TEXT, wwn:TEXT";

impl RootDeviceRule {
    /// Parses `TARGET=HINTS`; the error says what is wrong and how to write it.
    pub fn parse(s: &str) -> Result<Self, String> {
        let Some((target, hints)) = s.split_once('=') else {
            return Err(format!("{s:?} has no '='; {FORMS}"));
        };
        let target = match target.trim() {
            "bootstrap" => RootDeviceTarget::Role(HostRole::Bootstrap),
            "control-plane" => RootDeviceTarget::Role(HostRole::ControlPlane),
            "worker" => RootDeviceTarget::Role(HostRole::Worker),
            other => match other.strip_prefix("host:") {
                Some(id) => RootDeviceTarget::Host(
                    Id::parse(id).map_err(|e| format!("host:{id}: {e}; {FORMS}"))?,
                ),
                None => return Err(format!("unknown target {other:?}; {FORMS}")),
            },
        };
        let mut h = RootDeviceHints::default();
        for part in hints.split(',') {
            let (key, value) = part
                .split_once(':')
                .ok_or_else(|| format!("{part:?} is not HINT:VALUE; {FORMS}"))?;
            let value = value.trim();
            let text = |v: &str| -> Result<String, String> {
                harmony_types::check_printable(key, v)
                    .map(|_| v.to_string())
                    .map_err(|e| format!("{key}: {e}"))
            };
            let twice = || format!("{key} is given twice; give it once");
            match key.trim() {
                "name" => {
                    let name = value.strip_prefix("/dev/").unwrap_or(value);
                    harmony_types::DiskName::parse(name).map_err(|e| format!("name: {e}"))?;
                    h.name
                        .replace(name.to_string())
                        .map_or(Ok(()), |_| Err(twice()))?
                }
                "min-size" => h
                    .min_size_bytes
                    .replace(parse_size(value).map_err(|e| format!("min-size: {e}"))?)
                    .map_or(Ok(()), |_| Err(twice()))?,
                "rotational" => {
                    let b = match value {
                        "true" => true,
                        "false" => false,
                        other => {
                            return Err(format!("rotational: {other:?} is not true or false"));
                        }
                    };
                    h.rotational.replace(b).map_or(Ok(()), |_| Err(twice()))?
                }
                "model" => h
                    .model
                    .replace(text(value)?)
                    .map_or(Ok(()), |_| Err(twice()))?,
                "serial" => h
                    .serial
                    .replace(text(value)?)
                    .map_or(Ok(()), |_| Err(twice()))?,
                "wwn" => h
                    .wwn
                    .replace(text(value)?)
                    .map_or(Ok(()), |_| Err(twice()))?,
                other => return Err(format!("unknown hint {other:?}; {FORMS}")),
            }
        }
        Ok(Self {
            target,
            hints: h,
            text: s.trim().to_string(),
        })
    }

    /// Whether the rule is for `host` of `role`.
    pub fn applies_to(&self, host: &Id, role: HostRole) -> bool {
        match &self.target {
            RootDeviceTarget::Role(r) => *r == role,
            RootDeviceTarget::Host(id) => id == host,
        }
    }
}

impl fmt::Display for RootDeviceRule {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "--root-device {}", self.text)
    }
}

impl RootDeviceHints {
    /// The minimum size these hints ask for.
    pub fn min_size(&self) -> u64 {
        self.min_size_bytes.unwrap_or(OKD_MIN_INSTALL_DISK_BYTES)
    }

    /// Whether `disk` satisfies every hint.
    pub fn matches(&self, disk: &Disk) -> bool {
        disk.size_bytes >= self.min_size()
            && self.name.as_ref().is_none_or(|n| *n == disk.name)
            && self.rotational.is_none_or(|r| r == disk.rotational)
            && self
                .model
                .as_ref()
                .is_none_or(|m| disk.model.as_ref().is_some_and(|d| d.contains(m.as_str())))
            && self
                .serial
                .as_ref()
                .is_none_or(|s| disk.serial.as_ref() == Some(s))
            && self
                .wwn
                .as_ref()
                .is_none_or(|w| disk.wwn.as_ref() == Some(w))
    }

    /// The disk of `host` to install to: among those that match, non-rotational first (unless
    /// `rotational` was given), then the smallest, then by name. `None` when none matches.
    pub fn select<'a>(&self, host: &'a PhysicalHost) -> Option<&'a Disk> {
        host.disks
            .iter()
            .filter(|d| self.matches(d))
            .min_by(|a, b| {
                (a.rotational, a.size_bytes, &a.name).cmp(&(b.rotational, b.size_bytes, &b.name))
            })
    }
}

impl fmt::Display for RootDeviceHints {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let mut parts = vec![format!("min-size:{}B", self.min_size())];
        if let Some(n) = &self.name {
            parts.push(format!("name:{n}"));
        }
        if let Some(r) = self.rotational {
            parts.push(format!("rotational:{r}"));
        }
        for (k, v) in [
            ("model", &self.model),
            ("serial", &self.serial),
            ("wwn", &self.wwn),
        ] {
            if let Some(v) = v {
                parts.push(format!("{k}:{v}"));
            }
        }
        f.write_str(&parts.join(","))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use harmony_types::MacAddress;

    fn disk(name: &str, gib: u64, rotational: bool) -> Disk {
        Disk {
            name: name.into(),
            size_bytes: gib << 30,
            rotational,
            ..Default::default()
        }
    }

    fn host(disks: Vec<Disk>) -> PhysicalHost {
        PhysicalHost {
            id: Id::parse("m").unwrap(),
            hostname: None,
            serial: None,
            macs: vec![MacAddress::parse("52:54:00:00:00:01").unwrap()],
            cpu_count: 4,
            memory_bytes: 16 << 30,
            disks,
        }
    }

    fn pick(rule: &str, h: &PhysicalHost) -> Option<String> {
        RootDeviceRule::parse(rule)
            .unwrap()
            .hints
            .select(h)
            .map(|d| d.name.clone())
    }

    #[test]
    fn the_default_never_picks_a_disk_below_the_minimum() {
        // The tester's machine: virtio 8 GiB, SATA 20 GiB, NVMe 4 GiB; none reaches 100 GB.
        let small = host(vec![
            disk("vda", 8, false),
            disk("sda", 20, true),
            disk("nvme0n1", 4, false),
        ]);
        assert_eq!(RootDeviceHints::default().select(&small), None);
        // Two qualifying disks: the SSD, even though the HDD is smaller.
        let big = host(vec![
            disk("sda", 500, true),
            disk("nvme0n1", 960, false),
            disk("nvme1n1", 3840, false),
            disk("vda", 40, false),
        ]);
        assert_eq!(
            RootDeviceHints::default()
                .select(&big)
                .map(|d| d.name.as_str()),
            Some("nvme0n1")
        );
        assert_eq!(pick("worker=rotational:true", &big).as_deref(), Some("sda"));
        assert_eq!(
            pick("worker=min-size:2TB", &big).as_deref(),
            Some("nvme1n1")
        );
        assert_eq!(
            pick("worker=min-size:16GiB", &small).as_deref(),
            Some("sda")
        );
        assert_eq!(
            pick("worker=min-size:1GiB,rotational:false", &small).as_deref(),
            Some("nvme0n1")
        );
        assert_eq!(
            pick("worker=name:/dev/vda,min-size:1GiB", &small).as_deref(),
            Some("vda")
        );
    }

    #[test]
    fn identity_hints_match_model_substring_serial_and_wwn_exactly() {
        let mut a = disk("sda", 480, false);
        a.model = Some("SAMSUNG MZ7LH480".into());
        a.serial = Some("S4EVNX0R123456".into());
        let mut b = disk("sdb", 480, false);
        b.wwn = Some("naa.5000c500a1b2c3d4".into());
        let h = host(vec![a, b]);
        assert_eq!(pick("host:m=model:MZ7LH", &h).as_deref(), Some("sda"));
        assert_eq!(
            pick("host:m=serial:S4EVNX0R123456", &h).as_deref(),
            Some("sda")
        );
        assert_eq!(
            pick("host:m=serial:S4EVNX0R12345", &h),
            None,
            "serial is exact"
        );
        assert_eq!(
            pick("host:m=wwn:naa.5000c500a1b2c3d4", &h).as_deref(),
            Some("sdb")
        );
    }

    #[test]
    fn bad_rules_say_what_and_how() {
        for (bad, says) in [
            ("worker", "has no '='"),
            ("gpu=min-size:1GB", "unknown target"),
            ("worker=size:1GB", "unknown hint"),
            ("worker=rotational:yes", "not true or false"),
            ("worker=min-size:12", "no unit"),
            ("worker=name:sda1", "name:"),
            ("worker=model:a,model:b", "given twice"),
            ("worker=serial:x\u{1b}y", "serial"),
            ("host:=name:sda", "host:"),
        ] {
            let e = RootDeviceRule::parse(bad).unwrap_err();
            assert!(e.contains(says), "{bad}: {e}");
        }
        let r = RootDeviceRule::parse("host:rack14-u10=serial:S1").unwrap();
        assert!(r.applies_to(&Id::parse("rack14-u10").unwrap(), HostRole::Worker));
        assert!(!r.applies_to(&Id::parse("other").unwrap(), HostRole::Worker));
        assert_eq!(r.to_string(), "--root-device host:rack14-u10=serial:S1");
    }
}
