//! `/v1/admin/regions...` and `/v1/regions...`.

use axum::Json;
use axum::body::Bytes;
use axum::extract::{Path, State};
use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use harmony_api::{
    AddZone, BootstrapToken, CreateRegion, Decommissioned, NewBootstrap, RegionList,
    TenantRegionList,
};

use super::{AppState, Body, Caller, Failure};
use crate::services::identities;
use crate::services::regions::{self, Minted, RegionError};

fn token(m: Minted) -> (StatusCode, Json<BootstrapToken>) {
    (
        StatusCode::CREATED,
        Json(BootstrapToken {
            region: m.region,
            zone: m.zone,
            bootstrap_token: m.token,
            bootstrap_expires_at: m.expires_at,
        }),
    )
}

/// `bootstrap_ttl_s`: 1 ms to [`MAX_TTL_S`](super::body::MAX_TTL_S) (the server's
/// `--bootstrap-ttl-s` caps it further).
fn bootstrap_ttl(asked: Option<f64>) -> Result<Option<f64>, String> {
    super::body::seconds(
        "bootstrap_ttl_s",
        asked,
        0.001,
        super::body::MAX_TTL_S,
        "omit it for the server's --bootstrap-ttl-s, or ask for a shorter lifetime",
    )
}

/// `POST /v1/admin/regions`: 201 with the bootstrap token (shown once), 409 if it exists.
pub async fn create(
    State(s): State<AppState>,
    Body(body): Body<CreateRegion>,
) -> Result<(StatusCode, Json<BootstrapToken>), Failure> {
    let ttl = bootstrap_ttl(body.bootstrap_ttl_s).map_err(super::body::bad_request)?;
    let minted = regions::create(&s.cp, &body.region, &body.zone, ttl).await?;
    Ok(token(minted))
}

/// `POST /v1/admin/regions/{region}/bootstrap-token` (optional body `{"zone": ...}`): a new
/// token for a zone's agent (the first zone's by default) that never obtained its identity.
pub async fn new_bootstrap(
    State(s): State<AppState>,
    Path(region): Path<String>,
    body: Bytes,
) -> Result<(StatusCode, Json<BootstrapToken>), Failure> {
    let asked: NewBootstrap = if body.iter().all(u8::is_ascii_whitespace) {
        NewBootstrap::default()
    } else {
        super::body::parse(&body).map_err(|e| {
            Failure::new(
                StatusCode::BAD_REQUEST,
                format!("POST /v1/admin/regions/{region}/bootstrap-token: {e}; send {{\"zone\": \"<zone>\"}} or no body"),
            )
        })?
    };
    Ok(token(
        regions::new_bootstrap(&s.cp, &region, asked.zone.as_deref()).await?,
    ))
}

/// `POST /v1/admin/regions/{region}/zones`: adds a zone; 201 with its agent's bootstrap token.
pub async fn add_zone(
    State(s): State<AppState>,
    Path(region): Path<String>,
    Body(body): Body<AddZone>,
) -> Result<(StatusCode, Json<BootstrapToken>), Failure> {
    let ttl = bootstrap_ttl(body.bootstrap_ttl_s).map_err(super::body::bad_request)?;
    let minted = regions::add_zone(&s.cp, &region, &body.zone, ttl).await?;
    Ok(token(minted))
}

/// `DELETE /v1/admin/regions/{region}/zones/{zone}`: revokes the zone's identity and closes its
/// agent; the region's other zones go on.
pub async fn decommission_zone(
    State(s): State<AppState>,
    Path((region, zone)): Path<(String, String)>,
) -> Result<Json<Decommissioned>, Failure> {
    let zones = regions::zones_of(&s.cp, &region).await?;
    if !identities::revoke_zone(&s.cp, &region, &zone).await? {
        return Err(RegionError::UnknownZone {
            region,
            zone,
            known: regions::zone_names(&zones),
        }
        .into());
    }
    Ok(Json(Decommissioned {
        region,
        zone: Some(zone),
        decommissioned: true,
    }))
}

/// `DELETE /v1/admin/regions/{region}`: revokes the region's identity and closes its agent.
pub async fn decommission(
    State(s): State<AppState>,
    Path(region): Path<String>,
) -> Result<Json<Decommissioned>, Failure> {
    if !identities::revoke(&s.cp, &region).await? {
        return Err(RegionError::Unknown(region).into());
    }
    Ok(Json(Decommissioned {
        region,
        zone: None,
        decommissioned: true,
    }))
}

/// `GET /v1/regions`: a tenant gets region, zones and health only ([`TenantRegionList`]).
pub async fn list(State(s): State<AppState>, caller: Caller) -> Result<Response, Failure> {
    let regions = regions::list(&s.cp).await?;
    Ok(if caller.is_admin() {
        Json(RegionList { regions }).into_response()
    } else {
        Json(TenantRegionList {
            regions: regions.iter().map(|r| r.for_tenant()).collect(),
        })
        .into_response()
    })
}

/// `GET /v1/regions/{region}`: a tenant gets region, zones and health only.
pub async fn one(
    State(s): State<AppState>,
    Path(region): Path<String>,
    caller: Caller,
) -> Result<Response, Failure> {
    let view = regions::view(&s.cp, &region).await?;
    Ok(if caller.is_admin() {
        Json(view).into_response()
    } else {
        Json(view.for_tenant()).into_response()
    })
}
