//! The agent's providers: at most one per service type (built-ins included), their health
//! (three states over time thresholds), the offers the control plane sees, the instances the
//! agent created, and their persistence in the providers file.
//!
//! By concern: [`health`] (the state machine), [`builtin`] (which built-ins exist), `offers`
//! (registration and what the control plane is told), `instances` (the `service_*` ops),
//! `monitoring` (the health, discovery and instance-poll loops) and `persistence` (the file).

mod builtin;
mod health;
mod instances;
mod monitoring;
mod offers;
mod persistence;
#[cfg(test)]
mod tests;
#[cfg(test)]
mod tests_external;

pub use builtin::Builtin;
pub use health::{HealthPolicy, health};

use harmony_agent_protocol::{Frame, InstanceStatus, ProviderHealth};
use serde::{Deserialize, Serialize};
use serde_json::Value;
use std::collections::BTreeMap;
use std::path::PathBuf;
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};
use tokio::sync::mpsc;

use super::{Provider, ProviderError, check_label};
use crate::cluster::Cluster;
use crate::providers::external::{ExternalProvider, HttpClient, Registration};
use persistence::{Persisted, load};

/// What the registry needs from the agent's flags.
#[derive(Debug, Clone)]
pub struct RegistryConfig {
    /// Health thresholds.
    pub policy: HealthPolicy,
    /// The built-ins that may be enabled.
    pub builtins: Vec<Builtin>,
    /// Where registrations and instances persist; in memory only when `None`.
    pub file: Option<PathBuf>,
    /// How often built-in APIs are re-discovered.
    pub discovery_interval: Duration,
    /// How often remembered instances are polled.
    pub instance_poll: Duration,
}

/// A provider as the REST API shows it.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ProviderView {
    /// Its name.
    pub name: String,
    /// The types it serves.
    pub service_types: Vec<String>,
    /// Whether it is built in.
    pub builtin: bool,
    /// External: its instance API.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub endpoint: Option<String>,
    /// External: its health URL.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub health_url: Option<String>,
    /// Its health now.
    pub health: ProviderHealth,
    /// Why.
    pub health_reason: String,
    /// When its last health check succeeded (ms since epoch).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub last_healthy_at: Option<i64>,
}

/// How a registration was taken.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Registered {
    /// A new provider.
    Created,
    /// The same registration again: nothing changed.
    Unchanged,
    /// A different registration under an existing name replaced it.
    Replaced,
}

/// Why a registration or deregistration was refused.
#[derive(Debug, thiserror::Error)]
pub enum RegistryError {
    /// A field is wrong.
    #[error(transparent)]
    Invalid(ProviderError),
    /// A requested type is held by another provider.
    #[error("{message}")]
    Conflict {
        /// The holder.
        holder: String,
        /// The contested type.
        service_type: String,
        /// The message for people.
        message: String,
    },
    /// The name is a built-in provider's.
    #[error(
        "provider {name:?} is built into the agent and cannot be registered, replaced or deregistered through this API; choose the built-ins with --builtin-providers"
    )]
    Builtin {
        /// The name.
        name: String,
    },
    /// No provider of that name.
    #[error("no provider named {name:?} is registered; GET /v1/providers lists them")]
    NotFound {
        /// The name.
        name: String,
    },
    /// The providers file could not be written; nothing was changed.
    #[error("--providers-file {path}: {reason}; nothing was changed")]
    Persist {
        /// The file.
        path: String,
        /// Why.
        reason: String,
    },
}

struct Entry {
    provider: Arc<dyn Provider>,
    external: Option<Arc<ExternalProvider>>,
    builtin: Option<Builtin>,
    types: Vec<String>,
    since: Instant,
    last_ok: Option<Instant>,
    last_ok_wall: Option<i64>,
    failure: String,
    /// Built-ins: whether discovery found their API (externals are always enabled).
    enabled: bool,
}

impl Entry {
    fn health(&self, now: Instant, policy: &HealthPolicy) -> (ProviderHealth, String) {
        if !self.enabled {
            let api = self.builtin.map(Builtin::api);
            let reason = match api {
                Some(a) if self.last_ok.is_some() || !self.failure.is_empty() => format!(
                    "disabled: the cluster does not serve {} {}",
                    a.group_version, a.kind
                ),
                Some(a) => format!(
                    "disabled until API discovery finds {} {}",
                    a.group_version, a.kind
                ),
                None => "disabled".into(),
            };
            return (ProviderHealth::Unavailable, reason);
        }
        health(now, self.last_ok, self.since, &self.failure, policy)
    }

    fn view(&self, name: &str, now: Instant, policy: &HealthPolicy) -> ProviderView {
        let (health, health_reason) = self.health(now, policy);
        let reg = self.external.as_ref().map(|e| e.registration());
        ProviderView {
            name: name.to_string(),
            service_types: self.types.clone(),
            builtin: self.builtin.is_some(),
            endpoint: reg.map(|r| r.endpoint.clone()),
            health_url: reg.map(|r| r.health_url.clone()),
            health,
            health_reason,
            last_healthy_at: self.last_ok_wall,
        }
    }
}

/// An instance the agent created, remembered until its provider says it is deleted.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
struct Remembered {
    instance_id: String,
    service_type: String,
    provider: String,
    #[serde(default)]
    spec: Value,
    #[serde(skip)]
    last: Option<InstanceStatus>,
}

#[derive(Default)]
struct State {
    providers: BTreeMap<String, Entry>,
    instances: BTreeMap<String, Remembered>,
    /// The (type, provider, health) set last announced.
    announced: Option<Vec<(String, String, ProviderHealth)>>,
}

/// The agent's providers and instances.
pub struct Registry {
    state: Mutex<State>,
    config: RegistryConfig,
    cluster: Arc<Cluster>,
    http: HttpClient,
    outbox: mpsc::UnboundedSender<Frame>,
}

fn now_ms() -> i64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map(|d| d.as_millis() as i64)
        .unwrap_or(0)
}

fn same_report(a: &InstanceStatus, b: &InstanceStatus) -> bool {
    a.state == b.state && a.detail == b.detail && a.outputs == b.outputs
}

impl Registry {
    /// A registry with the allowed built-ins (enabled once discovery finds their APIs) and the
    /// registrations and instances of the providers file; start its loops with [`Registry::start`].
    pub fn new(
        config: RegistryConfig,
        cluster: Arc<Cluster>,
        http: HttpClient,
        outbox: mpsc::UnboundedSender<Frame>,
    ) -> Result<Arc<Self>, String> {
        let now = Instant::now();
        let mut state = State::default();
        for b in &config.builtins {
            state.providers.insert(
                b.provider_name().to_string(),
                Entry {
                    provider: b.provider(cluster.clone()),
                    external: None,
                    builtin: Some(*b),
                    types: vec![b.service_type().to_string()],
                    since: now,
                    last_ok: None,
                    last_ok_wall: None,
                    failure: String::new(),
                    enabled: false,
                },
            );
        }
        let persisted = match &config.file {
            Some(path) => load(path)?,
            None => Persisted::default(),
        };
        let registry = Self {
            state: Mutex::new(state),
            config,
            cluster,
            http,
            outbox,
        };
        {
            let mut state = registry.lock();
            for reg in persisted.providers {
                let name = reg.name.clone();
                match registry.admit(&state, &reg) {
                    Ok(()) => {
                        let entry = registry.external_entry(reg, now);
                        state.providers.insert(name, entry);
                    }
                    Err(e) => log::warn!("providers file: registration {name:?} skipped: {e}"),
                }
            }
            for i in persisted.instances {
                if check_label("instance_id", &i.instance_id).is_ok() {
                    state.instances.insert(i.instance_id.clone(), i);
                }
            }
        }
        Ok(Arc::new(registry))
    }

    fn lock(&self) -> MutexGuard<'_, State> {
        // A panic while holding the lock cannot leave the maps half-updated (each update is one
        // insert or remove), so the poisoned state is still consistent.
        self.state.lock().unwrap_or_else(|p| p.into_inner())
    }

    fn external_entry(&self, reg: Registration, now: Instant) -> Entry {
        let types = reg.service_types.clone();
        let external = Arc::new(ExternalProvider::new(reg, self.http.clone()));
        Entry {
            provider: external.clone(),
            external: Some(external),
            builtin: None,
            types,
            since: now,
            last_ok: None,
            last_ok_wall: None,
            failure: String::new(),
            enabled: true,
        }
    }
}
