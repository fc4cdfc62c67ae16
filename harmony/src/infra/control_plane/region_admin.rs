//! The control plane's admin API as the [`RegionAdmin`] capability: each answer becomes the
//! domain's type, each failure the `CapabilityError` of the same kind.

use async_trait::async_trait;
use harmony_api::{BootstrapToken, Health, RegionView, ZoneView};
use harmony_types::{RegionId, ZoneId};

use super::client::{ControlPlaneClient, ControlPlaneError};
use crate::domain::capability::{
    BootstrapGrant, CapabilityError, RegionAdmin, RegionHealth, RegionState, ZoneState,
};

impl From<Health> for RegionHealth {
    fn from(h: Health) -> Self {
        match h {
            Health::Healthy => RegionHealth::Healthy,
            Health::Unhealthy => RegionHealth::Unhealthy,
            Health::Unavailable => RegionHealth::Unavailable,
        }
    }
}

impl From<RegionView> for RegionState {
    fn from(v: RegionView) -> Self {
        let zones = if v.zones.is_empty() {
            // A control plane from before zones: the region is its one zone.
            vec![ZoneState {
                zone: v.zone.clone(),
                health: v.health.into(),
                health_reason: v.health_reason.clone(),
                bootstrapped: v.bootstrapped,
                decommissioned: v.decommissioned,
                agent_version: v.agent_version.clone(),
            }]
        } else {
            v.zones.iter().map(|z| zone_state(&v, z)).collect()
        };
        RegionState {
            region: v.region,
            health: v.health.into(),
            health_reason: v.health_reason,
            bootstrapped: v.bootstrapped,
            decommissioned: v.decommissioned,
            agent_version: v.agent_version,
            zones,
        }
    }
}

/// Zone `z` of region `r` in the domain's terms. A view without the zone's `bootstrapped`
/// (an older control plane) reads the region's for its first zone, and "its agent ever
/// reported" for the others.
fn zone_state(r: &RegionView, z: &ZoneView) -> ZoneState {
    let bootstrapped = z.bootstrapped.unwrap_or(if z.zone == r.zone {
        r.bootstrapped
    } else {
        z.last_heartbeat.is_some() || z.agent_version.is_some()
    });
    ZoneState {
        zone: z.zone.clone(),
        health: z.health.into(),
        health_reason: z.health_reason.clone().unwrap_or_default(),
        bootstrapped,
        decommissioned: r.decommissioned || z.decommissioned.unwrap_or(false),
        agent_version: z.agent_version.clone(),
    }
}

impl From<BootstrapToken> for BootstrapGrant {
    fn from(t: BootstrapToken) -> Self {
        BootstrapGrant {
            region: t.region,
            zone: t.zone,
            token: t.bootstrap_token,
            expires_at_ms: t.bootstrap_expires_at,
        }
    }
}

impl ControlPlaneClient {
    /// The capability error of a failed admin call about `region`.
    fn admin_error(&self, region: &RegionId, e: ControlPlaneError) -> CapabilityError {
        e.into_capability(
            &format!("region {region}"),
            &format!("control plane {}", self.url()),
        )
    }

    /// The capability error of a failed admin call about zone `zone` of `region`.
    fn zone_error(
        &self,
        region: &RegionId,
        zone: &ZoneId,
        e: ControlPlaneError,
    ) -> CapabilityError {
        e.into_capability(
            &format!("zone {zone} of region {region}"),
            &format!("control plane {}", self.url()),
        )
    }
}

#[async_trait]
impl RegionAdmin for ControlPlaneClient {
    fn control_plane_url(&self) -> &str {
        self.url()
    }

    async fn create_region(
        &self,
        region: &RegionId,
        zone: &ZoneId,
    ) -> Result<Option<BootstrapGrant>, CapabilityError> {
        ControlPlaneClient::create_region(self, region, zone)
            .await
            .map(|created| created.map(BootstrapGrant::from))
            .map_err(|e| self.admin_error(region, e))
    }

    async fn add_zone(
        &self,
        region: &RegionId,
        zone: &ZoneId,
    ) -> Result<Option<BootstrapGrant>, CapabilityError> {
        ControlPlaneClient::add_zone(self, region, zone, None)
            .await
            .map(|added| added.map(BootstrapGrant::from))
            .map_err(|e| self.zone_error(region, zone, e))
    }

    async fn new_bootstrap_token(
        &self,
        region: &RegionId,
        zone: &ZoneId,
    ) -> Result<BootstrapGrant, CapabilityError> {
        self.new_zone_bootstrap_token(region, zone)
            .await
            .map(BootstrapGrant::from)
            .map_err(|e| self.zone_error(region, zone, e))
    }

    async fn region_state(
        &self,
        region: &RegionId,
    ) -> Result<Option<RegionState>, CapabilityError> {
        self.region(region.as_str())
            .await
            .map(|view| view.map(RegionState::from))
            .map_err(|e| self.admin_error(region, e))
    }

    async fn decommission_region(&self, region: &RegionId) -> Result<(), CapabilityError> {
        self.decommission(region.as_str())
            .await
            .map_err(|e| self.admin_error(region, e))
    }
}

#[cfg(test)]
mod tests {
    use harmony_api::ApiError;
    use serde_json::json;

    use super::super::tests::{Reply, TestServer};
    use super::*;

    fn region() -> RegionId {
        RegionId::parse("east").unwrap()
    }

    fn zone(z: &str) -> ZoneId {
        ZoneId::parse(z).unwrap()
    }

    #[tokio::test]
    async fn answers_become_domain_types_and_the_token_is_never_shown() {
        let server = TestServer::start(|seen| match (seen.method.as_str(), seen.uri.as_str()) {
            ("POST", "/v1/admin/regions") => Reply::json(
                201,
                json!({"region": "east", "zone": "z1", "bootstrap_token": "hbt_id_s3cr3t",
                       "bootstrap_expires_at": 42}),
            ),
            ("GET", "/v1/regions/east") => Reply::json(
                200,
                json!({"region": "east", "zone": "z1", "health": "unhealthy",
                       "health_reason": "heartbeat late", "bootstrapped": true,
                       "agent_version": "0.1.0"}),
            ),
            ("DELETE", "/v1/admin/regions/east") => Reply::json(200, json!({})),
            _ => Reply::json(404, ApiError::new("no such region")),
        })
        .await;
        let admin = server.client();
        let grant = RegionAdmin::create_region(&admin, &region(), &zone("z1"))
            .await
            .unwrap()
            .expect("created");
        assert_eq!(
            (
                grant.region.as_str(),
                grant.zone.as_str(),
                grant.expires_at_ms
            ),
            ("east", "z1", 42)
        );
        assert_eq!(grant.token.expose(), "hbt_id_s3cr3t");
        assert!(!format!("{grant:?}").contains("s3cr3t"));
        let state = admin.region_state(&region()).await.unwrap().unwrap();
        // A view without zones (a control plane from before zones) is its one zone.
        let z1 = ZoneState {
            zone: "z1".into(),
            health: RegionHealth::Unhealthy,
            health_reason: "heartbeat late".into(),
            bootstrapped: true,
            decommissioned: false,
            agent_version: Some("0.1.0".into()),
        };
        assert_eq!(
            state,
            RegionState {
                region: "east".into(),
                health: RegionHealth::Unhealthy,
                health_reason: "heartbeat late".into(),
                bootstrapped: true,
                decommissioned: false,
                agent_version: Some("0.1.0".into()),
                zones: vec![z1.clone()],
            }
        );
        assert_eq!(
            admin.zone_state(&region(), &zone("z1")).await.unwrap(),
            Some(z1)
        );
        assert_eq!(
            admin.zone_state(&region(), &zone("z2")).await.unwrap(),
            None
        );
        let west = RegionId::parse("west").unwrap();
        assert_eq!(admin.region_state(&west).await.unwrap(), None);
        admin.decommission_region(&region()).await.unwrap();
        assert_eq!(admin.control_plane_url(), server.url);
    }

    #[tokio::test]
    async fn zones_are_added_and_tokened_by_name_and_each_reads_its_own_state() {
        let server = TestServer::start(|seen| match (seen.method.as_str(), seen.uri.as_str()) {
            ("POST", "/v1/admin/regions/east/zones") if seen.body.contains(r#""zone":"z2""#) => {
                Reply::json(
                    201,
                    json!({"region": "east", "zone": "z2", "bootstrap_token": "hbt_z2_s3cr3t",
                           "bootstrap_expires_at": 7}),
                )
            }
            ("POST", "/v1/admin/regions/east/zones") => {
                Reply::json(409, ApiError::new("zone z1 of region east exists"))
            }
            ("POST", "/v1/admin/regions/east/bootstrap-token")
                if seen.body.contains(r#""zone":"z2""#) =>
            {
                Reply::json(
                    201,
                    json!({"region": "east", "zone": "z2", "bootstrap_token": "hbt_again_s3cr3t",
                           "bootstrap_expires_at": 8}),
                )
            }
            ("GET", "/v1/regions/east") => Reply::json(
                200,
                json!({"region": "east", "zone": "z1", "health": "healthy",
                "health_reason": "heartbeats on time", "bootstrapped": true,
                "zones": [
                    {"zone": "z1", "health": "healthy", "health_reason": "on time",
                     "bootstrapped": true, "agent_version": "1.0",
                     "decommissioned": false},
                    {"zone": "z2", "health": "unavailable",
                     "health_reason": "never connected", "bootstrapped": false},
                    // No `bootstrapped` (an older control plane): its agent reported.
                    {"zone": "z3", "health": "unhealthy", "last_heartbeat": 5},
                    {"zone": "z4", "health": "unavailable", "decommissioned": true}
                ]}),
            ),
            _ => Reply::json(404, ApiError::new("no such region")),
        })
        .await;
        let admin = server.client();
        let added = RegionAdmin::add_zone(&admin, &region(), &zone("z2"))
            .await
            .unwrap()
            .expect("added");
        assert_eq!((added.region.as_str(), added.zone.as_str()), ("east", "z2"));
        assert_eq!(added.token.expose(), "hbt_z2_s3cr3t");
        // The zone exists already: its token was handed out then.
        assert!(
            RegionAdmin::add_zone(&admin, &region(), &zone("z1"))
                .await
                .unwrap()
                .is_none()
        );
        let again = RegionAdmin::new_bootstrap_token(&admin, &region(), &zone("z2"))
            .await
            .unwrap();
        assert_eq!((again.zone.as_str(), again.expires_at_ms), ("z2", 8));

        let state = admin.region_state(&region()).await.unwrap().unwrap();
        let names: Vec<&str> = state.zones.iter().map(|z| z.zone.as_str()).collect();
        assert_eq!(names, ["z1", "z2", "z3", "z4"]);
        assert!(state.is_first_zone("z1"));
        let z1 = state.zone("z1").unwrap();
        assert!(z1.is_healthy() && z1.bootstrapped && !z1.decommissioned);
        assert_eq!(z1.agent_version.as_deref(), Some("1.0"));
        let z2 = state.zone("z2").unwrap();
        assert_eq!(
            (z2.health, z2.health_reason.as_str(), z2.bootstrapped),
            (RegionHealth::Unavailable, "never connected", false)
        );
        assert!(state.zone("z3").unwrap().bootstrapped);
        assert!(state.zone("z4").unwrap().decommissioned);
    }

    #[tokio::test]
    async fn a_refused_admin_token_is_forbidden_naming_the_zone_and_the_control_plane() {
        let server =
            TestServer::start(|_| Reply::json(401, ApiError::new("bad admin token"))).await;
        let admin = server.client();
        let e = RegionAdmin::new_bootstrap_token(&admin, &region(), &zone("z1"))
            .await
            .unwrap_err();
        let CapabilityError::Forbidden {
            object,
            server: by,
            message,
        } = &e
        else {
            panic!("{e}")
        };
        assert_eq!(object, "zone z1 of region east");
        assert_eq!(by, &format!("control plane {}", server.url));
        assert!(message.contains("bad admin token"), "{e}");
        assert!(!e.to_string().contains("admin-test-token"), "{e}");
    }
}
