//! The TFTP capability: serves the iPXE binaries that PXE firmware loads first.

use async_trait::async_trait;
use serde::Serialize;
use std::path::PathBuf;

use super::CapabilityError;
use crate::domain::outcome::ObjectChange;

/// A file the TFTP server must serve, copied from a local source.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct TftpFile {
    /// Name clients request (`undionly.kpxe`, `ipxe.efi`).
    pub name: String,
    /// Where the bytes come from on this machine (Debian's `ipxe` package: `/usr/lib/ipxe/`).
    pub source: PathBuf,
}

/// A TFTP server.
#[async_trait]
#[diagnostic::on_unimplemented(
    message = "topology `{Self}` has no TFTP server (`TftpServer`)",
    label = "this Score needs a topology that implements `TftpServer` (it serves PXE boot files over TFTP)",
    note = "use a bare-metal topology that offers TFTP: HAClusterTopology (`harmony::infra::okd::HAClusterTopology`, backed by dnsmasq); Kubernetes and render topologies (RenderTopology, K8sTopology, DefaultTopology) have none; or implement `TftpServer` for `{Self}`"
)]
pub trait TftpServer: Send + Sync {
    /// Ensures each file is served with the bytes of its source.
    async fn ensure_tftp_files(
        &self,
        files: &[TftpFile],
    ) -> Result<Vec<ObjectChange>, CapabilityError>;
}
