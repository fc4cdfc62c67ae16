//! The built-in `cloudnativepg` provider: service type `postgresql` through Harmony's
//! `PostgreSQL` capability (the CloudNativePG operator) on the agent's cluster.

use async_trait::async_trait;
use harmony::domain::capability::{ComputeResources, ObjectRef, PostgreSQL, PostgresCluster};
use harmony::types::Dns1123Label;
use harmony_agent_protocol::{InstanceState, InstanceStatus};
use serde_json::{Map, Value, json};
use std::sync::Arc;

use super::cluster_access::{ClusterAccess, object_ref};
use super::kube_backed::KubeBacked;
use super::{ProviderError, SpecReader, status};
use crate::cluster::Cluster;

/// The provider's name.
pub const NAME: &str = "cloudnativepg";
/// The service type it serves.
pub const SERVICE_TYPE: &str = "postgresql";

/// The ownership name of an instance's objects (the capability labels what it applies).
fn owner(id: &str) -> String {
    format!("service-instance {id}")
}

/// The cluster a `postgresql` spec asks for, validated; errors name the field.
pub fn cluster_from_spec(id: &str, spec: &Value) -> Result<PostgresCluster, ProviderError> {
    let r = SpecReader::new(spec, &["version", "instances", "storage", "namespace"])?;
    let major_version = r.int("version", 17, 13, 18)? as u32;
    let instances = r.int("instances", 1, 1, 100)? as u32;
    let storage = r.quantity("storage", "1Gi")?;
    let namespace = r.namespace()?;
    let label = |field: &str, v: &str| {
        Dns1123Label::parse(v).map_err(|e| ProviderError::InvalidParams {
            field: field.into(),
            problem: e.to_string(),
        })
    };
    Ok(PostgresCluster {
        name: label("instance_id", id)?,
        namespace: label("spec.namespace", &namespace)?,
        major_version,
        image: None,
        instances,
        storage,
        resources: ComputeResources::default(),
        server_alt_dns_names: Vec::new(),
        wal_keep_size: None,
    })
}

fn cluster_ref(namespace: &str, id: &str) -> ObjectRef {
    object_ref("postgresql.cnpg.io/v1", "Cluster", namespace, id)
}

/// The instance status a CNPG `Cluster` (or its absence) says. Outputs name the credentials
/// Secret, never its content.
pub fn status_of(id: &str, namespace: &str, cluster: Option<&Value>) -> InstanceStatus {
    let Some(c) = cluster else {
        return status(
            id,
            SERVICE_TYPE,
            NAME,
            InstanceState::Deleted,
            format!("no Cluster {namespace}/{id}"),
            Map::new(),
        );
    };
    let want = c
        .pointer("/spec/instances")
        .and_then(Value::as_i64)
        .unwrap_or(1);
    let ready = c
        .pointer("/status/readyInstances")
        .and_then(Value::as_i64)
        .unwrap_or(0);
    let phase = c
        .pointer("/status/phase")
        .and_then(Value::as_str)
        .unwrap_or("no phase yet");
    let mut outputs = Map::new();
    outputs.insert("host".into(), json!(format!("{id}-rw.{namespace}.svc")));
    outputs.insert("port".into(), json!(5432));
    outputs.insert("credentials_secret".into(), json!(format!("{id}-app")));
    outputs.insert("namespace".into(), json!(namespace));
    let state = if c.pointer("/metadata/deletionTimestamp").is_some() {
        InstanceState::Deleting
    } else if ready >= want {
        InstanceState::Ready
    } else {
        InstanceState::Provisioning
    };
    status(
        id,
        SERVICE_TYPE,
        NAME,
        state,
        format!("{ready}/{want} instances ready ({phase})"),
        outputs,
    )
}

/// Serves `postgresql` on the agent's cluster.
pub struct PostgresProvider {
    cluster: ClusterAccess,
}

impl PostgresProvider {
    /// The provider on `cluster`.
    pub fn new(cluster: Arc<Cluster>) -> Self {
        Self {
            cluster: ClusterAccess::new(cluster, NAME),
        }
    }
}

#[async_trait]
impl KubeBacked for PostgresProvider {
    const NAME: &'static str = NAME;
    const SERVICE_TYPE: &'static str = SERVICE_TYPE;

    fn cluster(&self) -> &ClusterAccess {
        &self.cluster
    }

    fn primary(namespace: &str, id: &str) -> ObjectRef {
        cluster_ref(namespace, id)
    }

    /// The ownership record only lists members; without it the owner is forgotten.
    fn owned(namespace: &str, id: &str) -> Vec<ObjectRef> {
        vec![
            cluster_ref(namespace, id),
            harmony::infra::kube::ownership_record(&owner(id)),
        ]
    }

    fn status_of(id: &str, namespace: &str, primary: Option<&Value>) -> InstanceStatus {
        status_of(id, namespace, primary)
    }

    async fn converge(&self, id: &str, spec: &Value) -> Result<String, ProviderError> {
        let cluster = cluster_from_spec(id, spec)?;
        self.cluster
            .topology()
            .await?
            .apply_cluster(&cluster, &owner(id))
            .await
            .map_err(|f| self.cluster.err(f.error))?;
        Ok(cluster.namespace.as_str().to_string())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn specs_default_and_name_bad_fields() {
        let c = cluster_from_spec("db1", &json!({})).unwrap();
        assert_eq!(
            (
                c.major_version,
                c.instances,
                c.storage.as_str(),
                c.namespace.as_str()
            ),
            (17, 1, "1Gi", "harmony-services")
        );
        let e = |v: Value| cluster_from_spec("db1", &v).unwrap_err().to_string();
        assert!(
            e(json!({"version": 12})).starts_with("spec.version: must be an integer from 13 to 18")
        );
        assert!(e(json!({"instances": 0})).starts_with("spec.instances:"));
        assert!(e(json!({"storage": "lots"})).starts_with("spec.storage:"));
    }

    #[test]
    fn status_names_the_secret_not_its_value() {
        let c = json!({"spec": {"instances": 2}, "status": {"readyInstances": 1, "phase": "Setting up primary"}});
        let s = status_of("db1", "data", Some(&c));
        assert_eq!(s.state, InstanceState::Provisioning);
        assert_eq!(s.outputs["host"], "db1-rw.data.svc");
        assert_eq!(s.outputs["port"], 5432);
        assert_eq!(s.outputs["credentials_secret"], "db1-app");
        let c = json!({"spec": {"instances": 1}, "status": {"readyInstances": 1}});
        assert_eq!(
            status_of("db1", "data", Some(&c)).state,
            InstanceState::Ready
        );
        assert_eq!(status_of("db1", "data", None).state, InstanceState::Deleted);
    }
}
