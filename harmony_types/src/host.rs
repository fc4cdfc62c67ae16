//! A physical machine as discovery reports it: the shape Harmony's inventory stores and the
//! discovery agent sends.

use serde::{Deserialize, Serialize};

use crate::{HostName, Id, MacAddress};

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
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Disk {
    /// Kernel name, e.g. `sda`, `nvme0n1`.
    pub name: String,
    /// Size in bytes.
    pub size_bytes: u64,
    /// Rotational (HDD) or not.
    pub rotational: bool,
}
