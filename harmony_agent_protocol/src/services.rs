//! Service providers on the wire: the service types an agent holds (`services` frame), the
//! status of one service instance (`instance` frame and the `service_*` op results), and the
//! `service_*` op parameters.
//!
//! An agent *holds* a service type when one of its providers serves it; it *advertises* the type
//! only while that provider is healthy. A type whose provider is unavailable is left out of the
//! `services` frame altogether.

use serde::{Deserialize, Serialize};
use serde_json::{Map, Value};
use std::fmt;

/// Three-state health of a provider, as the agent measures it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum ProviderHealth {
    /// Its last health check succeeded within the unhealthy threshold.
    Healthy,
    /// Checks have failed for longer than the unhealthy threshold, not yet the unavailable one.
    Unhealthy,
    /// Checks have failed for longer than the unavailable threshold, or never succeeded.
    Unavailable,
}

impl fmt::Display for ProviderHealth {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            ProviderHealth::Healthy => "healthy",
            ProviderHealth::Unhealthy => "unhealthy",
            ProviderHealth::Unavailable => "unavailable",
        })
    }
}

/// One service type an agent holds, with the provider serving it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ServiceOffer {
    /// The service type (`container`, `postgresql`, `vm`, or an external provider's own).
    pub service_type: String,
    /// The provider's name.
    pub provider: String,
    /// Whether the provider is built into the agent (otherwise registered through its API).
    #[serde(default)]
    pub builtin: bool,
    /// The provider's health; never `unavailable` in a `services` frame.
    pub health: ProviderHealth,
    /// Why it is in that state.
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub detail: String,
}

impl ServiceOffer {
    /// Whether this offer advertises its type (a healthy provider serves it).
    pub fn advertised(&self) -> bool {
        self.health == ProviderHealth::Healthy
    }
}

/// `services`: agent -> control plane, the full set of service types the agent holds now. Sent
/// right after every welcome and at once whenever a type or its provider's health changes.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Services {
    /// One offer per held type (at most one provider per type per agent).
    pub offers: Vec<ServiceOffer>,
}

impl Services {
    /// The advertised types: those a healthy provider serves.
    pub fn advertised(&self) -> Vec<&str> {
        self.offers
            .iter()
            .filter(|o| o.advertised())
            .map(|o| o.service_type.as_str())
            .collect()
    }
}

/// Lifecycle state of a service instance.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum InstanceState {
    /// Control plane only: waiting for its provider to become healthy.
    Queued,
    /// Sent to the agent, no answer yet.
    Pending,
    /// The provider accepted it and is creating it.
    Provisioning,
    /// The instance is up.
    Ready,
    /// Creating or running it failed (see the detail).
    Failed,
    /// The provider is deleting it.
    Deleting,
    /// The provider has no such instance (any more).
    Deleted,
}

impl InstanceState {
    /// Parses a provider's state word, case-insensitively.
    pub fn parse(word: &str) -> Option<Self> {
        serde_json::from_value(Value::String(word.to_ascii_lowercase())).ok()
    }

    /// The wire word.
    pub fn as_str(self) -> &'static str {
        match self {
            InstanceState::Queued => "queued",
            InstanceState::Pending => "pending",
            InstanceState::Provisioning => "provisioning",
            InstanceState::Ready => "ready",
            InstanceState::Failed => "failed",
            InstanceState::Deleting => "deleting",
            InstanceState::Deleted => "deleted",
        }
    }
}

impl fmt::Display for InstanceState {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// What a provider says of one instance: the `instance` frame and the `service_*` op result.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct InstanceStatus {
    /// The instance id (chosen by the control plane; a DNS-1123 label).
    pub instance_id: String,
    /// Its service type.
    pub service_type: String,
    /// The provider that serves it.
    pub provider: String,
    /// Its state.
    pub state: InstanceState,
    /// Detail for people (never secret values).
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub detail: String,
    /// What a consumer needs to use it (endpoints, Secret names; never secret values).
    #[serde(default, skip_serializing_if = "Map::is_empty")]
    pub outputs: Map<String, Value>,
}

/// `service_create` params: create (or converge) an instance.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ServiceCreateParams {
    /// The instance id.
    pub instance_id: String,
    /// The service type.
    pub service_type: String,
    /// The provider-specific spec (a JSON object).
    #[serde(default)]
    pub spec: Value,
}

/// `service_delete` and `service_status` params.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ServiceRef {
    /// The instance id.
    pub instance_id: String,
    /// The service type.
    pub service_type: String,
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn only_healthy_offers_are_advertised() {
        let offer = |t: &str, health| ServiceOffer {
            service_type: t.into(),
            provider: "p".into(),
            builtin: false,
            health,
            detail: String::new(),
        };
        let s = Services {
            offers: vec![
                offer("container", ProviderHealth::Healthy),
                offer("queue", ProviderHealth::Unhealthy),
            ],
        };
        assert_eq!(s.advertised(), vec!["container"]);
    }

    #[test]
    fn instance_states_parse_provider_words() {
        assert_eq!(InstanceState::parse("Ready"), Some(InstanceState::Ready));
        assert_eq!(
            InstanceState::parse("provisioning"),
            Some(InstanceState::Provisioning)
        );
        assert_eq!(InstanceState::parse("exploded"), None);
        let v = serde_json::to_value(InstanceStatus {
            instance_id: "i1".into(),
            service_type: "queue".into(),
            provider: "q".into(),
            state: InstanceState::Ready,
            detail: String::new(),
            outputs: Map::new(),
        })
        .unwrap();
        assert_eq!(
            v,
            json!({"instance_id": "i1", "service_type": "queue", "provider": "q", "state": "ready"})
        );
    }
}
