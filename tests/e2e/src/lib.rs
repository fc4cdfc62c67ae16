//! Harness for end-to-end tests against real components started by the tests themselves.

pub mod apiserver;

pub use apiserver::{ApiServer, shared_crds_dir};
