//! Regions: creation with a one-time bootstrap token, and how each region looks now (health from
//! its session row, so any replica answers alike).

use harmony_agent_protocol::{Hello, SecretString, Services};
use harmony_api::{Health, RegionView, ZoneView};
use harmony_types::{RegionId, ZoneId};
use std::collections::HashMap;
use std::time::Duration;

use super::health::HealthPolicy;
pub use super::health::{health_of, liveness, session_services, status_of};
pub use super::zones::{Snapshot, describe_zone, pick_zone, zone_names};
use super::{ControlPlane, placement};
use crate::store::{RegionRecord, StoreError, ZoneRecord, now_ms};
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
    /// The zone's agent already holds an identity.
    #[error(
        "region {0} zone {1} already has an agent identity; a second agent cannot bootstrap. Revoke it first (DELETE /v1/admin/regions/{0}/zones/{1}), or add another zone with POST /v1/admin/regions/{0}/zones"
    )]
    AlreadyBootstrapped(String, String),
    /// The region has no such zone.
    #[error(
        "zone: region {region} has no zone {zone} (its zones: {known}); add it with POST /v1/admin/regions/{region}/zones"
    )]
    UnknownZone {
        /// The region.
        region: String,
        /// The zone asked for.
        zone: String,
        /// Its zones, comma-separated.
        known: String,
    },
    /// The zone exists (and is not decommissioned).
    #[error(
        "zone {zone} of region {region} already exists; its bootstrap token was shown once. Use POST /v1/admin/regions/{region}/bootstrap-token with {{\"zone\": \"{zone}\"}} if its agent never connected"
    )]
    ZoneExists {
        /// The region.
        region: String,
        /// The zone.
        zone: String,
    },
    /// The zone is decommissioned.
    #[error(
        "zone {zone} of region {region} is decommissioned; add it again with POST /v1/admin/regions/{region}/zones"
    )]
    ZoneDecommissioned {
        /// The region.
        region: String,
        /// The zone.
        zone: String,
    },
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

/// Adds zone `zone` (a cluster with its own agent) to the active region `region`, or
/// re-commissions a decommissioned zone, with a bootstrap token for its agent.
pub async fn add_zone(
    cp: &ControlPlane,
    region: &str,
    zone: &str,
    ttl_s: Option<f64>,
) -> Result<Minted, RegionError> {
    let record = existing(cp, region).await?;
    if record.decommissioned_at.is_some() {
        return Err(RegionError::Decommissioned(region.to_string()));
    }
    let zone = ZoneId::parse(zone).map_err(|e| RegionError::Invalid {
        field: "zone",
        reason: e.to_string(),
    })?;
    if !cp.store.add_zone(region, zone.as_str()).await? {
        return Err(RegionError::ZoneExists {
            region: region.to_string(),
            zone: zone.to_string(),
        });
    }
    let minted = mint(cp, region, zone.as_str(), ttl_s).await?;
    log::info!("region {region}: added zone {zone}");
    Ok(minted)
}

/// The zones of `region` (first zone first), or [`RegionError::Unknown`].
pub async fn zones_of(cp: &ControlPlane, region: &str) -> Result<Vec<ZoneRecord>, RegionError> {
    let record = existing(cp, region).await?;
    let snap = Snapshot {
        zones: cp.store.region_zones(region).await?,
        sessions: HashMap::new(),
        pending: HashMap::new(),
        states: HashMap::new(),
        by_region: Default::default(),
    };
    Ok(snap.zones_of(&record))
}

/// A new bootstrap token for a zone (the region's first zone when `None`) whose agent never
/// obtained an identity, or whose identity expired (its agent was offline past the identity's
/// lifetime): the agent exchanges it for a new identity and the zone keeps its queued requests.
pub async fn new_bootstrap(
    cp: &ControlPlane,
    region: &str,
    zone: Option<&str>,
) -> Result<Minted, RegionError> {
    let record = existing(cp, region).await?;
    if record.decommissioned_at.is_some() {
        return Err(RegionError::Decommissioned(region.to_string()));
    }
    let zones = zones_of(cp, region).await?;
    let wanted = zone.unwrap_or(&record.zone);
    let Some(z) = zones.iter().find(|z| z.zone == wanted) else {
        return Err(RegionError::UnknownZone {
            region: region.to_string(),
            zone: wanted.to_string(),
            known: zone_names(&zones),
        });
    };
    if z.decommissioned_at.is_some() {
        return Err(RegionError::ZoneDecommissioned {
            region: region.to_string(),
            zone: z.zone.clone(),
        });
    }
    if z.has_identity && z.live_identity {
        return Err(RegionError::AlreadyBootstrapped(
            region.to_string(),
            z.zone.clone(),
        ));
    }
    mint(cp, &record.name, &z.zone, None).await
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
        .filter(|t| *t > 0.0)
        .and_then(|t| Duration::try_from_secs_f64(t).ok())
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
    let expires_at = now_ms().saturating_add(i64::try_from(ttl.as_millis()).unwrap_or(i64::MAX));
    cp.store
        .add_bootstrap(
            region,
            zone,
            &tokens::hash(token.expose()),
            &salt,
            expires_at,
        )
        .await?;
    log::info!(
        "minted a bootstrap token for region {region} zone {zone} (fingerprint {}), valid until {expires_at} ms",
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
    let snap = Snapshot::read(cp).await?;
    let now = now_ms();
    Ok(regions
        .iter()
        .map(|r| describe(r, &snap, now, &cp.settings.policy))
        .collect())
}

/// One region as the API shows it.
pub async fn view(cp: &ControlPlane, region: &str) -> Result<RegionView, RegionError> {
    let record = existing(cp, region).await?;
    let snap = Snapshot::read(cp).await?;
    Ok(describe(&record, &snap, now_ms(), &cp.settings.policy))
}

/// The API view of a region from the store's snapshot. Health is the region's (any zone
/// healthy: healthy; else any unhealthy: unhealthy; else unavailable); the other top-level
/// fields describe its first zone, and its services those of the zone placement picks now.
pub fn describe(r: &RegionRecord, snap: &Snapshot, now: i64, policy: &HealthPolicy) -> RegionView {
    let zones = snap.zones_of(r);
    let first = zones
        .iter()
        .find(|z| z.zone == r.zone)
        .cloned()
        .unwrap_or_else(|| zones[0].clone());
    let session = snap.session(&first);
    let views: Vec<ZoneView> = zones
        .iter()
        .map(|z| describe_zone(z, snap, now, policy))
        .collect();
    let active: Vec<&ZoneView> = views
        .iter()
        .filter(|v| v.decommissioned != Some(true))
        .collect();
    let mut health = harmony_api::region_health(active.iter().map(|v| v.health));
    let mut health_reason = match active.as_slice() {
        [] => "every zone is decommissioned".to_string(),
        [one] => one.health_reason.clone().unwrap_or_default(),
        many => many
            .iter()
            .map(|v| {
                format!(
                    "zone {}: {} ({})",
                    v.zone,
                    v.health,
                    v.health_reason.as_deref().unwrap_or("")
                )
            })
            .collect::<Vec<_>>()
            .join("; "),
    };
    let placed = snap.placement_zone(r, now, policy);
    let (placed_health, services) = match &placed {
        Some(z) => {
            let (h, _, services) = snap.health(z, now, policy);
            (h, services)
        }
        None => (Health::Unavailable, Services::default()),
    };
    let mut advertised_services = placement::advertised_types(placed_health, &services);
    let hello: Option<Hello> = session.and_then(|s| serde_json::from_str(&s.hello_json).ok());
    let k8s_reachable = session.is_some_and(|s| liveness(s).k8s_reachable);
    if r.decommissioned_at.is_some() {
        health = Health::Unavailable;
        health_reason = "decommissioned".into();
        advertised_services.clear();
    }
    let first_live = r.decommissioned_at.is_none() && first.decommissioned_at.is_none();
    RegionView {
        region: r.name.clone(),
        zone: r.zone.clone(),
        zones: views,
        created_at: r.created_at,
        bootstrapped: first.has_identity,
        decommissioned: r.decommissioned_at.is_some(),
        health,
        health_reason,
        // A decommissioned zone's connection is being closed: it is not trusted any more.
        connected: first_live && session.is_some_and(|s| s.connected),
        connected_at: session.map(|s| s.connected_at),
        last_heartbeat: session.map(|s| s.last_heartbeat_at),
        agent_version: hello.as_ref().map(|h| h.agent_version.clone()),
        ops: hello.as_ref().map(|h| h.ops.clone()).unwrap_or_default(),
        k8s_reachable,
        pending_requests: snap
            .pending
            .get(&(first.region.clone(), first.zone.clone()))
            .copied()
            .unwrap_or(0) as usize,
        services: services.offers,
        advertised_services,
        max_frame_bytes: session.map(|s| s.max_frame_bytes),
        replica: session
            .filter(|s| first_live && s.connected)
            .map(|s| s.replica.clone()),
    }
}

#[cfg(test)]
#[path = "regions_tests.rs"]
mod tests;
