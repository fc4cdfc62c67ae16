use harmony_agent_protocol::{RawJson, Res, SecretString};
use harmony_api::{
    ApiError, BootstrapToken, CreateService, RegionList, RegionView, ServiceInstance, ServiceList,
    SubmitRequest,
};
use harmony_http::reqwest::{self, Method, StatusCode, Url};
use serde::Serialize;
use serde::de::DeserializeOwned;
use serde_json::Value;
use std::fmt;
use std::time::Duration;

use super::stream;

/// Why a call to the control plane failed. Never carries a token.
#[derive(Debug, thiserror::Error)]
pub enum ControlPlaneError {
    /// The client could not be built.
    #[error("{field}: {problem}")]
    Config {
        /// The setting at fault.
        field: &'static str,
        /// What is wrong and the fix.
        problem: String,
    },
    /// The control plane could not be reached, or the connection broke before the answer.
    #[error("cannot reach the control plane at {url}: {reason}")]
    Unreachable {
        /// The URL called.
        url: String,
        /// The transport error.
        reason: String,
    },
    /// The control plane answered with an error status.
    #[error("{what}: the control plane answered {status}: {}", error.error)]
    Status {
        /// What was asked.
        what: String,
        /// The HTTP status.
        status: u16,
        /// The control plane's error body (message, code, limits); boxed to keep the error small.
        error: Box<ApiError>,
    },
    /// No answer in time.
    #[error(
        "{what}: no answer from the control plane within {}",
        crate::domain::capability::seconds(after)
    )]
    Timeout {
        /// What was asked.
        what: String,
        /// The wait.
        after: Duration,
    },
    /// The answer was not what the API documents.
    #[error("{what}: unexpected answer from the control plane: {reason}")]
    Invalid {
        /// What was asked.
        what: String,
        /// Why it could not be read.
        reason: String,
    },
}

/// A region the admin API just created (or re-armed): the one-time bootstrap token, shown once.
pub type CreatedRegion = BootstrapToken;

/// A region as `GET /v1/regions` reports it: the region's health (healthy while any zone is),
/// each zone's in `zones` ([`harmony_api::ZoneView`], see [`RegionView::zone`]), and top-level
/// fields describing its first zone.
pub type RegionStatus = RegionView;

/// One zone of a region as `GET /v1/regions` reports it.
pub type ZoneStatus = harmony_api::ZoneView;

/// A service instance to create through `POST /v1/services` (a [`CreateService`] whose spec
/// is always given).
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct NewService {
    /// The service type (`container`, `postgresql`, `vm`, or an external provider's).
    #[serde(rename = "type")]
    pub service_type: String,
    /// The provider-specific spec (a JSON object).
    pub spec: Value,
    /// The region to place it in; the control plane chooses when `None`.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub region: Option<String>,
    /// The instance id (a DNS-1123 label); the control plane chooses when `None`.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub id: Option<String>,
    /// The instance it belongs to: placed in its parent's region and zone.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub parent: Option<String>,
}

impl From<&NewService> for CreateService {
    fn from(n: &NewService) -> Self {
        CreateService {
            service_type: n.service_type.clone(),
            spec: Some(n.spec.clone()),
            region: n.region.clone(),
            id: n.id.clone(),
            project: None,
            tenant: None,
            parent: n.parent.clone(),
        }
    }
}

/// The control plane's HTTP API over TLS, authenticated with a bearer token: the admin token
/// (every route), or a tenant token (`htt_...`: its own projects, requests and services, and
/// regions' health; see [`Self::for_project`]).
#[derive(Clone)]
pub struct ControlPlaneClient {
    base: String,
    token: SecretString,
    http: reqwest::Client,
    /// The project requests and service creates run for: `(tenant, project)`; the tenant is
    /// `None` with a tenant token (the token implies it).
    pub(super) project: Option<(Option<String>, String)>,
    /// Longest wait for one admin call (listing, creating, revoking); 30 s unless
    /// [`Self::with_admin_timeout`] says otherwise.
    admin_timeout: Duration,
}

impl fmt::Debug for ControlPlaneClient {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("ControlPlaneClient")
            .field("base", &self.base)
            .finish_non_exhaustive()
    }
}

/// Default wait for admin calls ([`ControlPlaneClient::with_admin_timeout`] changes it).
const ADMIN_TIMEOUT: Duration = Duration::from_secs(30);
/// Slack on top of a request's own wait, for the control plane to answer its timeout itself.
const REQUEST_SLACK: Duration = Duration::from_secs(5);

impl ControlPlaneClient {
    /// A client for `url` (`https://host:port`; `wss://` is accepted), trusting the PEM CAs in
    /// `ca_pem` or, when `None`, the system roots. `admin_token` may as well be a tenant token:
    /// the control plane then answers only what that tenant may see.
    pub fn new(
        url: &str,
        admin_token: SecretString,
        ca_pem: Option<&[u8]>,
    ) -> Result<Self, ControlPlaneError> {
        let bad = |field, problem: String| ControlPlaneError::Config { field, problem };
        let parsed =
            Url::parse(url).map_err(|e| bad("control plane url", format!("{url:?}: {e}")))?;
        let base = match parsed.scheme() {
            "https" | "wss" => format!(
                "https://{}{}",
                parsed.host_str().unwrap_or_default(),
                parsed.port().map(|p| format!(":{p}")).unwrap_or_default()
            ),
            other => {
                return Err(bad(
                    "control plane url",
                    format!(
                        "scheme {other:?}: the control plane is only reached over TLS (https://)"
                    ),
                ));
            }
        };
        // No client-wide read timeout: a request call long-polls for up to its own wait, so
        // each call is bounded by its total timeout instead.
        let http = harmony_http::ClientSettings::new()
            .ca_pem(ca_pem)
            .https_only(true)
            .read_timeout(None)
            .user_agent(concat!("harmony/", env!("CARGO_PKG_VERSION")))
            .build()
            .map_err(|e| bad(e.field, e.problem))?;
        Ok(Self {
            base,
            token: admin_token,
            http,
            project: None,
            admin_timeout: ADMIN_TIMEOUT,
        })
    }

    /// The same client with admin calls (everything but requests, which carry their own wait)
    /// bounded by `wait` instead of 30 s: listing 100,000 regions on a busy control plane can
    /// take longer. A call that passes it fails with [`ControlPlaneError::Timeout`].
    pub fn with_admin_timeout(mut self, wait: Duration) -> Self {
        self.admin_timeout = wait;
        self
    }

    /// The base URL (`https://host:port`).
    pub fn url(&self) -> &str {
        &self.base
    }

    /// A request to `path` carrying the admin token, bounded by `wait` in total.
    pub(super) fn start(
        &self,
        method: Method,
        path: &str,
        wait: Duration,
    ) -> reqwest::RequestBuilder {
        self.http
            .request(method, format!("{}{path}", self.base))
            .bearer_auth(self.token.expose())
            .timeout(wait)
    }

    /// Turns a reqwest failure into the error that says what happened.
    pub(super) fn failed(
        &self,
        what: &str,
        path: &str,
        wait: Duration,
        e: &reqwest::Error,
    ) -> ControlPlaneError {
        if e.is_timeout() {
            ControlPlaneError::Timeout {
                what: what.to_string(),
                after: wait,
            }
        } else {
            ControlPlaneError::Unreachable {
                url: format!("{}{path}", self.base),
                reason: harmony_http::describe(e),
            }
        }
    }

    pub(super) async fn call<B: Serialize + ?Sized>(
        &self,
        method: Method,
        path: &str,
        body: Option<&B>,
        what: &str,
    ) -> Result<(StatusCode, Vec<u8>), ControlPlaneError> {
        let mut request = self.start(method, path, self.admin_timeout);
        if let Some(b) = body {
            request = request.json(b);
        }
        let fail = |e: reqwest::Error| self.failed(what, path, self.admin_timeout, &e);
        let response = request.send().await.map_err(fail)?;
        let status = response.status();
        let bytes = response.bytes().await.map_err(fail)?;
        Ok((status, bytes.to_vec()))
    }

    /// The error of a non-success answer, from its [`ApiError`] body when it has one.
    pub(super) fn status_error(what: &str, status: StatusCode, body: &[u8]) -> ControlPlaneError {
        let error = serde_json::from_slice::<ApiError>(body).unwrap_or_else(|_| {
            let text = String::from_utf8_lossy(body);
            let text = text.trim();
            ApiError::new(if text.is_empty() {
                "no message".to_string()
            } else {
                text.chars().take(300).collect()
            })
        });
        ControlPlaneError::Status {
            what: what.to_string(),
            status: status.as_u16(),
            error: Box::new(error),
        }
    }

    pub(super) fn parse<T: DeserializeOwned>(
        what: &str,
        body: &[u8],
    ) -> Result<T, ControlPlaneError> {
        serde_json::from_slice(body).map_err(|e| ControlPlaneError::Invalid {
            what: what.to_string(),
            reason: e.to_string(),
        })
    }

    /// One region; `None` when the control plane does not know it.
    pub async fn region(&self, region: &str) -> Result<Option<RegionStatus>, ControlPlaneError> {
        self.get_one(
            &format!("reading region {region}"),
            &format!("/v1/regions/{region}"),
        )
        .await
    }

    /// A request as the control plane stored it (state, deliveries, result), read from any
    /// replica; `None` when no request has that id (or it was pruned after its retention).
    pub async fn request_status(
        &self,
        id: &str,
    ) -> Result<Option<harmony_api::RequestStatus>, ControlPlaneError> {
        self.get_one(
            &format!("reading request {id}"),
            &format!("/v1/requests/{id}"),
        )
        .await
    }

    /// `GET path`: the answer, or `None` on 404.
    async fn get_one<T: DeserializeOwned>(
        &self,
        what: &str,
        path: &str,
    ) -> Result<Option<T>, ControlPlaneError> {
        let (status, body) = self.call::<()>(Method::GET, path, None, what).await?;
        match status {
            StatusCode::OK => Self::parse(what, &body).map(Some),
            StatusCode::NOT_FOUND => Ok(None),
            s => Err(Self::status_error(what, s, &body)),
        }
    }

    /// `GET path` answered 200.
    async fn get_ok<T: DeserializeOwned>(
        &self,
        what: &str,
        path: &str,
    ) -> Result<T, ControlPlaneError> {
        let (status, body) = self.call::<()>(Method::GET, path, None, what).await?;
        if status != StatusCode::OK {
            return Err(Self::status_error(what, status, &body));
        }
        Self::parse(what, &body)
    }

    /// Every region.
    pub async fn regions(&self) -> Result<Vec<RegionStatus>, ControlPlaneError> {
        let list: RegionList = self.get_ok("listing regions", "/v1/regions").await?;
        Ok(list.regions)
    }

    /// Creates a service instance: 201 (answered) and 202 (pending or queued) both return the
    /// record; a refusal (400, 404, 409, 410) is [`ControlPlaneError::Status`] with the server's
    /// message.
    pub async fn create_service(
        &self,
        new: &NewService,
    ) -> Result<ServiceInstance, ControlPlaneError> {
        let what = format!("creating a {} service instance", new.service_type);
        let mut body = CreateService::from(new);
        if let Some((tenant, project)) = &self.project {
            body.tenant = tenant.clone();
            body.project = Some(project.clone());
        }
        let (status, body) = self
            .call(Method::POST, "/v1/services", Some(&body), &what)
            .await?;
        match status {
            StatusCode::CREATED | StatusCode::ACCEPTED => Self::parse(&what, &body),
            s => Err(Self::status_error(&what, s, &body)),
        }
    }

    /// One service instance; `None` when the control plane does not know it.
    pub async fn service(&self, id: &str) -> Result<Option<ServiceInstance>, ControlPlaneError> {
        self.get_one(
            &format!("reading service instance {id}"),
            &format!("/v1/services/{id}"),
        )
        .await
    }

    /// Every service instance, oldest first.
    pub async fn services(&self) -> Result<Vec<ServiceInstance>, ControlPlaneError> {
        let list: ServiceList = self
            .get_ok("listing service instances", "/v1/services")
            .await?;
        Ok(list.services)
    }

    /// Deletes a service instance: state `cancelled` (a queued create), `deleted`, or
    /// `deleting` (the provider is still at it). Unknown ids are a 404 `Status` error.
    pub async fn delete_service(&self, id: &str) -> Result<ServiceInstance, ControlPlaneError> {
        let what = format!("deleting service instance {id}");
        let path = format!("/v1/services/{id}");
        let (status, body) = self.call::<()>(Method::DELETE, &path, None, &what).await?;
        match status {
            StatusCode::OK | StatusCode::ACCEPTED => Self::parse(&what, &body),
            s => Err(Self::status_error(&what, s, &body)),
        }
    }

    /// Sends op `op` with `params` to `region`'s agent as request `id` and waits up to `wait`
    /// for its result. `id` is an idempotency key: re-sending it with the same op and params
    /// never acts twice; with other params the control plane refuses it (409 `duplicate_id`).
    pub async fn request(
        &self,
        region: &str,
        id: &str,
        op: &str,
        params: impl Serialize,
        wait: Duration,
    ) -> Result<Res, ControlPlaneError> {
        self.request_in_zone(region, None, id, op, params, wait)
            .await
    }

    /// As [`Self::request`], run by the agent of zone `zone` of `region` (when `None`, the
    /// control plane picks a healthy zone). An unknown zone is a 404 `Status` error naming the
    /// region's zones.
    pub async fn request_in_zone(
        &self,
        region: &str,
        zone: Option<&str>,
        id: &str,
        op: &str,
        params: impl Serialize,
        wait: Duration,
    ) -> Result<Res, ControlPlaneError> {
        let what = match zone {
            Some(z) => format!("request {id} ({op}) to region {region} zone {z}"),
            None => format!("request {id} ({op}) to region {region}"),
        };
        let params = RawJson::from_serialize(&params).map_err(|e| ControlPlaneError::Invalid {
            what: what.clone(),
            reason: format!("params cannot be encoded as JSON: {e}"),
        })?;
        let path = format!("/v1/regions/{region}/requests");
        let total = wait + REQUEST_SLACK;
        let fail = |e: reqwest::Error| self.failed(&what, &path, total, &e);
        let response = self
            .start(Method::POST, &path, total)
            .json(&self.submit(id, op, params, wait, zone))
            .send()
            .await
            .map_err(fail)?;
        let status = response.status();
        let body = response.bytes().await.map_err(fail)?;
        match status {
            StatusCode::OK => Self::parse(&what, &body),
            s => Err(Self::status_error(&what, s, &body)),
        }
    }

    /// As [`Self::request`] with params already encoded, streaming the agent's progress: the
    /// answer is read as NDJSON (`?stream=ndjson`) and `on_progress` is called with each
    /// progress event as it arrives, before the result. A server that answers one plain JSON
    /// body instead (an older control plane) is accepted too, without progress.
    pub async fn request_streaming<F>(
        &self,
        region: &str,
        id: &str,
        op: &str,
        params: &RawJson,
        wait: Duration,
        on_progress: F,
    ) -> Result<Res, ControlPlaneError>
    where
        F: FnMut(&harmony_api::RequestEvent) + Send,
    {
        let zoned = Zoned { region, zone: None };
        self.request_streaming_in_zone(zoned, id, op, params, wait, on_progress)
            .await
    }

    /// As [`Self::request_streaming`], run by the agent of `at.zone` (placement picks when
    /// `None`).
    pub async fn request_streaming_in_zone<F>(
        &self,
        at: Zoned<'_>,
        id: &str,
        op: &str,
        params: &RawJson,
        wait: Duration,
        on_progress: F,
    ) -> Result<Res, ControlPlaneError>
    where
        F: FnMut(&harmony_api::RequestEvent) + Send,
    {
        let Zoned { region, zone } = at;
        let what = match zone {
            Some(z) => format!("request {id} ({op}) to region {region} zone {z}"),
            None => format!("request {id} ({op}) to region {region}"),
        };
        let path = format!("/v1/regions/{region}/requests");
        let total = wait + REQUEST_SLACK;
        let request = self
            .start(Method::POST, &format!("{path}?stream=ndjson"), total)
            .header(reqwest::header::ACCEPT, harmony_api::NDJSON)
            .json(&self.submit(id, op, params.clone(), wait, zone));
        stream::read_answer(self, request, &what, &path, total, on_progress).await
    }
}

/// Where a request goes: a region, and optionally one of its zones.
#[derive(Debug, Clone, Copy)]
pub struct Zoned<'a> {
    /// The region.
    pub region: &'a str,
    /// The zone; the control plane picks a healthy one when `None`.
    pub zone: Option<&'a str>,
}

impl ControlPlaneClient {
    /// The body of a request for `zone` (the control plane picks one when `None`), naming this
    /// client's project if it has one.
    fn submit(
        &self,
        id: &str,
        op: &str,
        params: RawJson,
        wait: Duration,
        zone: Option<&str>,
    ) -> SubmitRequest {
        let (tenant, project) = self.project.clone().unzip();
        SubmitRequest {
            id: Some(id.to_string()),
            op: op.to_string(),
            params,
            timeout_s: Some(wait.as_secs_f64()),
            project,
            tenant: tenant.flatten(),
            zone: zone.map(str::to_string),
        }
    }
}
