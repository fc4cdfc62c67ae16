//! The agent's providers: at most one per service type (built-ins included), their health
//! (three states over time thresholds), the offers the control plane sees, the instances the
//! agent created, and their persistence in the providers file.

use futures::future::join_all;
use harmony_agent_protocol::{
    Frame, InstanceState, InstanceStatus, ProviderHealth, ServiceOffer, Services,
};
use serde::{Deserialize, Serialize};
use serde_json::Value;
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};
use tokio::sync::mpsc;

use super::discovery::{self, RequiredApi};
use super::external::{ExternalProvider, HttpClient, Registration};
use super::{Provider, ProviderError, check_label};
use crate::exec::Cluster;

/// The thresholds of the health state machine.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct HealthPolicy {
    /// How often providers are checked.
    pub interval: Duration,
    /// Unhealthy once the last successful check is at least this old.
    pub unhealthy_after: Duration,
    /// Unavailable once the last successful check is older than this.
    pub unavailable_after: Duration,
}

impl HealthPolicy {
    /// How long one health check may take: min(interval, 5 s).
    pub fn check_timeout(&self) -> Duration {
        self.interval.min(Duration::from_secs(5))
    }
}

/// The health of a provider whose last successful check was at `last_ok` (never: `None`) and
/// that was registered (or the agent started) at `since`; `failure` says why checks fail.
pub fn health(
    now: Instant,
    last_ok: Option<Instant>,
    since: Instant,
    failure: &str,
    policy: &HealthPolicy,
) -> (ProviderHealth, String) {
    let why = if failure.is_empty() {
        String::new()
    } else {
        format!(": {failure}")
    };
    let Some(last) = last_ok else {
        let age = now.saturating_duration_since(since);
        if age > policy.unavailable_after {
            return (
                ProviderHealth::Unavailable,
                format!(
                    "no health check has succeeded in {} ms (unavailable after {} ms){why}",
                    age.as_millis(),
                    policy.unavailable_after.as_millis()
                ),
            );
        }
        return (
            ProviderHealth::Unhealthy,
            format!("no health check has succeeded yet{why}"),
        );
    };
    let age = now.saturating_duration_since(last);
    if age < policy.unhealthy_after {
        return (ProviderHealth::Healthy, "health checks succeed".into());
    }
    if age <= policy.unavailable_after {
        return (
            ProviderHealth::Unhealthy,
            format!(
                "last successful health check {} ms ago (unhealthy after {} ms, unavailable after {} ms){why}",
                age.as_millis(),
                policy.unhealthy_after.as_millis(),
                policy.unavailable_after.as_millis()
            ),
        );
    }
    (
        ProviderHealth::Unavailable,
        format!(
            "last successful health check {} ms ago (unavailable after {} ms){why}",
            age.as_millis(),
            policy.unavailable_after.as_millis()
        ),
    )
}

/// A built-in provider the agent may enable.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub enum Builtin {
    /// `container` through `kubernetes-workloads`.
    Container,
    /// `postgresql` through `cloudnativepg`.
    Postgresql,
    /// `vm` through `kubevirt`.
    Vm,
}

impl Builtin {
    /// Every built-in.
    pub const ALL: [Builtin; 3] = [Builtin::Container, Builtin::Postgresql, Builtin::Vm];

    /// The service type it serves (the word `--builtin-providers` takes).
    pub fn service_type(self) -> &'static str {
        match self {
            Builtin::Container => super::container::SERVICE_TYPE,
            Builtin::Postgresql => super::postgresql::SERVICE_TYPE,
            Builtin::Vm => super::kubevirt::SERVICE_TYPE,
        }
    }

    /// The provider's name.
    pub fn provider_name(self) -> &'static str {
        match self {
            Builtin::Container => super::container::NAME,
            Builtin::Postgresql => super::postgresql::NAME,
            Builtin::Vm => super::kubevirt::NAME,
        }
    }

    /// The API whose presence enables it.
    pub fn api(self) -> RequiredApi {
        match self {
            Builtin::Container => RequiredApi {
                group_version: "apps/v1",
                kind: "Deployment",
            },
            Builtin::Postgresql => RequiredApi {
                group_version: "postgresql.cnpg.io/v1",
                kind: "Cluster",
            },
            Builtin::Vm => RequiredApi {
                group_version: "kubevirt.io/v1",
                kind: "VirtualMachine",
            },
        }
    }

    fn provider(self, cluster: Arc<Cluster>) -> Arc<dyn Provider> {
        match self {
            Builtin::Container => Arc::new(super::container::ContainerProvider::new(cluster)),
            Builtin::Postgresql => Arc::new(super::postgresql::PostgresProvider::new(cluster)),
            Builtin::Vm => Arc::new(super::kubevirt::KubevirtProvider::new(cluster)),
        }
    }

    /// Parses `--builtin-providers`: a comma-separated list of service types, or `none`.
    pub fn parse_list(text: &str) -> Result<Vec<Builtin>, String> {
        let text = text.trim();
        if text.eq_ignore_ascii_case("none") || text.is_empty() {
            return Ok(Vec::new());
        }
        let mut out = Vec::new();
        for word in text.split(',').map(str::trim) {
            let b = Builtin::ALL
                .into_iter()
                .find(|b| b.service_type() == word)
                .ok_or_else(|| {
                    format!(
                        "{word:?} is not a built-in service type; give a comma-separated list of container, postgresql, vm, or none"
                    )
                })?;
            if !out.contains(&b) {
                out.push(b);
            }
        }
        Ok(out)
    }
}

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

/// The providers file.
#[derive(Debug, Default, Serialize, Deserialize)]
struct Persisted {
    #[serde(default)]
    providers: Vec<Registration>,
    #[serde(default)]
    instances: Vec<Remembered>,
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

    /// Validates `reg` and checks it against the other providers (not one of the same name).
    fn admit(&self, state: &State, reg: &Registration) -> Result<(), RegistryError> {
        reg.validate().map_err(RegistryError::Invalid)?;
        if let Some(e) = state.providers.get(&reg.name)
            && e.builtin.is_some()
        {
            return Err(RegistryError::Builtin {
                name: reg.name.clone(),
            });
        }
        for t in &reg.service_types {
            let holder = state
                .providers
                .iter()
                .find(|(n, e)| *n != &reg.name && e.types.contains(t));
            if let Some((holder, e)) = holder {
                let message = if e.builtin.is_some() {
                    format!(
                        "service type {t:?} is served by the built-in provider {holder:?}; start the agent with --builtin-providers not listing {t} (e.g. --builtin-providers none) to let another provider serve it, or register another type"
                    )
                } else {
                    format!(
                        "service type {t:?} is already served by provider {holder:?}; deregister it first (DELETE /v1/providers/{holder}) or register another type"
                    )
                };
                return Err(RegistryError::Conflict {
                    holder: holder.clone(),
                    service_type: t.clone(),
                    message,
                });
            }
        }
        Ok(())
    }

    /// Registers (or replaces) an external provider; a new or changed health URL is checked at once.
    pub fn register(
        self: &Arc<Self>,
        reg: Registration,
    ) -> Result<(Registered, ProviderView), RegistryError> {
        let now = Instant::now();
        let outcome;
        let view;
        let check_now;
        {
            let mut state = self.lock();
            self.admit(&state, &reg)?;
            let previous = state.providers.get(&reg.name);
            let previous_reg = previous.and_then(|e| e.external.as_ref().map(|x| x.registration()));
            if previous_reg == Some(&reg) {
                let e = &state.providers[&reg.name];
                return Ok((
                    Registered::Unchanged,
                    e.view(&reg.name, now, &self.config.policy),
                ));
            }
            let mut entry = self.external_entry(reg.clone(), now);
            check_now = match previous {
                Some(p) if previous_reg.is_some_and(|r| r.health_url == reg.health_url) => {
                    // Same health URL: its health history still holds.
                    entry.since = p.since;
                    entry.last_ok = p.last_ok;
                    entry.last_ok_wall = p.last_ok_wall;
                    entry.failure = p.failure.clone();
                    false
                }
                _ => true,
            };
            outcome = if previous.is_some() {
                Registered::Replaced
            } else {
                Registered::Created
            };
            let old = state.providers.insert(reg.name.clone(), entry);
            if let Err(e) = self.persist(&state) {
                match old {
                    Some(old) => state.providers.insert(reg.name.clone(), old),
                    None => state.providers.remove(&reg.name),
                };
                return Err(e);
            }
            view = state.providers[&reg.name].view(&reg.name, now, &self.config.policy);
        }
        log::info!(
            "provider {:?} {} for {} at {}",
            reg.name,
            if outcome == Registered::Created {
                "registered"
            } else {
                "re-registered"
            },
            reg.service_types.join(", "),
            super::external::display_url(&reg.endpoint)
        );
        if check_now {
            let me = self.clone();
            let name = reg.name.clone();
            tokio::spawn(async move {
                me.check_one(&name).await;
                me.publish();
            });
        }
        self.publish();
        Ok((outcome, view))
    }

    /// Deregisters an external provider.
    pub fn deregister(&self, name: &str) -> Result<(), RegistryError> {
        {
            let mut state = self.lock();
            match state.providers.get(name) {
                None => {
                    return Err(RegistryError::NotFound {
                        name: name.to_string(),
                    });
                }
                Some(e) if e.builtin.is_some() => {
                    return Err(RegistryError::Builtin {
                        name: name.to_string(),
                    });
                }
                Some(_) => {}
            }
            let old = state.providers.remove(name);
            if let Err(e) = self.persist(&state) {
                if let Some(old) = old {
                    state.providers.insert(name.to_string(), old);
                }
                return Err(e);
            }
        }
        log::info!("provider {name:?} deregistered");
        self.publish();
        Ok(())
    }

    /// Every provider, by name.
    pub fn views(&self) -> Vec<ProviderView> {
        let now = Instant::now();
        let state = self.lock();
        state
            .providers
            .iter()
            .map(|(n, e)| e.view(n, now, &self.config.policy))
            .collect()
    }

    /// One provider.
    pub fn view(&self, name: &str) -> Option<ProviderView> {
        let state = self.lock();
        state
            .providers
            .get(name)
            .map(|e| e.view(name, Instant::now(), &self.config.policy))
    }

    fn offers_of(&self, state: &State, now: Instant) -> Vec<ServiceOffer> {
        let mut offers: Vec<ServiceOffer> = state
            .providers
            .iter()
            .filter(|(_, e)| e.enabled)
            .flat_map(|(name, e)| {
                let (health, detail) = e.health(now, &self.config.policy);
                e.types.iter().map(move |t| ServiceOffer {
                    service_type: t.clone(),
                    provider: name.clone(),
                    builtin: e.builtin.is_some(),
                    health,
                    detail: detail.clone(),
                })
            })
            .filter(|o| o.health != ProviderHealth::Unavailable)
            .collect();
        offers.sort_by(|a, b| a.service_type.cmp(&b.service_type));
        offers
    }

    /// The services frame now: one offer per held type whose provider is not unavailable.
    pub fn services(&self) -> Services {
        let state = self.lock();
        Services {
            offers: self.offers_of(&state, Instant::now()),
        }
    }

    /// The last known status of every remembered instance, for the frames after a welcome.
    pub fn instance_frames(&self) -> Vec<Frame> {
        let state = self.lock();
        state
            .instances
            .values()
            .filter_map(|i| i.last.clone())
            .map(Frame::Instance)
            .collect()
    }

    /// Recomputes the offers; when (type, provider, health) changed, logs it and pushes a
    /// `services` frame at once.
    pub fn publish(&self) {
        let services = {
            let mut state = self.lock();
            let offers = self.offers_of(&state, Instant::now());
            let key: Vec<_> = offers
                .iter()
                .map(|o| (o.service_type.clone(), o.provider.clone(), o.health))
                .collect();
            if state.announced.as_ref() == Some(&key) {
                return;
            }
            state.announced = Some(key);
            Services { offers }
        };
        let described: Vec<String> = services
            .offers
            .iter()
            .map(|o| format!("{} via {} ({})", o.service_type, o.provider, o.health))
            .collect();
        log::info!(
            "services changed: {}",
            if described.is_empty() {
                "none held".to_string()
            } else {
                described.join(", ")
            }
        );
        let _ = self.outbox.send(Frame::Services(services));
    }

    fn persist(&self, state: &State) -> Result<(), RegistryError> {
        let Some(path) = &self.config.file else {
            return Ok(());
        };
        let doc = Persisted {
            providers: state
                .providers
                .values()
                .filter_map(|e| e.external.as_ref().map(|x| x.registration().clone()))
                .collect(),
            instances: state.instances.values().cloned().collect(),
        };
        save(path, &doc).map_err(|reason| RegistryError::Persist {
            path: path.display().to_string(),
            reason,
        })
    }

    fn persist_logged(&self, state: &State) {
        if let Err(e) = self.persist(state) {
            log::error!("{e}");
        }
    }

    /// The provider holding `service_type` with its health, or `no_provider`.
    fn holder(
        &self,
        service_type: &str,
    ) -> Result<(Arc<dyn Provider>, ProviderHealth, String), ProviderError> {
        let state = self.lock();
        let found = state
            .providers
            .values()
            .find(|e| e.enabled && e.types.iter().any(|t| t == service_type));
        match found {
            Some(e) => {
                let (h, why) = e.health(Instant::now(), &self.config.policy);
                Ok((e.provider.clone(), h, why))
            }
            None => {
                let mut served: Vec<&str> = state
                    .providers
                    .values()
                    .filter(|e| e.enabled)
                    .flat_map(|e| e.types.iter().map(String::as_str))
                    .collect();
                served.sort_unstable();
                Err(ProviderError::NoProvider {
                    service_type: service_type.to_string(),
                    served: if served.is_empty() {
                        "none".into()
                    } else {
                        served.join(", ")
                    },
                })
            }
        }
    }

    /// The provider `name` with its health, when it is present and enabled.
    fn named(&self, name: &str) -> Option<(Arc<dyn Provider>, ProviderHealth, String)> {
        let state = self.lock();
        state.providers.get(name).filter(|e| e.enabled).map(|e| {
            let (h, why) = e.health(Instant::now(), &self.config.policy);
            (e.provider.clone(), h, why)
        })
    }

    /// The remembered instance `id`, checked against the requested type.
    fn remembered(
        &self,
        id: &str,
        service_type: &str,
    ) -> Result<Option<Remembered>, ProviderError> {
        let state = self.lock();
        match state.instances.get(id) {
            Some(r) if r.service_type != service_type => Err(ProviderError::InvalidParams {
                field: "service_type".into(),
                problem: format!(
                    "instance {id:?} is of service type {:?}, not {service_type:?}; give its own type",
                    r.service_type
                ),
            }),
            other => Ok(other.cloned()),
        }
    }

    /// `service_create`: the provider holding the type creates (or converges) the instance,
    /// which is then remembered.
    pub async fn create(
        &self,
        id: &str,
        service_type: &str,
        spec: &Value,
    ) -> Result<InstanceStatus, ProviderError> {
        check_label("instance_id", id)?;
        check_label("service_type", service_type)?;
        if !(spec.is_object() || spec.is_null()) {
            return Err(ProviderError::InvalidParams {
                field: "spec".into(),
                problem: "must be a JSON object (or absent for {})".into(),
            });
        }
        let spec = if spec.is_null() {
            Value::Object(Default::default())
        } else {
            spec.clone()
        };
        if let Some(r) = self.remembered(id, service_type)? {
            // Converging an instance must reach the provider that holds it.
            let holder = self
                .holder(service_type)
                .ok()
                .map(|(p, _, _)| p.name().to_string());
            if holder.as_deref() != Some(r.provider.as_str()) {
                return Err(ProviderError::InvalidParams {
                    field: "instance_id".into(),
                    problem: format!(
                        "instance {id:?} exists already, served by provider {:?}; delete it first or choose another id",
                        r.provider
                    ),
                });
            }
        }
        let (provider, health, why) = self.holder(service_type)?;
        if health != ProviderHealth::Healthy {
            return Err(ProviderError::Unavailable {
                provider: provider.name().to_string(),
                service_type: service_type.to_string(),
                health: health.to_string(),
                reason: why,
            });
        }
        let status = provider.create(id, service_type, &spec).await?;
        let mut state = self.lock();
        state.instances.insert(
            id.to_string(),
            Remembered {
                instance_id: id.to_string(),
                service_type: service_type.to_string(),
                provider: provider.name().to_string(),
                spec,
                last: Some(status.clone()),
            },
        );
        self.persist_logged(&state);
        Ok(status)
    }

    /// The provider for an existing instance: the one that created it, else the type's holder.
    fn provider_for(
        &self,
        id: &str,
        service_type: &str,
    ) -> Result<(Arc<dyn Provider>, Value), ProviderError> {
        let remembered = self.remembered(id, service_type)?;
        let (provider, health, why) = match &remembered {
            Some(r) => self
                .named(&r.provider)
                .ok_or_else(|| ProviderError::Unavailable {
                    provider: r.provider.clone(),
                    service_type: service_type.to_string(),
                    health: ProviderHealth::Unavailable.to_string(),
                    reason: "it is not registered or not enabled now".into(),
                })?,
            None => self.holder(service_type)?,
        };
        if health == ProviderHealth::Unavailable {
            return Err(ProviderError::Unavailable {
                provider: provider.name().to_string(),
                service_type: service_type.to_string(),
                health: health.to_string(),
                reason: why,
            });
        }
        let spec = remembered
            .map(|r| r.spec)
            .unwrap_or_else(|| Value::Object(Default::default()));
        Ok((provider, spec))
    }

    /// `service_delete`: the provider deletes the instance; once `deleted` it is forgotten.
    pub async fn delete(
        &self,
        id: &str,
        service_type: &str,
    ) -> Result<InstanceStatus, ProviderError> {
        check_label("instance_id", id)?;
        check_label("service_type", service_type)?;
        let (provider, spec) = self.provider_for(id, service_type)?;
        let status = provider.delete(id, service_type, &spec).await?;
        let mut state = self.lock();
        if status.state == InstanceState::Deleted {
            if state.instances.remove(id).is_some() {
                self.persist_logged(&state);
            }
        } else if let Some(r) = state.instances.get_mut(id) {
            r.last = Some(status.clone());
        }
        Ok(status)
    }

    /// `service_status`: the provider's status of the instance.
    pub async fn status(
        &self,
        id: &str,
        service_type: &str,
    ) -> Result<InstanceStatus, ProviderError> {
        check_label("instance_id", id)?;
        check_label("service_type", service_type)?;
        let (provider, spec) = self.provider_for(id, service_type)?;
        provider.status(id, service_type, &spec).await
    }

    /// Starts the health, discovery and instance-poll loops (they run for the process's life).
    pub fn start(self: &Arc<Self>) {
        let me = self.clone();
        tokio::spawn(async move {
            let mut tick = tokio::time::interval(me.config.policy.interval);
            tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
            loop {
                tick.tick().await;
                me.health_round().await;
            }
        });
        if !self.config.builtins.is_empty() {
            let me = self.clone();
            tokio::spawn(async move {
                let mut tick = tokio::time::interval(me.config.discovery_interval);
                tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
                loop {
                    tick.tick().await;
                    me.discover().await;
                }
            });
        }
        let me = self.clone();
        tokio::spawn(async move {
            let mut tick = tokio::time::interval(me.config.instance_poll);
            tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
            loop {
                tick.tick().await;
                me.poll_instances().await;
            }
        });
    }

    fn record_check(&self, state: &mut State, name: &str, result: Result<(), String>) {
        let Some(e) = state.providers.get_mut(name) else {
            return;
        };
        match result {
            Ok(()) => {
                if !e.failure.is_empty() || e.last_ok.is_none() {
                    log::info!("provider {name:?}: health check succeeds");
                }
                e.last_ok = Some(Instant::now());
                e.last_ok_wall = Some(now_ms());
                e.failure.clear();
            }
            Err(why) => {
                if e.failure != why {
                    log::warn!("provider {name:?}: {why}");
                }
                e.failure = why;
            }
        }
    }

    async fn check_one(&self, name: &str) {
        let external = self
            .lock()
            .providers
            .get(name)
            .and_then(|e| e.external.clone());
        let Some(external) = external else { return };
        let result = external
            .check_health(self.config.policy.check_timeout())
            .await;
        let mut state = self.lock();
        // A registration replaced meanwhile has its own check; this result is not its.
        if state
            .providers
            .get(name)
            .and_then(|e| e.external.as_ref())
            .is_some_and(|x| Arc::ptr_eq(x, &external))
        {
            self.record_check(&mut state, name, result);
        }
    }

    /// Whether the agent's cluster answers, within the check timeout.
    async fn cluster_answers(&self) -> Result<kube::Client, String> {
        let timeout = self.config.policy.check_timeout();
        let topology = tokio::time::timeout(timeout, self.cluster.topology(false, false))
            .await
            .map_err(|_| {
                format!(
                    "the Kubernetes API did not answer within {} ms",
                    timeout.as_millis()
                )
            })?
            .map_err(|e| e.to_string())?;
        let client = topology.client().map_err(|e| e.to_string())?;
        discovery::answers(&client, timeout).await?;
        Ok(client)
    }

    /// One health round: every external provider's health URL, and the cluster for built-ins.
    pub async fn health_round(&self) {
        let (names, any_builtin): (Vec<String>, bool) = {
            let state = self.lock();
            (
                state
                    .providers
                    .iter()
                    .filter(|(_, e)| e.external.is_some())
                    .map(|(n, _)| n.clone())
                    .collect(),
                state
                    .providers
                    .values()
                    .any(|e| e.builtin.is_some() && e.enabled),
            )
        };
        let externals = join_all(names.iter().map(|n| self.check_one(n)));
        let cluster = async {
            if any_builtin {
                Some(self.cluster_answers().await.map(|_| ()))
            } else {
                None
            }
        };
        let (_, cluster) = futures::join!(externals, cluster);
        if let Some(result) = cluster {
            let mut state = self.lock();
            let builtins: Vec<String> = state
                .providers
                .iter()
                .filter(|(_, e)| e.builtin.is_some() && e.enabled)
                .map(|(n, _)| n.clone())
                .collect();
            for n in builtins {
                self.record_check(&mut state, &n, result.clone());
            }
        }
        self.publish();
    }

    /// Re-discovers the built-ins' APIs; when the cluster does not answer, what was known stays.
    pub async fn discover(&self) {
        let client = match self.cluster_answers().await {
            Ok(c) => c,
            Err(why) => {
                let mut state = self.lock();
                let builtins: Vec<String> = state
                    .providers
                    .iter()
                    .filter(|(_, e)| e.builtin.is_some())
                    .map(|(n, _)| n.clone())
                    .collect();
                for n in builtins {
                    self.record_check(&mut state, &n, Err(why.clone()));
                }
                drop(state);
                self.publish();
                return;
            }
        };
        let mut found = Vec::new();
        for b in &self.config.builtins {
            match discovery::serves(&client, b.api()).await {
                Ok(present) => found.push((*b, present)),
                // One unreadable API must not hold back what the others say.
                Err(why) => log::warn!("API discovery: {why}; keeping what was known"),
            }
        }
        {
            let mut state = self.lock();
            for (b, present) in found {
                let name = b.provider_name();
                let Some(e) = state.providers.get_mut(name) else {
                    continue;
                };
                if e.enabled != present || e.last_ok.is_none() {
                    let api = b.api();
                    if present {
                        log::info!(
                            "built-in provider {name} enabled: the cluster serves {} {}",
                            api.group_version,
                            api.kind
                        );
                    } else {
                        log::info!(
                            "built-in provider {name} disabled: the cluster does not serve {} {}",
                            api.group_version,
                            api.kind
                        );
                    }
                }
                e.enabled = present;
                self.record_check(&mut state, name, Ok(()));
            }
        }
        self.publish();
    }

    /// Asks each remembered instance's provider (unless unavailable) for its status; pushes an
    /// `instance` frame on change and forgets instances reported `deleted`.
    pub async fn poll_instances(&self) {
        let work: Vec<(Remembered, Arc<dyn Provider>)> = {
            let now = Instant::now();
            let state = self.lock();
            state
                .instances
                .values()
                .filter_map(|r| {
                    let e = state.providers.get(&r.provider).filter(|e| e.enabled)?;
                    let (h, _) = e.health(now, &self.config.policy);
                    (h != ProviderHealth::Unavailable).then(|| (r.clone(), e.provider.clone()))
                })
                .collect()
        };
        let results = join_all(work.into_iter().map(|(r, p)| async move {
            let result = p.status(&r.instance_id, &r.service_type, &r.spec).await;
            (r, result)
        }))
        .await;
        let mut state = self.lock();
        let mut forgot = false;
        for (r, result) in results {
            let status = match result {
                Ok(s) => s,
                Err(e) => {
                    log::debug!("status of instance {}: {e}", r.instance_id);
                    continue;
                }
            };
            let Some(current) = state.instances.get_mut(&r.instance_id) else {
                continue;
            };
            if current.provider != r.provider {
                continue;
            }
            let changed = current
                .last
                .as_ref()
                .is_none_or(|l| !same_report(l, &status));
            if changed {
                log::info!(
                    "instance {} ({}): {}{}",
                    status.instance_id,
                    status.service_type,
                    status.state,
                    if status.detail.is_empty() {
                        String::new()
                    } else {
                        format!(" ({})", status.detail)
                    }
                );
                current.last = Some(status.clone());
                let _ = self.outbox.send(Frame::Instance(status.clone()));
            }
            if status.state == InstanceState::Deleted {
                state.instances.remove(&r.instance_id);
                forgot = true;
            }
        }
        if forgot {
            self.persist_logged(&state);
        }
    }
}

fn load(path: &Path) -> Result<Persisted, String> {
    match std::fs::read_to_string(path) {
        Ok(text) => serde_json::from_str(&text).map_err(|e| {
            format!(
                "{}: not a providers file ({e}); fix or remove it (registrations are then lost)",
                path.display()
            )
        }),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(Persisted::default()),
        Err(e) => Err(format!("{}: {e}", path.display())),
    }
}

/// Writes the file atomically (temp file + rename), mode 0600.
fn save(path: &Path, doc: &Persisted) -> Result<(), String> {
    let text = serde_json::to_string_pretty(doc).map_err(|e| e.to_string())?;
    if let Some(dir) = path.parent().filter(|d| !d.as_os_str().is_empty()) {
        std::fs::create_dir_all(dir).map_err(|e| format!("creating {}: {e}", dir.display()))?;
    }
    let mut tmp = path.as_os_str().to_owned();
    tmp.push(".tmp");
    let tmp = PathBuf::from(tmp);
    crate::identity::write_private(&tmp, &text)
        .map_err(|e| format!("writing {}: {e}", tmp.display()))?;
    std::fs::rename(&tmp, path).map_err(|e| format!("renaming {} into place: {e}", tmp.display()))
}

#[cfg(test)]
mod tests {
    use super::*;
    use harmony::infra::kube::KubeTarget;

    fn policy() -> HealthPolicy {
        HealthPolicy {
            interval: Duration::from_millis(100),
            unhealthy_after: Duration::from_millis(300),
            unavailable_after: Duration::from_millis(600),
        }
    }

    #[test]
    fn health_has_three_states_over_the_thresholds() {
        let p = policy();
        let t0 = Instant::now();
        let at = |ms| t0 + Duration::from_millis(ms);
        let h = |now, last, since| health(now, last, since, "refused", &p).0;
        assert_eq!(h(at(0), Some(t0), t0), ProviderHealth::Healthy);
        assert_eq!(h(at(299), Some(t0), t0), ProviderHealth::Healthy);
        assert_eq!(h(at(300), Some(t0), t0), ProviderHealth::Unhealthy);
        assert_eq!(h(at(600), Some(t0), t0), ProviderHealth::Unhealthy);
        assert_eq!(h(at(601), Some(t0), t0), ProviderHealth::Unavailable);
        // A later success makes it healthy again.
        assert_eq!(h(at(900), Some(at(850)), t0), ProviderHealth::Healthy);
        // Never succeeded: unhealthy until registration age passes the unavailable threshold.
        assert_eq!(h(at(0), None, t0), ProviderHealth::Unhealthy);
        assert_eq!(h(at(600), None, t0), ProviderHealth::Unhealthy);
        assert_eq!(h(at(601), None, t0), ProviderHealth::Unavailable);
        let (_, why) = health(at(400), Some(t0), t0, "connection refused", &p);
        assert!(
            why.contains("400 ms") && why.contains("connection refused"),
            "{why}"
        );
    }

    #[test]
    fn builtin_lists_parse() {
        assert_eq!(Builtin::parse_list("none").unwrap(), vec![]);
        assert_eq!(
            Builtin::parse_list("container, vm").unwrap(),
            vec![Builtin::Container, Builtin::Vm]
        );
        let e = Builtin::parse_list("container,queue").unwrap_err();
        assert!(e.contains("\"queue\""), "{e}");
    }

    fn registry(
        builtins: Vec<Builtin>,
        file: Option<PathBuf>,
    ) -> (Arc<Registry>, mpsc::UnboundedReceiver<Frame>) {
        let (tx, rx) = mpsc::unbounded_channel();
        let cluster = Arc::new(Cluster::new(
            "test".into(),
            KubeTarget::Kubeconfig {
                path: Some("/nonexistent/kubeconfig".into()),
                context: None,
            },
        ));
        let r = Registry::new(
            RegistryConfig {
                policy: policy(),
                builtins,
                file,
                discovery_interval: Duration::from_secs(30),
                instance_poll: Duration::from_secs(5),
            },
            cluster,
            super::super::external::http_client().unwrap(),
            tx,
        )
        .unwrap();
        (r, rx)
    }

    fn reg(name: &str, types: &[&str]) -> Registration {
        Registration {
            name: name.into(),
            service_types: types.iter().map(|t| t.to_string()).collect(),
            endpoint: "http://127.0.0.1:9".into(),
            health_url: "http://127.0.0.1:9/healthz".into(),
        }
    }

    fn set_health(r: &Registry, name: &str, last_ok: Option<Instant>, since: Instant) {
        let mut s = r.lock();
        let e = s.providers.get_mut(name).unwrap();
        e.last_ok = last_ok;
        e.since = since;
    }

    #[tokio::test]
    async fn one_provider_per_type_builtins_included() {
        let (r, _rx) = registry(vec![Builtin::Container], None);
        assert_eq!(
            r.register(reg("q1", &["queue"])).unwrap().0,
            Registered::Created
        );
        assert_eq!(
            r.register(reg("q1", &["queue"])).unwrap().0,
            Registered::Unchanged
        );
        match r.register(reg("q2", &["cache", "queue"])).unwrap_err() {
            RegistryError::Conflict {
                holder,
                service_type,
                message,
            } => {
                assert_eq!((holder.as_str(), service_type.as_str()), ("q1", "queue"));
                assert_eq!(
                    message,
                    "service type \"queue\" is already served by provider \"q1\"; deregister it first (DELETE /v1/providers/q1) or register another type"
                );
            }
            e => panic!("{e}"),
        }
        match r.register(reg("c1", &["container"])).unwrap_err() {
            RegistryError::Conflict {
                holder, message, ..
            } => {
                assert_eq!(holder, "kubernetes-workloads");
                assert!(
                    message.contains("built-in") && message.contains("--builtin-providers"),
                    "{message}"
                );
            }
            e => panic!("{e}"),
        }
        assert!(matches!(
            r.register(reg("kubernetes-workloads", &["x"])),
            Err(RegistryError::Builtin { .. })
        ));
        assert!(matches!(
            r.deregister("kubernetes-workloads"),
            Err(RegistryError::Builtin { .. })
        ));
        assert!(matches!(
            r.deregister("nope"),
            Err(RegistryError::NotFound { .. })
        ));
        // Replacing q1 with other types frees queue.
        assert_eq!(
            r.register(reg("q1", &["cache"])).unwrap().0,
            Registered::Replaced
        );
        assert_eq!(
            r.register(reg("q2", &["queue"])).unwrap().0,
            Registered::Created
        );
        r.deregister("q2").unwrap();
        assert!(r.view("q2").is_none());
        // With the built-in turned off, an external provider may take its type.
        let (r, _rx) = registry(vec![], None);
        assert_eq!(
            r.register(reg("c1", &["container"])).unwrap().0,
            Registered::Created
        );
    }

    #[tokio::test]
    async fn offers_leave_out_unavailable_providers_and_advertise_only_healthy() {
        let (r, mut rx) = registry(vec![Builtin::Container], None);
        let now = Instant::now();
        let long_ago = now - Duration::from_secs(10);
        r.register(reg("ok", &["a"])).unwrap();
        r.register(reg("late", &["b"])).unwrap();
        r.register(reg("gone", &["c"])).unwrap();
        r.register(reg("never", &["d"])).unwrap();
        set_health(&r, "ok", Some(now), long_ago);
        set_health(&r, "late", Some(now - Duration::from_millis(400)), long_ago);
        set_health(&r, "gone", Some(long_ago), long_ago);
        set_health(&r, "never", None, long_ago);
        let s = r.services();
        let types: Vec<(&str, ProviderHealth)> = s
            .offers
            .iter()
            .map(|o| (o.service_type.as_str(), o.health))
            .collect();
        // The built-in is not enabled before discovery finds its API: not held at all.
        assert_eq!(
            types,
            vec![
                ("a", ProviderHealth::Healthy),
                ("b", ProviderHealth::Unhealthy)
            ]
        );
        assert_eq!(s.advertised(), vec!["a"]);
        assert!(
            s.offers
                .iter()
                .all(|o| o.health != ProviderHealth::Unavailable)
        );
        // Enabling the built-in with a fresh check advertises container.
        {
            let mut st = r.lock();
            let e = st.providers.get_mut("kubernetes-workloads").unwrap();
            e.enabled = true;
            e.last_ok = Some(Instant::now());
        }
        assert_eq!(r.services().advertised(), vec!["a", "container"]);
        // Publishing pushes a services frame only when (type, provider, health) changed.
        while rx.try_recv().is_ok() {}
        r.publish();
        assert!(
            matches!(rx.try_recv(), Ok(Frame::Services(s)) if s.advertised() == vec!["a", "container"])
        );
        r.publish();
        assert!(rx.try_recv().is_err());
        let view = r.view("gone").unwrap();
        assert_eq!(view.health, ProviderHealth::Unavailable);
        assert!(view.last_healthy_at.is_none());
    }

    #[tokio::test]
    async fn create_refuses_unknown_and_unhealthy_types() {
        let (r, _rx) = registry(vec![], None);
        r.register(reg("q1", &["queue"])).unwrap();
        let e = r.create("i1", "db", &Value::Null).await.unwrap_err();
        assert_eq!(e.code(), "no_provider");
        assert_eq!(
            e.to_string(),
            "no provider of this agent serves service type \"db\"; it serves: queue"
        );
        let e = r.create("i1", "queue", &Value::Null).await.unwrap_err();
        assert_eq!(e.code(), "provider_unavailable");
        let e = r.create("I_1", "queue", &Value::Null).await.unwrap_err();
        assert_eq!(e.code(), "invalid_params");
        assert!(e.to_string().starts_with("instance_id: "), "{e}");
        let e = r.status("i1", "Queue").await.unwrap_err();
        assert!(e.to_string().starts_with("service_type: "), "{e}");
    }

    #[tokio::test]
    async fn registrations_and_instances_survive_a_restart() {
        let dir = tempfile::tempdir().unwrap();
        let file = dir.path().join("state/providers.json");
        {
            let (r, _rx) = registry(vec![], Some(file.clone()));
            r.register(reg("q1", &["queue", "cache"])).unwrap();
            r.register(reg("q2", &["blob"])).unwrap();
            r.deregister("q2").unwrap();
            let mut st = r.lock();
            st.instances.insert(
                "i1".into(),
                Remembered {
                    instance_id: "i1".into(),
                    service_type: "queue".into(),
                    provider: "q1".into(),
                    spec: serde_json::json!({"size": 3}),
                    last: None,
                },
            );
            r.persist(&st).unwrap();
        }
        #[cfg(unix)]
        {
            use std::os::unix::fs::PermissionsExt;
            let mode = std::fs::metadata(&file).unwrap().permissions().mode();
            assert_eq!(mode & 0o777, 0o600);
        }
        let (r, _rx) = registry(vec![], Some(file.clone()));
        let views = r.views();
        assert_eq!(views.len(), 1);
        assert_eq!(views[0].name, "q1");
        assert_eq!(views[0].service_types, vec!["queue", "cache"]);
        assert_eq!(views[0].endpoint.as_deref(), Some("http://127.0.0.1:9"));
        let st = r.lock();
        assert_eq!(st.instances["i1"].spec["size"], 3);
        assert_eq!(st.instances["i1"].provider, "q1");
        drop(st);
        std::fs::write(&file, "{not json").unwrap();
        let (tx, _rx2) = mpsc::unbounded_channel();
        let err = Registry::new(
            RegistryConfig {
                policy: policy(),
                builtins: vec![],
                file: Some(file.clone()),
                discovery_interval: Duration::from_secs(30),
                instance_poll: Duration::from_secs(5),
            },
            Arc::new(Cluster::new("t".into(), KubeTarget::InCluster)),
            super::super::external::http_client().unwrap(),
            tx,
        )
        .err()
        .unwrap();
        assert!(err.contains("not a providers file"), "{err}");
    }

    /// A provider speaking the external contract, healthy while `healthy` is set.
    async fn fake_provider(healthy: Arc<std::sync::atomic::AtomicBool>) -> std::net::SocketAddr {
        use http_body_util::Full;
        use hyper::body::Bytes;
        use std::sync::atomic::Ordering;
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = listener.local_addr().unwrap();
        let instances = Arc::new(Mutex::new(std::collections::BTreeSet::<String>::new()));
        tokio::spawn(async move {
            loop {
                let (tcp, _) = listener.accept().await.unwrap();
                let healthy = healthy.clone();
                let instances = instances.clone();
                tokio::spawn(async move {
                    let service = hyper::service::service_fn(
                        move |req: hyper::Request<hyper::body::Incoming>| {
                            let healthy = healthy.load(Ordering::SeqCst);
                            let instances = instances.clone();
                            async move {
                                let path = req.uri().path().to_string();
                                let id = path
                                    .strip_prefix("/v1/instances/")
                                    .unwrap_or_default()
                                    .to_string();
                                let mut set = instances.lock().unwrap();
                                let (status, body) = match (req.method().as_str(), path.as_str()) {
                                    ("GET", "/healthz") if healthy => (200, String::new()),
                                    ("GET", "/healthz") => (503, String::new()),
                                    ("PUT", _) if id == "bad" => {
                                        (500, r#"{"error": "boom"}"#.into())
                                    }
                                    ("PUT", _) => {
                                        set.insert(id);
                                        (201, r#"{"state": "provisioning", "outputs": {"url": "q://x"}}"#.into())
                                    }
                                    ("GET", _) if set.contains(&id) => (
                                        200,
                                        r#"{"state": "Ready", "outputs": {"url": "q://x"}}"#.into(),
                                    ),
                                    ("GET", _) => (404, String::new()),
                                    ("DELETE", _) => {
                                        set.remove(&id);
                                        (204, String::new())
                                    }
                                    _ => (405, String::new()),
                                };
                                let mut r = hyper::Response::new(Full::new(Bytes::from(body)));
                                *r.status_mut() = hyper::StatusCode::from_u16(status).unwrap();
                                Ok::<_, std::convert::Infallible>(r)
                            }
                        },
                    );
                    let _ = hyper::server::conn::http1::Builder::new()
                        .serve_connection(hyper_util::rt::TokioIo::new(tcp), service)
                        .await;
                });
            }
        });
        addr
    }

    #[tokio::test]
    async fn an_external_provider_serves_instances_through_its_contract() {
        use std::sync::atomic::{AtomicBool, Ordering};
        let healthy = Arc::new(AtomicBool::new(true));
        let addr = fake_provider(healthy.clone()).await;
        let (r, mut rx) = registry(vec![], None);
        r.register(Registration {
            name: "p1".into(),
            service_types: vec!["queue".into()],
            endpoint: format!("http://{addr}/"),
            health_url: format!("http://{addr}/healthz?probe=1"),
        })
        .unwrap();
        r.health_round().await;
        assert_eq!(r.services().advertised(), vec!["queue"]);
        let mut frames = Vec::new();
        while let Ok(f) = rx.try_recv() {
            frames.push(f);
        }
        assert!(
            frames
                .iter()
                .any(|f| matches!(f, Frame::Services(s) if s.advertised() == vec!["queue"]))
        );
        let s = r
            .create("i1", "queue", &serde_json::json!({"size": 1}))
            .await
            .unwrap();
        assert_eq!(
            (s.state, s.provider.as_str()),
            (InstanceState::Provisioning, "p1")
        );
        assert_eq!(s.outputs["url"], "q://x");
        r.poll_instances().await;
        assert!(matches!(rx.try_recv(), Ok(Frame::Instance(i)) if i.state == InstanceState::Ready));
        r.poll_instances().await;
        assert!(
            rx.try_recv().is_err(),
            "an unchanged status is not pushed again"
        );
        assert_eq!(r.instance_frames().len(), 1);
        let e = r.create("bad", "queue", &Value::Null).await.unwrap_err();
        assert_eq!(e.code(), "provider_error");
        let msg = e.to_string();
        assert!(
            msg.contains("\"p1\"")
                && msg.contains(&format!("http://{addr}/v1/instances/bad"))
                && msg.contains("500")
                && msg.contains("boom"),
            "{msg}"
        );
        let s = r.delete("i1", "queue").await.unwrap();
        assert_eq!(s.state, InstanceState::Deleted);
        assert!(r.instance_frames().is_empty());
        assert_eq!(
            r.status("i1", "queue").await.unwrap().state,
            InstanceState::Deleted
        );
        // Failing checks: unhealthy (still held, not advertised), then unavailable (withdrawn).
        healthy.store(false, Ordering::SeqCst);
        r.health_round().await;
        set_health(
            &r,
            "p1",
            Some(Instant::now() - Duration::from_millis(400)),
            Instant::now(),
        );
        r.health_round().await;
        let s = r.services();
        assert_eq!(s.offers.len(), 1);
        assert_eq!(s.offers[0].health, ProviderHealth::Unhealthy);
        assert!(s.offers[0].detail.contains("503"), "{}", s.offers[0].detail);
        assert_eq!(
            r.create("i2", "queue", &Value::Null)
                .await
                .unwrap_err()
                .code(),
            "provider_unavailable"
        );
        set_health(
            &r,
            "p1",
            Some(Instant::now() - Duration::from_secs(5)),
            Instant::now(),
        );
        r.health_round().await;
        assert!(r.services().offers.is_empty());
        let mut last = None;
        while let Ok(f) = rx.try_recv() {
            if let Frame::Services(s) = f {
                last = Some(s);
            }
        }
        assert_eq!(
            last.map(|s| s.offers.len()),
            Some(0),
            "the withdrawal is pushed"
        );
        let view = r.view("p1").unwrap();
        assert_eq!(view.health, ProviderHealth::Unavailable);
        assert!(view.last_healthy_at.is_some());
    }
}
