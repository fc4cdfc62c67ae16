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
//! Exit codes: 0 all Scores succeeded, 1 a Score (or topology preparation) failed,
//! 2 usage or validation error, including a confirmation that could not be asked.

mod args;
mod console;
mod operator;
mod progress;
mod report;
mod run;
mod select;

pub use args::{Args, OutputFormat};
pub use console::Console;
pub use report::REPORT_FORMAT_VERSION;
pub use run::{run, run_with};
