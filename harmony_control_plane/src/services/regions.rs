//! Regions: creation with a one-time bootstrap token, and how each region looks now (health from
//! its session row, so any replica answers alike).

use harmony_agent_protocol::{AgentStatus, Hello, SecretString, Services};
use harmony_api::{Health, RegionView};
use harmony_types::{RegionId, ZoneId};
use std::collections::HashMap;
use std::time::Duration;

use super::health::{self, HealthPolicy, Liveness};
use super::{ControlPlane, placement};
use crate::store::{RegionRecord, SessionRecord, StoreError, now_ms};
use crate::tokens;

/// Why a region operation was refused.
#[derive(Debug, thiserror::Error)]
pub enum RegionError {
    /// A name is not a DNS-1123 label.
    #[error("{field}: {reason}")]
    Invalid {
        /// The field.
        field: &'static str,
        /// What is wrong.
        reason: String,
    },
    /// The region exists (and is not decommissioned).
    #[error(
        "region {0} already exists; its bootstrap token was shown once at creation. Use POST /v1/admin/regions/{0}/bootstrap-token if its agent never connected"
    )]
    Exists(String),
    /// No such region.
    #[error("no region {0}; create it with POST /v1/admin/regions")]
    Unknown(String),
    /// The region is decommissioned.
    #[error("region {0} is decommissioned; re-create it with POST /v1/admin/regions")]
    Decommissioned(String),
    /// The region's agent already holds an identity.
    #[error(
        "region {0} already has an agent identity; a second agent cannot bootstrap. Revoke it first (DELETE /v1/admin/regions/{0})"
    )]
    AlreadyBootstrapped(String),
    /// The state database failed.
    #[error(transparent)]
    Store(#[from] StoreError),
    /// No randomness for a token.
    #[error("internal error: {0}")]
    Internal(String),
}

/// A region with a fresh bootstrap token (shown once, never logged).
#[derive(Debug, Clone)]
pub struct Minted {
    /// The region.
    pub region: String,
    /// Its zone.
    pub zone: String,
    /// The token.
    pub token: SecretString,
    /// Its expiry (ms since epoch).
    pub expires_at: i64,
}

/// Creates `region` in `zone` (or re-creates a decommissioned one) with a bootstrap token valid
/// for `ttl_s` seconds, capped by `--bootstrap-ttl-s`.
pub async fn create(
    cp: &ControlPlane,
    region: &str,
    zone: &str,
    ttl_s: Option<f64>,
) -> Result<Minted, RegionError> {
    let region = RegionId::parse(region).map_err(|e| RegionError::Invalid {
        field: "region",
        reason: e.to_string(),
    })?;
    let zone = ZoneId::parse(zone).map_err(|e| RegionError::Invalid {
        field: "zone",
        reason: e.to_string(),
    })?;
    if !cp
        .store
        .create_region(region.as_str(), zone.as_str())
        .await?
    {
        return Err(RegionError::Exists(region.to_string()));
    }
    let minted = mint(cp, region.as_str(), zone.as_str(), ttl_s).await?;
    log::info!("created region {region} with zone {zone}");
    Ok(minted)
}

/// A new bootstrap token for a region whose agent never obtained an identity.
pub async fn new_bootstrap(cp: &ControlPlane, region: &str) -> Result<Minted, RegionError> {
    let record = existing(cp, region).await?;
    if record.decommissioned_at.is_some() {
        return Err(RegionError::Decommissioned(region.to_string()));
    }
    if record.has_identity {
        return Err(RegionError::AlreadyBootstrapped(region.to_string()));
    }
    mint(cp, &record.name, &record.zone, None).await
}

/// The stored region, or [`RegionError::Unknown`].
pub async fn existing(cp: &ControlPlane, region: &str) -> Result<RegionRecord, RegionError> {
    cp.store
        .region(region)
        .await?
        .ok_or_else(|| RegionError::Unknown(region.to_string()))
}

/// The lifetime of a new bootstrap token: the caller's, if shorter than the server's.
fn bootstrap_ttl(max: Duration, asked_s: Option<f64>) -> Duration {
    asked_s
        .filter(|t| t.is_finite() && *t > 0.0)
        .map(Duration::from_secs_f64)
        .map_or(max, |t| t.min(max))
}

async fn mint(
    cp: &ControlPlane,
    region: &str,
    zone: &str,
    ttl_s: Option<f64>,
) -> Result<Minted, RegionError> {
    let internal = |e: getrandom::Error| RegionError::Internal(format!("no randomness: {e}"));
    let token = tokens::mint(harmony_agent_protocol::BOOTSTRAP_PREFIX).map_err(internal)?;
    let salt = tokens::random32().map_err(internal)?;
    let ttl = bootstrap_ttl(cp.settings.bootstrap_ttl, ttl_s);
    let expires_at = now_ms() + ttl.as_millis() as i64;
    cp.store
        .add_bootstrap(region, &tokens::hash(token.expose()), &salt, expires_at)
        .await?;
    log::info!(
        "minted a bootstrap token for region {region} (fingerprint {}), valid until {expires_at} ms",
        tokens::fingerprint(token.expose())
    );
    Ok(Minted {
        region: region.to_string(),
        zone: zone.to_string(),
        token,
        expires_at,
    })
}

/// Every region as the API shows it.
pub async fn list(cp: &ControlPlane) -> Result<Vec<RegionView>, RegionError> {
    let regions = cp.store.regions().await?;
    let sessions: HashMap<String, SessionRecord> = cp
        .store
        .sessions()
        .await?
        .into_iter()
        .map(|s| (s.region.clone(), s))
        .collect();
    let pending = cp.store.unanswered_counts().await?;
    let now = now_ms();
    Ok(regions
        .iter()
        .map(|r| {
            let count = pending.get(&r.name).copied().unwrap_or(0);
            describe(r, sessions.get(&r.name), count, now, &cp.settings.policy)
        })
        .collect())
}

/// One region as the API shows it.
pub async fn view(cp: &ControlPlane, region: &str) -> Result<RegionView, RegionError> {
    let record = existing(cp, region).await?;
    let session = cp.store.session(region).await?;
    let pending = cp
        .store
        .unanswered_counts()
        .await?
        .get(region)
        .copied()
        .unwrap_or(0);
    Ok(describe(
        &record,
        session.as_ref(),
        pending,
        now_ms(),
        &cp.settings.policy,
    ))
}

/// What a session row says about liveness.
pub fn liveness(session: &SessionRecord) -> Liveness {
    let status: Option<AgentStatus> = session
        .status_json
        .as_deref()
        .and_then(|s| serde_json::from_str(s).ok());
    Liveness {
        connected: session.connected,
        last_heartbeat_ms: Some(session.last_heartbeat_at),
        k8s_reachable: status.as_ref().is_some_and(|s| s.k8s_reachable),
        pinged: status.is_some(),
    }
}

/// The services a session row's agent holds (none when unreadable or not yet sent).
pub fn session_services(session: &SessionRecord) -> Services {
    session
        .services_json
        .as_deref()
        .and_then(|s| serde_json::from_str(s).ok())
        .unwrap_or_default()
}

/// A region's health now and the services its agent holds (empty when never connected).
pub fn health_of(
    session: Option<&SessionRecord>,
    now: i64,
    policy: &HealthPolicy,
) -> (Health, String, Services) {
    match session {
        None => (
            Health::Unavailable,
            "no agent has connected yet".into(),
            Services::default(),
        ),
        Some(s) => {
            let (h, why) = health::health(now, &liveness(s), policy);
            (h, why, session_services(s))
        }
    }
}

/// The API view of a region from its record, session row and unanswered request count.
pub fn describe(
    r: &RegionRecord,
    session: Option<&SessionRecord>,
    pending_requests: u64,
    now: i64,
    policy: &HealthPolicy,
) -> RegionView {
    let (mut health, mut health_reason, services) = health_of(session, now, policy);
    let hello: Option<Hello> = session.and_then(|s| serde_json::from_str(&s.hello_json).ok());
    let k8s_reachable = session.is_some_and(|s| liveness(s).k8s_reachable);
    let mut advertised_services = placement::advertised_types(health, &services);
    if r.decommissioned_at.is_some() {
        health = Health::Unavailable;
        health_reason = "decommissioned".into();
        advertised_services.clear();
    }
    RegionView {
        region: r.name.clone(),
        zone: r.zone.clone(),
        zones: vec![r.zone.clone()],
        created_at: r.created_at,
        bootstrapped: r.has_identity,
        decommissioned: r.decommissioned_at.is_some(),
        health,
        health_reason,
        // A decommissioned region's connection is being closed: it is not trusted any more.
        connected: r.decommissioned_at.is_none() && session.is_some_and(|s| s.connected),
        connected_at: session.map(|s| s.connected_at),
        last_heartbeat: session.map(|s| s.last_heartbeat_at),
        agent_version: hello.as_ref().map(|h| h.agent_version.clone()),
        ops: hello.as_ref().map(|h| h.ops.clone()).unwrap_or_default(),
        k8s_reachable,
        pending_requests: pending_requests as usize,
        services: services.offers,
        advertised_services,
        max_frame_bytes: session.map(|s| s.max_frame_bytes),
        replica: session.filter(|s| s.connected).map(|s| s.replica.clone()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use harmony_agent_protocol::{ProviderHealth, ServiceOffer};

    fn policy() -> HealthPolicy {
        HealthPolicy {
            heartbeat: Duration::from_millis(200),
            unhealthy_after: Duration::from_millis(600),
            unavailable_after: Duration::from_millis(1500),
        }
    }

    fn record(decommissioned: bool) -> RegionRecord {
        RegionRecord {
            name: "eu".into(),
            zone: "paris".into(),
            created_at: 1,
            decommissioned_at: decommissioned.then_some(5),
            has_identity: true,
        }
    }

    fn session(status: Option<&str>) -> SessionRecord {
        let services = Services {
            offers: vec![ServiceOffer {
                service_type: "queue".into(),
                provider: "q".into(),
                builtin: false,
                health: ProviderHealth::Healthy,
                detail: String::new(),
            }],
        };
        SessionRecord {
            region: "eu".into(),
            replica: "r1".into(),
            conn: "c1".into(),
            connected: true,
            connected_at: 1000,
            disconnected_at: None,
            last_heartbeat_at: 1000,
            hello_json: r#"{"agent_version":"1.2.3","region":"eu","zone":"paris","ops":["get_inventory"],"protocol":1}"#.into(),
            status_json: status.map(str::to_string),
            services_json: Some(serde_json::to_string(&services).unwrap()),
            max_frame_bytes: 1024,
        }
    }

    #[test]
    fn a_region_view_is_computed_from_its_session_row() {
        let p = policy();
        let never = describe(&record(false), None, 0, 2000, &p);
        assert_eq!(never.health, Health::Unavailable);
        assert!(!never.connected && never.agent_version.is_none());

        // Connected, no heartbeat yet: unhealthy, nothing advertised.
        let s = session(None);
        let fresh = describe(&record(false), Some(&s), 2, 1100, &p);
        assert_eq!(fresh.health, Health::Unhealthy);
        assert!(fresh.advertised_services.is_empty());
        assert_eq!(fresh.services.len(), 1);
        assert_eq!(fresh.pending_requests, 2);
        assert_eq!(fresh.agent_version.as_deref(), Some("1.2.3"));
        assert_eq!(fresh.ops, ["get_inventory"]);
        assert_eq!(fresh.replica.as_deref(), Some("r1"));
        assert_eq!(fresh.max_frame_bytes, Some(1024));

        let s = session(Some(r#"{"k8s_reachable":true}"#));
        let healthy = describe(&record(false), Some(&s), 0, 1100, &p);
        assert_eq!(healthy.health, Health::Healthy, "{}", healthy.health_reason);
        assert!(healthy.k8s_reachable);
        assert_eq!(healthy.advertised_services, ["queue"]);

        let gone = describe(&record(true), Some(&s), 0, 1100, &p);
        assert_eq!(gone.health, Health::Unavailable);
        assert_eq!(gone.health_reason, "decommissioned");
        assert!(gone.advertised_services.is_empty() && gone.decommissioned);
        assert!(
            !gone.connected,
            "a revoked connection is not shown connected"
        );
    }

    #[test]
    fn a_bootstrap_token_lives_no_longer_than_the_server_allows() {
        let max = Duration::from_secs(3600);
        assert_eq!(bootstrap_ttl(max, None), max);
        assert_eq!(bootstrap_ttl(max, Some(0.3)), Duration::from_millis(300));
        assert_eq!(bootstrap_ttl(max, Some(1e9)), max);
        assert_eq!(bootstrap_ttl(max, Some(-1.0)), max);
        assert_eq!(bootstrap_ttl(max, Some(f64::NAN)), max);
    }
}
