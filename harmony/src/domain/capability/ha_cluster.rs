//! The layout of a highly available cluster on bare metal: names, network and logical hosts.
//!
//! A logical host is a slot in the cluster (`worker0` at 10.0.0.21); discovery later binds a
//! physical machine to it. The layout is validated as a whole before anything runs.

use serde::Serialize;
use std::collections::BTreeMap;

use std::time::Duration;

use harmony_types::{Dns1123Label, HostName, Id, IpAddress, Ipv4Cidr, MacAddress};

use crate::domain::inventory::{HostRole, PhysicalHost};
use crate::domain::operator::Operator;
use crate::domain::validation::ValidationError;

/// How many control-plane hosts an HA cluster has.
pub const CONTROL_PLANE_HOSTS: usize = 3;

/// A slot in the cluster: a short host name and its fixed address.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, derive_new::new)]
pub struct LogicalHost {
    /// Short host name (one DNS label), e.g. `cp0`, `worker1`.
    pub name: HostName,
    /// Its address, inside the cluster network.
    pub ip: IpAddress,
}

/// Everything fixed about an HA cluster before any machine is discovered.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct ClusterLayout {
    /// Cluster name, the first label of every cluster name (`okd` in `api.okd.example.com`).
    pub cluster_name: Dns1123Label,
    /// Base domain, e.g. `example.com`.
    pub base_domain: HostName,
    /// The machine network.
    pub network: Ipv4Cidr,
    /// The default gateway handed out by DHCP.
    pub gateway: IpAddress,
    /// The load balancer address: `api`, `api-int` and `*.apps` resolve to it.
    pub load_balancer: IpAddress,
    /// The address the DHCP, TFTP, DNS and HTTP services listen on.
    pub services: IpAddress,
    /// The temporary bootstrap host.
    pub bootstrap: LogicalHost,
    /// Exactly three control-plane hosts.
    pub control_plane: Vec<LogicalHost>,
    /// Zero or more workers.
    pub workers: Vec<LogicalHost>,
}

impl ClusterLayout {
    /// The logical hosts of `role`, in declaration order.
    pub fn hosts_for(&self, role: HostRole) -> &[LogicalHost] {
        match role {
            HostRole::Bootstrap => std::slice::from_ref(&self.bootstrap),
            HostRole::ControlPlane => &self.control_plane,
            HostRole::Worker => &self.workers,
        }
    }

    /// The role of the logical host named `name`, if it is one.
    pub fn role_of(&self, name: &HostName) -> Option<HostRole> {
        [
            HostRole::Bootstrap,
            HostRole::ControlPlane,
            HostRole::Worker,
        ]
        .into_iter()
        .find(|r| self.hosts_for(*r).iter().any(|h| &h.name == name))
    }

    /// `<cluster>.<base domain>`, the suffix of every cluster name.
    pub fn cluster_domain(&self) -> String {
        format!("{}.{}", self.cluster_name, self.base_domain)
    }

    /// Fully qualified name of a host or service label (`api` -> `api.okd.example.com`).
    pub fn fqdn(&self, label: &str) -> String {
        format!("{label}.{}", self.cluster_domain())
    }

    /// Checks the layout: every address inside the network and not its network or broadcast
    /// address, host names single labels, no duplicate names or addresses, exactly three
    /// control-plane hosts. The error names the offending host and the fix.
    pub fn validate(&self) -> Result<(), ValidationError> {
        let net = self.network;
        let inside = |field: &str, what: &str, ip: IpAddress| {
            if !net.contains(ip) {
                return Err(ValidationError::new(
                    field,
                    format!("{what} has address {ip}, outside the network {net}"),
                    format!("give {what} an address inside {net}, or widen `network`"),
                ));
            }
            let host_bits = u32::from(ip.addr()) & !u32::from(net.netmask());
            let broadcast = !u32::from(net.netmask());
            if net.prefix() < 31 && (host_bits == 0 || host_bits == broadcast) {
                return Err(ValidationError::new(
                    field,
                    format!("{what} has address {ip}, the network or broadcast address of {net}"),
                    format!("give {what} a host address inside {net}"),
                ));
            }
            Ok(())
        };
        inside("gateway", "the gateway", self.gateway)?;
        inside("load_balancer", "the load balancer", self.load_balancer)?;
        inside("services", "the services address", self.services)?;

        if self.control_plane.len() != CONTROL_PLANE_HOSTS {
            return Err(ValidationError::new(
                "control_plane",
                format!(
                    "has {} host(s); an HA cluster needs exactly {CONTROL_PLANE_HOSTS}",
                    self.control_plane.len()
                ),
                format!("declare exactly {CONTROL_PLANE_HOSTS} control-plane logical hosts"),
            ));
        }

        let mut names: BTreeMap<&str, String> = BTreeMap::new();
        let mut ips: BTreeMap<IpAddress, String> = BTreeMap::new();
        for (ip, what) in [
            (self.gateway, "gateway"),
            (self.load_balancer, "load_balancer"),
            (self.services, "services"),
        ] {
            ips.entry(ip)
                .and_modify(|v| *v = format!("{v} and {what}"))
                .or_insert_with(|| what.to_string());
        }
        for (field, host) in self.fields() {
            let what = format!("host {}", host.name);
            let name = host.name.as_str();
            if name.contains('.') {
                return Err(ValidationError::new(
                    format!("{field}.name"),
                    format!("{what} is a dotted name"),
                    format!(
                        "use the short name ({}); its full name is <name>.{}",
                        host.name.short_name(),
                        self.cluster_domain()
                    ),
                ));
            }
            inside(&field, &what, host.ip)?;
            if let Some(first) = names.insert(name, field.clone()) {
                return Err(ValidationError::new(
                    format!("{field}.name"),
                    format!("host name {name} is already used by {first}"),
                    "give every logical host a distinct name",
                ));
            }
            if let Some(first) = ips.get(&host.ip) {
                return Err(ValidationError::new(
                    format!("{field}.ip"),
                    format!("{what} has address {}, already used by {first}", host.ip),
                    "give every logical host its own address, distinct from the gateway, load balancer and services addresses",
                ));
            }
            ips.insert(host.ip, field.clone());
        }
        Ok(())
    }

    fn fields(&self) -> Vec<(String, &LogicalHost)> {
        std::iter::once(("bootstrap".to_string(), &self.bootstrap))
            .chain(
                self.control_plane
                    .iter()
                    .enumerate()
                    .map(|(i, h)| (format!("control_plane[{i}]"), h)),
            )
            .chain(
                self.workers
                    .iter()
                    .enumerate()
                    .map(|(i, h)| (format!("workers[{i}]"), h)),
            )
            .collect()
    }
}

/// Which physical host a declared role is about.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum HostSelector {
    /// The host with this inventory id.
    Id(Id),
    /// The host with this MAC among its NICs.
    Mac(MacAddress),
}

impl HostSelector {
    /// Whether `host` is the one selected.
    pub fn matches(&self, host: &PhysicalHost) -> bool {
        match self {
            HostSelector::Id(id) => &host.id == id,
            HostSelector::Mac(mac) => host.macs.contains(mac),
        }
    }
}

impl std::fmt::Display for HostSelector {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            HostSelector::Id(id) => write!(f, "host {id}"),
            HostSelector::Mac(mac) => write!(f, "host with MAC {mac}"),
        }
    }
}

/// A role given to a host ahead of time (a roles file, for CI), instead of asking.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct DeclaredRole {
    /// The host.
    pub host: HostSelector,
    /// Its role.
    pub role: HostRole,
    /// The logical host it must be bound to; must be one of `role`'s.
    pub logical: Option<HostName>,
}

/// A topology that is an HA cluster on bare metal: its layout, and how hosts get their roles.
#[diagnostic::on_unimplemented(
    message = "topology `{Self}` is not an HA cluster on bare metal (`HaCluster`)",
    label = "this Score needs a topology that implements `HaCluster` (it reads the cluster's layout and assigns host roles)",
    note = "use the bare-metal topology HAClusterTopology (`harmony::infra::okd::HAClusterTopology::from_context`); Kubernetes and render topologies (RenderTopology, K8sTopology, DefaultTopology) cannot bring up a cluster; or implement `HaCluster` for `{Self}`"
)]
pub trait HaCluster: Send + Sync {
    /// The validated layout.
    fn layout(&self) -> &ClusterLayout;

    /// Who is asked to choose hosts and to reboot them.
    fn operator(&self) -> &dyn Operator;

    /// Roles declared ahead of time (`--roles FILE`).
    fn declared_roles(&self) -> &[DeclaredRole];

    /// How long a phase waits for enough hosts to be discovered.
    fn discovery_timeout(&self) -> Duration;

    /// Rules giving discovered hosts roles without a terminal (`--assign ROLE=RULE`).
    fn role_rules(&self) -> &[super::RoleRule] {
        &[]
    }

    /// Rules choosing the disk each host installs to (`--root-device TARGET=HINTS`); a host
    /// no rule is for installs by [`super::RootDeviceHints::default`].
    fn root_device_rules(&self) -> &[super::RootDeviceRule] {
        &[]
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn host(name: &str, ip: &str) -> LogicalHost {
        LogicalHost::new(
            HostName::parse(name).unwrap(),
            IpAddress::parse(ip).unwrap(),
        )
    }

    pub(crate) fn layout() -> ClusterLayout {
        ClusterLayout {
            cluster_name: Dns1123Label::parse("okd").unwrap(),
            base_domain: HostName::parse("example.com").unwrap(),
            network: Ipv4Cidr::parse("10.10.0.0/24").unwrap(),
            gateway: IpAddress::parse("10.10.0.1").unwrap(),
            load_balancer: IpAddress::parse("10.10.0.2").unwrap(),
            services: IpAddress::parse("10.10.0.2").unwrap(),
            bootstrap: host("bootstrap", "10.10.0.10"),
            control_plane: vec![
                host("cp0", "10.10.0.11"),
                host("cp1", "10.10.0.12"),
                host("cp2", "10.10.0.13"),
            ],
            workers: vec![host("worker0", "10.10.0.21"), host("worker1", "10.10.0.22")],
        }
    }

    #[test]
    fn a_good_layout_passes_and_names_are_derived() {
        let l = layout();
        l.validate().unwrap();
        assert_eq!(l.fqdn("api"), "api.okd.example.com");
        assert_eq!(l.hosts_for(HostRole::Worker).len(), 2);
        assert_eq!(
            l.role_of(&HostName::parse("cp1").unwrap()),
            Some(HostRole::ControlPlane)
        );
        assert_eq!(l.role_of(&HostName::parse("nope").unwrap()), None);
    }

    #[test]
    fn errors_name_the_offending_host() {
        let mut l = layout();
        l.workers[1].ip = IpAddress::parse("10.20.0.5").unwrap();
        let e = l.validate().unwrap_err();
        assert_eq!(e.field, "workers[1]");
        assert!(
            e.problem.contains("worker1") && e.problem.contains("outside"),
            "{e}"
        );

        let mut l = layout();
        l.workers[0].ip = l.control_plane[2].ip;
        let e = l.validate().unwrap_err();
        assert_eq!(e.field, "workers[0].ip");
        assert!(
            e.problem.contains("worker0") && e.problem.contains("control_plane[2]"),
            "{e}"
        );

        let mut l = layout();
        l.workers[1].name = HostName::parse("cp0").unwrap();
        let e = l.validate().unwrap_err();
        assert_eq!(e.field, "workers[1].name");
        assert!(e.problem.contains("control_plane[0]"), "{e}");

        let mut l = layout();
        l.control_plane.pop();
        let e = l.validate().unwrap_err();
        assert_eq!(e.field, "control_plane");
        assert!(e.problem.contains("exactly 3"), "{e}");

        let mut l = layout();
        l.bootstrap.ip = IpAddress::parse("10.10.0.255").unwrap();
        let e = l.validate().unwrap_err();
        assert_eq!(e.field, "bootstrap");
        assert!(e.problem.contains("broadcast"), "{e}");

        let mut l = layout();
        l.workers[0].ip = l.load_balancer;
        let e = l.validate().unwrap_err();
        assert!(e.problem.contains("load_balancer"), "{e}");

        let mut l = layout();
        l.workers[0].name = HostName::parse("worker0.okd.example.com").unwrap();
        let e = l.validate().unwrap_err();
        assert_eq!(e.field, "workers[0].name");
        assert!(e.fix.contains("short name"), "{e}");
    }
}
