//! The DHCP capability: fixed host reservations (MAC -> IP -> host name) and PXE boot options.

use async_trait::async_trait;
use serde::Serialize;

use harmony_types::{HostName, IpAddress, MacAddress, Url};

use super::CapabilityError;
use crate::domain::outcome::ObjectChange;

/// A DHCP reservation: the host with this MAC always gets this address and host name.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize)]
pub struct DhcpHostBinding {
    /// The NIC that PXE-boots.
    pub mac: MacAddress,
    /// The address reserved for it.
    pub ip: IpAddress,
    /// The host name handed out with the lease (short name, e.g. `worker0`).
    pub hostname: HostName,
    /// The host's other NICs, given the same address: whichever NIC asks gets it (one lease at
    /// a time, as dnsmasq's `dhcp-host=MAC1,MAC2,IP` does), so the host keeps its address
    /// whichever NIC its firmware or installer brings up.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub other_macs: Vec<MacAddress>,
}

impl DhcpHostBinding {
    /// Every MAC of the reservation, the PXE NIC's first.
    pub fn macs(&self) -> impl Iterator<Item = &MacAddress> {
        std::iter::once(&self.mac).chain(&self.other_macs)
    }
}

/// A lease the DHCP server handed out (a reservation or an address of its discovery range).
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct DhcpLease {
    /// The client's MAC.
    pub mac: MacAddress,
    /// The address leased.
    pub ip: IpAddress,
    /// When it ends, in seconds since the Unix epoch; `None` for an infinite lease.
    pub expires: Option<u64>,
}

/// What PXE clients are told to boot: an iPXE binary over TFTP for firmware that is not iPXE yet,
/// and an HTTP script for iPXE itself.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct PxeBootOptions {
    /// The TFTP server holding the iPXE binaries (`next-server`).
    pub tftp_server: IpAddress,
    /// iPXE binary for legacy BIOS clients, e.g. `undionly.kpxe`.
    pub bios_file: String,
    /// iPXE binary for x86-64 UEFI clients, e.g. `ipxe.efi`.
    pub uefi_file: String,
    /// The script iPXE chains to, e.g. `http://10.0.0.1:8080/boot.ipxe`.
    pub ipxe_script: Url,
}

/// A DHCP server with fixed reservations and PXE options.
#[async_trait]
#[diagnostic::on_unimplemented(
    message = "topology `{Self}` has no DHCP server (`DhcpServer`)",
    label = "this Score needs a topology that implements `DhcpServer` (it reserves addresses and serves PXE options)",
    note = "use a bare-metal topology that offers DHCP: HAClusterTopology (`harmony::infra::okd::HAClusterTopology`, backed by dnsmasq); Kubernetes and render topologies (RenderTopology, K8sTopology, DefaultTopology) have none; or implement `DhcpServer` for `{Self}`"
)]
pub trait DhcpServer: Send + Sync {
    /// Ensures each binding exists (keyed by MAC); bindings of other MACs are kept. Fails,
    /// touching nothing, when an address or host name is already reserved for another MAC.
    async fn ensure_bindings(
        &self,
        bindings: &[DhcpHostBinding],
    ) -> Result<Vec<ObjectChange>, CapabilityError>;

    /// The reservations currently configured, sorted by MAC.
    async fn bindings(&self) -> Result<Vec<DhcpHostBinding>, CapabilityError>;

    /// The leases handed out and not expired, as the server records them.
    async fn leases(&self) -> Result<Vec<DhcpLease>, CapabilityError>;

    /// Sets the PXE boot options handed to every reserved host.
    async fn set_pxe_options(
        &self,
        options: &PxeBootOptions,
    ) -> Result<Vec<ObjectChange>, CapabilityError>;
}
