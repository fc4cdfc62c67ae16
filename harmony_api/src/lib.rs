//! The control plane's HTTP API: every request and response body, defined once for the server
//! (`harmony_control_plane`) and its clients (`ControlPlaneClient`, the operator, tests).
//!
//! Routes (all JSON, `Authorization: Bearer <token>` except `/healthz` and `/v1/agent`). The
//! admin token reaches every route; a tenant token (`htt_...`, see [`tenancy`]) only the routes
//! marked `T`, and there only its own tenant's projects, requests and services (another
//! tenant's are 404) and no admin fields; `/v1/admin/...` answers it 403.
//!
//! ```text
//! POST   /v1/admin/tenants                        CreateTenant       -> 201 Tenant
//! GET    /v1/admin/tenants                                           -> 200 TenantList
//! POST   /v1/admin/tenants/{tenant}/tokens        CreateTenantToken  -> 201 TenantToken
//! DELETE /v1/admin/tenants/{tenant}/tokens/{id}                      -> 200 TokenRevoked
//! PUT    /v1/admin/tenants/{tenant}/caps/{region} ProjectQuota       -> 200 TenantCaps
//! POST   /v1/admin/tenants/{tenant}/projects      CreateProject      -> 201 Project
//! PUT    /v1/admin/tenants/{tenant}/projects/{project}/quotas/{region}
//!                                                 ProjectQuota       -> 200 Project
//! GET    /v1/projects                                                -> 200 ProjectList    T
//! POST   /v1/admin/regions                        CreateRegion       -> 201 BootstrapToken
//! POST   /v1/admin/regions/{region}/bootstrap-token  [NewBootstrap]  -> 201 BootstrapToken
//! POST   /v1/admin/regions/{region}/zones         AddZone            -> 201 BootstrapToken
//! DELETE /v1/admin/regions/{region}/zones/{zone}                     -> 200 Decommissioned
//! DELETE /v1/admin/regions/{region}                                  -> 200 Decommissioned
//! GET    /v1/regions                                                 -> 200 RegionList     T
//! GET    /v1/regions/{region}                                        -> 200 RegionView     T
//! POST   /v1/regions/{region}/requests            SubmitRequest      -> 200 Res            T
//!        ...?stream=ndjson (or Accept: application/x-ndjson)         -> 200 RequestEvent lines
//! GET    /v1/requests/{id}                                           -> 200 RequestStatus  T
//! POST   /v1/services                             CreateService      -> 201/202 ServiceInstance T
//! GET    /v1/services                                                -> 200 ServiceList    T
//! GET    /v1/services/{id}                                           -> 200 ServiceInstance T
//! DELETE /v1/services/{id}                                           -> 200/202 ServiceInstance T
//! ```
//!
//! A tenant's `GET /v1/regions` answer is a [`TenantRegionList`]: region, zones and health only.
//!
//! Every error is an [`ApiError`] body with a status code that says what kind of error it is.

pub mod tenancy;

pub use tenancy::*;

mod zones;

pub use harmony_agent_protocol::ops::Capacity;
use harmony_agent_protocol::{RawJson, Res, SecretString, ServiceOffer};
use serde::{Deserialize, Serialize};
use serde_json::{Map, Value};
use std::fmt;
pub use zones::{AddZone, NewBootstrap, ZoneView, region_health};

/// The media type of a streamed request answer: one [`RequestEvent`] per line.
pub const NDJSON: &str = "application/x-ndjson";

/// Three-state health of a region.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Health {
    /// Heartbeats on time and the agent reaches its cluster.
    Healthy,
    /// Connected but degraded, heartbeats late, or disconnected within the grace period.
    Unhealthy,
    /// No heartbeat past the threshold, never connected, or decommissioned.
    Unavailable,
}

impl fmt::Display for Health {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            Health::Healthy => "healthy",
            Health::Unhealthy => "unhealthy",
            Health::Unavailable => "unavailable",
        })
    }
}

/// An error answer: a message for people, and for some errors a machine-readable code and the
/// numbers behind it.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct ApiError {
    /// What went wrong, naming the field and the fix.
    pub error: String,
    /// A `harmony_agent_protocol::code` value when one applies (`too_large`, `duplicate_id`...).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub code: Option<String>,
    /// The limit a too-large request exceeded, in bytes.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub limit_bytes: Option<u64>,
    /// The size of the refused request, in bytes.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub size_bytes: Option<u64>,
    /// Regions advertising a service type that could not be placed where asked.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub available_in: Option<Vec<String>>,
    /// Regions holding that type degraded (creates are queued there).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub degraded_in: Option<Vec<String>>,
}

impl ApiError {
    /// An error with a message only.
    pub fn new(message: impl Into<String>) -> Self {
        Self {
            error: message.into(),
            ..Self::default()
        }
    }

    /// The same error with a machine-readable code.
    pub fn with_code(mut self, code: &str) -> Self {
        self.code = Some(code.to_string());
        self
    }
}

/// `POST /v1/admin/regions`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct CreateRegion {
    /// The region's name (a DNS-1123 label).
    pub region: String,
    /// Its zone (a DNS-1123 label).
    pub zone: String,
    /// A bootstrap token lifetime shorter than the server's `--bootstrap-ttl-s`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub bootstrap_ttl_s: Option<f64>,
}

/// A one-time bootstrap token for a region's agent, shown once.
#[derive(Clone, Serialize, Deserialize)]
pub struct BootstrapToken {
    /// The region.
    pub region: String,
    /// Its zone.
    pub zone: String,
    /// The token: give it to the agent, never print it.
    pub bootstrap_token: SecretString,
    /// When the token expires, ms since the Unix epoch.
    pub bootstrap_expires_at: i64,
}

impl fmt::Debug for BootstrapToken {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("BootstrapToken")
            .field("region", &self.region)
            .field("zone", &self.zone)
            .field("bootstrap_token", &"<redacted>")
            .field("bootstrap_expires_at", &self.bootstrap_expires_at)
            .finish()
    }
}

/// `DELETE /v1/admin/regions/{region}` (and `.../zones/{zone}`).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Decommissioned {
    /// The region.
    pub region: String,
    /// The zone, when only one zone was decommissioned.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub zone: Option<String>,
    /// Always `true` in a success answer.
    pub decommissioned: bool,
}

/// A region as `GET /v1/regions` reports it: its record and, from whichever replica holds its
/// agents, the live state. `health` is the region's: healthy when any zone is, else unhealthy
/// when any zone is, else unavailable. The other top-level fields describe the region's first
/// zone (the one it was created with), so a one-zone region reads as it always did; `zones`
/// describes each zone.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct RegionView {
    /// The region.
    pub region: String,
    /// Its zone.
    pub zone: String,
    /// Its zones (one per cluster), the first zone first.
    #[serde(default)]
    pub zones: Vec<ZoneView>,
    /// Creation time, ms since the Unix epoch.
    #[serde(default)]
    pub created_at: i64,
    /// Whether an identity was issued (the bootstrap token is spent).
    #[serde(default)]
    pub bootstrapped: bool,
    /// Whether the region was decommissioned.
    #[serde(default)]
    pub decommissioned: bool,
    /// Health.
    pub health: Health,
    /// Why.
    #[serde(default)]
    pub health_reason: String,
    /// Whether an agent is connected now.
    #[serde(default)]
    pub connected: bool,
    /// When the current (or last) connection was welcomed, ms since the Unix epoch.
    #[serde(default)]
    pub connected_at: Option<i64>,
    /// Last heartbeat, ms since the Unix epoch.
    #[serde(default)]
    pub last_heartbeat: Option<i64>,
    /// The agent's version.
    #[serde(default)]
    pub agent_version: Option<String>,
    /// The ops it advertised.
    #[serde(default)]
    pub ops: Vec<String>,
    /// Whether it reaches its Kubernetes API.
    #[serde(default)]
    pub k8s_reachable: bool,
    /// Requests accepted and not yet answered.
    #[serde(default)]
    pub pending_requests: usize,
    /// The service types its agent holds, with their providers' health.
    #[serde(default)]
    pub services: Vec<ServiceOffer>,
    /// The types it advertises now (region and provider healthy), sorted.
    #[serde(default)]
    pub advertised_services: Vec<String>,
    /// The largest request frame its agent accepts, from its last hello.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub max_frame_bytes: Option<u64>,
    /// The control-plane replica holding the agent's connection.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub replica: Option<String>,
}

impl RegionView {
    /// Whether the region is healthy.
    pub fn is_healthy(&self) -> bool {
        self.health == Health::Healthy
    }

    /// What a tenant may see of this region: name, zones and health.
    pub fn for_tenant(&self) -> TenantRegionView {
        TenantRegionView {
            region: self.region.clone(),
            zone: self.zone.clone(),
            zones: self
                .zones
                .iter()
                .map(|z| TenantZoneView {
                    zone: z.zone.clone(),
                    health: z.health,
                })
                .collect(),
            health: self.health,
        }
    }

    /// One of its zones.
    pub fn zone(&self, zone: &str) -> Option<&ZoneView> {
        self.zones.iter().find(|z| z.zone == zone)
    }
}

/// `GET /v1/regions`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct RegionList {
    /// Every region, by name.
    pub regions: Vec<RegionView>,
}

/// `POST /v1/regions/{region}/requests`: an op for the region's agent.
///
/// `id` is an idempotency key: the same id with the same op and params joins (or returns) the
/// first request; the same id with another op or params is refused with 409 `duplicate_id`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct SubmitRequest {
    /// The idempotency key (1 to 128 characters); the control plane picks one when absent.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub id: Option<String>,
    /// The op (`apply_manifests`, `get_inventory`, ...).
    pub op: String,
    /// The op's params, kept byte for byte.
    #[serde(default)]
    pub params: RawJson,
    /// How long to wait for the answer, in seconds (capped by the server).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub timeout_s: Option<f64>,
    /// The project the request runs for (required with a tenant token): the agent runs it in
    /// the project's namespace, under its quota in this region.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub project: Option<String>,
    /// The project's tenant, for the admin acting for a tenant (a tenant token implies its own).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tenant: Option<String>,
    /// The zone whose agent runs it; the control plane picks a healthy zone when absent (then
    /// an unhealthy one, then the first).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub zone: Option<String>,
}

/// Where a durable request stands.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum RequestState {
    /// Accepted and stored; not yet sent to the agent.
    Queued,
    /// Sent to the agent (at least once); no answer yet.
    Sent,
    /// Answered; the result is stored.
    Done,
    /// Dropped before an answer (its region was decommissioned).
    Cancelled,
}

/// `GET /v1/requests/{id}`: a request as stored, readable from any replica.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct RequestStatus {
    /// The request id.
    pub id: String,
    /// Its region.
    pub region: String,
    /// The zone it was placed in.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub zone: Option<String>,
    /// Its op.
    pub op: String,
    /// Where it stands.
    pub state: RequestState,
    /// How many times it was sent to an agent.
    #[serde(default)]
    pub deliveries: u32,
    /// Accepted at, ms since the Unix epoch.
    pub created_at: i64,
    /// Answered at, ms since the Unix epoch.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub completed_at: Option<i64>,
    /// The agent's answer once `done`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub res: Option<Res>,
}

/// What one line of a streamed request answer is.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum RequestEventKind {
    /// Advisory progress from the agent (`stage`, `detail`).
    Progress,
    /// The agent's answer (`res`); the last line.
    Result,
    /// No answer in time, or the request could not be run (`error`); the last line.
    Error,
}

/// One line of a streamed request answer ([`NDJSON`]): progress lines, then one result or
/// error line.
///
/// A flat struct rather than a tagged enum: the `res` it carries holds raw JSON, which serde
/// cannot read through a tagged enum's buffering.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct RequestEvent {
    /// What this line is.
    #[serde(rename = "type")]
    pub kind: RequestEventKind,
    /// The request id.
    pub id: String,
    /// Progress: a short stage name.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub stage: Option<String>,
    /// Progress: detail for people.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub detail: Option<String>,
    /// Result: the agent's answer.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub res: Option<Res>,
    /// Error: why there is no answer, with the HTTP status a non-streamed call would have had.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub error: Option<ApiError>,
    /// Error: that status.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub status: Option<u16>,
}

impl RequestEvent {
    /// A progress line.
    pub fn progress(
        id: impl Into<String>,
        stage: impl Into<String>,
        detail: impl Into<String>,
    ) -> Self {
        Self {
            kind: RequestEventKind::Progress,
            id: id.into(),
            stage: Some(stage.into()),
            detail: Some(detail.into()),
            res: None,
            error: None,
            status: None,
        }
    }

    /// The final result line.
    pub fn result(res: Res) -> Self {
        Self {
            kind: RequestEventKind::Result,
            id: res.id.clone(),
            stage: None,
            detail: None,
            res: Some(res),
            error: None,
            status: None,
        }
    }

    /// The final error line.
    pub fn error(id: impl Into<String>, status: u16, error: ApiError) -> Self {
        Self {
            kind: RequestEventKind::Error,
            id: id.into(),
            stage: None,
            detail: None,
            res: None,
            error: Some(error),
            status: Some(status),
        }
    }
}

/// `POST /v1/services`: a service instance to create.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct CreateService {
    /// The service type (`container`, `postgresql`, `vm`, or an external provider's).
    #[serde(rename = "type")]
    pub service_type: String,
    /// The provider-specific spec (a JSON object; `{}` when absent).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub spec: Option<Value>,
    /// The region to place it in; the control plane chooses when absent.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub region: Option<String>,
    /// The instance id (a DNS-1123 label); the control plane chooses when absent.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub id: Option<String>,
    /// The project owning it (required with a tenant token; with the admin token, the project
    /// of the tenant named in `tenant`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub project: Option<String>,
    /// The project's tenant, for the admin acting for a tenant.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tenant: Option<String>,
    /// The instance this one belongs to: it is placed in its parent's region and zone (naming
    /// another region is refused with 422 `containment`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub parent: Option<String>,
}

/// A service instance as the control plane reports it.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ServiceInstance {
    /// The instance id: for a tenant, the id it chose (ids live in each tenant); for the admin,
    /// the stored id, which for a project's instance is the tenant's id, `-` and 10 hex digits
    /// (the name its agent and provider know it by).
    pub id: String,
    /// The tenant owning it (shown to the admin).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tenant: Option<String>,
    /// The project owning it (shown to the admin).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub project: Option<String>,
    /// The service type.
    #[serde(rename = "type", default)]
    pub service_type: String,
    /// The region it is placed in.
    #[serde(default)]
    pub region: String,
    /// The zone it is placed in.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub zone: Option<String>,
    /// The instance it belongs to.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub parent: Option<String>,
    /// `queued`, `pending`, `provisioning`, `ready`, `failed`, `deleting`; a delete also answers
    /// `cancelled` or `deleted`.
    pub state: String,
    /// Why it is in that state.
    #[serde(default)]
    pub detail: String,
    /// The provider serving it, once known.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub provider: Option<String>,
    /// What a consumer needs to use it (endpoints, Secret names; never secret values).
    #[serde(default)]
    pub outputs: Map<String, Value>,
    /// The spec it was created with.
    #[serde(default)]
    pub spec: Value,
    /// Creation time, ms since the Unix epoch.
    #[serde(default)]
    pub created_at: i64,
    /// Last change, ms since the Unix epoch.
    #[serde(default)]
    pub updated_at: i64,
}

/// `GET /v1/services`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ServiceList {
    /// Every instance, oldest first.
    pub services: Vec<ServiceInstance>,
}

#[cfg(test)]
mod tests {
    use super::*;
    use harmony_agent_protocol::ErrorBody;

    #[test]
    fn a_streamed_result_line_keeps_the_raw_result_bytes() {
        let res = Res::ok_raw("r1", RawJson::from_string(r#"{"n":1e2}"#.into()).unwrap());
        let line = serde_json::to_string(&RequestEvent::result(res)).unwrap();
        assert_eq!(
            line,
            r#"{"type":"result","id":"r1","res":{"id":"r1","ok":true,"result":{"n":1e2}}}"#
        );
        let back: RequestEvent = serde_json::from_str(&line).unwrap();
        assert_eq!(back.res.unwrap().result.unwrap().get(), r#"{"n":1e2}"#);
        let err = RequestEvent::error("r2", 504, ApiError::new("timed out"));
        let back: RequestEvent =
            serde_json::from_str(&serde_json::to_string(&err).unwrap()).unwrap();
        assert_eq!(
            (back.kind, back.status),
            (RequestEventKind::Error, Some(504))
        );
        let failed = Res::err("r3", ErrorBody::new("conflict", "owned by kubectl"));
        let line = serde_json::to_string(&RequestEvent::result(failed.clone())).unwrap();
        assert_eq!(
            serde_json::from_str::<RequestEvent>(&line).unwrap().res,
            Some(failed)
        );
    }

    #[test]
    fn health_is_an_enum_on_the_wire_and_tokens_stay_out_of_debug() {
        assert_eq!(
            serde_json::to_string(&Health::Unhealthy).unwrap(),
            r#""unhealthy""#
        );
        assert!(serde_json::from_str::<Health>(r#""fine""#).is_err());
        let t: BootstrapToken = serde_json::from_str(
            r#"{"region":"eu","zone":"z","bootstrap_token":"hbt_secretvalue","bootstrap_expires_at":1}"#,
        )
        .unwrap();
        assert!(!format!("{t:?}").contains("secretvalue"));
    }

    #[test]
    fn a_submit_request_keeps_its_params_bytes() {
        let body = r#"{"id":"a","op":"apply_manifests","params":{"manifests":[],"x":1.50}}"#;
        let r: SubmitRequest = serde_json::from_str(body).unwrap();
        assert_eq!(r.params.get(), r#"{"manifests":[],"x":1.50}"#);
        let without: SubmitRequest = serde_json::from_str(r#"{"op":"get_inventory"}"#).unwrap();
        assert!(without.params.is_null() && without.id.is_none());
    }
}
