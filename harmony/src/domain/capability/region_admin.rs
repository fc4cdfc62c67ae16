//! The region administration capability: create a region on the control plane (receiving its
//! agent's one-time bootstrap token), mint a fresh token, read a region's health, decommission.
//!
//! A Score that brings a region under the control plane (the agent rollout) needs it; a topology
//! offers it when it can reach the control plane's admin API. Traits and data only: the adapter
//! over the control plane's HTTP API lives in `infra::agent`.

use async_trait::async_trait;
use std::fmt;

use super::CapabilityError;
use harmony_agent_protocol::SecretString;
use harmony_types::{RegionId, ZoneId};

/// A region's health as the control plane judges it from its agent's heartbeats.
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

/// What the control plane knows of a region, in the terms a rollout decides on.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RegionState {
    /// The region.
    pub region: String,
    /// Its health.
    pub health: RegionHealth,
    /// Why it has that health, in the control plane's words.
    pub health_reason: String,
    /// Whether an agent exchanged its bootstrap token for an identity (no token is needed again).
    pub bootstrapped: bool,
    /// Whether the region was decommissioned (its identity revoked).
    pub decommissioned: bool,
    /// The version its agent reported, once connected.
    pub agent_version: Option<String>,
}

impl RegionState {
    /// Whether the region is healthy.
    pub fn is_healthy(&self) -> bool {
        self.health == RegionHealth::Healthy
    }
}

/// A one-time bootstrap token for a region's agent: give it to the agent, never print it.
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

/// Administer regions on a control plane: what bringing a region's agent online needs.
///
/// Errors are [`CapabilityError`]s of the kind the control plane answered (a refused admin token
/// is `Forbidden`, an unknown region `NotFound`), never carrying a token.
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

    /// Mints a new bootstrap token for a region whose agent never connected (the previous one
    /// may have expired).
    async fn new_bootstrap_token(
        &self,
        region: &RegionId,
    ) -> Result<BootstrapGrant, CapabilityError>;

    /// The region as the control plane sees it; `None` when it does not exist.
    async fn region_state(&self, region: &RegionId)
    -> Result<Option<RegionState>, CapabilityError>;

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

    async fn new_bootstrap_token(
        &self,
        region: &RegionId,
    ) -> Result<BootstrapGrant, CapabilityError> {
        (**self).new_bootstrap_token(region).await
    }

    async fn region_state(
        &self,
        region: &RegionId,
    ) -> Result<Option<RegionState>, CapabilityError> {
        (**self).region_state(region).await
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
        };
        assert!(state(RegionHealth::Healthy).is_healthy());
        assert!(!state(RegionHealth::Unhealthy).is_healthy());
        assert!(!state(RegionHealth::Unavailable).is_healthy());
        assert_eq!(RegionHealth::Unavailable.to_string(), "unavailable");
    }
}
