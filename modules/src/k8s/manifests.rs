//! `K8sManifestsScore`: JSON manifests of mixed kinds, applied together.

use async_trait::async_trait;
use serde_json::{Value, json};
use std::sync::Arc;

use harmony::domain::capability::{CapabilityError, K8sClient, K8sObject};
use harmony::domain::interpret::{Interpret, InterpretName};
use harmony::domain::{InterpretError, Inventory, Outcome, Score, Topology, ValidationError};
use harmony_types::Version;

use super::apply::apply_objects;

/// Untyped manifests of any kinds (CRDs and custom resources included) applied together in one
/// apply, so a topology sees them as a whole (a split plane places a pod template with what it uses).
#[derive(Debug, Clone)]
pub struct K8sManifestsScore {
    name: String,
    /// Shared, so `create_interpret` (a clone) copies a pointer, not the manifests.
    manifests: Arc<[Value]>,
}

impl K8sManifestsScore {
    /// A Score named `name` applying `manifests` in one apply.
    pub fn new(name: impl Into<String>, manifests: Vec<Value>) -> Self {
        Self {
            name: name.into(),
            manifests: manifests.into(),
        }
    }

    fn objects(&self) -> Result<Vec<K8sObject>, CapabilityError> {
        self.manifests.iter().cloned().map(K8sObject::new).collect()
    }
}

impl<T: Topology + K8sClient + 'static> Score<T> for K8sManifestsScore {
    fn name(&self) -> String {
        self.name.clone()
    }

    fn create_interpret(&self) -> Box<dyn Interpret<T>> {
        Box::new(self.clone())
    }

    fn parameters(&self) -> Value {
        let objects: Vec<Value> = match self.objects() {
            Ok(o) => o.iter().map(K8sObject::redacted).collect(),
            Err(e) => vec![Value::String(e.to_string())],
        };
        json!({ "objects": objects })
    }

    fn validate(&self) -> Result<(), ValidationError> {
        if self.manifests.is_empty() {
            return Err(ValidationError::new(
                "manifests",
                "is empty",
                "give at least one manifest",
            ));
        }
        for (i, m) in self.manifests.iter().enumerate() {
            K8sObject::new(m.clone()).map_err(|e| {
                ValidationError::new(
                    format!("manifests[{i}]"),
                    e.to_string(),
                    "set apiVersion, kind and metadata.name",
                )
            })?;
        }
        Ok(())
    }
}

#[async_trait]
impl<T: Topology + K8sClient + 'static> Interpret<T> for K8sManifestsScore {
    fn name(&self) -> InterpretName {
        InterpretName("Manifests")
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
            .objects()
            .map_err(crate::interpret_support::capability_error(
                format!("preparing {}", self.name),
                &[],
            ))?;
        apply_objects(topology, &self.name, &objects).await
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use harmony::infra::render::RenderTopology;

    type R = RenderTopology;

    #[test]
    fn validation_names_the_bad_manifest_and_parameters_hide_secrets() {
        let empty = K8sManifestsScore::new("x", vec![]);
        assert_eq!(Score::<R>::validate(&empty).unwrap_err().field, "manifests");
        let bad = K8sManifestsScore::new(
            "x",
            vec![
                json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "ok"}}),
                json!({"kind": "Secret"}),
            ],
        );
        assert_eq!(
            Score::<R>::validate(&bad).unwrap_err().field,
            "manifests[1]"
        );
        let secret = K8sManifestsScore::new(
            "x",
            vec![
                json!({"apiVersion": "v1", "kind": "Secret", "metadata": {"name": "s"}, "stringData": {"password": "hunter2"}}),
            ],
        );
        Score::<R>::validate(&secret).unwrap();
        assert!(
            !Score::<R>::parameters(&secret)
                .to_string()
                .contains("hunter2")
        );
    }

    #[test]
    fn a_clone_for_the_interpret_shares_the_manifests() {
        let score = K8sManifestsScore::new(
            "x",
            vec![json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "ok"}})],
        );
        let interpret_copy = score.clone();
        assert!(Arc::ptr_eq(&score.manifests, &interpret_copy.manifests));
    }
}
