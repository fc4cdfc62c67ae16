//! Role rules: discovered hosts given a role without a terminal, by MAC or by minimum size
//! (`--assign ROLE=mac:AA:BB:CC:DD:EE:FF`, `--assign ROLE=min-memory:16GiB,min-disk:120GB`).
//! A size rule never guesses: when it matches more hosts than the role still needs, the phase
//! stops and lists them so the operator narrows the rule.

use std::fmt;

use harmony_types::MacAddress;

use crate::domain::inventory::{HostRole, PhysicalHost};

/// What a rule matches.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum HostMatch {
    /// The host with this MAC among its NICs.
    Mac(MacAddress),
    /// Every host with at least this much memory and a disk at least this large.
    Size {
        /// Minimum memory in bytes, as discovery reports it (`MemTotal`).
        min_memory_bytes: Option<u64>,
        /// Minimum size of the host's largest disk, in bytes.
        min_disk_bytes: Option<u64>,
    },
}

/// One `--assign ROLE=RULE`: hosts matching the rule get the role.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RoleRule {
    /// The role given.
    pub role: HostRole,
    /// Which hosts.
    pub matcher: HostMatch,
    /// The rule as the operator wrote it, for messages.
    pub text: String,
}

/// The fix appended to every parse error.
const FORMS: &str = "write ROLE=mac:AA:BB:CC:DD:EE:FF or ROLE=min-memory:16GiB,min-disk:120GB, ROLE one of bootstrap, control-plane, worker";

impl RoleRule {
    /// Parses `ROLE=mac:MAC` or `ROLE=min-memory:SIZE[,min-disk:SIZE]`; the error says what is
    /// wrong and how to write it.
    pub fn parse(s: &str) -> Result<Self, String> {
        let Some((role, rule)) = s.split_once('=') else {
            return Err(format!("{s:?} has no '='; {FORMS}"));
        };
        let role = match role.trim() {
            "bootstrap" => HostRole::Bootstrap,
            "control-plane" => HostRole::ControlPlane,
            "worker" => HostRole::Worker,
            other => return Err(format!("unknown role {other:?}; {FORMS}")),
        };
        let rule = rule.trim();
        let matcher = if let Some(mac) = rule.strip_prefix("mac:") {
            HostMatch::Mac(MacAddress::parse(mac).map_err(|e| format!("{e}; {FORMS}"))?)
        } else {
            let (mut memory, mut disk) = (None, None);
            for part in rule.split(',') {
                let (key, value) = part
                    .split_once(':')
                    .ok_or_else(|| format!("{part:?} is not KEY:VALUE; {FORMS}"))?;
                let slot = match key.trim() {
                    "min-memory" => &mut memory,
                    "min-disk" => &mut disk,
                    other => {
                        return Err(format!(
                            "unknown rule {other:?} (known: mac, min-memory, min-disk); {FORMS}"
                        ));
                    }
                };
                if slot.is_some() {
                    return Err(format!("{key} is given twice; give it once"));
                }
                *slot = Some(parse_size(value.trim()).map_err(|e| format!("{key}: {e}"))?);
            }
            HostMatch::Size {
                min_memory_bytes: memory,
                min_disk_bytes: disk,
            }
        };
        Ok(Self {
            role,
            matcher,
            text: format!("{role}={rule}"),
        })
    }

    /// Whether `host` matches the rule (its role aside).
    pub fn matches(&self, host: &PhysicalHost) -> bool {
        match &self.matcher {
            HostMatch::Mac(mac) => host.macs.contains(mac),
            HostMatch::Size {
                min_memory_bytes,
                min_disk_bytes,
            } => {
                let largest = host.disks.iter().map(|d| d.size_bytes).max().unwrap_or(0);
                min_memory_bytes.is_none_or(|m| host.memory_bytes >= m)
                    && min_disk_bytes.is_none_or(|m| largest >= m)
            }
        }
    }
}

impl fmt::Display for RoleRule {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "--assign {}", self.text)
    }
}

/// `16GiB`, `120GB`, `512MiB`, `1.5TB`: decimal (kB, MB, GB, TB) or binary (KiB, MiB, GiB,
/// TiB) units; the unit is required so that nobody guesses which one was meant.
pub(crate) fn parse_size(s: &str) -> Result<u64, String> {
    let split = s
        .find(|c: char| !(c.is_ascii_digit() || c == '.'))
        .ok_or_else(|| {
            format!(
                "size {s:?} has no unit; write e.g. 16GiB or 120GB (GB = 10^9 bytes, GiB = 2^30)"
            )
        })?;
    let (number, unit) = s.split_at(split);
    let factor: u64 = match unit.trim() {
        "B" => 1,
        "kB" | "KB" => 1_000,
        "MB" => 1_000_000,
        "GB" => 1_000_000_000,
        "TB" => 1_000_000_000_000,
        "KiB" => 1 << 10,
        "MiB" => 1 << 20,
        "GiB" => 1 << 30,
        "TiB" => 1 << 40,
        other => {
            return Err(format!(
                "unknown unit {other:?} in {s:?}; use B, kB, MB, GB, TB, KiB, MiB, GiB or TiB"
            ));
        }
    };
    let value: f64 = number
        .parse()
        .map_err(|_| format!("{number:?} in {s:?} is not a number; write e.g. 16GiB"))?;
    if value <= 0.0 {
        return Err(format!("size {s:?} must be more than zero"));
    }
    Ok((value * factor as f64).round() as u64)
}

#[cfg(test)]
mod tests {
    use super::*;
    use harmony_types::{Disk, Id};

    fn host(memory_gib: u64, disk_gb: u64) -> PhysicalHost {
        PhysicalHost {
            id: Id::parse("h").unwrap(),
            hostname: None,
            serial: None,
            macs: vec![MacAddress::parse("52:54:00:00:00:01").unwrap()],
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

    #[test]
    fn parses_mac_and_size_rules_and_matches_hosts() {
        let r = RoleRule::parse("worker=mac:52-54-00-00-00-01").unwrap();
        assert_eq!(r.role, HostRole::Worker);
        assert!(r.matches(&host(1, 1)));
        let r = RoleRule::parse("control-plane=min-memory:16GiB,min-disk:120GB").unwrap();
        assert_eq!(r.role, HostRole::ControlPlane);
        assert!(r.matches(&host(16, 120)));
        assert!(!r.matches(&host(15, 500)));
        assert!(!r.matches(&host(32, 119)));
        assert_eq!(
            r.to_string(),
            "--assign control-plane=min-memory:16GiB,min-disk:120GB"
        );
    }

    #[test]
    fn bad_rules_say_what_is_wrong_and_how_to_write_them() {
        for (input, says) in [
            ("worker", "no '='"),
            ("master=mac:52:54:00:00:00:01", "unknown role \"master\""),
            ("worker=mac:52:54:00", "ROLE=mac:"),
            ("worker=min-memory:16", "no unit"),
            ("worker=min-memory:16gb", "unknown unit"),
            ("worker=min-cpu:4", "unknown rule \"min-cpu\""),
            ("worker=min-disk:1GB,min-disk:2GB", "twice"),
            ("worker=min-disk:0GB", "more than zero"),
        ] {
            let e = RoleRule::parse(input).unwrap_err();
            assert!(e.contains(says), "{input}: {e}");
        }
    }
}
