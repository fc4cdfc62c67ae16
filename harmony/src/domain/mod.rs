//! The domain: what a Score, an Interpret and a Topology are, and how a run is driven.

pub mod capability;
pub mod diff;
pub mod events;
pub mod flags;
pub mod interpret;
pub mod inventory;
pub mod maestro;
pub mod mode;
pub mod operator;
pub mod outcome;
pub mod redact;
pub mod score;
pub mod topology;
pub mod validation;

pub use events::{HarmonyEvent, capture_progress, report_progress};
pub use interpret::{Interpret, InterpretName};
pub use inventory::Inventory;
pub use maestro::{Maestro, RunOptions, ScoreReport};
pub use mode::{ExecutionMode, RunContext, WaitPolicy};
pub use outcome::{
    ChangeAction, FieldChange, InterpretError, ObjectChange, Outcome, OutcomeStatus, ScoreStatus,
    WaitedStatus,
};
pub use score::Score;
pub use topology::{PreparationError, PreparationOutcome, Topology};
pub use validation::ValidationError;
