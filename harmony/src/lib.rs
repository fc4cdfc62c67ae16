//! Harmony core.
//!
//! - [`domain`]: Score, Interpret, Topology, capability traits, Inventory, Outcome, Maestro,
//!   events. No file formats, no processes, no Kubernetes client.
//! - [`infra`]: adapters that implement capabilities (render-to-files today).

pub mod domain;
pub mod infra;

pub use harmony_types as types;
