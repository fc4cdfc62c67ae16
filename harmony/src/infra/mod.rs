//! Adapters that implement capabilities on real backends.

pub mod default_topology;
pub mod kube;
pub mod render;
pub mod split_plane;
