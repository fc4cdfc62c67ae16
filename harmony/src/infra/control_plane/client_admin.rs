//! Region and zone administration through the control plane's admin API.

use harmony_api::{AddZone, CreateRegion, NewBootstrap};
use harmony_http::reqwest::{Method, StatusCode};
use std::time::Duration;

use super::client::{ControlPlaneClient, ControlPlaneError, CreatedRegion};

impl ControlPlaneClient {
    /// Creates `region` with `zone`; `None` when it already exists (its token was shown once).
    pub async fn create_region(
        &self,
        region: &harmony_types::RegionId,
        zone: &harmony_types::ZoneId,
    ) -> Result<Option<CreatedRegion>, ControlPlaneError> {
        self.create_region_with_ttl(region, zone, None).await
    }

    /// As [`Self::create_region`], with a bootstrap token lifetime shorter than the server's.
    pub async fn create_region_with_ttl(
        &self,
        region: &harmony_types::RegionId,
        zone: &harmony_types::ZoneId,
        ttl: Option<Duration>,
    ) -> Result<Option<CreatedRegion>, ControlPlaneError> {
        let what = format!("creating region {region}");
        let body = CreateRegion {
            region: region.to_string(),
            zone: zone.to_string(),
            bootstrap_ttl_s: ttl.map(|t| t.as_secs_f64()),
        };
        let (status, body) = self
            .call(Method::POST, "/v1/admin/regions", Some(&body), &what)
            .await?;
        match status {
            StatusCode::CREATED => Self::parse(&what, &body).map(Some),
            StatusCode::CONFLICT => Ok(None),
            s => Err(Self::status_error(&what, s, &body)),
        }
    }

    /// Mints a new bootstrap token for a region whose agent never connected.
    pub async fn new_bootstrap_token(
        &self,
        region: &harmony_types::RegionId,
    ) -> Result<CreatedRegion, ControlPlaneError> {
        let what = format!("minting a bootstrap token for region {region}");
        let path = format!("/v1/admin/regions/{region}/bootstrap-token");
        let (status, body) = self.call::<()>(Method::POST, &path, None, &what).await?;
        match status {
            StatusCode::CREATED => Self::parse(&what, &body),
            s => Err(Self::status_error(&what, s, &body)),
        }
    }

    /// Mints a new bootstrap token for zone `zone` of `region`, whose agent never connected.
    pub async fn new_zone_bootstrap_token(
        &self,
        region: &harmony_types::RegionId,
        zone: &harmony_types::ZoneId,
    ) -> Result<CreatedRegion, ControlPlaneError> {
        let what = format!("minting a bootstrap token for region {region} zone {zone}");
        let path = format!("/v1/admin/regions/{region}/bootstrap-token");
        let body = NewBootstrap {
            zone: Some(zone.to_string()),
        };
        let (status, body) = self.call(Method::POST, &path, Some(&body), &what).await?;
        match status {
            StatusCode::CREATED => Self::parse(&what, &body),
            s => Err(Self::status_error(&what, s, &body)),
        }
    }

    /// Adds zone `zone` (a cluster with its own agent) to `region`: the zone agent's one-time
    /// bootstrap token; `None` when the zone already exists (its token was shown once).
    pub async fn add_zone(
        &self,
        region: &harmony_types::RegionId,
        zone: &harmony_types::ZoneId,
        ttl: Option<Duration>,
    ) -> Result<Option<CreatedRegion>, ControlPlaneError> {
        let what = format!("adding zone {zone} to region {region}");
        let path = format!("/v1/admin/regions/{region}/zones");
        let body = AddZone {
            zone: zone.to_string(),
            bootstrap_ttl_s: ttl.map(|t| t.as_secs_f64()),
        };
        let (status, body) = self.call(Method::POST, &path, Some(&body), &what).await?;
        match status {
            StatusCode::CREATED => Self::parse(&what, &body).map(Some),
            StatusCode::CONFLICT => Ok(None),
            s => Err(Self::status_error(&what, s, &body)),
        }
    }

    /// Decommissions one zone of `region`: revokes its agent's identity and closes its
    /// connection; the region's other zones go on.
    pub async fn decommission_zone(
        &self,
        region: &str,
        zone: &str,
    ) -> Result<(), ControlPlaneError> {
        let what = format!("decommissioning zone {zone} of region {region}");
        let path = format!("/v1/admin/regions/{region}/zones/{zone}");
        let (status, body) = self.call::<()>(Method::DELETE, &path, None, &what).await?;
        match status {
            StatusCode::OK => Ok(()),
            s => Err(Self::status_error(&what, s, &body)),
        }
    }

    /// Decommissions `region`: revokes its identity and closes its agent's connection.
    pub async fn decommission(&self, region: &str) -> Result<(), ControlPlaneError> {
        let what = format!("decommissioning region {region}");
        let path = format!("/v1/admin/regions/{region}");
        let (status, body) = self.call::<()>(Method::DELETE, &path, None, &what).await?;
        match status {
            StatusCode::OK => Ok(()),
            s => Err(Self::status_error(&what, s, &body)),
        }
    }
}
