//! `PostgreSQLScore`: one PostgreSQL cluster on one site.

use async_trait::async_trait;
use serde::{Deserialize, Serialize};

use harmony::domain::capability::PostgreSQL;
use harmony::domain::interpret::{Interpret, InterpretName};
use harmony::domain::{
    InterpretError, Inventory, Outcome, Score, Topology, ValidationError, report_progress,
};
use harmony::types::Version;

use super::spec::ClusterSpec;

/// A PostgreSQL cluster: name, namespace, version, instances, storage and resources.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct PostgreSQLScore {
    /// The cluster's name (a DNS-1035 label of at most 50 characters).
    pub name: String,
    /// Its namespace.
    pub namespace: String,
    /// Version, size and resources.
    #[serde(flatten)]
    pub cluster: ClusterSpec,
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
            cluster: ClusterSpec::new(storage),
        }
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
        self.cluster
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
        Version::new(0, 1, 0)
    }

    async fn execute(&self, _: &Inventory, topology: &T) -> Result<Outcome, InterpretError> {
        let cluster = self.cluster.resolve(&self.name, &self.namespace)?;
        let owner = Score::<T>::name(self);
        report_progress(format!("applying PostgreSQL cluster {}", cluster.name));
        let changes = topology
            .apply_cluster(&cluster, &owner)
            .await
            .map_err(|f| InterpretError::Capability {
                action: format!("applying PostgreSQL cluster {}", cluster.name),
                applied: f.applied,
                source: f.error,
            })?;
        Ok(Outcome::from_changes(changes))
    }
}
