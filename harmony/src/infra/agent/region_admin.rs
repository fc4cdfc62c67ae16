//! The control plane's admin API as the [`RegionAdmin`] capability: each answer becomes the
//! domain's type, each failure the `CapabilityError` of the same kind.

use async_trait::async_trait;
use harmony_api::{BootstrapToken, Health, RegionView};
use harmony_types::{RegionId, ZoneId};

use super::client::{ControlPlaneClient, ControlPlaneError};
use crate::domain::capability::{
    BootstrapGrant, CapabilityError, RegionAdmin, RegionHealth, RegionState,
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
        RegionState {
            region: v.region,
            health: v.health.into(),
            health_reason: v.health_reason,
            bootstrapped: v.bootstrapped,
            decommissioned: v.decommissioned,
            agent_version: v.agent_version,
        }
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

    async fn new_bootstrap_token(
        &self,
        region: &RegionId,
    ) -> Result<BootstrapGrant, CapabilityError> {
        ControlPlaneClient::new_bootstrap_token(self, region)
            .await
            .map(BootstrapGrant::from)
            .map_err(|e| self.admin_error(region, e))
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
        let grant = RegionAdmin::create_region(&admin, &region(), &ZoneId::parse("z1").unwrap())
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
        assert_eq!(
            state,
            RegionState {
                region: "east".into(),
                health: RegionHealth::Unhealthy,
                health_reason: "heartbeat late".into(),
                bootstrapped: true,
                decommissioned: false,
                agent_version: Some("0.1.0".into()),
            }
        );
        let west = RegionId::parse("west").unwrap();
        assert_eq!(admin.region_state(&west).await.unwrap(), None);
        admin.decommission_region(&region()).await.unwrap();
        assert_eq!(admin.control_plane_url(), server.url);
    }

    #[tokio::test]
    async fn a_refused_admin_token_is_forbidden_naming_the_region_and_the_control_plane() {
        let server =
            TestServer::start(|_| Reply::json(401, ApiError::new("bad admin token"))).await;
        let admin = server.client();
        let e = RegionAdmin::new_bootstrap_token(&admin, &region())
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
        assert_eq!(object, "region east");
        assert_eq!(by, &format!("control plane {}", server.url));
        assert!(message.contains("bad admin token"), "{e}");
        assert!(!e.to_string().contains("admin-test-token"), "{e}");
    }
}
