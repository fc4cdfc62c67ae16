//! Scores and their Interprets, one folder per domain.
//!
//! `k8s` is always built; Cargo features add the others (`okd`, `postgresql`, `region`,
//! `tenant`), each with the `harmony` adapters it needs, so a plain Kubernetes program does not
//! compile them.

mod interpret_support;
pub mod k8s;
#[cfg(feature = "okd")]
pub mod okd;
#[cfg(feature = "postgresql")]
pub mod postgresql;
#[cfg(feature = "region")]
pub mod region;
#[cfg(feature = "tenant")]
pub mod tenant;

/// Compiles the code in README.md so the "Writing a Score" guide cannot rot.
#[cfg(doctest)]
#[doc = include_str!("../../README.md")]
pub struct ReadmeDoctests;

/// Compiles the Rust snippets of the PostgreSQL guide (`docs/modules/multisite_postgresql.md`).
#[cfg(doctest)]
#[doc = include_str!("../../docs/modules/multisite_postgresql.md")]
pub struct MultisitePostgresqlGuide;

/// Compiles the Rust snippet of the split-plane guide (`docs/split-plane.md`); it uses only
/// `harmony`, which this crate depends on.
#[cfg(doctest)]
#[doc = include_str!("../../docs/split-plane.md")]
pub struct SplitPlaneGuide;
