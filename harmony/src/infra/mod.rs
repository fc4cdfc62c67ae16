//! Adapters that implement capabilities on real backends.

pub mod cnpg;
pub mod default_topology;
pub mod kube;
pub mod multi_site;
pub mod render;
pub mod split_plane;
