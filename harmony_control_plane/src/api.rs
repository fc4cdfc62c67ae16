//! The HTTPS listener: TLS, HTTP/1.1 routing, the admin and request API, and the upgrade of
//! `/v1/agent` to a WebSocket handed to [`crate::session`].

use harmony_agent_protocol::{AGENT_PATH, MAX_FRAME_BYTES, Req, SecretString};
use harmony_types::{RegionId, ZoneId};
use http_body_util::{BodyExt, Full, Limited};
use hyper::body::{Bytes, Incoming};
use hyper::header::{AUTHORIZATION, CONNECTION, CONTENT_TYPE, HeaderValue, UPGRADE};
use hyper::{Method, Request, Response, StatusCode};
use hyper_util::rt::TokioIo;
use serde::Deserialize;
use serde_json::{Value, json};
use std::convert::Infallible;
use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;
use tokio::net::TcpListener;
use tokio_tungstenite::WebSocketStream;
use tokio_tungstenite::tungstenite::handshake::derive_accept_key;
use tokio_tungstenite::tungstenite::protocol::{Role, WebSocketConfig};

use crate::store::{RegionRecord, now_ms};
use crate::{App, services, session, tokens};

type Body = Full<Bytes>;

/// Largest HTTP request body accepted (a request carries manifests).
const MAX_BODY: usize = MAX_FRAME_BYTES;
const TLS_HANDSHAKE_TIMEOUT: Duration = Duration::from_secs(10);
/// Default wait of the request API when the caller names none.
const DEFAULT_REQUEST_WAIT: Duration = Duration::from_secs(60);

/// Accepts connections until the process ends; each connection is served on its own task.
pub async fn accept_loop(listener: TcpListener, tls: tokio_rustls::TlsAcceptor, app: Arc<App>) {
    loop {
        let (tcp, peer) = match listener.accept().await {
            Ok(c) => c,
            Err(e) => {
                // Out of file descriptors and the like: back off instead of spinning.
                log::warn!("accept failed: {e}");
                tokio::time::sleep(Duration::from_millis(100)).await;
                continue;
            }
        };
        let _ = tcp.set_nodelay(true);
        let tls = tls.clone();
        let app = app.clone();
        tokio::spawn(async move {
            let stream = match tokio::time::timeout(TLS_HANDSHAKE_TIMEOUT, tls.accept(tcp)).await {
                Ok(Ok(s)) => s,
                Ok(Err(e)) => {
                    log::debug!("TLS handshake with {peer} failed: {e}");
                    return;
                }
                Err(_) => {
                    log::debug!("TLS handshake with {peer} timed out");
                    return;
                }
            };
            let service = hyper::service::service_fn(move |req| {
                let app = app.clone();
                async move { Ok::<_, Infallible>(route(app, req, peer).await) }
            });
            if let Err(e) = hyper::server::conn::http1::Builder::new()
                .max_buf_size(64 * 1024)
                .serve_connection(TokioIo::new(stream), service)
                .with_upgrades()
                .await
            {
                log::debug!("HTTP connection from {peer}: {e}");
            }
        });
    }
}

fn json_response(status: StatusCode, value: &Value) -> Response<Body> {
    let mut r = Response::new(Full::new(Bytes::from(value.to_string())));
    *r.status_mut() = status;
    r.headers_mut()
        .insert(CONTENT_TYPE, HeaderValue::from_static("application/json"));
    r
}

/// An error answer: status and message (small, so `Result`s stay small).
struct Fail(StatusCode, String);

fn error(status: StatusCode, message: impl Into<String>) -> Fail {
    Fail(status, message.into())
}

fn respond(f: Fail) -> Response<Body> {
    json_response(f.0, &json!({ "error": f.1 }))
}

fn bearer(req: &Request<Incoming>) -> Option<SecretString> {
    req.headers()
        .get(AUTHORIZATION)
        .and_then(|v| v.to_str().ok())
        .and_then(|s| s.strip_prefix("Bearer "))
        .map(|s| SecretString::new(s.trim()))
}

fn admin_ok(app: &App, req: &Request<Incoming>) -> bool {
    bearer(req).is_some_and(|t| tokens::same(&tokens::hash(t.expose()), &app.admin_hash))
}

async fn route(app: Arc<App>, req: Request<Incoming>, peer: SocketAddr) -> Response<Body> {
    let path = req.uri().path().to_string();
    let method = req.method().clone();
    let segments: Vec<&str> = path.trim_matches('/').split('/').collect();
    log::debug!("{method} {path} from {peer}");
    if method == Method::GET && path == "/healthz" {
        return Response::new(Full::new(Bytes::from_static(b"ok")));
    }
    if method == Method::GET && path == AGENT_PATH {
        return upgrade(app, req, peer);
    }
    if !admin_ok(&app, &req) {
        return respond(error(
            StatusCode::UNAUTHORIZED,
            "missing or wrong admin token; send `Authorization: Bearer <admin token>` (the control plane's --admin-token-file)",
        ));
    }
    let result = match (&method, segments.as_slice()) {
        (&Method::POST, ["v1", "admin", "regions"]) => create_region(&app, req).await,
        (&Method::POST, ["v1", "admin", "regions", region, "bootstrap-token"]) => {
            new_bootstrap(&app, region)
        }
        (&Method::DELETE, ["v1", "admin", "regions", region]) => decommission(&app, region),
        (&Method::GET, ["v1", "regions"]) => list(&app),
        (&Method::GET, ["v1", "regions", region]) => one(&app, region),
        (&Method::POST, ["v1", "regions", region, "requests"]) => {
            let region = region.to_string();
            request(&app, &region, req).await
        }
        (&Method::POST, ["v1", "services"]) => create_service(&app, req).await,
        (&Method::GET, ["v1", "services"]) => Ok(answered(services::list(&app))),
        (&Method::GET, ["v1", "services", id]) => Ok(answered(services::one(&app, id))),
        (&Method::DELETE, ["v1", "services", id]) => {
            let id = id.to_string();
            Ok(answered(services::delete(&app, &id).await))
        }
        _ => Err(error(
            StatusCode::NOT_FOUND,
            format!("no endpoint {method} {path}; see docs/modules/multi_region.md"),
        )),
    };
    result.unwrap_or_else(respond)
}

type Handled = Result<Response<Body>, Fail>;

/// A service-instance answer (success or refusal alike) as a response.
fn answered(a: Result<services::Answer, services::Answer>) -> Response<Body> {
    let a = a.unwrap_or_else(|refused| refused);
    json_response(
        StatusCode::from_u16(a.status).unwrap_or(StatusCode::INTERNAL_SERVER_ERROR),
        &a.body,
    )
}

async fn create_service(app: &Arc<App>, req: Request<Incoming>) -> Handled {
    let body: services::CreateRequest = read_json(
        req,
        "POST /v1/services expects {\"type\": ..., \"spec\"?: {...}, \"region\"?: ..., \"id\"?: ...}",
    )
    .await?;
    Ok(answered(services::create(app, body).await))
}

fn internal(e: impl std::fmt::Display) -> Fail {
    log::error!("{e}");
    error(StatusCode::INTERNAL_SERVER_ERROR, e.to_string())
}

async fn read_json<T: for<'de> Deserialize<'de>>(
    req: Request<Incoming>,
    what: &str,
) -> Result<T, Fail> {
    let body = Limited::new(req.into_body(), MAX_BODY)
        .collect()
        .await
        .map_err(|e| {
            error(
                StatusCode::PAYLOAD_TOO_LARGE,
                format!("{what}: body unreadable or over {MAX_BODY} bytes: {e}"),
            )
        })?
        .to_bytes();
    serde_json::from_slice(&body)
        .map_err(|e| error(StatusCode::BAD_REQUEST, format!("{what}: {e}")))
}

#[derive(Deserialize)]
struct CreateRegion {
    region: String,
    zone: String,
    /// A shorter bootstrap token lifetime than the server's `--bootstrap-ttl-s`.
    #[serde(default)]
    bootstrap_ttl_s: Option<f64>,
}

fn mint_bootstrap(app: &App, region: &str, ttl: Option<f64>) -> Result<(SecretString, i64), Fail> {
    let token = tokens::mint(harmony_agent_protocol::BOOTSTRAP_PREFIX).map_err(internal)?;
    let ttl = ttl
        .filter(|t| t.is_finite() && *t > 0.0)
        .map(Duration::from_secs_f64)
        .map_or(app.bootstrap_ttl, |t| t.min(app.bootstrap_ttl));
    let expires_at = now_ms() + ttl.as_millis() as i64;
    app.store
        .add_bootstrap(region, &tokens::hash(token.expose()), expires_at)
        .map_err(internal)?;
    log::info!(
        "minted a bootstrap token for region {region} (fingerprint {}), valid until {expires_at} ms",
        tokens::fingerprint(token.expose())
    );
    Ok((token, expires_at))
}

async fn create_region(app: &App, req: Request<Incoming>) -> Handled {
    let body: CreateRegion = read_json(
        req,
        "POST /v1/admin/regions expects {\"region\": ..., \"zone\": ...}",
    )
    .await?;
    let region = RegionId::parse(&body.region)
        .map_err(|e| error(StatusCode::BAD_REQUEST, format!("region: {e}")))?;
    let zone = ZoneId::parse(&body.zone)
        .map_err(|e| error(StatusCode::BAD_REQUEST, format!("zone: {e}")))?;
    if !app
        .store
        .create_region(region.as_str(), zone.as_str())
        .map_err(internal)?
    {
        return Err(error(
            StatusCode::CONFLICT,
            format!(
                "region {region} already exists; its bootstrap token was shown once at creation. Use POST /v1/admin/regions/{region}/bootstrap-token if its agent never connected"
            ),
        ));
    }
    let (token, expires_at) = mint_bootstrap(app, region.as_str(), body.bootstrap_ttl_s)?;
    log::info!("created region {region} with zone {zone}");
    Ok(json_response(
        StatusCode::CREATED,
        &json!({
            "region": region, "zone": zone,
            "bootstrap_token": token.expose(),
            "bootstrap_expires_at": expires_at,
        }),
    ))
}

fn new_bootstrap(app: &App, region: &str) -> Handled {
    let record = app
        .store
        .region(region)
        .map_err(internal)?
        .ok_or_else(|| unknown_region(region))?;
    if record.decommissioned_at.is_some() {
        return Err(error(
            StatusCode::GONE,
            format!("region {region} is decommissioned; re-create it with POST /v1/admin/regions"),
        ));
    }
    if record.has_identity {
        return Err(error(
            StatusCode::CONFLICT,
            format!(
                "region {region} already has an agent identity; a second agent cannot bootstrap. Revoke it first (DELETE /v1/admin/regions/{region})"
            ),
        ));
    }
    let (token, expires_at) = mint_bootstrap(app, region, None)?;
    Ok(json_response(
        StatusCode::CREATED,
        &json!({
            "region": record.name, "zone": record.zone,
            "bootstrap_token": token.expose(),
            "bootstrap_expires_at": expires_at,
        }),
    ))
}

fn unknown_region(region: &str) -> Fail {
    error(
        StatusCode::NOT_FOUND,
        format!("no region {region}; create it with POST /v1/admin/regions"),
    )
}

fn decommission(app: &App, region: &str) -> Handled {
    if !app.store.decommission(region).map_err(internal)? {
        return Err(unknown_region(region));
    }
    app.hub.close(
        region,
        harmony_agent_protocol::close::REVOKED,
        "identity revoked: the region was decommissioned",
    );
    log::info!("region {region} decommissioned; its identities and tokens are revoked");
    Ok(json_response(
        StatusCode::OK,
        &json!({"region": region, "decommissioned": true}),
    ))
}

fn describe(app: &App, r: &RegionRecord) -> Value {
    let live = app.hub.view(&r.name);
    let mut v = json!({
        "region": r.name,
        "zones": [r.zone],
        "zone": r.zone,
        "created_at": r.created_at,
        "bootstrapped": r.has_identity,
        "decommissioned": r.decommissioned_at.is_some(),
    });
    if let (Value::Object(map), Ok(Value::Object(live))) = (&mut v, serde_json::to_value(&live)) {
        map.extend(live);
        if r.decommissioned_at.is_some() {
            map.insert("health".into(), json!("unavailable"));
            map.insert("health_reason".into(), json!("decommissioned"));
            map.insert("advertised_services".into(), json!([]));
        }
    }
    v
}

fn list(app: &App) -> Handled {
    let regions = app.store.regions().map_err(internal)?;
    let items: Vec<Value> = regions.iter().map(|r| describe(app, r)).collect();
    Ok(json_response(StatusCode::OK, &json!({ "regions": items })))
}

fn one(app: &App, region: &str) -> Handled {
    let r = app
        .store
        .region(region)
        .map_err(internal)?
        .ok_or_else(|| unknown_region(region))?;
    Ok(json_response(StatusCode::OK, &describe(app, &r)))
}

#[derive(Deserialize)]
struct RequestBody {
    #[serde(default)]
    id: Option<String>,
    op: String,
    #[serde(default)]
    params: Value,
    #[serde(default)]
    timeout_s: Option<f64>,
}

fn random_id() -> Result<String, Fail> {
    let mut b = [0u8; 16];
    getrandom::fill(&mut b).map_err(internal)?;
    Ok(b.iter().map(|x| format!("{x:02x}")).collect())
}

async fn request(app: &App, region: &str, req: Request<Incoming>) -> Handled {
    let body: RequestBody = read_json(
        req,
        "POST /v1/regions/{region}/requests expects {\"op\": ..., \"params\": ..., \"id\"?: ..., \"timeout_s\"?: ...}",
    )
    .await?;
    let record = app
        .store
        .region(region)
        .map_err(internal)?
        .ok_or_else(|| unknown_region(region))?;
    if record.decommissioned_at.is_some() {
        return Err(error(
            StatusCode::GONE,
            format!("region {region} is decommissioned; no agent will answer"),
        ));
    }
    let id = match body.id {
        Some(id) if !id.is_empty() && id.len() <= 128 => id,
        Some(_) => {
            return Err(error(
                StatusCode::BAD_REQUEST,
                "id: must be 1 to 128 characters; omit it to let the control plane choose",
            ));
        }
        None => random_id()?,
    };
    let wait = body
        .timeout_s
        .filter(|t| t.is_finite() && *t > 0.0)
        .map(Duration::from_secs_f64)
        .unwrap_or(DEFAULT_REQUEST_WAIT)
        .min(app.max_request_wait);
    log::debug!("request {id} for region {region}: op {}", body.op);
    let rx = app.hub.submit(
        region,
        Req {
            id: id.clone(),
            op: body.op,
            params: body.params,
        },
    );
    match tokio::time::timeout(wait, rx).await {
        Ok(Ok(res)) => Ok(json_response(
            StatusCode::OK,
            &serde_json::to_value(&res).unwrap_or(Value::Null),
        )),
        Ok(Err(_)) => Err(error(
            StatusCode::GONE,
            format!("region {region} was decommissioned while request {id} waited"),
        )),
        Err(_) => {
            app.hub.abandon(region, &id);
            let live = app.hub.view(region);
            Err(error(
                StatusCode::GATEWAY_TIMEOUT,
                format!(
                    "timed out after {:.1}s waiting for region {region} to answer request {id} (region {:?}: {}); retry with the same id to avoid acting twice",
                    wait.as_secs_f64(),
                    live.health,
                    live.health_reason
                ),
            ))
        }
    }
}

fn upgrade(app: Arc<App>, mut req: Request<Incoming>, peer: SocketAddr) -> Response<Body> {
    let is_ws = req
        .headers()
        .get(UPGRADE)
        .and_then(|v| v.to_str().ok())
        .is_some_and(|v| v.eq_ignore_ascii_case("websocket"));
    let Some(key) = req.headers().get("sec-websocket-key").cloned() else {
        return respond(error(
            StatusCode::BAD_REQUEST,
            "agents must upgrade /v1/agent to a WebSocket (Sec-WebSocket-Key missing)",
        ));
    };
    if !is_ws {
        return respond(error(
            StatusCode::BAD_REQUEST,
            "expected Upgrade: websocket",
        ));
    }
    let credential = bearer(&req);
    let on_upgrade = hyper::upgrade::on(&mut req);
    let buffer = app.ws_buffer_bytes;
    tokio::spawn(async move {
        match on_upgrade.await {
            Ok(upgraded) => {
                let config = WebSocketConfig::default()
                    .read_buffer_size(buffer)
                    .write_buffer_size(0)
                    .max_write_buffer_size(MAX_FRAME_BYTES * 2)
                    .max_message_size(Some(MAX_FRAME_BYTES))
                    .max_frame_size(Some(MAX_FRAME_BYTES));
                let ws = WebSocketStream::from_raw_socket(
                    TokioIo::new(upgraded),
                    Role::Server,
                    Some(config),
                )
                .await;
                session::run(app, ws, credential, peer).await;
            }
            Err(e) => log::debug!("upgrade from {peer} failed: {e}"),
        }
    });
    let mut r = Response::new(Full::new(Bytes::new()));
    *r.status_mut() = StatusCode::SWITCHING_PROTOCOLS;
    let h = r.headers_mut();
    h.insert(CONNECTION, HeaderValue::from_static("upgrade"));
    h.insert(UPGRADE, HeaderValue::from_static("websocket"));
    if let Ok(v) = HeaderValue::from_str(&derive_accept_key(key.as_bytes())) {
        h.insert("sec-websocket-accept", v);
    }
    r
}
