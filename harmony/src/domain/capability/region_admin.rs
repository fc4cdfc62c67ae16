//! The region administration capability: create a region on the control plane with its first
//! zone, or add a zone to it (receiving that zone's agent's one-time bootstrap token), mint a
//! fresh token for a zone, read a region's and each zone's health, decommission.
//!
//! A Score that brings a region under the control plane (the agent rollout) needs it; a topology
//! offers it when it can reach the control plane's admin API. Traits and data only: the adapter
//! over the control plane's HTTP API lives in `infra::control_plane`.

use async_trait::async_trait;
use std::fmt;

use super::CapabilityError;
use harmony_agent_protocol::SecretString;
use harmony_types::{RegionId, ZoneId};

/// A region's (or one zone's) health as the control plane judges it from its agents'
/// heartbeats: a region is as healthy as its healthiest zone.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum RegionHealth {
    /// Heartbeats on time and the agent reaches its cluster.
    Healthy,
    /// Connected but degraded, heartbeats late, or disconnected within the grace period.
    Unhealthy,
    /// No heartbeat past the threshold, never connected, or decommissioned.
    Unavailable,
}

impl fmt::Display for RegionHealth {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            RegionHealth::Healthy => "healthy",
            RegionHealth::Unhealthy => "unhealthy",
            RegionHealth::Unavailable => "unavailable",
        })
    }
}

/// What the control plane knows of a region, in the terms a rollout decides on. The region-wide
/// fields other than `health` describe its first zone (the one it was created with), as the
/// control plane's own view does; `zones` describes each zone.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RegionState {
    /// The region.
    pub region: String,
    /// Its health: healthy when any zone is, else unhealthy when any is, else unavailable.
    pub health: RegionHealth,
    /// Why it has that health, in the control plane's words.
    pub health_reason: String,
    /// Whether its first zone's agent exchanged its bootstrap token for an identity.
    pub bootstrapped: bool,
    /// Whether the region was decommissioned (its identities revoked).
    pub decommissioned: bool,
    /// The version its first zone's agent reported, once connected.
    pub agent_version: Option<String>,
    /// Its zones (each a cluster with its own agent), the first zone first.
    pub zones: Vec<ZoneState>,
}

impl RegionState {
    /// Whether the region is healthy.
    pub fn is_healthy(&self) -> bool {
        self.health == RegionHealth::Healthy
    }

    /// Its zone `zone`, if the region has it.
    pub fn zone(&self, zone: &str) -> Option<&ZoneState> {
        self.zones.iter().find(|z| z.zone == zone)
    }

    /// Whether `zone` is the region's first zone (the one it was created with).
    pub fn is_first_zone(&self, zone: &str) -> bool {
        self.zones.first().is_some_and(|z| z.zone == zone)
    }
}

/// What the control plane knows of one zone of a region (a cluster with its own agent).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ZoneState {
    /// The zone.
    pub zone: String,
    /// Its health, from its own agent's heartbeats.
    pub health: RegionHealth,
    /// Why it has that health, in the control plane's words.
    pub health_reason: String,
    /// Whether its agent exchanged its bootstrap token for an identity (no token is needed
    /// again, and the control plane refuses to mint one).
    pub bootstrapped: bool,
    /// Whether the zone (or its region) was decommissioned (its identity revoked).
    pub decommissioned: bool,
    /// The version its agent reported, once connected.
    pub agent_version: Option<String>,
}

impl ZoneState {
    /// Whether the zone is healthy.
    pub fn is_healthy(&self) -> bool {
        self.health == RegionHealth::Healthy
    }
}

/// A one-time bootstrap token for the agent of one zone of a region: give it to the agent,
/// never print it.
#[derive(Clone)]
pub struct BootstrapGrant {
    /// The region.
    pub region: String,
    /// The zone the token's agent serves.
    pub zone: String,
    /// The token (`hbt_...`); `Debug` and `Display` print `<redacted>`.
    pub token: SecretString,
    /// When the token expires, ms since the Unix epoch.
    pub expires_at_ms: i64,
}

impl fmt::Debug for BootstrapGrant {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("BootstrapGrant")
            .field("region", &self.region)
            .field("zone", &self.zone)
            .field("expires_at_ms", &self.expires_at_ms)
            .finish_non_exhaustive()
    }
}

/// Administer regions and their zones on a control plane: what bringing a zone's agent online
/// needs.
///
/// Errors are [`CapabilityError`]s of the kind the control plane answered (a refused admin token
/// is `Forbidden`, an unknown region or zone `NotFound`), never carrying a token.
#[async_trait]
#[diagnostic::on_unimplemented(
    message = "topology `{Self}` cannot administer regions (`RegionAdmin`)",
    label = "this Score needs a topology that implements `RegionAdmin` (it creates the region on the control plane)",
    note = "wrap the region's direct topology with the control plane's client: `RegionSiteTopology::new(topology, control_plane)`, or implement `RegionAdmin` for `{Self}`"
)]
pub trait RegionAdmin: Send + Sync {
    /// The control plane's URL: where regions are administered (named in reports), and what
    /// agents dial unless a rollout says otherwise.
    fn control_plane_url(&self) -> &str;

    /// Creates `region` with its first zone `zone` and mints its agent's one-time bootstrap
    /// token; `None` when the region already exists (its token was handed out then).
    async fn create_region(
        &self,
        region: &RegionId,
        zone: &ZoneId,
    ) -> Result<Option<BootstrapGrant>, CapabilityError>;

    /// Adds zone `zone` (a cluster with its own agent) to the existing `region` and mints its
    /// agent's one-time bootstrap token; `None` when the region already has that zone (its
    /// token was handed out then).
    async fn add_zone(
        &self,
        region: &RegionId,
        zone: &ZoneId,
    ) -> Result<Option<BootstrapGrant>, CapabilityError>;

    /// Mints a new bootstrap token for zone `zone` of `region`, whose agent never obtained an
    /// identity (the previous token may have expired).
    async fn new_bootstrap_token(
        &self,
        region: &RegionId,
        zone: &ZoneId,
    ) -> Result<BootstrapGrant, CapabilityError>;

    /// The region and each of its zones as the control plane sees them; `None` when the region
    /// does not exist.
    async fn region_state(&self, region: &RegionId)
    -> Result<Option<RegionState>, CapabilityError>;

    /// Zone `zone` of `region` as the control plane sees it; `None` when the region does not
    /// exist or has no such zone.
    async fn zone_state(
        &self,
        region: &RegionId,
        zone: &ZoneId,
    ) -> Result<Option<ZoneState>, CapabilityError> {
        Ok(self
            .region_state(region)
            .await?
            .and_then(|r| r.zone(zone.as_str()).cloned()))
    }

    /// Decommissions `region`: revokes its identity and closes its agent's connection.
    async fn decommission_region(&self, region: &RegionId) -> Result<(), CapabilityError>;
}

/// A borrowed region administrator is one.
#[async_trait]
impl<A: RegionAdmin + ?Sized> RegionAdmin for &A {
    fn control_plane_url(&self) -> &str {
        (**self).control_plane_url()
    }

    async fn create_region(
        &self,
        region: &RegionId,
        zone: &ZoneId,
    ) -> Result<Option<BootstrapGrant>, CapabilityError> {
        (**self).create_region(region, zone).await
    }

    async fn add_zone(
        &self,
        region: &RegionId,
        zone: &ZoneId,
    ) -> Result<Option<BootstrapGrant>, CapabilityError> {
        (**self).add_zone(region, zone).await
    }

    async fn new_bootstrap_token(
        &self,
        region: &RegionId,
        zone: &ZoneId,
    ) -> Result<BootstrapGrant, CapabilityError> {
        (**self).new_bootstrap_token(region, zone).await
    }

    async fn region_state(
        &self,
        region: &RegionId,
    ) -> Result<Option<RegionState>, CapabilityError> {
        (**self).region_state(region).await
    }

    async fn zone_state(
        &self,
        region: &RegionId,
        zone: &ZoneId,
    ) -> Result<Option<ZoneState>, CapabilityError> {
        (**self).zone_state(region, zone).await
    }

    async fn decommission_region(&self, region: &RegionId) -> Result<(), CapabilityError> {
        (**self).decommission_region(region).await
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_grant_never_shows_its_token() {
        let grant = BootstrapGrant {
            region: "eu-west".into(),
            zone: "paris-1".into(),
            token: SecretString::new("hbt_abc_s3cr3t"),
            expires_at_ms: 1,
        };
        let shown = format!("{grant:?} {}", grant.token);
        assert!(!shown.contains("s3cr3t"), "{shown}");
        assert!(
            shown.contains("eu-west") && shown.contains("paris-1"),
            "{shown}"
        );
    }

    #[test]
    fn only_healthy_is_healthy() {
        let state = |health| RegionState {
            region: "r".into(),
            health,
            health_reason: String::new(),
            bootstrapped: true,
            decommissioned: false,
            agent_version: None,
            zones: Vec::new(),
        };
        assert!(state(RegionHealth::Healthy).is_healthy());
        assert!(!state(RegionHealth::Unhealthy).is_healthy());
        assert!(!state(RegionHealth::Unavailable).is_healthy());
        assert_eq!(RegionHealth::Unavailable.to_string(), "unavailable");
    }

    #[test]
    fn a_zone_is_found_by_name_and_the_first_zone_is_the_regions_own() {
        let zone = |name: &str, health| ZoneState {
            zone: name.into(),
            health,
            health_reason: String::new(),
            bootstrapped: false,
            decommissioned: false,
            agent_version: None,
        };
        let region = RegionState {
            region: "eu".into(),
            health: RegionHealth::Healthy,
            health_reason: String::new(),
            bootstrapped: false,
            decommissioned: false,
            agent_version: None,
            zones: vec![
                zone("a", RegionHealth::Healthy),
                zone("b", RegionHealth::Unavailable),
            ],
        };
        // The region is healthy through zone a; zone b is not.
        assert!(region.is_healthy());
        assert!(region.zone("a").unwrap().is_healthy());
        assert!(!region.zone("b").unwrap().is_healthy());
        assert_eq!(region.zone("c"), None);
        assert!(region.is_first_zone("a") && !region.is_first_zone("b"));
    }
}
