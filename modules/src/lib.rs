//! Scores and their Interprets, one folder per domain.

mod interpret_support;
pub mod k8s;
pub mod okd;
pub mod postgresql;
pub mod region;
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
