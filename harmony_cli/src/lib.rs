//! The entry point every Harmony program calls with its inventory, topology and Scores.
//!
//! ```no_run
//! use harmony::domain::{Inventory, Score};
//! use harmony::infra::render::RenderTopology;
//! use std::convert::Infallible;
//! use std::process::ExitCode;
//!
//! #[tokio::main]
//! async fn main() -> ExitCode {
//!     let scores: Vec<Box<dyn Score<RenderTopology>>> = Vec::new(); // your Scores
//!     let topology = |ctx: &_| Ok::<_, Infallible>(RenderTopology::from_context(ctx));
//!     harmony_cli::run(Inventory::empty(), topology, scores).await
//! }
//! ```
//!
//! The flags a program offers follow its topology ([`TopologyFlags`]): Kubernetes programs
//! get `--kubeconfig`/`--context`, bare-metal ones `--apply`/`--inventory`/...; a flag the
//! topology would ignore exits 2 naming it. [`run_program`] adds the program's own flags.
//!
//! Exit codes: 0 all Scores succeeded, 1 a Score (or topology preparation) failed,
//! 2 usage or validation error, including a confirmation that could not be asked.

mod args;
mod console;
mod flags;
mod operator;
mod parse;
mod progress;
mod report;
mod run;
mod select;

pub use args::{
    Args, BareMetalArgs, ClusterArgs, CommonArgs, NoFlags, OutputFormat, OwnershipArgs,
};
pub use console::Console;
pub use harmony::domain::flags::{FlagGroups, TopologyFlags};
pub use parse::parse_args;
pub use report::REPORT_FORMAT_VERSION;
pub use run::{run, run_args, run_program, run_program_with, run_with};

/// Compiles the Rust snippets of the command-line guide (`docs/cli.md`).
#[cfg(doctest)]
#[doc = include_str!("../../docs/cli.md")]
pub struct CliGuide;
