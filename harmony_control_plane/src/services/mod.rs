//! What the control plane does, with no HTTP or WebSocket types: regions, identities, durable
//! requests and their delivery, service instances and their placement. Every operation reads and
//! writes the [`Store`]; [`Hub`] reaches the agent connections this replica holds.
//!
//! Each concern returns its own error enum; the edges (`http`, `session`) turn them into status
//! codes and close codes.

pub mod answers;
pub mod dispatch;
pub mod health;
pub mod identities;
pub mod instance_ids;
pub mod instance_requests;
pub mod instances;
pub mod page_sessions;
pub mod placement;
pub mod regions;
pub mod request_views;
mod request_waits;
pub mod requests;
pub mod scope;
pub mod scrub;
pub mod sessions;
pub mod tenancy;
pub mod tenancy_views;
pub mod zone_states;
pub mod zones;

mod background;

pub use background::{start, stop};
pub use health::HealthPolicy;

use std::sync::Arc;
use std::time::Duration;

use crate::hub::Hub;
use crate::store::{Store, StoreError};

/// Settings the services follow (from the command line).
#[derive(Debug, Clone)]
pub struct Settings {
    /// This replica's id (session rows and connection ids name it).
    pub replica_id: String,
    /// Heartbeat interval and health thresholds.
    pub policy: HealthPolicy,
    /// Longest a bootstrap token stays valid.
    pub bootstrap_ttl: Duration,
    /// How long an identity stays valid.
    pub identity_ttl: Duration,
    /// How long an identity stays valid after it was renewed.
    pub identity_overlap: Duration,
    /// Longest a caller may wait for a request's answer.
    pub max_request_wait: Duration,
    /// Finished requests (and their results) are kept this long.
    pub request_retention: Duration,
    /// The largest frame the control plane accepts from an agent.
    pub max_frame_bytes: usize,
}

/// Everything the services need: the store, this replica's live connections, the settings.
pub struct ControlPlane {
    /// Durable state, shared by every replica.
    pub store: Arc<dyn Store>,
    /// This replica's live agent connections.
    pub hub: Hub,
    /// Settings.
    pub settings: Settings,
    /// Callers waiting for answers, by request id.
    pub answers: answers::Answers,
}

impl ControlPlane {
    /// A control plane over `store`; [`start`] runs its background tasks.
    pub fn new(store: Arc<dyn Store>, settings: Settings) -> Arc<Self> {
        Arc::new(Self {
            store,
            hub: Hub::new(&settings.replica_id),
            settings,
            answers: answers::Answers::default(),
        })
    }
}

/// Logs a store failure of a background step (no caller to hand it to).
pub(crate) fn log_store(e: StoreError) {
    log::error!("{e}");
}

/// A random lowercase hex string of `bytes` random bytes.
pub(crate) fn random_hex(bytes: usize) -> Result<String, getrandom::Error> {
    let mut b = vec![0u8; bytes];
    getrandom::fill(&mut b)?;
    Ok(b.iter().map(|x| format!("{x:02x}")).collect())
}

#[cfg(test)]
mod recovery_tests;
#[cfg(test)]
mod tenancy_tests;
#[cfg(test)]
pub(crate) mod tests;
#[cfg(test)]
mod zone_tests;
