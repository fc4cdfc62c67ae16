//! Adapters that implement capabilities on real backends.

pub mod agent;
pub mod bare_metal;
pub mod cnpg;
pub mod default_topology;
pub mod dnsmasq;
pub mod either;
pub mod haproxy;
pub mod http_boot;
pub mod inventory_sqlite;
pub mod kube;
pub mod multi_site;
pub mod okd;
pub mod region_site;
pub mod render;
pub mod split_plane;
pub mod tenant_admin;
mod topology_flags;
