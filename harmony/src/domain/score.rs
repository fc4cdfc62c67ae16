//! Score: the intent, and the validation error a wrong parameter gives.

use std::fmt::Debug;

use super::interpret::Interpret;
use super::topology::Topology;
use super::validation::ValidationError;

/// Intent: what should exist. A Score states the capabilities it needs as bounds on `T`:
/// `harmony_modules`' `NamespaceScore` is `impl<T: Topology + K8sClient> Score<T>`, so it
/// compiles only with topologies that offer `K8sClient` (README's "Writing a Score" is a whole
/// example, compiled as a doctest).
pub trait Score<T: Topology>: Debug + Send + Sync {
    /// A name unique within a run, shown in lists, filters and reports.
    fn name(&self) -> String;

    /// The Interpret that knows how to reach this intent on `T`.
    fn create_interpret(&self) -> Box<dyn Interpret<T>>;

    /// The parameters as data for reports; secret fields must be redacted.
    fn parameters(&self) -> serde_json::Value;

    /// Checks the parameters against each other before anything runs. Types already rule out
    /// malformed single values; this is for cross-field rules.
    fn validate(&self) -> Result<(), ValidationError> {
        Ok(())
    }

    /// Checks the parameters against the topology they will run on (named sites exist, ...),
    /// after `validate` and still before anything runs. Must not contact any backend.
    fn validate_on(&self, _topology: &T) -> Result<(), ValidationError> {
        Ok(())
    }
}
