//! Topology: where Scores run, and how preparing it ended.

use async_trait::async_trait;

use super::mode::ExecutionMode;

/// Where Scores run. Capabilities are extra traits a topology implements (e.g. `K8sClient`).
#[async_trait]
pub trait Topology: Send + Sync {
    /// A short name for reports ("local", "site-paris").
    fn name(&self) -> &str;

    /// The mode every capability of this topology works in.
    fn mode(&self) -> ExecutionMode;

    /// Makes the topology usable (connect, check versions, create folders). Called once per run.
    async fn ensure_ready(&self) -> Result<PreparationOutcome, PreparationError>;

    /// Checks the program's declared inventory against what the topology already holds (for
    /// bare metal: duplicate MACs), before anything is touched. Most topologies hold none.
    fn validate_inventory(
        &self,
        _inventory: &super::inventory::Inventory,
    ) -> Result<(), super::ValidationError> {
        Ok(())
    }
}

/// A borrowed topology is the topology: lets a wrapper (e.g. `RegionSiteTopology`) add a
/// capability to a topology owned elsewhere.
#[async_trait]
impl<T: Topology + ?Sized> Topology for &T {
    fn name(&self) -> &str {
        (**self).name()
    }

    fn mode(&self) -> ExecutionMode {
        (**self).mode()
    }

    async fn ensure_ready(&self) -> Result<PreparationOutcome, PreparationError> {
        (**self).ensure_ready().await
    }

    fn validate_inventory(
        &self,
        inventory: &super::inventory::Inventory,
    ) -> Result<(), super::ValidationError> {
        (**self).validate_inventory(inventory)
    }
}

/// What preparing the topology did.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize)]
#[serde(tag = "status", content = "message", rename_all = "lowercase")]
pub enum PreparationOutcome {
    /// Preparation did something worth reporting.
    Success(String),
    /// Nothing needed doing.
    Noop,
}

/// Preparing the topology failed; nothing was applied.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("topology {topology:?} is not ready: {reason}")]
pub struct PreparationError {
    /// The topology's name.
    pub topology: String,
    /// Why, naming the server, folder or service at fault.
    pub reason: String,
}
