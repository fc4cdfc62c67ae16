//! CloudNativePG `Cluster`, OpenShift `Route` and Secret manifests, as plain JSON trees.

use base64::Engine;
use base64::engine::general_purpose::STANDARD;
use serde_json::{Map, Value, json};

use super::versions;
use crate::domain::capability::{
    PostgresCluster, PrimaryExposure, ReplicationCredentials, ReplicationSource,
};

/// The operand image when the cluster names none: CloudNativePG's image of the newest minor of
/// `major` that [`versions`] knows, never the floating `postgresql:<major>` tag (two sites
/// could pull different minors). A major the table lacks falls back to that tag.
pub fn default_image(major: u32) -> String {
    versions::newest(major)
        .map(|v| v.image())
        .unwrap_or_else(|| format!("{}:{major}", versions::IMAGE_REPOSITORY))
}

/// The Secret the operator creates with the `streaming_replica` client certificate.
pub fn replication_secret_name(cluster: &str) -> String {
    format!("{cluster}-replication")
}

/// The Secret the operator creates with the CA (`ca.crt` and `ca.key`).
pub fn ca_secret_name(cluster: &str) -> String {
    format!("{cluster}-ca")
}

/// The Service CloudNativePG points at the current primary.
pub fn rw_service_name(cluster: &str) -> String {
    format!("{cluster}-rw")
}

/// The LoadBalancer Service exposing the primary to other sites.
pub fn load_balancer_name(cluster: &str) -> String {
    format!("{cluster}-primary-lb")
}

/// On a replica site: the copy of the primary's replication secret.
pub fn copied_replication_secret_name(source: &ReplicationSource) -> String {
    format!("{}-replication", source.name)
}

/// On a replica site: the copy of the primary's CA certificate (never its key).
pub fn copied_ca_secret_name(source: &ReplicationSource) -> String {
    format!("{}-ca", source.name)
}

fn resources(c: &PostgresCluster) -> Option<Value> {
    let mut out = Map::new();
    let r = &c.resources;
    for (section, cpu, memory) in [
        ("requests", &r.cpu_request, &r.memory_request),
        ("limits", &r.cpu_limit, &r.memory_limit),
    ] {
        let mut m = Map::new();
        if let Some(cpu) = cpu {
            m.insert("cpu".into(), json!(cpu.as_str()));
        }
        if let Some(memory) = memory {
            m.insert("memory".into(), json!(memory.as_str()));
        }
        if !m.is_empty() {
            out.insert(section.into(), Value::Object(m));
        }
    }
    (!out.is_empty()).then_some(Value::Object(out))
}

/// A standalone or primary `Cluster`.
pub fn cluster(c: &PostgresCluster) -> Value {
    let mut spec = Map::new();
    spec.insert("instances".into(), json!(c.instances));
    spec.insert(
        "imageName".into(),
        json!(
            c.image
                .clone()
                .unwrap_or_else(|| default_image(c.major_version))
        ),
    );
    spec.insert("storage".into(), json!({"size": c.storage.as_str()}));
    if let Some(r) = resources(c) {
        spec.insert("resources".into(), r);
    }
    if let Some(w) = &c.wal_keep_size {
        spec.insert(
            "postgresql".into(),
            json!({"parameters": {"wal_keep_size": w}}),
        );
    }
    if !c.server_alt_dns_names.is_empty() {
        let names: Vec<&str> = c.server_alt_dns_names.iter().map(|h| h.as_str()).collect();
        spec.insert("certificates".into(), json!({"serverAltDNSNames": names}));
    }
    json!({
        "apiVersion": "postgresql.cnpg.io/v1",
        "kind": "Cluster",
        "metadata": {"name": c.name.as_str(), "namespace": c.namespace.as_str()},
        "spec": spec,
    })
}

/// The `externalClusters` entry a replica uses to stream from `source`.
pub fn external_cluster(source: &ReplicationSource) -> Value {
    let exposure = &source.exposure;
    let mut params = Map::new();
    for (k, v) in [
        ("host", exposure.host().as_str().to_string()),
        ("port", exposure.port().to_string()),
        ("user", "streaming_replica".to_string()),
        ("dbname", "postgres".to_string()),
        ("sslmode", "verify-full".to_string()),
    ] {
        params.insert(k.into(), json!(v));
    }
    if exposure.needs_direct_tls() {
        // A passthrough router routes by SNI; classic SSLRequest negotiation sends none.
        params.insert("sslnegotiation".into(), json!("direct"));
    }
    let replication = copied_replication_secret_name(source);
    json!({
        "name": source.name.as_str(),
        "connectionParameters": params,
        "sslCert": {"name": replication, "key": "tls.crt"},
        "sslKey": {"name": replication, "key": "tls.key"},
        "sslRootCert": {"name": copied_ca_secret_name(source), "key": "ca.crt"},
    })
}

/// A replica `Cluster`: bootstrapped with `pg_basebackup` from `source`, then streaming from it.
pub fn replica_cluster(c: &PostgresCluster, source: &ReplicationSource) -> Value {
    let mut value = cluster(c);
    if let Some(Value::Object(spec)) = value.get_mut("spec") {
        spec.insert(
            "bootstrap".into(),
            json!({"pg_basebackup": {"source": source.name.as_str()}}),
        );
        spec.insert(
            "replica".into(),
            json!({"enabled": true, "source": source.name.as_str()}),
        );
        spec.insert("externalClusters".into(), json!([external_cluster(source)]));
    }
    value
}

/// The OpenShift Route passing TLS through to the primary's `-rw` Service.
pub fn passthrough_route(c: &PostgresCluster, host: &str) -> Value {
    json!({
        "apiVersion": "route.openshift.io/v1",
        "kind": "Route",
        "metadata": {"name": c.name.as_str(), "namespace": c.namespace.as_str()},
        "spec": {
            "host": host,
            "to": {"kind": "Service", "name": rw_service_name(c.name.as_str()), "weight": 100},
            "port": {"targetPort": "postgres"},
            "tls": {"termination": "passthrough", "insecureEdgeTerminationPolicy": "None"},
            "wildcardPolicy": "None",
        },
    })
}

/// A LoadBalancer Service selecting the current primary instance.
pub fn load_balancer(c: &PostgresCluster) -> Value {
    json!({
        "apiVersion": "v1",
        "kind": "Service",
        "metadata": {"name": load_balancer_name(c.name.as_str()), "namespace": c.namespace.as_str()},
        "spec": {
            "type": "LoadBalancer",
            "selector": {"cnpg.io/cluster": c.name.as_str(), "cnpg.io/instanceRole": "primary"},
            "ports": [{"name": "postgres", "port": 5432, "targetPort": 5432, "protocol": "TCP"}],
        },
    })
}

/// The primary's exposure object.
pub fn exposure(c: &PostgresCluster, exposure: &PrimaryExposure) -> Value {
    match exposure {
        PrimaryExposure::PassthroughRoute { host } => passthrough_route(c, host.as_str()),
        PrimaryExposure::LoadBalancer { .. } => load_balancer(c),
    }
}

/// The copies on a replica site: the client certificate and key, and only `ca.crt` of the CA.
/// `cnpg.io/reload` makes the operator pick up a rotated certificate without a restart.
pub fn copied_secrets(
    namespace: &str,
    source: &ReplicationSource,
    credentials: &ReplicationCredentials,
) -> [Value; 2] {
    let b64 = |bytes: &[u8]| STANDARD.encode(bytes);
    let labels = json!({"cnpg.io/reload": "true"});
    [
        json!({
            "apiVersion": "v1",
            "kind": "Secret",
            "metadata": {"name": copied_replication_secret_name(source), "namespace": namespace, "labels": labels},
            "type": "kubernetes.io/tls",
            "data": {
                "tls.crt": b64(&credentials.client_cert),
                "tls.key": b64(credentials.client_key.expose()),
            },
        }),
        json!({
            "apiVersion": "v1",
            "kind": "Secret",
            "metadata": {"name": copied_ca_secret_name(source), "namespace": namespace, "labels": labels},
            "type": "Opaque",
            "data": {"ca.crt": b64(&credentials.ca_cert)},
        }),
    ]
}
