//! A bare-metal OKD site inside network namespaces: the services namespace holds bridge
//! `br0` with the services (10.77.0.2) and load-balancer (10.77.0.3) addresses, and
//! `HAClusterTopology` runs the real dnsmasq and haproxy there in apply mode.

use std::path::PathBuf;
use std::time::Duration;

use harmony::domain::capability::{ClusterLayout, LogicalHost};
use harmony::domain::inventory::{HostRole, PhysicalHost, RoleAssignment};
use harmony::domain::operator::{OperatorHandle, Unattended};
use harmony::domain::{Inventory, Maestro, RunContext, RunOptions, Score, ScoreReport};
use harmony::infra::okd::{BareMetalServices, HAClusterTopology};
use harmony::types::{Dns1123Label, HostName, Id, IpAddress, Ipv4Cidr, MacAddress};
use harmony_modules::okd::OkdInstallation;

use crate::netns::Lab;

/// The services address (DNS, DHCP, TFTP, HTTP).
pub const SERVICES: &str = "10.77.0.2";
/// The load-balancer address.
pub const LOAD_BALANCER: &str = "10.77.0.3";
/// The HTTP boot port.
pub const HTTP_PORT: u16 = 8080;
/// Worker 0's logical host and the MAC of the machine declared for it.
pub const WORKER0: (&str, &str, &str) = ("worker0", "10.77.0.21", "52:54:00:77:00:21");
/// Worker 1's.
pub const WORKER1: (&str, &str, &str) = ("worker1", "10.77.0.22", "52:54:00:77:00:22");

fn parse<T, E: std::fmt::Display>(r: Result<T, E>) -> Result<T, String> {
    r.map_err(|e| e.to_string())
}

/// `okd.e2e.test` on 10.77.0.0/24: bootstrap .10, control plane .11-.13, workers .21-.22.
pub fn layout() -> Result<ClusterLayout, String> {
    let host = |n: &str, ip: &str| -> Result<LogicalHost, String> {
        Ok(LogicalHost::new(
            parse(HostName::parse(n))?,
            parse(IpAddress::parse(ip))?,
        ))
    };
    Ok(ClusterLayout {
        cluster_name: parse(Dns1123Label::parse("okd"))?,
        base_domain: parse(HostName::parse("e2e.test"))?,
        network: parse(Ipv4Cidr::parse("10.77.0.0/24"))?,
        gateway: parse(IpAddress::parse("10.77.0.1"))?,
        load_balancer: parse(IpAddress::parse(LOAD_BALANCER))?,
        services: parse(IpAddress::parse(SERVICES))?,
        bootstrap: host("bootstrap", "10.77.0.10")?,
        control_plane: vec![
            host("cp0", "10.77.0.11")?,
            host("cp1", "10.77.0.12")?,
            host("cp2", "10.77.0.13")?,
        ],
        workers: vec![host(WORKER0.0, WORKER0.1)?, host(WORKER1.0, WORKER1.1)?],
    })
}

/// A machine as discovery would report it.
pub fn machine(id: &str, mac: &str) -> Result<PhysicalHost, String> {
    Ok(PhysicalHost {
        id: parse(Id::parse(id))?,
        hostname: None,
        serial: None,
        macs: vec![parse(MacAddress::parse(mac))?],
        cpu_count: 4,
        memory_bytes: 16 << 30,
        disks: vec![],
    })
}

/// The two worker machines, declared with the worker role.
pub fn worker_inventory() -> Result<Inventory, String> {
    let hosts = vec![
        machine("machine-a", WORKER0.2)?,
        machine("machine-b", WORKER1.2)?,
    ];
    let assignments = hosts
        .iter()
        .map(|h| RoleAssignment {
            host: h.id.clone(),
            role: HostRole::Worker,
        })
        .collect();
    Ok(Inventory {
        location: None,
        hosts,
        assignments,
    })
}

/// A site in namespaces, its topology in apply mode, and its files in a temporary folder.
pub struct OkdLab {
    /// The Maestro holding the topology.
    pub maestro: Maestro<HAClusterTopology>,
    /// The namespaces.
    pub lab: Lab,
    /// The folder Harmony owns for the services (and the fake ignition and iPXE files).
    pub dir: tempfile::TempDir,
}

impl OkdLab {
    /// Builds the lab; `extra` addresses are added to the bridge (backend hosts, say).
    pub fn new(tag: &str, extra: &[&str], inventory: Inventory) -> Result<Self, String> {
        Self::with_discovery_image(tag, extra, inventory, None)
    }

    /// As [`OkdLab::new`], serving the discovery image in `image` (vmlinuz, initrd.img) to
    /// machines without a reservation.
    pub fn with_discovery_image(
        tag: &str,
        extra: &[&str],
        inventory: Inventory,
        image: Option<PathBuf>,
    ) -> Result<Self, String> {
        Self::with_root_device(tag, extra, inventory, image, Vec::new())
    }

    /// As [`OkdLab::with_discovery_image`], hosts installing by `root_device` rules (as
    /// `--root-device` gives them).
    pub fn with_root_device(
        tag: &str,
        extra: &[&str],
        inventory: Inventory,
        image: Option<PathBuf>,
        root_device: Vec<harmony::domain::capability::RootDeviceRule>,
    ) -> Result<Self, String> {
        let ctx = RunContext {
            apply: true,
            operator: OperatorHandle::new(Unattended { assume_yes: true }),
            discovery_timeout: Some(Duration::from_secs(5)),
            root_device,
            ..RunContext::default()
        };
        Self::with_context(network(tag, extra)?, inventory, image, &ctx)
    }

    /// The lab on `lab` (made by [`network`], e.g. to plug VMs into its bridge first), its
    /// topology made from `ctx` as the command line would (`--bmc`, `--bmc-ca-file`,
    /// `--assign`, the operator, ...); `image` as in [`OkdLab::with_discovery_image`].
    pub fn with_context(
        lab: Lab,
        inventory: Inventory,
        image: Option<PathBuf>,
        ctx: &RunContext,
    ) -> Result<Self, String> {
        let dir = tempfile::tempdir().map_err(|e| e.to_string())?;
        let services = BareMetalServices {
            dir: dir.path().join("services"),
            interface: Some("br0".into()),
            http_port: HTTP_PORT,
            prefix: lab.services.prefix(),
            serve_http: false,
            discovery_image: image,
            ..BareMetalServices::default()
        };
        let topology =
            HAClusterTopology::from_context(layout()?, services, ctx).map_err(|e| e.to_string())?;
        Ok(Self {
            maestro: Maestro::new(inventory, topology),
            lab,
            dir,
        })
    }

    /// Placeholder ignition files and iPXE binaries in the lab's folder.
    pub fn installation(&self) -> Result<OkdInstallation, String> {
        fake_installation(self.dir.path())
    }

    /// Registers and runs `scores`, returning one report each.
    pub async fn run(
        &mut self,
        scores: Vec<Box<dyn Score<HAClusterTopology>>>,
    ) -> Result<Vec<ScoreReport>, String> {
        let first = self.maestro.scores().len();
        let n = scores.len();
        self.maestro.register(scores);
        let selection: Vec<usize> = (first..first + n).collect();
        let invalid = self.maestro.validate(&selection);
        if !invalid.is_empty() {
            return Err(format!("{invalid:?}"));
        }
        self.maestro
            .run(&selection, RunOptions::default())
            .await
            .map_err(|e| e.to_string())
    }

    /// The topology.
    pub fn topology(&self) -> &HAClusterTopology {
        self.maestro.topology()
    }

    /// The folder Harmony owns.
    pub fn services_dir(&self) -> PathBuf {
        self.dir.path().join("services")
    }
}

impl Drop for OkdLab {
    fn drop(&mut self) {
        let _ = self.maestro.topology().stop_services();
    }
}

/// The site's namespaces: a services namespace whose bridge `br0` holds the services and
/// load-balancer addresses and `extra` ones (backend hosts, say).
pub fn network(tag: &str, extra: &[&str]) -> Result<Lab, String> {
    let mut addresses = vec![format!("{SERVICES}/24"), format!("{LOAD_BALANCER}/24")];
    addresses.extend(extra.iter().map(|a| format!("{a}/24")));
    let refs: Vec<&str> = addresses.iter().map(String::as_str).collect();
    Lab::new(tag, &refs)
}

/// A tap device `name` in `lab`'s services namespace, plugged into the bridge and usable by
/// `user` (`ip tuntap add ... user USER`): for a QEMU that does not run as root (libvirt's,
/// see [`crate::bmc_lab::VmSpec::tap`]).
pub fn user_tap(lab: &Lab, name: &str, user: &str) -> Result<(), String> {
    let ns = &lab.services;
    ns.run(&[
        "ip", "tuntap", "add", "dev", name, "mode", "tap", "user", user,
    ])?;
    ns.run(&["ip", "link", "set", name, "master", "br0"])?;
    ns.run(&["ip", "link", "set", name, "up"])?;
    Ok(())
}

/// Writes placeholder ignition files and iPXE binaries under `dir` (the boot chain is under
/// test, not their content) and returns an installation using them.
pub fn fake_installation(dir: &std::path::Path) -> Result<OkdInstallation, String> {
    let ignition_dir = dir.join("ignition");
    let ipxe_dir = dir.join("ipxe-binaries");
    for (d, files) in [
        (
            &ignition_dir,
            ["bootstrap.ign", "master.ign", "worker.ign"].as_slice(),
        ),
        (&ipxe_dir, ["undionly.kpxe", "ipxe.efi"].as_slice()),
    ] {
        std::fs::create_dir_all(d).map_err(|e| e.to_string())?;
        for f in files {
            std::fs::write(d.join(f), format!("placeholder {f}\n")).map_err(|e| e.to_string())?;
        }
    }
    Ok(OkdInstallation {
        ignition_dir: Some(ignition_dir),
        ipxe_dir,
        ..OkdInstallation::default()
    })
}
