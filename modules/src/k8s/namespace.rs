use async_trait::async_trait;
use k8s_openapi::api::core::v1::Namespace;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;
use std::collections::BTreeMap;

use harmony::domain::capability::{CapabilityError, K8sClient, K8sObject};
use harmony::domain::interpret::{Interpret, InterpretName};
use harmony::domain::{InterpretError, Inventory, Outcome, Score, Topology};
use harmony_types::{Dns1123Label, Version};

use super::apply::apply_objects;

/// A namespace, with optional labels (e.g. Pod Security admission levels).
#[derive(Debug, Clone, derive_new::new)]
pub struct NamespaceScore {
    /// The namespace's name, already validated by its type.
    name: Dns1123Label,
    /// Labels, none until [`NamespaceScore::with_label`] adds them.
    #[new(default)]
    labels: BTreeMap<String, String>,
}

impl NamespaceScore {
    /// Adds a label.
    pub fn with_label(mut self, key: impl Into<String>, value: impl Into<String>) -> Self {
        self.labels.insert(key.into(), value.into());
        self
    }

    fn manifest(&self) -> Result<K8sObject, CapabilityError> {
        let ns = Namespace {
            metadata: ObjectMeta {
                name: Some(self.name.to_string()),
                labels: (!self.labels.is_empty()).then(|| self.labels.clone()),
                ..Default::default()
            },
            ..Default::default()
        };
        let value = serde_json::to_value(&ns).map_err(|e| CapabilityError::InvalidObject {
            object: format!("Namespace {}", self.name),
            problem: e.to_string(),
        })?;
        K8sObject::new(value)
    }
}

impl<T: Topology + K8sClient + 'static> Score<T> for NamespaceScore {
    fn name(&self) -> String {
        format!("Namespace {}", self.name)
    }

    fn create_interpret(&self) -> Box<dyn Interpret<T>> {
        Box::new(self.clone())
    }

    fn parameters(&self) -> serde_json::Value {
        serde_json::json!({ "name": self.name, "labels": self.labels })
    }
}

#[async_trait]
impl<T: Topology + K8sClient + 'static> Interpret<T> for NamespaceScore {
    fn name(&self) -> InterpretName {
        InterpretName("Namespace")
    }

    fn version(&self) -> Version {
        crate::interpret_support::version()
    }

    async fn execute(
        &self,
        _inventory: &Inventory,
        topology: &T,
    ) -> Result<Outcome, InterpretError> {
        let object = self
            .manifest()
            .map_err(crate::interpret_support::capability_error(
                format!("preparing namespace {}", self.name),
                &[],
            ))?;
        let subject = <Self as Score<T>>::name(self);
        apply_objects(topology, &subject, &[object]).await
    }
}
