//! OKD on bare metal: the phases an operator walks at the rack.
//!
//! [`OkdPrepareScore`] sets up DNS, the load balancer, PXE and the boot files;
//! [`OkdHostsScore`] brings up one role (bootstrap, control plane or workers): it makes sure
//! enough hosts are discovered, binds each to a logical host **of that role**, reserves its
//! address, writes its per-MAC iPXE script and asks the operator to reboot it;
//! [`OkdNodesScore`] waits for one role's bound hosts to join the installed cluster as Ready
//! nodes, approving their kubelets' CSRs and no others; [`OkdBootstrapRemovalScore`] takes the
//! bootstrap host out of the load balancer once the control plane is Ready;
//! [`OkdSanityCheckScore`] cross-checks inventory, DHCP, DNS and scripts; and
//! [`OkdInstallationReportScore`] lists what was set up. Guide: docs/modules/okd.md.

mod acquire;
mod binding;
mod bootstrap_removal;
mod check;
mod hosts;
mod install_disk;
mod node_identity;
mod nodes;
mod power_on;
mod prepare;
mod reboot;
mod rules;
mod templates;

use std::path::PathBuf;

use harmony::domain::Topology;
use harmony::domain::capability::{
    ClusterNodes, DhcpServer, DnsServer, HaCluster, HostInventory, HttpServer, LoadBalancer,
    PowerControl, TftpServer,
};
use harmony::domain::inventory::HostRole;

pub use binding::{BindingError, Candidate, plan_bindings};
pub use bootstrap_removal::{
    BOOTSTRAP_PORTS, OkdBootstrapRemovalScore, services_without_bootstrap,
};
pub use check::{OkdInstallationReportScore, OkdSanityCheckScore};
pub use hosts::OkdHostsScore;
pub use nodes::{DEFAULT_NODE_TIMEOUT, OkdNodesScore};
pub use prepare::{OkdPrepareScore, dns_records, load_balancer_services};
pub use templates::{boot_script, host_script, host_script_shape};

/// Everything an OKD bring-up needs besides the topology: boot images, ignition and iPXE files.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct OkdInstallation {
    /// The live kernel, as a path under the HTTP root (`images/scos-live-kernel.x86_64`).
    pub kernel: String,
    /// The live initramfs under the HTTP root.
    pub initramfs: String,
    /// The live root filesystem under the HTTP root.
    pub rootfs: String,
    /// The folder `openshift-install create ignition-configs` wrote `bootstrap.ign`,
    /// `master.ign` and `worker.ign` into. Required to apply; optional to render.
    pub ignition_dir: Option<PathBuf>,
    /// Disk to install to when the host reported none (a host declared in the program
    /// without disks); discovered hosts install by root-device hints (`--root-device`).
    pub default_install_disk: String,
    /// Where the iPXE binaries for TFTP come from (Debian's `ipxe` package).
    pub ipxe_dir: PathBuf,
}

impl Default for OkdInstallation {
    fn default() -> Self {
        Self {
            kernel: "images/scos-live-kernel.x86_64".into(),
            initramfs: "images/scos-live-initramfs.x86_64.img".into(),
            rootfs: "images/scos-live-rootfs.x86_64.img".into(),
            ignition_dir: None,
            default_install_disk: "/dev/sda".into(),
            ipxe_dir: PathBuf::from("/usr/lib/ipxe"),
        }
    }
}

/// The ignition file a role boots with.
pub fn ignition_file(role: HostRole) -> &'static str {
    match role {
        HostRole::Bootstrap => "bootstrap.ign",
        HostRole::ControlPlane => "master.ign",
        HostRole::Worker => "worker.ign",
    }
}

/// The capabilities an OKD bring-up needs, as one bound. `HAClusterTopology` implements it; a
/// topology of your own that offers the eight capabilities adds `impl OkdTopology for X {}`.
#[diagnostic::on_unimplemented(
    message = "topology `{Self}` cannot bring up OKD on bare metal (`OkdTopology`)",
    label = "this OKD Score needs a bare-metal topology: `HaCluster`, `DhcpServer`, `TftpServer`, `DnsServer`, `HttpServer`, `LoadBalancer`, `HostInventory` and `PowerControl`",
    note = "use HAClusterTopology (`harmony::infra::okd::HAClusterTopology::from_context`), which offers all eight; Kubernetes and render topologies (RenderTopology, K8sTopology, DefaultTopology) offer none of them"
)]
pub trait OkdTopology:
    Topology
    + HaCluster
    + DhcpServer
    + TftpServer
    + DnsServer
    + HttpServer
    + LoadBalancer
    + HostInventory
    + PowerControl
    + 'static
{
}

// An explicit impl, not a blanket one over the eight capabilities: pairing an OKD Score with
// another topology then fails with this one trait's message instead of one error per missing
// capability. A topology of your own that offers all eight adds `impl OkdTopology for X {}`.
impl OkdTopology for harmony::infra::okd::HAClusterTopology {}

/// Every phase in order: prepare, bootstrap, control plane, control-plane nodes Ready,
/// bootstrap removal, workers, worker nodes joined and Ready, sanity check, report.
pub fn okd_scores<T: OkdTopology + ClusterNodes>(
    install: &OkdInstallation,
) -> Vec<Box<dyn harmony::domain::Score<T>>> {
    vec![
        Box::new(OkdPrepareScore::new(install.clone())),
        Box::new(OkdHostsScore::new(HostRole::Bootstrap, install.clone())),
        Box::new(OkdHostsScore::new(HostRole::ControlPlane, install.clone())),
        Box::new(OkdNodesScore::new(HostRole::ControlPlane)),
        Box::new(OkdBootstrapRemovalScore::new()),
        Box::new(OkdHostsScore::new(HostRole::Worker, install.clone())),
        Box::new(OkdNodesScore::new(HostRole::Worker)),
        Box::new(OkdSanityCheckScore),
        Box::new(OkdInstallationReportScore),
    ]
}

pub(crate) use crate::interpret_support::{capability_error, version};
