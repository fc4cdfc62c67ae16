//! Harness for end-to-end tests against real components started by the tests themselves.

pub mod accel;
pub mod agent_rbac;
pub mod apiserver;
pub mod bench;
pub mod blackhole;
pub mod bmc_lab;
pub mod command;
pub mod discovery_boot;
pub mod eventually;
pub mod files;
pub mod ha;
pub mod multi_region;
pub mod netns;
pub mod okd_lab;
pub mod pg_datapath;
pub mod postgres;
pub mod providers;
pub mod raw_agent;
pub mod raw_api;
pub mod resilience;
pub mod workloads;
pub mod world;
pub mod x509;

pub use apiserver::{ApiServer, ApiServerOptions, crds_dir};

/// Compiles the Rust snippets of the testing guide (`docs/testing.md`), which use this crate.
#[cfg(doctest)]
#[doc = include_str!("../../../docs/testing.md")]
pub struct TestingGuide;
pub use pg_datapath::DataPath;

/// A positive count for a benchmark flag (`--runs 3`, `--hosts 10000`), as a clap value parser.
pub fn positive_count(value: &str) -> Result<usize, String> {
    value
        .trim()
        .parse::<usize>()
        .ok()
        .filter(|n| *n > 0)
        .ok_or(format!("expected a positive number, got {value:?}"))
}
