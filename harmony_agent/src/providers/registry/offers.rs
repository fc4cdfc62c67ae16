//! Registration of external providers and the offers the control plane is told about.

use harmony_agent_protocol::{Frame, ProviderHealth, ServiceOffer, Services};
use std::sync::Arc;
use std::time::Instant;

use super::{ProviderView, Registered, Registry, RegistryError, State};
use crate::providers::external::Registration;

impl Registry {
    /// Validates `reg` and checks it against the other providers (not one of the same name).
    pub(super) fn admit(&self, state: &State, reg: &Registration) -> Result<(), RegistryError> {
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
            crate::providers::external::display_url(&reg.endpoint)
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

    pub(super) fn offers_of(&self, state: &State, now: Instant) -> Vec<ServiceOffer> {
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
}
