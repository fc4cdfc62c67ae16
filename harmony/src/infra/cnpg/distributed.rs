//! The distributed topology on CloudNativePG: every site's `Cluster` lists every site in
//! `externalClusters` and says in `spec.replica` which one is the primary
//! (<https://cloudnative-pg.io/documentation/current/replica_cluster/#distributed-topology>).
//!
//! CloudNativePG's rules this follows (`internal/webhook/v1/cluster_webhook.go`,
//! `api/v1/cluster_funcs.go` at v1.30): `primary`, `self` and `source` each name an
//! `externalClusters` entry; `enabled` is never set with `primary`; a `Cluster` is a replica when
//! `self` (or its name) differs from `primary`; a `promotionToken` only on the one being promoted.

use async_trait::async_trait;
use serde_json::{Map, Value, json};

use super::{manifests, objects, owned};
use crate::domain::capability::postgresql_distributed::{
    DistributedCluster, DistributedPostgreSQL, MemberRole, MemberState, ReplicaShape,
};
use crate::domain::capability::{
    ApplyFailure, CapabilityError, K8sClient, ObjectRef, PostgresCluster, ReplicationCredentials,
    ReplicationSource,
};
use crate::domain::{ObjectChange, Topology};

/// The `externalClusters` entry of a site in its own `Cluster`: only `self` names it and nothing
/// connects to it, so it uses the site's own operator secrets, and its host when it has one
/// (else the in-cluster `-rw` Service, whose name the operator's certificate carries).
fn own_entry(cluster: &DistributedCluster, site: &str) -> Value {
    let c = cluster.cluster();
    let (name, ns) = (c.name.as_str(), c.namespace.as_str());
    let mut entry = match cluster.source(site) {
        Some(source) => manifests::external_cluster(&source),
        None => json!({
            "name": cluster.name_of(site),
            "connectionParameters": {
                "host": format!("{}.{ns}.svc", manifests::rw_service_name(name)),
                "port": "5432", "user": "streaming_replica", "dbname": "postgres",
                "sslmode": "verify-full",
            },
        }),
    };
    let replication = manifests::replication_secret_name(name);
    entry["sslCert"] = json!({"name": replication, "key": "tls.crt"});
    entry["sslKey"] = json!({"name": replication, "key": "tls.key"});
    entry["sslRootCert"] = json!({"name": manifests::ca_secret_name(name), "key": "ca.crt"});
    entry
}

/// The `Cluster` of `site` with `role`: the cluster's spec, its own host in the server
/// certificate, every site it may stream from in `externalClusters` (the exposed ones, through
/// the copies of their secrets, and itself), and `spec.replica`. `existing` is the live
/// `Cluster`: its bootstrap is kept (it only matters at creation, and a demoted primary must not
/// get a second bootstrap method); a new `Cluster` that is not the primary bootstraps with
/// `pg_basebackup` from the primary.
pub fn cluster_manifest(
    cluster: &DistributedCluster,
    site: &str,
    role: &MemberRole,
    existing: Option<&MemberState>,
) -> Value {
    let mut c = cluster.cluster().clone();
    c.server_alt_dns_names = cluster
        .get(site)
        .and_then(|m| m.exposure.as_ref())
        .map(|e| vec![e.host().clone()])
        .unwrap_or_default();
    let mut value = manifests::cluster(&c);
    let externals: Vec<Value> = cluster
        .members()
        .iter()
        .filter_map(|m| match m.site == site {
            true => Some(own_entry(cluster, site)),
            false => cluster
                .source(&m.site)
                .map(|s| manifests::external_cluster(&s)),
        })
        .collect();
    let mut replica = Map::new();
    replica.insert("primary".into(), json!(cluster.name_of(&role.primary)));
    replica.insert("self".into(), json!(cluster.name_of(site)));
    replica.insert(
        "source".into(),
        json!(cluster.source_for(site, &role.primary)),
    );
    if let Some(token) = &role.promotion_token {
        replica.insert("promotionToken".into(), json!(token));
    }
    let bootstrap = match existing {
        Some(state) => state.bootstrap_source.clone(),
        None => (site != role.primary).then(|| cluster.name_of(&role.primary)),
    };
    if let Some(Value::Object(spec)) = value.get_mut("spec") {
        spec.insert("externalClusters".into(), Value::Array(externals));
        spec.insert("replica".into(), Value::Object(replica));
        if let Some(source) = bootstrap {
            spec.insert(
                "bootstrap".into(),
                json!({"pg_basebackup": {"source": source}}),
            );
        }
    }
    value
}

/// What a `Cluster` manifest says about its place among the sites, and its operator's status.
pub fn member_state(cluster: &Value) -> MemberState {
    let text = |p: &str| {
        cluster
            .pointer(p)
            .and_then(Value::as_str)
            .filter(|s| !s.is_empty())
            .map(String::from)
    };
    let shape = match cluster.pointer("/spec/replica") {
        None | Some(Value::Null) => ReplicaShape::None,
        Some(r) => match (
            r.get("enabled").and_then(Value::as_bool),
            text("/spec/replica/primary"),
        ) {
            (Some(enabled), _) => ReplicaShape::Standalone { enabled },
            (None, Some(primary)) => ReplicaShape::Distributed {
                primary,
                self_name: text("/spec/replica/self")
                    .or_else(|| text("/metadata/name"))
                    .unwrap_or_default(),
                source: text("/spec/replica/source").unwrap_or_default(),
                promotion_token: text("/spec/replica/promotionToken"),
            },
            (None, None) => ReplicaShape::Standalone { enabled: false },
        },
    };
    MemberState {
        shape,
        bootstrap_source: text("/spec/bootstrap/pg_basebackup/source"),
        demotion_token: text("/status/demotionToken"),
        last_promotion_token: text("/status/lastPromotionToken"),
        switch_in_progress: cluster
            .pointer("/status/switchReplicaClusterStatus/inProgress")
            .and_then(Value::as_bool)
            .unwrap_or(false),
        phase: text("/status/phase"),
        timeline: cluster
            .pointer("/status/timelineID")
            .and_then(Value::as_u64),
        current_primary: text("/status/currentPrimary"),
    }
}

fn cluster_ref(cluster: &PostgresCluster) -> ObjectRef {
    ObjectRef {
        api_version: "postgresql.cnpg.io/v1".into(),
        kind: "Cluster".into(),
        namespace: Some(cluster.namespace.to_string()),
        name: cluster.name.to_string(),
    }
}

#[async_trait]
impl<T: K8sClient + Topology + ?Sized> DistributedPostgreSQL for T {
    async fn member_state(
        &self,
        cluster: &PostgresCluster,
    ) -> Result<Option<MemberState>, CapabilityError> {
        Ok(self
            .get(&cluster_ref(cluster))
            .await?
            .map(|o| member_state(o.value())))
    }

    async fn apply_member(
        &self,
        cluster: &DistributedCluster,
        site: &str,
        role: &MemberRole,
        existing: Option<&MemberState>,
        owner: &str,
    ) -> Result<Vec<ObjectChange>, ApplyFailure> {
        let objects = objects(vec![cluster_manifest(cluster, site, role, existing)])?;
        self.apply(&objects, &owned(owner)).await
    }

    async fn store_credentials(
        &self,
        cluster: &PostgresCluster,
        sources: &[(ReplicationSource, ReplicationCredentials)],
        owner: &str,
    ) -> Result<Vec<ObjectChange>, ApplyFailure> {
        let values = sources
            .iter()
            .flat_map(|(source, c)| {
                manifests::copied_secrets(cluster.namespace.as_str(), source, c)
            })
            .collect();
        self.apply(&objects(values)?, &owned(owner)).await
    }
}

#[cfg(test)]
mod tests;
