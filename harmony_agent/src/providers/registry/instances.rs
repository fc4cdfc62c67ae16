//! The `service_*` ops: which provider serves an instance, and the instances remembered.

use harmony_agent_protocol::{InstanceState, InstanceStatus, ProviderHealth};
use serde_json::Value;
use std::sync::Arc;
use std::time::Instant;

use super::{Registry, Remembered};
use crate::providers::{Provider, ProviderError, check_label};

impl Registry {
    /// The provider holding `service_type` with its health, or `no_provider`.
    pub(super) fn holder(
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
    pub(super) fn named(&self, name: &str) -> Option<(Arc<dyn Provider>, ProviderHealth, String)> {
        let state = self.lock();
        state.providers.get(name).filter(|e| e.enabled).map(|e| {
            let (h, why) = e.health(Instant::now(), &self.config.policy);
            (e.provider.clone(), h, why)
        })
    }

    /// The remembered instance `id`, checked against the requested type.
    pub(super) fn remembered(
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
    pub(super) fn provider_for(
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

    /// `service_create` resumed after the agent died during it: the instance's status from
    /// the provider that holds it, never a second create (a provider's create need not be
    /// idempotent). An instance the provider knows is remembered, as after a create.
    pub async fn recover_created(
        &self,
        id: &str,
        service_type: &str,
        spec: &Value,
    ) -> Result<InstanceStatus, ProviderError> {
        check_label("instance_id", id)?;
        check_label("service_type", service_type)?;
        if self.remembered(id, service_type)?.is_some() {
            return self.status(id, service_type).await;
        }
        let spec = if spec.is_object() {
            spec.clone()
        } else {
            Value::Object(Default::default())
        };
        let (provider, _, _) = self.holder(service_type)?;
        let status = provider.status(id, service_type, &spec).await?;
        if status.state != InstanceState::Deleted {
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
        }
        Ok(status)
    }
}
