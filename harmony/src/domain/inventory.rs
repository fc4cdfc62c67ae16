//! Physical inventory: the hosts a site has and the roles they are given.

use serde::{Deserialize, Serialize};
use std::fmt;

pub use harmony_types::{Disk, PhysicalHost};
use harmony_types::{Id, MacAddress};

/// Everything known about the physical side of a site. Empty for pure Kubernetes work.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct Inventory {
    /// Where the hardware is (for reports), e.g. "paris-dc2 rack 14".
    pub location: Option<String>,
    /// Discovered or declared hosts.
    pub hosts: Vec<PhysicalHost>,
    /// Which host plays which role.
    pub assignments: Vec<RoleAssignment>,
}

impl Inventory {
    /// An inventory with no hosts.
    pub fn empty() -> Self {
        Self::default()
    }

    /// The hosts assigned to `role`, in assignment order.
    pub fn hosts_in_role(&self, role: HostRole) -> Vec<&PhysicalHost> {
        self.assignments
            .iter()
            .filter(|a| a.role == role)
            .filter_map(|a| self.hosts.iter().find(|h| h.id == a.host))
            .collect()
    }

    /// Finds a host by any of its MAC addresses.
    pub fn host_by_mac(&self, mac: MacAddress) -> Option<&PhysicalHost> {
        self.hosts.iter().find(|h| h.macs.contains(&mac))
    }
}

/// The role a host plays in a cluster.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum HostRole {
    /// The temporary bootstrap node.
    Bootstrap,
    /// A control-plane node.
    ControlPlane,
    /// A worker node.
    Worker,
}

impl fmt::Display for HostRole {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            HostRole::Bootstrap => "bootstrap",
            HostRole::ControlPlane => "control-plane",
            HostRole::Worker => "worker",
        })
    }
}

/// A host given a role.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct RoleAssignment {
    /// The host's id.
    pub host: Id,
    /// Its role.
    pub role: HostRole,
}

#[cfg(test)]
mod tests {
    use super::*;

    fn host(id: &str, mac: &str) -> PhysicalHost {
        PhysicalHost {
            id: Id::parse(id).unwrap(),
            hostname: None,
            serial: None,
            macs: vec![MacAddress::parse(mac).unwrap()],
            cpu_count: 8,
            memory_bytes: 32 << 30,
            disks: vec![],
        }
    }

    #[test]
    fn roles_and_lookup() {
        let inv = Inventory {
            location: None,
            hosts: vec![
                host("a", "52:54:00:00:00:01"),
                host("b", "52:54:00:00:00:02"),
            ],
            assignments: vec![
                RoleAssignment {
                    host: Id::parse("b").unwrap(),
                    role: HostRole::Worker,
                },
                RoleAssignment {
                    host: Id::parse("a").unwrap(),
                    role: HostRole::ControlPlane,
                },
            ],
        };
        let workers: Vec<&str> = inv
            .hosts_in_role(HostRole::Worker)
            .iter()
            .map(|h| h.id.as_str())
            .collect();
        assert_eq!(workers, ["b"]);
        let mac = MacAddress::parse("52-54-00-00-00-01").unwrap();
        assert_eq!(inv.host_by_mac(mac).unwrap().id.as_str(), "a");
        let json = serde_json::to_string(&inv).unwrap();
        assert!(json.contains("\"control-plane\""));
        assert_eq!(serde_json::from_str::<Inventory>(&json).unwrap(), inv);
    }
}
