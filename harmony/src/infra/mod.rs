//! Adapters that implement capabilities on real backends.
//!
//! Kubernetes and render adapters are always built. Cargo features add the others, so a plain
//! Kubernetes program does not compile their clients: `okd` (bare metal: `okd`, `bare_metal`,
//! `dnsmasq`, `haproxy`, `http_boot`, `inventory_sqlite`, and `redfish`), `redfish` alone (BMC
//! power control), `cnpg` (PostgreSQL on CloudNativePG) and `agent` (regions through the control plane: `control_plane` (its client and
//! `AgentTopology`), `region_site`, `tenant_admin_topology`).

#[cfg(feature = "okd")]
pub mod bare_metal;
#[cfg(feature = "cnpg")]
pub mod cnpg;
#[cfg(feature = "agent")]
pub mod control_plane;
pub mod default_topology;
#[cfg(feature = "okd")]
pub mod dnsmasq;
pub mod either;
#[cfg(feature = "okd")]
pub mod haproxy;
#[cfg(feature = "okd")]
pub mod http_boot;
#[cfg(feature = "okd")]
pub mod inventory_sqlite;
pub mod kube;
pub mod multi_site;
#[cfg(feature = "okd")]
pub mod okd;
#[cfg(feature = "redfish")]
pub mod redfish;
#[cfg(feature = "agent")]
pub mod region_site;
pub mod render;
pub mod split_plane;
#[cfg(feature = "agent")]
pub mod tenant_admin_topology;
mod topology_flags;
