//! The agent's local REST API for bringing your own provider (`--provider-listen`): register,
//! list and deregister providers, and see what the agent offers. Plain HTTP; a bearer token
//! (`--provider-token-file`) is required whenever the address is not loopback.

use harmony_agent_protocol::SecretString;
use http_body_util::{BodyExt, Full, Limited};
use hyper::body::{Bytes, Incoming};
use hyper::{Method, Request, Response, StatusCode};
use hyper_util::rt::TokioIo;
use serde_json::{Value, json};
use std::convert::Infallible;
use std::net::SocketAddr;
use std::sync::Arc;

use super::ProviderError;
use super::external::Registration;
use super::registry::{Registered, Registry, RegistryError};

/// Largest request body accepted.
const MAX_BODY: usize = 64 * 1024;

/// What the API serves from.
pub struct ApiState {
    /// The providers.
    pub registry: Arc<Registry>,
    /// The bearer token every call must carry, when set.
    pub token: Option<SecretString>,
}

/// An answer: status and JSON body.
pub type Reply = (StatusCode, Value);

fn error(status: StatusCode, message: impl Into<String>) -> Reply {
    (status, json!({"error": message.into()}))
}

fn bad_field(field: &str, problem: impl std::fmt::Display) -> Reply {
    (
        StatusCode::BAD_REQUEST,
        json!({"error": format!("{field}: {problem}"), "field": field}),
    )
}

/// Compares in time independent of where the first difference is.
fn same_secret(a: &[u8], b: &[u8]) -> bool {
    if a.len() != b.len() {
        return false;
    }
    a.iter().zip(b).fold(0u8, |acc, (x, y)| acc | (x ^ y)) == 0
}

fn authorized(token: Option<&SecretString>, header: Option<&str>) -> bool {
    let Some(token) = token else { return true };
    header
        .and_then(|h| h.strip_prefix("Bearer "))
        .is_some_and(|given| same_secret(given.trim().as_bytes(), token.expose().as_bytes()))
}

/// Reads a registration from a request body; errors name the field and the fix.
pub fn parse_registration(body: &[u8]) -> Result<Registration, Reply> {
    let v: Value = serde_json::from_slice(body).map_err(|e| {
        bad_field(
            "body",
            format!(
                "not JSON ({e}); send {{\"name\", \"service_types\", \"endpoint\", \"health_url\"}}"
            ),
        )
    })?;
    let Some(o) = v.as_object() else {
        return Err(bad_field(
            "body",
            "must be a JSON object with name, service_types, endpoint and health_url",
        ));
    };
    let string = |field: &str, example: &str| -> Result<String, Reply> {
        match o.get(field) {
            Some(Value::String(s)) => Ok(s.clone()),
            None | Some(Value::Null) => Err(bad_field(
                field,
                format!("is required; e.g. \"{field}\": {example:?}"),
            )),
            Some(_) => Err(bad_field(field, "must be a string")),
        }
    };
    let name = string("name", "q1")?;
    let service_types = match o.get("service_types") {
        Some(Value::Array(items)) => items
            .iter()
            .enumerate()
            .map(|(i, t)| {
                t.as_str()
                    .map(str::to_string)
                    .ok_or_else(|| bad_field(&format!("service_types[{i}]"), "must be a string"))
            })
            .collect::<Result<Vec<_>, _>>()?,
        None | Some(Value::Null) => {
            return Err(bad_field(
                "service_types",
                "is required; list the types it serves, e.g. [\"queue\"]",
            ));
        }
        Some(_) => {
            return Err(bad_field(
                "service_types",
                "must be an array of strings, e.g. [\"queue\"]",
            ));
        }
    };
    let endpoint = string("endpoint", "http://127.0.0.1:9000")?;
    let health_url = string("health_url", "http://127.0.0.1:9000/healthz")?;
    let reg = Registration {
        name,
        service_types,
        endpoint,
        health_url,
    };
    reg.validate().map_err(|e| invalid(&e))?;
    Ok(reg)
}

fn invalid(e: &ProviderError) -> Reply {
    match e {
        ProviderError::InvalidParams { field, problem } => bad_field(field, problem),
        other => error(StatusCode::BAD_REQUEST, other.to_string()),
    }
}

fn registry_error(e: RegistryError) -> Reply {
    match &e {
        RegistryError::Invalid(p) => invalid(p),
        RegistryError::Conflict {
            holder,
            service_type,
            message,
        } => (
            StatusCode::CONFLICT,
            json!({"error": message, "holder": holder, "service_type": service_type}),
        ),
        RegistryError::Builtin { .. } => error(StatusCode::CONFLICT, e.to_string()),
        RegistryError::NotFound { .. } => error(StatusCode::NOT_FOUND, e.to_string()),
        RegistryError::Persist { .. } => error(StatusCode::INTERNAL_SERVER_ERROR, e.to_string()),
    }
}

fn to_json<T: serde::Serialize>(v: &T) -> Value {
    serde_json::to_value(v).unwrap_or(Value::Null)
}

/// Answers one call. `auth` is the Authorization header as sent.
pub fn handle(
    state: &ApiState,
    method: &Method,
    path: &str,
    auth: Option<&str>,
    body: &[u8],
) -> Reply {
    if !authorized(state.token.as_ref(), auth) {
        return error(
            StatusCode::UNAUTHORIZED,
            "missing or wrong bearer token; send Authorization: Bearer <the token in the agent's --provider-token-file>",
        );
    }
    let path = path.trim_end_matches('/');
    let segments: Vec<&str> = path.split('/').skip(1).collect();
    match (method, segments.as_slice()) {
        (&Method::POST, ["v1", "providers"]) => {
            let reg = match parse_registration(body) {
                Ok(r) => r,
                Err(reply) => return reply,
            };
            match state.registry.register(reg) {
                Ok((Registered::Created, view)) => (StatusCode::CREATED, to_json(&view)),
                Ok((_, view)) => (StatusCode::OK, to_json(&view)),
                Err(e) => registry_error(e),
            }
        }
        (&Method::GET, ["v1", "providers"]) => (
            StatusCode::OK,
            json!({"providers": to_json(&state.registry.views())}),
        ),
        (&Method::GET, ["v1", "providers", name]) => match state.registry.view(name) {
            Some(v) => (StatusCode::OK, to_json(&v)),
            None => registry_error(RegistryError::NotFound {
                name: name.to_string(),
            }),
        },
        (&Method::DELETE, ["v1", "providers", name]) => match state.registry.deregister(name) {
            Ok(()) => (StatusCode::OK, json!({"deregistered": name})),
            Err(e) => registry_error(e),
        },
        (&Method::GET, ["v1", "services"]) => {
            let services = state.registry.services();
            let advertised = services.advertised();
            (
                StatusCode::OK,
                json!({"offers": to_json(&services.offers), "advertised": advertised}),
            )
        }
        (_, ["v1", "providers"] | ["v1", "providers", _] | ["v1", "services"]) => error(
            StatusCode::METHOD_NOT_ALLOWED,
            format!("{method} is not allowed on {path}"),
        ),
        _ => error(
            StatusCode::NOT_FOUND,
            format!(
                "no such endpoint {path}; the API serves /v1/providers, /v1/providers/{{name}}, /v1/services and /healthz"
            ),
        ),
    }
}

async fn answer(state: Arc<ApiState>, req: Request<Incoming>) -> Response<Full<Bytes>> {
    if req.uri().path() == "/healthz" {
        return Response::new(Full::new(Bytes::from_static(b"ok")));
    }
    let method = req.method().clone();
    let path = req.uri().path().to_string();
    let auth = req
        .headers()
        .get(hyper::header::AUTHORIZATION)
        .and_then(|h| h.to_str().ok())
        .map(str::to_string);
    let (status, body) = match Limited::new(req.into_body(), MAX_BODY).collect().await {
        Ok(b) => handle(&state, &method, &path, auth.as_deref(), &b.to_bytes()),
        Err(_) => error(
            StatusCode::PAYLOAD_TOO_LARGE,
            format!("the body is larger than {MAX_BODY} bytes or could not be read"),
        ),
    };
    let mut r = Response::new(Full::new(Bytes::from(body.to_string())));
    *r.status_mut() = status;
    r.headers_mut().insert(
        hyper::header::CONTENT_TYPE,
        hyper::header::HeaderValue::from_static("application/json"),
    );
    r
}

/// Serves the API on `listener` until the process ends.
pub async fn serve(listener: tokio::net::TcpListener, state: Arc<ApiState>) -> std::io::Result<()> {
    loop {
        let (tcp, _) = listener.accept().await?;
        let state = state.clone();
        tokio::spawn(async move {
            let service = hyper::service::service_fn(move |req| {
                let state = state.clone();
                async move { Ok::<_, Infallible>(answer(state, req).await) }
            });
            let _ = hyper::server::conn::http1::Builder::new()
                .serve_connection(TokioIo::new(tcp), service)
                .await;
        });
    }
}

/// Binds `addr` and serves the API in the background; binding errors are returned at once.
pub async fn start(addr: SocketAddr, state: Arc<ApiState>) -> std::io::Result<SocketAddr> {
    let listener = tokio::net::TcpListener::bind(addr).await?;
    let local = listener.local_addr()?;
    log::info!(
        "provider API on http://{local}/v1/providers{}",
        if state.token.is_some() {
            " (bearer token required)"
        } else {
            ""
        }
    );
    tokio::spawn(async move {
        if let Err(e) = serve(listener, state).await {
            log::error!("provider API on {local}: {e}");
        }
    });
    Ok(local)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::cluster::Cluster;
    use crate::providers::registry::{Builtin, HealthPolicy, RegistryConfig};
    use harmony::infra::kube::KubeTarget;
    use std::time::Duration;

    fn state(token: Option<&str>, builtins: Vec<Builtin>) -> ApiState {
        let (tx, _rx) = tokio::sync::mpsc::unbounded_channel();
        let registry = Registry::new(
            RegistryConfig {
                policy: HealthPolicy {
                    interval: Duration::from_millis(100),
                    unhealthy_after: Duration::from_millis(300),
                    unavailable_after: Duration::from_millis(600),
                },
                builtins,
                file: None,
                discovery_interval: Duration::from_secs(30),
                instance_poll: Duration::from_secs(5),
            },
            Arc::new(Cluster::new("t".into(), KubeTarget::InCluster)),
            crate::providers::external::http_client().unwrap(),
            tx,
        )
        .unwrap();
        ApiState {
            registry,
            token: token.map(SecretString::new),
        }
    }

    fn post(s: &ApiState, body: Value) -> Reply {
        handle(
            s,
            &Method::POST,
            "/v1/providers",
            None,
            body.to_string().as_bytes(),
        )
    }

    fn q1() -> Value {
        json!({"name": "q1", "service_types": ["queue"], "endpoint": "http://127.0.0.1:9", "health_url": "http://127.0.0.1:9/healthz"})
    }

    #[tokio::test]
    async fn registration_validation_names_the_field() {
        let s = state(None, vec![]);
        let check = |body: Value, field: &str, contains: &str| {
            let (status, v) = post(&s, body);
            assert_eq!(status, StatusCode::BAD_REQUEST);
            assert_eq!(v["field"], field, "{v}");
            let msg = v["error"].as_str().unwrap();
            assert!(
                msg.starts_with(&format!("{field}: ")) && msg.contains(contains),
                "{msg}"
            );
        };
        let with = |k: &str, val: Value| {
            let mut b = q1();
            b[k] = val;
            b
        };
        check(with("name", json!("Q_1")), "name", "DNS-1123");
        check(with("name", Value::Null), "name", "is required");
        check(
            with("service_types", json!([])),
            "service_types",
            "is empty",
        );
        check(
            with("service_types", json!("queue")),
            "service_types",
            "array",
        );
        check(
            with("service_types", json!(["ok", "No"])),
            "service_types[1]",
            "DNS-1123",
        );
        check(with("endpoint", json!("ftp://h")), "endpoint", "http");
        check(with("health_url", json!("http://")), "health_url", "");
        let (status, v) = handle(&s, &Method::POST, "/v1/providers", None, b"{oops");
        assert_eq!(status, StatusCode::BAD_REQUEST);
        assert_eq!(v["field"], "body");
        // Nothing was registered by the bad calls.
        let (_, v) = handle(&s, &Method::GET, "/v1/providers", None, b"");
        assert_eq!(v["providers"], json!([]));
    }

    #[tokio::test]
    async fn register_list_conflict_and_deregister() {
        let s = state(None, vec![Builtin::Container]);
        let (status, v) = post(&s, q1());
        assert_eq!(status, StatusCode::CREATED);
        assert_eq!(v["name"], "q1");
        assert_eq!(v["builtin"], false);
        assert_eq!(v["health"], "unhealthy");
        assert_eq!(post(&s, q1()).0, StatusCode::OK);
        let (status, v) = post(
            &s,
            json!({"name": "q2", "service_types": ["queue"], "endpoint": "http://h", "health_url": "http://h/health"}),
        );
        assert_eq!(status, StatusCode::CONFLICT);
        assert_eq!(
            v,
            json!({"error": "service type \"queue\" is already served by provider \"q1\"; deregister it first (DELETE /v1/providers/q1) or register another type", "holder": "q1", "service_type": "queue"})
        );
        let (status, v) = post(
            &s,
            json!({"name": "c1", "service_types": ["container"], "endpoint": "http://h", "health_url": "http://h/health"}),
        );
        assert_eq!(status, StatusCode::CONFLICT);
        assert_eq!(v["holder"], "kubernetes-workloads");
        assert!(v["error"].as_str().unwrap().contains("--builtin-providers"));
        let (status, v) = handle(&s, &Method::GET, "/v1/providers", None, b"");
        assert_eq!(status, StatusCode::OK);
        assert_eq!(v["providers"].as_array().unwrap().len(), 2);
        let (status, v) = handle(
            &s,
            &Method::GET,
            "/v1/providers/kubernetes-workloads",
            None,
            b"",
        );
        assert_eq!(status, StatusCode::OK);
        assert_eq!(v["builtin"], true);
        assert!(v.get("endpoint").is_none());
        let (status, v) = handle(&s, &Method::GET, "/v1/services", None, b"");
        assert_eq!(status, StatusCode::OK);
        assert_eq!(v["advertised"], json!([]));
        assert_eq!(v["offers"][0]["service_type"], "queue");
        assert_eq!(
            handle(
                &s,
                &Method::DELETE,
                "/v1/providers/kubernetes-workloads",
                None,
                b""
            )
            .0,
            StatusCode::CONFLICT
        );
        assert_eq!(
            handle(&s, &Method::DELETE, "/v1/providers/nope", None, b"").0,
            StatusCode::NOT_FOUND
        );
        let (status, v) = handle(&s, &Method::DELETE, "/v1/providers/q1", None, b"");
        assert_eq!((status, v), (StatusCode::OK, json!({"deregistered": "q1"})));
        assert_eq!(
            handle(&s, &Method::GET, "/v1/providers/q1", None, b"").0,
            StatusCode::NOT_FOUND
        );
        assert_eq!(
            handle(&s, &Method::PUT, "/v1/services", None, b"").0,
            StatusCode::METHOD_NOT_ALLOWED
        );
    }

    #[tokio::test]
    async fn a_token_is_enforced_over_http() {
        let s = Arc::new(state(Some("t0ken"), vec![]));
        assert_eq!(
            handle(&s, &Method::GET, "/v1/providers", None, b"").0,
            StatusCode::UNAUTHORIZED
        );
        assert_eq!(
            handle(&s, &Method::GET, "/v1/providers", Some("Bearer nope"), b"").0,
            StatusCode::UNAUTHORIZED
        );
        assert_eq!(
            handle(&s, &Method::GET, "/v1/providers", Some("Bearer t0ken"), b"").0,
            StatusCode::OK
        );
        let addr = start("127.0.0.1:0".parse().unwrap(), s).await.unwrap();
        let http = crate::providers::external::http_client().unwrap();
        let get = |path: &str, auth: Option<&str>| {
            let mut b = http.get(format!("http://{addr}{path}"));
            if let Some(a) = auth {
                b = b.header("authorization", a);
            }
            b.send()
        };
        assert_eq!(
            get("/healthz", None).await.unwrap().status(),
            StatusCode::OK
        );
        assert_eq!(
            get("/v1/services", None).await.unwrap().status(),
            StatusCode::UNAUTHORIZED
        );
        let r = get("/v1/services", Some("Bearer t0ken")).await.unwrap();
        assert_eq!(r.status(), StatusCode::OK);
        let body = r.bytes().await.unwrap();
        let v: Value = serde_json::from_slice(&body).unwrap();
        assert_eq!(v, json!({"offers": [], "advertised": []}));
    }
}
