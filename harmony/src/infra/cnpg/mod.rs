//! The `PostgreSQL` capability on Kubernetes through the CloudNativePG operator.
//!
//! Every topology with `K8sClient` gets it: live clusters, render mode, split planes. The
//! manifests are in [`manifests`], the operand image of each version in [`versions`]; the facts
//! they respect (SNI, certificates, WAL) are in `docs/modules/multisite_postgresql.md`.

pub mod distributed;
pub mod manifests;
pub mod replication;
pub mod versions;

use async_trait::async_trait;
use base64::Engine;
use base64::engine::general_purpose::STANDARD;
use serde_json::Value;
use std::time::Duration;

use crate::domain::capability::postgresql::{SiteObservation, StatusProbe};
use crate::domain::capability::{
    ApplyFailure, ApplyOptions, CapabilityError, CredentialsLookup, K8sClient, K8sObject,
    ObjectRef, PostgreSQL, PostgresCluster, PrimaryExposure, ReplicationCredentials,
    ReplicationSource, SecretBytes, WaitCondition,
};
use crate::domain::{ExecutionMode, ObjectChange, Topology, report_progress};

fn objects(values: Vec<Value>) -> Result<Vec<K8sObject>, ApplyFailure> {
    values
        .into_iter()
        .map(K8sObject::new)
        .collect::<Result<_, _>>()
        .map_err(|error| ApplyFailure {
            applied: Vec::new(),
            error,
        })
}

fn owned(owner: &str) -> ApplyOptions {
    ApplyOptions {
        owner: Some(owner.to_string()),
        ..ApplyOptions::default()
    }
}

fn secret_ref(namespace: &str, name: String) -> ObjectRef {
    ObjectRef {
        api_version: "v1".into(),
        kind: "Secret".into(),
        namespace: Some(namespace.to_string()),
        name,
    }
}

/// One key of a Secret's `data`, decoded; the error names the Secret and the key.
fn secret_key(secret: &K8sObject, key: &str) -> Result<Vec<u8>, CapabilityError> {
    let invalid = |problem: String| CapabilityError::InvalidObject {
        object: secret.reference().to_string(),
        problem,
    };
    let encoded = secret
        .value()
        .pointer("/data")
        .and_then(|d| d.get(key))
        .and_then(Value::as_str)
        .ok_or_else(|| {
            invalid(format!(
                "has no data key {key:?}; is it the operator's secret?"
            ))
        })?;
    STANDARD
        .decode(encoded)
        .map_err(|e| invalid(format!("data key {key:?} is not base64: {e}")))
}

#[async_trait]
impl<T: K8sClient + Topology + ?Sized> PostgreSQL for T {
    async fn apply_cluster(
        &self,
        cluster: &PostgresCluster,
        owner: &str,
    ) -> Result<Vec<ObjectChange>, ApplyFailure> {
        let objects = objects(vec![manifests::cluster(cluster)])?;
        self.apply(&objects, &owned(owner)).await
    }

    async fn check_exposure(
        &self,
        cluster: &PostgresCluster,
        exposure: &PrimaryExposure,
    ) -> Result<(), CapabilityError> {
        let PrimaryExposure::PassthroughRoute { .. } = exposure else {
            return Ok(());
        };
        // Reading the Route itself (present or not) needs no rights beyond what applying it needs.
        let probe = ObjectRef {
            api_version: "route.openshift.io/v1".into(),
            kind: "Route".into(),
            namespace: Some(cluster.namespace.to_string()),
            name: cluster.name.to_string(),
        };
        match self.get(&probe).await {
            Ok(_) => Ok(()),
            Err(CapabilityError::UnknownKind { server, .. }) => Err(CapabilityError::Unsupported {
                what: "a passthrough Route for the primary".into(),
                backend: format!("site {} ({server})", self.name()),
                reason: "it serves no OpenShift Route API (route.openshift.io/v1); use exposure \"loadBalancer\" with the primary's load balancer host, or run the primary on an OpenShift site".into(),
            }),
            Err(e) => Err(e),
        }
    }

    async fn ingress_domain(&self) -> Result<Option<String>, CapabilityError> {
        // OpenShift's cluster-wide ingress configuration; its domain is where the router serves
        // Route hosts by default. A cluster without the config API is simply not OpenShift.
        let config = ObjectRef {
            api_version: "config.openshift.io/v1".into(),
            kind: "Ingress".into(),
            namespace: None,
            name: "cluster".into(),
        };
        match self.get(&config).await {
            Ok(found) => Ok(found.and_then(|o| {
                o.value()
                    .pointer("/spec/domain")
                    .and_then(Value::as_str)
                    .filter(|d| !d.is_empty())
                    .map(str::to_string)
            })),
            Err(CapabilityError::UnknownKind { .. }) => Ok(None),
            Err(e) => Err(e),
        }
    }

    async fn expose_primary(
        &self,
        cluster: &PostgresCluster,
        exposure: &PrimaryExposure,
        owner: &str,
    ) -> Result<Vec<ObjectChange>, ApplyFailure> {
        let objects = objects(vec![manifests::exposure(cluster, exposure)])?;
        self.apply(&objects, &owned(owner)).await
    }

    async fn replication_credentials(
        &self,
        cluster: &PostgresCluster,
        timeout: Duration,
    ) -> Result<CredentialsLookup, CapabilityError> {
        let ns = cluster.namespace.as_str();
        let name = cluster.name.as_str();
        let refs = [
            secret_ref(ns, manifests::replication_secret_name(name)),
            secret_ref(ns, manifests::ca_secret_name(name)),
        ];
        match self.mode() {
            ExecutionMode::Render => {
                return Ok(CredentialsLookup::NotObservable(format!(
                    "render mode: the operator creates {} and {} on a live cluster; an apply copies them to the replica sites",
                    refs[0], refs[1]
                )));
            }
            ExecutionMode::Plan => {}
            ExecutionMode::Apply => {
                for r in &refs {
                    report_progress(format!("waiting for the operator to create {r}"));
                    self.wait_for(r, &WaitCondition::Exists, timeout).await?;
                }
            }
        }
        let (Some(replication), Some(ca)) = (self.get(&refs[0]).await?, self.get(&refs[1]).await?)
        else {
            return Ok(CredentialsLookup::NotObservable(format!(
                "{} or {} does not exist yet on site {}; after the primary is applied the operator creates them and the next run copies them",
                refs[0],
                refs[1],
                self.name()
            )));
        };
        Ok(CredentialsLookup::Found(ReplicationCredentials {
            client_cert: secret_key(&replication, "tls.crt")?,
            client_key: SecretBytes::new(secret_key(&replication, "tls.key")?),
            ca_cert: secret_key(&ca, "ca.crt")?,
        }))
    }

    async fn apply_replica(
        &self,
        cluster: &PostgresCluster,
        source: &ReplicationSource,
        credentials: Option<&ReplicationCredentials>,
        owner: &str,
    ) -> Result<Vec<ObjectChange>, ApplyFailure> {
        let mut values = Vec::new();
        if let Some(c) = credentials {
            values.extend(manifests::copied_secrets(
                cluster.namespace.as_str(),
                source,
                c,
            ));
        }
        values.push(manifests::replica_cluster(cluster, source));
        self.apply(&objects(values)?, &owned(owner)).await
    }

    async fn replication_status(
        &self,
        cluster: &PostgresCluster,
        probe: &StatusProbe,
    ) -> SiteObservation {
        replication::observe(self, cluster, probe).await
    }
}
