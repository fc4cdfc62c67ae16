use async_trait::async_trait;
use k8s_openapi::{NamespaceResourceScope, Resource};
use serde::Serialize;
use std::any::TypeId;
use std::fmt::Debug;
use std::sync::Arc;

use harmony::domain::capability::{CapabilityError, K8sClient, K8sObject};
use harmony::domain::interpret::{Interpret, InterpretName};
use harmony::domain::{InterpretError, Inventory, Outcome, Score, Topology, ValidationError};
use harmony_types::{Dns1123Label, Dns1123Subdomain, Version};

use super::apply::apply_objects;

/// Namespace given to namespaced objects that name none, as `kubectl` does with no context.
const DEFAULT_NAMESPACE: &str = "default";

/// Any typed Kubernetes object (or a list of them), applied as declared.
///
/// Namespaced objects without `metadata.namespace` go to `default`, or to the namespace set with
/// [`K8sResourceScore::in_namespace`].
#[derive(Debug, Clone)]
pub struct K8sResourceScore<K> {
    name: String,
    namespace: Option<String>,
    /// Shared, so `create_interpret` (a clone) copies a pointer, not the objects.
    resources: Arc<[K]>,
}

impl<K> K8sResourceScore<K>
where
    K: Resource + Serialize + Clone + Debug + Send + Sync + 'static,
{
    /// One object; the Score is named after its kind and name.
    pub fn single(resource: K) -> Self {
        let name = format!(
            "{} {}",
            K::KIND,
            resource_name(&resource).unwrap_or_else(|| "<unnamed>".into())
        );
        Self {
            name,
            namespace: None,
            resources: Arc::new([resource]),
        }
    }

    /// Several objects of one kind under a Score name of your choice.
    pub fn list(name: impl Into<String>, resources: Vec<K>) -> Self {
        Self {
            name: name.into(),
            namespace: None,
            resources: resources.into(),
        }
    }

    /// Puts namespaced objects that name no namespace into `namespace`.
    pub fn in_namespace(mut self, namespace: impl Into<String>) -> Self {
        self.namespace = Some(namespace.into());
        self
    }

    fn is_namespaced() -> bool {
        TypeId::of::<K::Scope>() == TypeId::of::<NamespaceResourceScope>()
    }

    /// The objects as manifests, namespace defaulted for namespaced kinds.
    fn manifests(&self) -> Result<Vec<K8sObject>, CapabilityError> {
        self.resources
            .iter()
            .map(|r| {
                let value =
                    serde_json::to_value(r).map_err(|e| CapabilityError::InvalidObject {
                        object: format!("{} {}", K::KIND, resource_name(r).unwrap_or_default()),
                        problem: e.to_string(),
                    })?;
                let object = K8sObject::new(value)?;
                Ok(if Self::is_namespaced() {
                    object.with_default_namespace(
                        self.namespace.as_deref().unwrap_or(DEFAULT_NAMESPACE),
                    )
                } else {
                    object
                })
            })
            .collect()
    }
}

fn resource_name<K: Serialize>(r: &K) -> Option<String> {
    serde_json::to_value(r)
        .ok()?
        .pointer("/metadata/name")?
        .as_str()
        .map(str::to_string)
}

impl<T, K> Score<T> for K8sResourceScore<K>
where
    T: Topology + K8sClient + 'static,
    K: Resource + Serialize + Clone + Debug + Send + Sync + 'static,
{
    fn name(&self) -> String {
        self.name.clone()
    }

    fn create_interpret(&self) -> Box<dyn Interpret<T>> {
        Box::new(self.clone())
    }

    fn parameters(&self) -> serde_json::Value {
        let objects: Vec<serde_json::Value> = match self.manifests() {
            Ok(m) => m.iter().map(K8sObject::redacted).collect(),
            Err(e) => vec![serde_json::Value::String(e.to_string())],
        };
        serde_json::json!({ "kind": K::KIND, "apiVersion": K::API_VERSION, "objects": objects })
    }

    fn validate(&self) -> Result<(), ValidationError> {
        if let Some(ns) = &self.namespace {
            Dns1123Label::parse(ns).map_err(|e| {
                ValidationError::new(
                    "namespace",
                    e.to_string(),
                    "use a DNS-1123 label such as \"my-app\"",
                )
            })?;
        }
        for (i, r) in self.resources.iter().enumerate() {
            let field = |f: &str| format!("{}[{i}].{f}", K::KIND);
            let value = serde_json::to_value(r)
                .map_err(|e| ValidationError::new(field("*"), e.to_string(), "fix the object"))?;
            let name = value
                .pointer("/metadata/name")
                .and_then(|v| v.as_str())
                .ok_or_else(|| {
                    ValidationError::new(field("metadata.name"), "is missing", "set metadata.name")
                })?;
            Dns1123Subdomain::parse(name).map_err(|e| {
                ValidationError::new(
                    field("metadata.name"),
                    e.to_string(),
                    "use lower-case letters, digits, '-' and '.'",
                )
            })?;
            if let Some(ns) = value
                .pointer("/metadata/namespace")
                .and_then(|v| v.as_str())
            {
                Dns1123Label::parse(ns).map_err(|e| {
                    ValidationError::new(
                        field("metadata.namespace"),
                        e.to_string(),
                        "use a DNS-1123 label such as \"my-app\"",
                    )
                })?;
            }
        }
        if self.resources.is_empty() {
            return Err(ValidationError::new(
                "resources",
                "is empty",
                "give at least one object",
            ));
        }
        Ok(())
    }
}

#[async_trait]
impl<T, K> Interpret<T> for K8sResourceScore<K>
where
    T: Topology + K8sClient + 'static,
    K: Resource + Serialize + Clone + Debug + Send + Sync + 'static,
{
    fn name(&self) -> InterpretName {
        InterpretName("K8sResource")
    }

    fn version(&self) -> Version {
        crate::interpret_support::version()
    }

    async fn execute(
        &self,
        _inventory: &Inventory,
        topology: &T,
    ) -> Result<Outcome, InterpretError> {
        let objects = self
            .manifests()
            .map_err(crate::interpret_support::capability_error(
                format!("preparing {}", self.name),
                &[],
            ))?;
        apply_objects(topology, &self.name, &objects).await
    }
}
