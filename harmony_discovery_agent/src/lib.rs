//! Reads a host's hardware facts from `/proc` and `/sys` and posts them, as JSON, to
//! Harmony's discovery endpoint (`POST /discovery` on the HTTP boot server).
//!
//! The report is Harmony's own `PhysicalHost` value: id (the DMI product UUID when readable,
//! else the first MAC, hyphenated), hostname, MACs of the physical NICs (sorted), CPU count,
//! memory and whole disks named as the endpoint accepts them (`DiskName`: sd, vd, xvd, hd, nvme,
//! mmcblk; no partitions, loop, ram or device-mapper devices). It posts with
//! Harmony's shared HTTP client (`harmony_http`: reqwest, rustls with ring) on a
//! current-thread runtime, and depends on nothing heavier, so the binary stays small enough for
//! a discovery image.

use std::path::{Path, PathBuf};
use std::time::Duration;

use harmony_types::{Disk, DiskName, HostName, Id, MacAddress, PhysicalHost, Url};

/// What the agent posts (defined next to its validation rules in `harmony_types`).
pub use harmony_types::DiscoveryReport;

/// Discovery failed.
#[derive(Debug, thiserror::Error)]
pub enum AgentError {
    /// A file under /proc or /sys could not be read.
    #[error("cannot read {path}: {source}")]
    Read {
        /// The file.
        path: String,
        /// The OS error.
        #[source]
        source: std::io::Error,
    },
    /// A fact is missing or malformed.
    #[error("{what}: {problem}")]
    Fact {
        /// Which fact.
        what: String,
        /// What is wrong.
        problem: String,
    },
    /// The endpoint could not be reached or refused the report.
    #[error("posting to {url}: {problem}")]
    Post {
        /// The endpoint.
        url: String,
        /// What went wrong.
        problem: String,
    },
}

fn read(path: &Path) -> Result<String, AgentError> {
    std::fs::read_to_string(path).map_err(|source| AgentError::Read {
        path: path.display().to_string(),
        source,
    })
}

/// Where the facts are read from: `/` on a real host, a prepared folder in tests.
#[derive(Debug, Clone)]
pub struct Facts {
    root: PathBuf,
}

impl Facts {
    /// Facts of this machine.
    pub fn system() -> Self {
        Self {
            root: PathBuf::from("/"),
        }
    }

    /// Facts under `root` (which holds `proc/` and `sys/`).
    pub fn under(root: impl Into<PathBuf>) -> Self {
        Self { root: root.into() }
    }

    fn path(&self, rel: &str) -> PathBuf {
        self.root.join(rel)
    }

    /// Logical CPUs from `/proc/cpuinfo`.
    pub fn cpu_count(&self) -> Result<u32, AgentError> {
        let text = read(&self.path("proc/cpuinfo"))?;
        let n = text.lines().filter(|l| l.starts_with("processor")).count();
        u32::try_from(n)
            .ok()
            .filter(|n| *n > 0)
            .ok_or_else(|| AgentError::Fact {
                what: "cpu_count".into(),
                problem: "no `processor` line in /proc/cpuinfo".into(),
            })
    }

    /// Memory installed, in bytes: the sizes of the DMI memory devices (SMBIOS type 17) when
    /// the firmware lists them, else the online memory blocks times the block size, else
    /// `MemTotal` from `/proc/meminfo`. `MemTotal` comes last because it is smaller than what
    /// is installed (the kernel's own image and reservations are not counted), so it would
    /// under-report every machine.
    pub fn memory_bytes(&self) -> Result<u64, AgentError> {
        if let Some(bytes) = self.dmi_memory_bytes() {
            return Ok(bytes);
        }
        if let Some(bytes) = self.memory_block_bytes() {
            return Ok(bytes);
        }
        self.mem_total_bytes()
    }

    /// The sum of the DMI memory device sizes (`/sys/firmware/dmi/entries/17-*/raw`, readable
    /// once the kernel's `dmi-sysfs` module is loaded); `None` when none is listed.
    pub fn dmi_memory_bytes(&self) -> Option<u64> {
        let entries = std::fs::read_dir(self.path("sys/firmware/dmi/entries")).ok()?;
        let mut total = 0u64;
        let mut found = false;
        for entry in entries.flatten() {
            if !entry.file_name().to_string_lossy().starts_with("17-") {
                continue;
            }
            let Ok(raw) = std::fs::read(entry.path().join("raw")) else {
                continue;
            };
            if let Some(bytes) = memory_device_size(&raw) {
                total += bytes;
                found = true;
            }
        }
        (found && total > 0).then_some(total)
    }

    /// Online memory blocks times the block size (`/sys/devices/system/memory`); `None` when
    /// the kernel does not list memory blocks.
    pub fn memory_block_bytes(&self) -> Option<u64> {
        let dir = self.path("sys/devices/system/memory");
        let size = std::fs::read_to_string(dir.join("block_size_bytes")).ok()?;
        let size = u64::from_str_radix(size.trim().trim_start_matches("0x"), 16).ok()?;
        let blocks = std::fs::read_dir(&dir)
            .ok()?
            .flatten()
            .filter(|e| {
                let name = e.file_name().to_string_lossy().into_owned();
                name.strip_prefix("memory")
                    .is_some_and(|n| !n.is_empty() && n.bytes().all(|b| b.is_ascii_digit()))
            })
            // A block without an `online` file (built without hotplug) is online.
            .filter(|e| {
                std::fs::read_to_string(e.path().join("online"))
                    .map(|t| t.trim() == "1")
                    .unwrap_or(true)
            })
            .count() as u64;
        (blocks > 0 && size > 0).then_some(blocks * size)
    }

    /// `MemTotal` from `/proc/meminfo`: the memory the kernel manages.
    pub fn mem_total_bytes(&self) -> Result<u64, AgentError> {
        let text = read(&self.path("proc/meminfo"))?;
        text.lines()
            .find_map(|l| l.strip_prefix("MemTotal:"))
            .and_then(|v| v.trim().trim_end_matches("kB").trim().parse::<u64>().ok())
            .map(|kib| kib * 1024)
            .ok_or_else(|| AgentError::Fact {
                what: "memory_bytes".into(),
                problem: "no readable MemTotal line in /proc/meminfo".into(),
            })
    }

    /// MACs of physical NICs: entries of `/sys/class/net` with a `device` link, not all-zero.
    pub fn macs(&self) -> Result<Vec<MacAddress>, AgentError> {
        let dir = self.path("sys/class/net");
        let mut macs = Vec::new();
        let entries = std::fs::read_dir(&dir).map_err(|source| AgentError::Read {
            path: dir.display().to_string(),
            source,
        })?;
        for entry in entries.flatten() {
            let nic = entry.path();
            if !nic.join("device").exists() {
                continue;
            }
            let Ok(text) = std::fs::read_to_string(nic.join("address")) else {
                continue;
            };
            if let Ok(mac) = MacAddress::parse(text.trim())
                && mac.octets() != [0; 6]
            {
                macs.push(mac);
            }
        }
        macs.sort();
        macs.dedup();
        Ok(macs)
    }

    /// Whole disks from `/sys/block` (size in 512-byte sectors, `queue/rotational`).
    pub fn disks(&self) -> Result<Vec<Disk>, AgentError> {
        let dir = self.path("sys/block");
        let mut disks = Vec::new();
        let entries = std::fs::read_dir(&dir).map_err(|source| AgentError::Read {
            path: dir.display().to_string(),
            source,
        })?;
        for entry in entries.flatten() {
            let name = entry.file_name().to_string_lossy().into_owned();
            // Only whole disks an installer can write to, named as Harmony's discovery
            // endpoint accepts them (`DiskName`): not loop, ram, dm-, zram, sr, md, nbd...
            if DiskName::parse(&name).is_err() {
                continue;
            }
            let dev = entry.path();
            let sectors: u64 = read(&dev.join("size"))?.trim().parse().unwrap_or(0);
            if sectors == 0 {
                continue;
            }
            let rotational = std::fs::read_to_string(dev.join("queue/rotational"))
                .map(|t| t.trim() == "1")
                .unwrap_or(false);
            // Identity for root-device hints: what the kernel exposes, left out when absent or
            // when the endpoint would refuse it (control characters, too long).
            let text = |rels: &[&str]| {
                rels.iter().find_map(|rel| {
                    let t = std::fs::read_to_string(dev.join(rel)).ok()?;
                    let t = t.trim();
                    harmony_types::check_printable(rel, t)
                        .is_ok()
                        .then(|| t.to_string())
                })
            };
            disks.push(Disk {
                model: text(&["device/model"]),
                serial: text(&["device/serial", "serial"]),
                wwn: text(&["wwid", "device/wwid"]),
                name,
                size_bytes: sectors * 512,
                rotational,
            });
        }
        disks.sort_by(|a, b| a.name.cmp(&b.name));
        Ok(disks)
    }

    /// The kernel host name, if it is a valid one.
    pub fn hostname(&self) -> Option<HostName> {
        std::fs::read_to_string(self.path("proc/sys/kernel/hostname"))
            .ok()
            .and_then(|h| HostName::parse(h.trim()).ok())
    }

    /// The DMI product UUID, when readable and not a placeholder.
    pub fn product_uuid(&self) -> Option<Id> {
        let text = std::fs::read_to_string(self.path("sys/class/dmi/id/product_uuid")).ok()?;
        let uuid = text.trim().to_ascii_lowercase();
        let placeholder = uuid.chars().all(|c| c == '0' || c == '-' || c == 'f');
        if placeholder {
            None
        } else {
            Id::parse(&uuid).ok()
        }
    }

    /// Everything, as one report.
    pub fn report(&self) -> Result<PhysicalHost, AgentError> {
        let macs = self.macs()?;
        let id = match self.product_uuid() {
            Some(id) => id,
            None => {
                let first = macs.first().ok_or_else(|| AgentError::Fact {
                    what: "id".into(),
                    problem: "no DMI product UUID and no physical NIC to name the host by".into(),
                })?;
                Id::parse(&first.to_hyphenated()).map_err(|e| AgentError::Fact {
                    what: "id".into(),
                    problem: e.to_string(),
                })?
            }
        };
        Ok(PhysicalHost {
            id,
            hostname: self.hostname(),
            serial: self.product_serial(),
            macs,
            cpu_count: self.cpu_count()?,
            memory_bytes: self.memory_bytes()?,
            disks: self.disks()?,
        })
    }

    /// The DMI system serial number, when readable and not a vendor placeholder.
    pub fn product_serial(&self) -> Option<String> {
        let text = std::fs::read_to_string(self.path("sys/class/dmi/id/product_serial")).ok()?;
        let serial = text.trim();
        let placeholder = serial.is_empty()
            || serial.chars().all(|c| c == '0' || c == ' ')
            || [
                "not specified",
                "to be filled by o.e.m.",
                "system serial number",
                "default string",
                "none",
            ]
            .contains(&serial.to_ascii_lowercase().as_str());
        // A serial the endpoint would refuse (control characters, too long) is left out
        // rather than losing the whole report.
        let acceptable = harmony_types::check_printable("serial", serial).is_ok();
        (!placeholder && acceptable).then(|| serial.to_string())
    }

    /// The report the agent sends: the host, with its DMI serial and UUID.
    pub fn discovery_report(&self) -> Result<DiscoveryReport, AgentError> {
        let host = self.report()?;
        // The NIC iPXE booted from, when the boot script named it and it is one of ours.
        let boot_mac = std::fs::read_to_string(self.path("proc/cmdline"))
            .ok()
            .and_then(|c| boot_mac_from_cmdline(&c))
            .filter(|m| host.macs.contains(m));
        Ok(DiscoveryReport {
            host,
            uuid: self
                .product_uuid()
                .map(|id| id.to_string())
                .filter(|u| harmony_types::check_uuid("uuid", u).is_ok()),
            boot_mac,
        })
    }

    /// The discovery URL from the kernel command line (`harmony.discovery=URL` in
    /// `/proc/cmdline`), as the discovery image's boot script passes it.
    pub fn cmdline_url(&self) -> Result<Url, AgentError> {
        url_from_cmdline(&read(&self.path("proc/cmdline"))?)
    }
}

/// The kernel command-line parameter naming the discovery endpoint.
pub const CMDLINE_PARAMETER: &str = "harmony.discovery";

/// The kernel command-line parameter naming the MAC iPXE booted from (`${mac}` in boot.ipxe).
pub const BOOT_MAC_PARAMETER: &str = "harmony.bootmac";

/// The value of `parameter=VALUE` among the words of a kernel command line.
fn cmdline_value<'a>(cmdline: &'a str, parameter: &str) -> Option<&'a str> {
    cmdline
        .split_whitespace()
        .find_map(|w| w.strip_prefix(parameter)?.strip_prefix('='))
}

/// Finds `harmony.bootmac=MAC` among the words of a kernel command line.
pub fn boot_mac_from_cmdline(cmdline: &str) -> Option<MacAddress> {
    cmdline_value(cmdline, BOOT_MAC_PARAMETER).and_then(|m| MacAddress::parse(m).ok())
}

/// Finds `harmony.discovery=URL` among the words of a kernel command line.
pub fn url_from_cmdline(cmdline: &str) -> Result<Url, AgentError> {
    let value = cmdline_value(cmdline, CMDLINE_PARAMETER).ok_or_else(|| AgentError::Fact {
            what: "kernel command line".into(),
            problem: format!(
                "no {CMDLINE_PARAMETER}=URL in it; boot the discovery image from Harmony's boot.ipxe, or pass the URL as the agent's argument"
            ),
        })?;
    Url::parse(value).map_err(|e| AgentError::Fact {
        what: format!("{CMDLINE_PARAMETER}={value}"),
        problem: e.to_string(),
    })
}

/// The size of one SMBIOS memory device (type 17) structure, in bytes; `None` for an empty
/// slot, an unknown size or a structure of another type. The Size word at offset 0x0C is in
/// MiB (KiB when bit 15 is set); 0x7FFF means the size is in the Extended Size dword at 0x1C
/// (MiB).
pub fn memory_device_size(raw: &[u8]) -> Option<u64> {
    if raw.first() != Some(&17) || raw.len() < 0x0E {
        return None;
    }
    let length = usize::from(raw[1]).min(raw.len());
    if length < 0x0E {
        return None;
    }
    let size = u16::from_le_bytes([raw[0x0C], raw[0x0D]]);
    match size {
        0 | 0xFFFF => None,
        0x7FFF if length >= 0x20 => {
            let ext =
                u32::from_le_bytes([raw[0x1C], raw[0x1D], raw[0x1E], raw[0x1F]]) & 0x7FFF_FFFF;
            (ext > 0).then(|| u64::from(ext) << 20)
        }
        s if s & 0x8000 != 0 => Some(u64::from(s & 0x7FFF) << 10),
        s => Some(u64::from(s) << 20),
    }
}

/// Posts `report` to `url` (`http://HOST:PORT/discovery`, or `https://` verified against the
/// system roots) and waits at most `timeout` for a 2xx. Blocking: it runs its own small
/// runtime, so call it from a plain thread (or `spawn_blocking`).
pub fn post<R: serde::Serialize + ?Sized>(
    url: &Url,
    report: &R,
    timeout: Duration,
) -> Result<(), AgentError> {
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .map_err(|e| AgentError::Post {
            url: url.to_string(),
            problem: format!("cannot start the I/O runtime: {e}"),
        })?;
    runtime.block_on(post_async(url, report, timeout))
}

/// As [`post`], from async code.
pub async fn post_async<R: serde::Serialize + ?Sized>(
    url: &Url,
    report: &R,
    timeout: Duration,
) -> Result<(), AgentError> {
    let fail = |problem: String| AgentError::Post {
        url: url.to_string(),
        problem,
    };
    if !matches!(url.scheme(), "http" | "https") {
        return Err(fail(format!(
            "scheme {:?} is not supported; use http:// (the PXE network) or https://",
            url.scheme()
        )));
    }
    let client = harmony_http::ClientSettings::new()
        .connect_timeout(timeout)
        .read_timeout(Some(timeout))
        .user_agent(concat!(
            "harmony-discovery-agent/",
            env!("CARGO_PKG_VERSION")
        ))
        .build()
        .map_err(|e| fail(e.to_string()))?;
    let answer = client
        .post(url.as_str())
        .json(report)
        .timeout(timeout)
        .send()
        .await
        .map_err(|e| fail(harmony_http::describe(&e)))?;
    let status = answer.status();
    if status.is_success() {
        return Ok(());
    }
    // The endpoint's own words help (e.g. "405 ... GET, HEAD or POST /discovery").
    let said = answer.text().await.unwrap_or_default();
    let said: String = said.trim().chars().take(300).collect();
    Err(fail(format!("answered {status}: {said}")))
}

#[cfg(test)]
mod tests {
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
}
