//! The replication status read of the `PostgreSQL` capability on CloudNativePG.
//!
//! Per site it reads the `Cluster` through the site's Kubernetes API (the operator's status),
//! and, when the site's cluster is exposed, opens SQL on that endpoint exactly as a replica
//! streams from the primary: to the Route host on 443 (or the load balancer host on 5432),
//! TLS first (`sslnegotiation=direct`, ALPN `postgresql`, the host as SNI) when the exposure
//! is a passthrough Route, the server certificate verified against the cluster's CA
//! (`<name>-ca` `ca.crt`) and the host name, and as `streaming_replica` with the cluster's own
//! client certificate (`<name>-replication`). CloudNativePG's `pg_hba` accepts that
//! certificate for the `postgres` database (`hostssl postgres streaming_replica all cert`).
//! The key is held in memory only, behind [`SecretBytes`]; no error or log carries it.
//!
//! What the SQL reads is [`SqlReading`]: only functions and views a role without
//! `pg_read_all_stats` may read, so it needs no grant beyond CloudNativePG's defaults.

use rustls::SignatureScheme;
use rustls::client::ResolvesClientCert;
use rustls::pki_types::pem::PemObject;
use rustls::pki_types::{CertificateDer, PrivateKeyDer};
use rustls::sign::CertifiedKey;
use serde_json::Value;
use std::fmt;
use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;
use tokio_postgres::config::{SslMode, SslNegotiation};
use tokio_postgres_rustls::MakeRustlsConnect;

use super::{manifests, secret_key, secret_ref};
use crate::domain::capability::postgresql::{
    ClusterStatus, Lsn, Reading, SiteObservation, SqlReading, StatusProbe,
};
use crate::domain::capability::{
    K8sClient, ObjectRef, PostgresCluster, PrimaryExposure, ReplicationCredentials, SecretBytes,
};
use crate::domain::{ExecutionMode, Topology};

/// The role the status read logs in as: CloudNativePG's replication user.
pub const STATUS_USER: &str = "streaming_replica";
/// The database it connects to (the only one `streaming_replica` may open outside replication).
pub const STATUS_DATABASE: &str = "postgres";
/// What the status read calls itself in `pg_stat_activity`.
pub const STATUS_APPLICATION_NAME: &str = "harmony-replication-status";

/// One statement, so every figure of a site comes from the same moment. Each function and view
/// here is readable by `streaming_replica`; `pg_stat_wal_receiver` shows it the receiver's pid
/// (so whether one runs) but its status only to `pg_read_all_stats`.
const STATUS_SQL: &str = "SELECT pg_is_in_recovery(), \
    (SELECT system_identifier FROM pg_control_system())::text, \
    extract(epoch FROM now())::float8, \
    CASE WHEN pg_is_in_recovery() THEN NULL ELSE pg_current_wal_lsn()::text END, \
    pg_last_wal_receive_lsn()::text, \
    pg_last_wal_replay_lsn()::text, \
    CASE WHEN pg_is_in_recovery() THEN pg_get_wal_replay_pause_state() END, \
    extract(epoch FROM pg_last_xact_replay_timestamp())::float8, \
    (SELECT count(*) FROM pg_stat_wal_receiver)::int4, \
    (SELECT status FROM pg_stat_wal_receiver LIMIT 1), \
    (SELECT count(*) FROM pg_stat_replication)::int4";

/// Where SQL on a cluster is opened from outside its site.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Endpoint {
    /// The host: the TLS server name (SNI) and the name the certificate must carry.
    pub host: String,
    /// The port (443 for a Route, 5432 for a load balancer).
    pub port: u16,
    /// TLS first, without PostgreSQL's SSLRequest (what a passthrough router needs).
    pub direct_tls: bool,
    /// Connect here instead of resolving `host`.
    pub connect_to: Option<SocketAddr>,
}

impl Endpoint {
    /// The endpoint of an exposure, as replicas use it.
    pub fn of(exposure: &PrimaryExposure, connect_to: Option<SocketAddr>) -> Self {
        Self {
            host: exposure.host().to_string(),
            port: exposure.port(),
            direct_tls: exposure.needs_direct_tls(),
            connect_to,
        }
    }
}

impl fmt::Display for Endpoint {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}:{}", self.host, self.port)?;
        if let Some(a) = self.connect_to {
            write!(f, " (connecting to {a})")?;
        }
        Ok(())
    }
}

/// Reads a site's replication status (the capability's `replication_status`).
pub(super) async fn observe<T: K8sClient + Topology + ?Sized>(
    site: &T,
    cluster: &PostgresCluster,
    probe: &StatusProbe,
) -> SiteObservation {
    if site.mode() == ExecutionMode::Render {
        return SiteObservation::nothing(
            "render mode: nothing runs, so nothing is measured (rendered; not verified)",
        );
    }
    let (ns, name) = (cluster.namespace.as_str(), cluster.name.as_str());
    let reference = ObjectRef {
        api_version: "postgresql.cnpg.io/v1".into(),
        kind: "Cluster".into(),
        namespace: Some(ns.to_string()),
        name: name.to_string(),
    };
    let status = match site.get(&reference).await {
        Ok(Some(o)) => Reading::Read(cluster_status(o.value())),
        Ok(None) => Reading::NotRead(format!(
            "{reference} does not exist on site {}",
            site.name()
        )),
        Err(e) => Reading::NotRead(e.to_string()),
    };
    let sql = match &probe.endpoint {
        None => Reading::NotRead(format!(
            "the {} on site {} is not exposed outside its site, so there is no endpoint to measure it through",
            probe.role,
            site.name()
        )),
        Some(exposure) => match credentials(site, ns, name).await {
            Err(why) => Reading::NotRead(why),
            Ok(c) => {
                let endpoint = Endpoint::of(exposure, probe.connect_to);
                match read_sql(&endpoint, &c, probe.timeout).await {
                    Ok(r) => Reading::Read(r),
                    Err(e) => Reading::NotRead(e),
                }
            }
        },
    };
    SiteObservation {
        cluster: status,
        sql,
        exposed: probe.endpoint.is_some(),
    }
}

/// The operator's view of the cluster: the fields of `spec` and `status` a status read shows.
pub fn cluster_status(cluster: &Value) -> ClusterStatus {
    let text = |p: &str| cluster.pointer(p).and_then(Value::as_str).map(String::from);
    let count = |p: &str| {
        cluster
            .pointer(p)
            .and_then(Value::as_u64)
            .and_then(|n| u32::try_from(n).ok())
    };
    ClusterStatus {
        phase: text("/status/phase"),
        ready_instances: count("/status/readyInstances"),
        instances: count("/spec/instances"),
        replica_mode: replica_mode(cluster),
        current_primary: text("/status/currentPrimary"),
        system_id: text("/status/systemID"),
    }
}

/// Whether the operator runs the cluster as a replica, by CloudNativePG's rule
/// (`api/v1/cluster_funcs.go` `IsReplica`): `spec.replica.enabled` when set; otherwise, in the
/// distributed topology, when `spec.replica.primary` names another member than `spec.replica.self`
/// (default: the cluster's name).
pub fn replica_mode(cluster: &Value) -> bool {
    let replica = cluster.pointer("/spec/replica");
    if let Some(enabled) = replica
        .and_then(|r| r.get("enabled"))
        .and_then(Value::as_bool)
    {
        return enabled;
    }
    fn text(v: Option<&Value>) -> Option<&str> {
        v.and_then(Value::as_str).filter(|s| !s.is_empty())
    }
    match text(replica.and_then(|r| r.get("primary"))) {
        Some(primary) => {
            let this = text(replica.and_then(|r| r.get("self")))
                .or_else(|| text(cluster.pointer("/metadata/name")));
            Some(primary) != this
        }
        None => false,
    }
}

/// The cluster's own replication certificate and CA on this site (read, never waited for).
async fn credentials<T: K8sClient + Topology + ?Sized>(
    site: &T,
    ns: &str,
    name: &str,
) -> Result<ReplicationCredentials, String> {
    let replication = secret_ref(ns, manifests::replication_secret_name(name));
    let ca = secret_ref(ns, manifests::ca_secret_name(name));
    let get = |r: &ObjectRef| {
        let r = r.clone();
        async move {
            match site.get(&r).await {
                Ok(Some(o)) => Ok(o),
                Ok(None) => Err(format!(
                    "{r} does not exist on site {} (the operator creates it with the Cluster)",
                    site.name()
                )),
                Err(e) => Err(e.to_string()),
            }
        }
    };
    let (replication, ca) = (get(&replication).await?, get(&ca).await?);
    let key = |s, k| secret_key(s, k).map_err(|e| e.to_string());
    Ok(ReplicationCredentials {
        client_cert: key(&replication, "tls.crt")?,
        client_key: SecretBytes::new(key(&replication, "tls.key")?),
        ca_cert: key(&ca, "ca.crt")?,
    })
}

/// Opens SQL on `endpoint` as [`STATUS_USER`] with `credentials` and reads a [`SqlReading`],
/// all within `timeout`. The error names the endpoint and the cause, never a secret.
pub async fn read_sql(
    endpoint: &Endpoint,
    credentials: &ReplicationCredentials,
    timeout: Duration,
) -> Result<SqlReading, String> {
    let fail = |what: String| format!("cannot measure through {endpoint} as {STATUS_USER}: {what}");
    let tls = tls_config(credentials).map_err(fail)?;
    let mut config = tokio_postgres::Config::new();
    config
        .host(&endpoint.host)
        .port(endpoint.connect_to.map_or(endpoint.port, |a| a.port()))
        .user(STATUS_USER)
        .dbname(STATUS_DATABASE)
        .application_name(STATUS_APPLICATION_NAME)
        .ssl_mode(SslMode::Require)
        .ssl_negotiation(if endpoint.direct_tls {
            SslNegotiation::Direct
        } else {
            SslNegotiation::Postgres
        })
        .connect_timeout(timeout);
    if let Some(a) = endpoint.connect_to {
        config.hostaddr(a.ip());
    }
    let work = async {
        let (client, connection) = config
            .connect(MakeRustlsConnect::new(tls))
            .await
            .map_err(|e| harmony_http::describe(&e))?;
        let driver = tokio::spawn(connection);
        let row = client
            .query_one(STATUS_SQL, &[])
            .await
            .map_err(|e| harmony_http::describe(&e));
        drop(client);
        let _ = driver.await;
        reading(&row?)
    };
    match tokio::time::timeout(timeout, work).await {
        Ok(r) => r.map_err(fail),
        Err(_) => Err(fail(format!(
            "no answer within {}",
            crate::domain::capability::seconds(&timeout)
        ))),
    }
}

fn reading(row: &tokio_postgres::Row) -> Result<SqlReading, String> {
    let lsn = |i: usize| -> Result<Option<Lsn>, String> {
        let text: Option<String> = row.try_get(i).map_err(|e| e.to_string())?;
        text.as_deref().map(Lsn::parse).transpose()
    };
    let get = |e: tokio_postgres::Error| format!("unexpected answer: {e}");
    Ok(SqlReading {
        in_recovery: row.try_get(0).map_err(get)?,
        system_id: row.try_get(1).map_err(get)?,
        clock_epoch: row.try_get(2).map_err(get)?,
        current_lsn: lsn(3)?,
        receive_lsn: lsn(4)?,
        replay_lsn: lsn(5)?,
        replay_pause_state: row.try_get(6).map_err(get)?,
        last_replayed_commit_epoch: row.try_get(7).map_err(get)?,
        wal_receiver_running: row.try_get::<_, i32>(8).map_err(get)? > 0,
        wal_receiver_status: row.try_get(9).map_err(get)?,
        wal_senders: u32::try_from(row.try_get::<_, i32>(10).map_err(get)?).unwrap_or(0),
    })
}

/// Harmony's rustls setup ([`harmony_http::tls_config`]) trusting only the cluster's CA,
/// announcing ALPN `postgresql` (PostgreSQL 17+ refuses direct TLS without it), and presenting
/// the `streaming_replica` client certificate.
fn tls_config(c: &ReplicationCredentials) -> Result<rustls::ClientConfig, String> {
    let mut config = harmony_http::tls_config(Some(&c.ca_cert))
        .map_err(|e| format!("the cluster's CA (ca.crt): {e}"))?;
    config.alpn_protocols = vec![b"postgresql".to_vec()];
    let chain: Vec<CertificateDer<'static>> = CertificateDer::pem_slice_iter(&c.client_cert)
        .collect::<Result<_, _>>()
        .map_err(|e| format!("the client certificate (tls.crt) is not PEM: {e}"))?;
    if chain.is_empty() {
        return Err("the client certificate (tls.crt) holds no CERTIFICATE block".into());
    }
    // The key's own parse error is not quoted: it could echo key material.
    let key = PrivateKeyDer::from_pem_slice(c.client_key.expose())
        .map_err(|_| "the client key (tls.key) is not a PEM private key".to_string())?;
    let signer = config
        .crypto_provider()
        .key_provider
        .load_private_key(key)
        .map_err(|_| "the client key (tls.key) is not a usable private key".to_string())?;
    config.client_auth_cert_resolver = Arc::new(ClientCertificate(Arc::new(CertifiedKey::new(
        chain, signer,
    ))));
    Ok(config)
}

/// Always presents the one client certificate (the server asks for it: `cert` auth).
struct ClientCertificate(Arc<CertifiedKey>);

impl fmt::Debug for ClientCertificate {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("ClientCertificate(<redacted>)")
    }
}

impl ResolvesClientCert for ClientCertificate {
    fn resolve(&self, _: &[&[u8]], _: &[SignatureScheme]) -> Option<Arc<CertifiedKey>> {
        Some(self.0.clone())
    }

    fn has_certs(&self) -> bool {
        true
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn the_operator_status_is_read_field_by_field() {
        let c = cluster_status(&json!({
            "metadata": {"name": "finance-db"},
            "spec": {"instances": 3, "replica": {"enabled": true, "source": "finance-db-site-paris"}},
            "status": {"phase": "Cluster in healthy state", "readyInstances": 2,
                       "currentPrimary": "finance-db-1", "systemID": "7711"}
        }));
        assert_eq!(
            c,
            ClusterStatus {
                phase: Some("Cluster in healthy state".into()),
                ready_instances: Some(2),
                instances: Some(3),
                replica_mode: true,
                current_primary: Some("finance-db-1".into()),
                system_id: Some("7711".into()),
            }
        );
        assert_eq!(cluster_status(&json!({})), ClusterStatus::default());
    }

    #[test]
    fn replica_mode_follows_cloudnativepg_is_replica() {
        let c = |replica: Value| json!({"metadata": {"name": "finance-db"}, "spec": {"replica": replica}});
        assert!(!replica_mode(&json!({"spec": {}})));
        assert!(replica_mode(&c(json!({"enabled": true}))));
        // `enabled` wins over the distributed fields when set.
        assert!(!replica_mode(&c(
            json!({"enabled": false, "primary": "a", "self": "b"})
        )));
        assert!(replica_mode(&c(
            json!({"primary": "finance-db-site-paris", "self": "finance-db-site-newyork"})
        )));
        assert!(!replica_mode(&c(
            json!({"primary": "finance-db-site-paris", "self": "finance-db-site-paris"})
        )));
        // Without `self`, the cluster's own name is the member name.
        assert!(!replica_mode(&c(json!({"primary": "finance-db"}))));
        assert!(replica_mode(&c(
            json!({"primary": "finance-db-site-paris"})
        )));
    }

    #[test]
    fn a_bad_key_is_named_without_echoing_it() {
        let key = generated_key();
        let creds = |key: &[u8]| ReplicationCredentials {
            client_cert: key_cert(&key_pair()).into_bytes(),
            client_key: SecretBytes::new(key.to_vec()),
            ca_cert: key_cert(&key_pair()).into_bytes(),
        };
        let garbage =
            b"-----BEGIN PRIVATE KEY-----\nc2VjcmV0LXNlY3JldA==\n-----END PRIVATE KEY-----\n";
        let e = tls_config(&creds(garbage)).unwrap_err();
        assert!(e.contains("tls.key"), "{e}");
        assert!(!e.contains("c2VjcmV0") && !e.contains("secret"), "{e}");
        let ok = tls_config(&creds(key.as_bytes())).unwrap();
        assert_eq!(ok.alpn_protocols, vec![b"postgresql".to_vec()]);
        assert!(ok.client_auth_cert_resolver.has_certs());
        assert_eq!(
            format!(
                "{:?}",
                ClientCertificate(ok.client_auth_cert_resolver.resolve(&[], &[]).unwrap())
            ),
            "ClientCertificate(<redacted>)"
        );
    }

    fn key_pair() -> rcgen::KeyPair {
        rcgen::KeyPair::generate().unwrap()
    }

    fn generated_key() -> String {
        key_pair().serialize_pem()
    }

    fn key_cert(key: &rcgen::KeyPair) -> String {
        let mut params = rcgen::CertificateParams::new(vec!["x.example.com".into()]).unwrap();
        params.is_ca = rcgen::IsCa::Ca(rcgen::BasicConstraints::Unconstrained);
        params.self_signed(key).unwrap().pem()
    }
}
