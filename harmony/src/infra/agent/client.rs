use harmony_agent_protocol::{Res, SecretString, ServiceOffer};
use harmony_types::{RegionId, ZoneId};
use http_body_util::{BodyExt, Full};
use hyper::body::Bytes;
use hyper::{Method, Request, StatusCode};
use hyper_rustls::HttpsConnector;
use hyper_util::client::legacy::Client;
use hyper_util::client::legacy::connect::HttpConnector;
use hyper_util::rt::TokioExecutor;
use rustls::pki_types::CertificateDer;
use rustls::pki_types::pem::PemObject;
use serde::{Deserialize, Serialize};
use serde_json::{Map, Value, json};
use std::fmt;
use std::sync::Arc;
use std::time::Duration;

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
    /// The control plane could not be reached.
    #[error("cannot reach the control plane at {url}: {reason}")]
    Unreachable {
        /// The URL called.
        url: String,
        /// The transport error.
        reason: String,
    },
    /// The control plane answered with an error status.
    #[error("{what}: the control plane answered {status}: {message}")]
    Status {
        /// What was asked.
        what: String,
        /// The HTTP status.
        status: u16,
        /// The control plane's message.
        message: String,
    },
    /// No answer in time.
    #[error("{what}: no answer from the control plane within {after:?}")]
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
#[derive(Clone, Deserialize)]
pub struct CreatedRegion {
    /// The region.
    pub region: String,
    /// Its zone.
    pub zone: String,
    /// The bootstrap token: give it to the agent, never print it.
    pub bootstrap_token: SecretString,
    /// When the token expires (ms since epoch).
    pub bootstrap_expires_at: i64,
}

impl fmt::Debug for CreatedRegion {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("CreatedRegion")
            .field("region", &self.region)
            .field("zone", &self.zone)
            .field("bootstrap_token", &"<redacted>")
            .field("bootstrap_expires_at", &self.bootstrap_expires_at)
            .finish()
    }
}

/// A region as `GET /v1/regions` reports it.
#[derive(Debug, Clone, PartialEq, Deserialize)]
pub struct RegionStatus {
    /// The region.
    pub region: String,
    /// Its zone.
    pub zone: String,
    /// `healthy`, `unhealthy` or `unavailable`.
    pub health: String,
    /// Why.
    #[serde(default)]
    pub health_reason: String,
    /// Whether its agent is connected now.
    #[serde(default)]
    pub connected: bool,
    /// When the current or last connection started (ms since epoch).
    #[serde(default)]
    pub connected_at: Option<i64>,
    /// Last heartbeat (ms since epoch).
    #[serde(default)]
    pub last_heartbeat: Option<i64>,
    /// The agent's version.
    #[serde(default)]
    pub agent_version: Option<String>,
    /// The ops it advertised.
    #[serde(default)]
    pub ops: Vec<String>,
    /// Whether an identity was issued (the bootstrap token is spent).
    #[serde(default)]
    pub bootstrapped: bool,
    /// Whether the region was decommissioned.
    #[serde(default)]
    pub decommissioned: bool,
    /// Requests queued or executing.
    #[serde(default)]
    pub pending_requests: usize,
    /// The service types its agent holds, with their providers' health.
    #[serde(default)]
    pub services: Vec<ServiceOffer>,
    /// The types it advertises now (region and provider healthy), sorted.
    #[serde(default)]
    pub advertised_services: Vec<String>,
}

/// A service instance to create through `POST /v1/services`.
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
}

/// A service instance as the control plane reports it.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ServiceInstance {
    /// The instance id.
    pub id: String,
    /// The service type.
    #[serde(rename = "type", default)]
    pub service_type: String,
    /// The region it is placed in.
    #[serde(default)]
    pub region: String,
    /// `queued`, `pending`, `provisioning`, `ready`, `failed`, `deleting`; a delete also answers
    /// `cancelled` or `deleted`.
    pub state: String,
    /// Why it is in that state.
    #[serde(default)]
    pub detail: String,
    /// The provider serving it, once known.
    #[serde(default)]
    pub provider: Option<String>,
    /// What a consumer needs to use it (endpoints, Secret names).
    #[serde(default)]
    pub outputs: Map<String, Value>,
    /// The spec it was created with.
    #[serde(default)]
    pub spec: Value,
    /// Creation time (ms since epoch).
    #[serde(default)]
    pub created_at: i64,
    /// Last change (ms since epoch).
    #[serde(default)]
    pub updated_at: i64,
}

impl RegionStatus {
    /// Whether the region is healthy.
    pub fn is_healthy(&self) -> bool {
        self.health == "healthy"
    }
}

/// The control plane's HTTP API over TLS, authenticated with the admin token.
#[derive(Clone)]
pub struct ControlPlaneClient {
    base: String,
    token: SecretString,
    http: Client<HttpsConnector<HttpConnector>, Full<Bytes>>,
}

impl fmt::Debug for ControlPlaneClient {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("ControlPlaneClient")
            .field("base", &self.base)
            .finish_non_exhaustive()
    }
}

/// Default wait for admin calls.
const ADMIN_TIMEOUT: Duration = Duration::from_secs(30);

impl ControlPlaneClient {
    /// A client for `url` (`https://host:port`; `wss://` is accepted), trusting the PEM CAs in
    /// `ca_pem` or, when `None`, the system roots.
    pub fn new(
        url: &str,
        admin_token: SecretString,
        ca_pem: Option<&[u8]>,
    ) -> Result<Self, ControlPlaneError> {
        let bad = |field, problem: String| ControlPlaneError::Config { field, problem };
        let parsed =
            url::Url::parse(url).map_err(|e| bad("control plane url", format!("{url:?}: {e}")))?;
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
        let mut roots = rustls::RootCertStore::empty();
        match ca_pem {
            Some(pem) => {
                let certs: Vec<CertificateDer<'static>> = CertificateDer::pem_slice_iter(pem)
                    .collect::<Result<_, _>>()
                    .map_err(|e| bad("ca bundle", format!("malformed PEM: {e}")))?;
                if certs.is_empty() {
                    return Err(bad(
                        "ca bundle",
                        "no CERTIFICATE block in the CA bundle".into(),
                    ));
                }
                for c in certs {
                    roots.add(c).map_err(|e| bad("ca bundle", e.to_string()))?;
                }
            }
            None => {
                for c in rustls_native_certs::load_native_certs().certs {
                    let _ = roots.add(c);
                }
            }
        }
        let tls = rustls::ClientConfig::builder_with_provider(Arc::new(
            rustls::crypto::ring::default_provider(),
        ))
        .with_safe_default_protocol_versions()
        .map_err(|e| bad("tls", e.to_string()))?
        .with_root_certificates(roots)
        .with_no_client_auth();
        let connector = hyper_rustls::HttpsConnectorBuilder::new()
            .with_tls_config(tls)
            .https_only()
            .enable_http1()
            .build();
        let http = Client::builder(TokioExecutor::new()).build(connector);
        Ok(Self {
            base,
            token: admin_token,
            http,
        })
    }

    /// The base URL (`https://host:port`).
    pub fn url(&self) -> &str {
        &self.base
    }

    async fn call(
        &self,
        method: Method,
        path: &str,
        body: Option<Value>,
        wait: Duration,
    ) -> Result<(StatusCode, Value), ControlPlaneError> {
        let url = format!("{}{path}", self.base);
        let what = format!("{method} {path}");
        let payload = body.map(|b| b.to_string()).unwrap_or_default();
        let request = Request::builder()
            .method(method)
            .uri(&url)
            .header("authorization", format!("Bearer {}", self.token.expose()))
            .header("content-type", "application/json")
            .body(Full::new(Bytes::from(payload)))
            .map_err(|e| ControlPlaneError::Invalid {
                what: what.clone(),
                reason: e.to_string(),
            })?;
        let exchange =
            async {
                let response = self.http.request(request).await.map_err(|e| {
                    ControlPlaneError::Unreachable {
                        url: url.clone(),
                        reason: describe_transport(&e),
                    }
                })?;
                let status = response.status();
                let bytes = response
                    .into_body()
                    .collect()
                    .await
                    .map_err(|e| ControlPlaneError::Unreachable {
                        url: url.clone(),
                        reason: e.to_string(),
                    })?
                    .to_bytes();
                let value: Value = serde_json::from_slice(&bytes).unwrap_or(Value::Null);
                Ok((status, value))
            };
        tokio::time::timeout(wait, exchange)
            .await
            .map_err(|_| ControlPlaneError::Timeout { what, after: wait })?
    }

    fn status_error(what: &str, status: StatusCode, body: &Value) -> ControlPlaneError {
        ControlPlaneError::Status {
            what: what.to_string(),
            status: status.as_u16(),
            message: body
                .get("error")
                .and_then(Value::as_str)
                .unwrap_or("no message")
                .to_string(),
        }
    }

    fn parse<T: for<'de> Deserialize<'de>>(what: &str, v: Value) -> Result<T, ControlPlaneError> {
        serde_json::from_value(v).map_err(|e| ControlPlaneError::Invalid {
            what: what.to_string(),
            reason: e.to_string(),
        })
    }

    /// Creates `region` with `zone`; `None` when it already exists (its token was shown once).
    pub async fn create_region(
        &self,
        region: &RegionId,
        zone: &ZoneId,
    ) -> Result<Option<CreatedRegion>, ControlPlaneError> {
        self.create_region_with_ttl(region, zone, None).await
    }

    /// As [`Self::create_region`], with a bootstrap token lifetime shorter than the server's.
    pub async fn create_region_with_ttl(
        &self,
        region: &RegionId,
        zone: &ZoneId,
        ttl: Option<Duration>,
    ) -> Result<Option<CreatedRegion>, ControlPlaneError> {
        let what = format!("creating region {region}");
        let mut body = json!({"region": region, "zone": zone});
        if let Some(t) = ttl {
            body["bootstrap_ttl_s"] = json!(t.as_secs_f64());
        }
        let (status, body) = self
            .call(Method::POST, "/v1/admin/regions", Some(body), ADMIN_TIMEOUT)
            .await?;
        match status {
            StatusCode::CREATED => Self::parse(&what, body).map(Some),
            StatusCode::CONFLICT => Ok(None),
            s => Err(Self::status_error(&what, s, &body)),
        }
    }

    /// Mints a new bootstrap token for a region whose agent never connected.
    pub async fn new_bootstrap_token(
        &self,
        region: &RegionId,
    ) -> Result<CreatedRegion, ControlPlaneError> {
        let what = format!("minting a bootstrap token for region {region}");
        let (status, body) = self
            .call(
                Method::POST,
                &format!("/v1/admin/regions/{region}/bootstrap-token"),
                None,
                ADMIN_TIMEOUT,
            )
            .await?;
        match status {
            StatusCode::CREATED => Self::parse(&what, body),
            s => Err(Self::status_error(&what, s, &body)),
        }
    }

    /// Decommissions `region`: revokes its identity and closes its agent's connection.
    pub async fn decommission(&self, region: &str) -> Result<(), ControlPlaneError> {
        let what = format!("decommissioning region {region}");
        let (status, body) = self
            .call(
                Method::DELETE,
                &format!("/v1/admin/regions/{region}"),
                None,
                ADMIN_TIMEOUT,
            )
            .await?;
        match status {
            StatusCode::OK => Ok(()),
            s => Err(Self::status_error(&what, s, &body)),
        }
    }

    /// One region; `None` when the control plane does not know it.
    pub async fn region(&self, region: &str) -> Result<Option<RegionStatus>, ControlPlaneError> {
        self.get_one(
            &format!("reading region {region}"),
            &format!("/v1/regions/{region}"),
        )
        .await
    }

    /// `GET path`: the answer, or `None` on 404.
    async fn get_one<T: for<'de> Deserialize<'de>>(
        &self,
        what: &str,
        path: &str,
    ) -> Result<Option<T>, ControlPlaneError> {
        let (status, body) = self.call(Method::GET, path, None, ADMIN_TIMEOUT).await?;
        match status {
            StatusCode::OK => Self::parse(what, body).map(Some),
            StatusCode::NOT_FOUND => Ok(None),
            s => Err(Self::status_error(what, s, &body)),
        }
    }

    /// `GET path`: the list under `key` of the answer.
    async fn get_list<T: for<'de> Deserialize<'de>>(
        &self,
        what: &str,
        path: &str,
        key: &str,
    ) -> Result<Vec<T>, ControlPlaneError> {
        let (status, body) = self.call(Method::GET, path, None, ADMIN_TIMEOUT).await?;
        if status != StatusCode::OK {
            return Err(Self::status_error(what, status, &body));
        }
        Self::parse(what, body.get(key).cloned().unwrap_or(Value::Null))
    }

    /// Every region.
    pub async fn regions(&self) -> Result<Vec<RegionStatus>, ControlPlaneError> {
        self.get_list("listing regions", "/v1/regions", "regions")
            .await
    }

    /// Creates a service instance: 201 (answered) and 202 (pending or queued) both return the
    /// record; a refusal (400, 404, 409, 410) is [`ControlPlaneError::Status`] with the server's
    /// message.
    pub async fn create_service(
        &self,
        new: &NewService,
    ) -> Result<ServiceInstance, ControlPlaneError> {
        let what = format!("creating a {} service instance", new.service_type);
        let body = serde_json::to_value(new).map_err(|e| ControlPlaneError::Invalid {
            what: what.clone(),
            reason: e.to_string(),
        })?;
        let (status, body) = self
            .call(Method::POST, "/v1/services", Some(body), ADMIN_TIMEOUT)
            .await?;
        match status {
            StatusCode::CREATED | StatusCode::ACCEPTED => Self::parse(&what, body),
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
        self.get_list("listing service instances", "/v1/services", "services")
            .await
    }

    /// Deletes a service instance: state `cancelled` (a queued create), `deleted`, or
    /// `deleting` (the provider is still at it). Unknown ids are a 404 `Status` error.
    pub async fn delete_service(&self, id: &str) -> Result<ServiceInstance, ControlPlaneError> {
        let what = format!("deleting service instance {id}");
        let (status, body) = self
            .call(
                Method::DELETE,
                &format!("/v1/services/{id}"),
                None,
                ADMIN_TIMEOUT,
            )
            .await?;
        match status {
            StatusCode::OK | StatusCode::ACCEPTED => Self::parse(&what, body),
            s => Err(Self::status_error(&what, s, &body)),
        }
    }

    /// Sends op `op` with `params` to `region`'s agent as request `id` and waits up to `wait`
    /// for its result. Re-sending the same id never acts twice (the agent dedupes).
    pub async fn request(
        &self,
        region: &str,
        id: &str,
        op: &str,
        params: Value,
        wait: Duration,
    ) -> Result<Res, ControlPlaneError> {
        let what = format!("request {id} ({op}) to region {region}");
        let (status, body) = self
            .call(
                Method::POST,
                &format!("/v1/regions/{region}/requests"),
                Some(
                    json!({"id": id, "op": op, "params": params, "timeout_s": wait.as_secs_f64()}),
                ),
                wait + Duration::from_secs(5),
            )
            .await?;
        match status {
            StatusCode::OK => Self::parse(&what, body),
            s => Err(Self::status_error(&what, s, &body)),
        }
    }
}

fn describe_transport(e: &hyper_util::client::legacy::Error) -> String {
    let mut text = e.to_string();
    let mut source = std::error::Error::source(e);
    while let Some(s) = source {
        text.push_str(": ");
        text.push_str(&s.to_string());
        source = s.source();
    }
    text
}
