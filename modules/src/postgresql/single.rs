//! `PostgreSQLScore`: one PostgreSQL cluster on one site.

use async_trait::async_trait;
use kube::CustomResource;
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

use harmony::domain::capability::PostgreSQL;
use harmony::domain::interpret::{Interpret, InterpretName};
use harmony::domain::{
    ExecutionMode, InterpretError, Inventory, Outcome, Score, Topology, ValidationError,
    report_progress,
};
use harmony::types::Version;

use super::spec::ClusterSpec;
use super::status::ResourceStatus;

/// What a single-site PostgreSQL cluster should be: the spec of the `PostgreSQL` custom resource
/// and of [`PostgreSQLScore`], one definition for both.
#[derive(CustomResource, JsonSchema, Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[kube(
    group = "harmony.io",
    version = "v1alpha1",
    kind = "PostgreSQL",
    root = "PostgreSQLResource",
    namespaced,
    status = "ResourceStatus",
    shortname = "hpg",
    doc = "A PostgreSQL cluster on one site (CloudNativePG)",
    printcolumn = r#"{"name":"Version","type":"string","jsonPath":".spec.version"}"#,
    printcolumn = r#"{"name":"Site","type":"string","jsonPath":".spec.site"}"#,
    printcolumn = r#"{"name":"Ready","type":"string","jsonPath":".status.conditions[?(@.type==\"Ready\")].status"}"#
)]
#[serde(rename_all = "camelCase")]
pub struct PostgreSQLSpec {
    /// The site it runs on (the operator needs it; a program that hands the Score one
    /// topology leaves it empty).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub site: Option<String>,
    /// Version, size and resources.
    #[serde(flatten)]
    pub cluster: ClusterSpec,
}

/// A PostgreSQL cluster: name, namespace, version, instances, storage and resources.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct PostgreSQLScore {
    /// The cluster's name (a DNS-1035 label of at most 50 characters).
    pub name: String,
    /// Its namespace.
    pub namespace: String,
    /// Everything else.
    pub spec: PostgreSQLSpec,
}

impl PostgreSQLScore {
    /// A PostgreSQL 17 cluster of one instance with `storage` per instance.
    pub fn new(
        name: impl Into<String>,
        namespace: impl Into<String>,
        storage: impl Into<String>,
    ) -> Self {
        Self {
            name: name.into(),
            namespace: namespace.into(),
            spec: PostgreSQLSpec {
                site: None,
                cluster: ClusterSpec::new(storage),
            },
        }
    }

    /// The Score a `PostgreSQL` resource asks for (name and namespace from its metadata).
    pub fn from_resource(resource: &PostgreSQLResource) -> Self {
        Self {
            name: resource.metadata.name.clone().unwrap_or_default(),
            namespace: resource
                .metadata
                .namespace
                .clone()
                .unwrap_or_else(|| "default".into()),
            spec: resource.spec.clone(),
        }
    }

    /// The owner (ApplySet name) of what this Score applies; cleanup deletes it.
    pub fn owner(&self) -> String {
        format!("PostgreSQL {}/{}", self.namespace, self.name)
    }
}

impl<T: Topology + PostgreSQL + 'static> Score<T> for PostgreSQLScore {
    fn name(&self) -> String {
        format!("PostgreSQL {}/{}", self.namespace, self.name)
    }

    fn create_interpret(&self) -> Box<dyn Interpret<T>> {
        Box::new(self.clone())
    }

    fn parameters(&self) -> serde_json::Value {
        serde_json::to_value(self).unwrap_or_default()
    }

    fn validate(&self) -> Result<(), ValidationError> {
        self.spec
            .cluster
            .resolve(&self.name, &self.namespace)
            .map(|_| ())
    }
}

#[async_trait]
impl<T: Topology + PostgreSQL + 'static> Interpret<T> for PostgreSQLScore {
    fn name(&self) -> InterpretName {
        InterpretName("PostgreSQL")
    }

    fn version(&self) -> Version {
        crate::interpret_support::version()
    }

    async fn execute(&self, _: &Inventory, topology: &T) -> Result<Outcome, InterpretError> {
        let cluster = self.spec.cluster.resolve(&self.name, &self.namespace)?;
        let owner = self.owner();
        let verb = match topology.mode() {
            ExecutionMode::Apply => "applying",
            ExecutionMode::Plan => "comparing",
            ExecutionMode::Render => "rendering",
        };
        report_progress(format!("{verb} PostgreSQL cluster {}", cluster.name));
        let changes = topology
            .apply_cluster(&cluster, &owner)
            .await
            .map_err(|f| InterpretError::Capability {
                action: format!("{verb} PostgreSQL cluster {}", cluster.name),
                applied: f.applied,
                source: f.error,
            })?;
        Ok(Outcome::from_changes(changes))
    }
}
