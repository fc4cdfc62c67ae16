//! Interpret: the code that reaches a Score's intent on a topology.

use async_trait::async_trait;
use std::fmt::{self, Debug};

use harmony_types::Version;

use super::inventory::Inventory;
use super::outcome::{InterpretError, Outcome};
use super::topology::Topology;

/// The name of an Interpret kind, e.g. `K8sResource`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct InterpretName(pub &'static str);

impl fmt::Display for InterpretName {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.0)
    }
}

/// How to reach a Score's intent on a topology `T`.
///
/// Execution status (queued, running, finished with which outcome) is tracked by the Maestro
/// and reported per Score, so an Interpret holds no mutable state of its own.
#[async_trait]
pub trait Interpret<T: Topology>: Debug + Send + Sync {
    /// What kind of Interpret this is.
    fn name(&self) -> InterpretName;

    /// The Interpret's own version, reported so outcomes can be traced to the code that made them.
    fn version(&self) -> Version;

    /// Does the work. Must be idempotent: a second run on unchanged input reports `Noop`.
    async fn execute(&self, inventory: &Inventory, topology: &T)
    -> Result<Outcome, InterpretError>;
}
