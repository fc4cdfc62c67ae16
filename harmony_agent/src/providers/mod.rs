//! Service providers behind the agent: the [`Provider`] model, the built-ins that run on the
//! agent's own cluster (`container`, `postgresql`, `vm`), external providers registered through
//! the local REST API, and the [`registry::Registry`] that holds at most one provider per type,
//! measures their health and tells the control plane what the agent offers.

pub mod api;
pub mod cluster_access;
pub mod container;
pub mod discovery;
pub mod external;
pub mod kube_backed;
pub mod kubevirt;
pub mod postgresql;
pub mod registry;

use async_trait::async_trait;
use harmony::domain::capability::CapabilityError;
use harmony_agent_protocol::{InstanceState, InstanceStatus, code};
use serde_json::{Map, Value};

/// Namespace built-in instances go to when their spec names none.
pub const DEFAULT_NAMESPACE: &str = "harmony-services";
/// Label on every object a built-in provider creates.
pub const MANAGED_BY_LABEL: &str = "app.kubernetes.io/managed-by";
/// Value of [`MANAGED_BY_LABEL`].
pub const MANAGED_BY: &str = "harmony-agent";
/// Label naming the service instance an object belongs to.
pub const INSTANCE_LABEL: &str = "harmony.io/service-instance";

/// Something that creates, deletes and reports service instances of the types it serves.
#[async_trait]
pub trait Provider: Send + Sync {
    /// The provider's name (a DNS-1123 label).
    fn name(&self) -> &str;
    /// The service types it serves.
    fn service_types(&self) -> Vec<String>;
    /// Creates (or converges) instance `id` from `spec`; idempotent.
    async fn create(
        &self,
        id: &str,
        service_type: &str,
        spec: &Value,
    ) -> Result<InstanceStatus, ProviderError>;
    /// Deletes instance `id`; idempotent. `spec` is the one it was created from (`{}` if unknown).
    async fn delete(
        &self,
        id: &str,
        service_type: &str,
        spec: &Value,
    ) -> Result<InstanceStatus, ProviderError>;
    /// Reads the status of instance `id`. `spec` as for [`Provider::delete`].
    async fn status(
        &self,
        id: &str,
        service_type: &str,
        spec: &Value,
    ) -> Result<InstanceStatus, ProviderError>;
}

/// Why a provider operation failed. Messages never carry tokens or secret values.
#[derive(Debug, thiserror::Error)]
pub enum ProviderError {
    /// A field of the op params or of the spec is wrong.
    #[error("{field}: {problem}")]
    InvalidParams {
        /// The field, e.g. `spec.image`.
        field: String,
        /// What is wrong and the fix.
        problem: String,
    },
    /// No provider of this agent serves the type.
    #[error("no provider of this agent serves service type {service_type:?}; it serves: {served}")]
    NoProvider {
        /// The requested type.
        service_type: String,
        /// The types held now, comma-separated (`none` when empty).
        served: String,
    },
    /// The type's provider is not healthy now.
    #[error(
        "provider {provider:?} of service type {service_type:?} is {health} ({reason}); retry when it is healthy"
    )]
    Unavailable {
        /// The provider.
        provider: String,
        /// The type.
        service_type: String,
        /// Its health word.
        health: String,
        /// Why.
        reason: String,
    },
    /// An external provider refused the call or answered something unreadable.
    #[error("provider {provider:?} at {url}: {problem}")]
    External {
        /// The provider.
        provider: String,
        /// The URL called, without its query string.
        url: String,
        /// The status or transport problem.
        problem: String,
    },
    /// The agent's cluster refused or failed a built-in provider's call.
    #[error("provider {provider:?}: {error}")]
    Cluster {
        /// The built-in provider.
        provider: String,
        /// The cluster's error.
        #[source]
        error: CapabilityError,
    },
}

impl ProviderError {
    /// The protocol error code for this error.
    pub fn code(&self) -> &'static str {
        match self {
            ProviderError::InvalidParams { .. } => code::INVALID_PARAMS,
            ProviderError::NoProvider { .. } => code::NO_PROVIDER,
            ProviderError::Unavailable { .. } => code::PROVIDER_UNAVAILABLE,
            ProviderError::External { .. } | ProviderError::Cluster { .. } => code::PROVIDER_ERROR,
        }
    }

    fn invalid(field: impl Into<String>, problem: impl Into<String>) -> Self {
        ProviderError::InvalidParams {
            field: field.into(),
            problem: problem.into(),
        }
    }
}

/// Checks `value` as a DNS-1123 label; the error names `field`.
pub fn check_label(field: &str, value: &str) -> Result<(), ProviderError> {
    harmony::types::Dns1123Label::parse(value)
        .map(|_| ())
        .map_err(|e| {
            ProviderError::invalid(
                field,
                format!("{e}; use lower-case letters, digits and '-', at most 63 characters"),
            )
        })
}

/// An instance status from its parts.
pub fn status(
    id: &str,
    service_type: &str,
    provider: &str,
    state: InstanceState,
    detail: impl Into<String>,
    outputs: Map<String, Value>,
) -> InstanceStatus {
    InstanceStatus {
        instance_id: id.to_string(),
        service_type: service_type.to_string(),
        provider: provider.to_string(),
        state,
        detail: detail.into(),
        outputs,
    }
}

/// Reads a spec object field by field, rejecting fields it does not know.
pub(crate) struct SpecReader<'a> {
    fields: &'a Map<String, Value>,
}

static EMPTY: std::sync::LazyLock<Map<String, Value>> = std::sync::LazyLock::new(Map::new);

impl<'a> SpecReader<'a> {
    /// A reader over `spec` (null is `{}`); fails when it is not an object or has unknown fields.
    pub(crate) fn new(spec: &'a Value, known: &[&str]) -> Result<Self, ProviderError> {
        let fields = match spec {
            Value::Null => &*EMPTY,
            Value::Object(m) => m,
            _ => {
                return Err(ProviderError::invalid(
                    "spec",
                    "must be a JSON object, e.g. {\"image\": \"nginx:1.27\"}",
                ));
            }
        };
        if let Some(unknown) = fields.keys().find(|k| !known.contains(&k.as_str())) {
            return Err(ProviderError::invalid(
                format!("spec.{unknown}"),
                format!(
                    "unknown field; this service type accepts: {}",
                    known.join(", ")
                ),
            ));
        }
        Ok(Self { fields })
    }

    fn get(&self, key: &str) -> Option<&'a Value> {
        self.fields.get(key).filter(|v| !v.is_null())
    }

    /// A required non-empty string.
    pub(crate) fn required_string(
        &self,
        key: &str,
        example: &str,
    ) -> Result<String, ProviderError> {
        match self.optional_string(key)? {
            Some(s) if !s.trim().is_empty() => Ok(s),
            _ => Err(ProviderError::invalid(
                format!("spec.{key}"),
                format!("is required: give a non-empty string such as {example:?}"),
            )),
        }
    }

    /// An optional string.
    pub(crate) fn optional_string(&self, key: &str) -> Result<Option<String>, ProviderError> {
        match self.get(key) {
            None => Ok(None),
            Some(Value::String(s)) => Ok(Some(s.clone())),
            Some(_) => Err(ProviderError::invalid(
                format!("spec.{key}"),
                "must be a string",
            )),
        }
    }

    /// An optional integer within `min..=max`.
    pub(crate) fn int(
        &self,
        key: &str,
        default: i64,
        min: i64,
        max: i64,
    ) -> Result<i64, ProviderError> {
        let Some(v) = self.get(key) else {
            return Ok(default);
        };
        match v.as_i64() {
            Some(n) if (min..=max).contains(&n) => Ok(n),
            _ => Err(ProviderError::invalid(
                format!("spec.{key}"),
                format!("must be an integer from {min} to {max} (default {default})"),
            )),
        }
    }

    /// An optional Kubernetes quantity.
    pub(crate) fn quantity(
        &self,
        key: &str,
        default: &str,
    ) -> Result<harmony::types::Quantity, ProviderError> {
        let text = self.optional_string(key)?.unwrap_or_else(|| default.into());
        harmony::types::Quantity::parse(&text).map_err(|e| {
            ProviderError::invalid(format!("spec.{key}"), format!("{e}; e.g. {default:?}"))
        })
    }

    /// The optional namespace, [`DEFAULT_NAMESPACE`] when absent.
    pub(crate) fn namespace(&self) -> Result<String, ProviderError> {
        let ns = self
            .optional_string("namespace")?
            .unwrap_or_else(|| DEFAULT_NAMESPACE.into());
        check_label("spec.namespace", &ns)?;
        Ok(ns)
    }

    /// The raw value of an optional field.
    pub(crate) fn raw(&self, key: &str) -> Option<&'a Value> {
        self.get(key)
    }
}

/// The namespace a spec names, for delete and status (where a bad spec must not block cleanup).
pub(crate) fn namespace_of(spec: &Value) -> String {
    spec.get("namespace")
        .and_then(Value::as_str)
        .filter(|ns| harmony::types::Dns1123Label::parse(ns).is_ok())
        .unwrap_or(DEFAULT_NAMESPACE)
        .to_string()
}

/// The shared labels of every object a built-in creates for instance `id`.
pub(crate) fn labels(id: &str) -> Value {
    serde_json::json!({MANAGED_BY_LABEL: MANAGED_BY, INSTANCE_LABEL: id})
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn spec_errors_name_the_field() {
        let e = SpecReader::new(&json!([1]), &["image"])
            .err()
            .unwrap()
            .to_string();
        assert!(e.starts_with("spec: must be a JSON object"), "{e}");
        let e = SpecReader::new(&json!({"imgae": "x"}), &["image", "replicas"])
            .err()
            .unwrap()
            .to_string();
        assert!(
            e.starts_with("spec.imgae: unknown field") && e.contains("image, replicas"),
            "{e}"
        );
        let spec = json!({"replicas": -1, "namespace": "Bad_NS"});
        let r = SpecReader::new(&spec, &["replicas", "namespace", "image"]).unwrap();
        let e = r.int("replicas", 1, 0, 1000).unwrap_err();
        assert_eq!(e.code(), code::INVALID_PARAMS);
        assert!(
            e.to_string()
                .starts_with("spec.replicas: must be an integer from 0"),
            "{e}"
        );
        let e = r.namespace().unwrap_err().to_string();
        assert!(e.starts_with("spec.namespace:"), "{e}");
        let e = r
            .required_string("image", "nginx:1.27")
            .unwrap_err()
            .to_string();
        assert!(e.starts_with("spec.image: is required"), "{e}");
        assert_eq!(
            namespace_of(&json!({"namespace": "Bad_NS"})),
            DEFAULT_NAMESPACE
        );
        assert_eq!(namespace_of(&json!({"namespace": "apps"})), "apps");
    }
}
