//! `HAClusterTopology`: an HA cluster on bare metal, served by dnsmasq (DHCP, TFTP, DNS), the
//! embedded HTTP boot server and haproxy, with its hosts kept in a SQLite inventory.
//!
//! Render mode (the default) writes every file under `--out DIR/<cluster>/` and runs nothing;
//! `--apply` writes them into the folder Harmony owns, checks them with the services' own
//! checkers and reloads the services.

mod capabilities;
mod discovery;
mod duplicates;
mod nodes;
mod power;
mod reports;
mod roles;
mod timeline;
mod topology;

pub use discovery::{
    DEFAULT_DISCOVERY_ADDRESSES, DISCOVERY_IMAGE_FILES, check_discovery_image, discovery_range,
};
pub use nodes::{APPROVAL_REASON, KubeClusterNodes, RequestedSubject, requested_subject};
pub use roles::{parse_roles_file, parse_roles_file_bmcs};

pub use topology::{
    BareMetalServices, DEFAULT_DISCOVERY_TIMEOUT, HAClusterTopology, HaClusterError,
};

#[cfg(test)]
mod tests;
