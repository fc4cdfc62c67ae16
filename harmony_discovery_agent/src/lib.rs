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
mod tests;
