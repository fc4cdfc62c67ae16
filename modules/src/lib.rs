//! Scores and their Interprets, one folder per domain.

mod interpret_support;
pub mod k8s;
pub mod okd;
pub mod postgresql;
pub mod region;

/// Compiles the code in README.md so the "Writing a Score" guide cannot rot.
#[cfg(doctest)]
#[doc = include_str!("../../README.md")]
pub struct ReadmeDoctests;
