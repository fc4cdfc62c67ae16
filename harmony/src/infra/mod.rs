//! Adapters that implement capabilities on real backends.

pub mod render;
