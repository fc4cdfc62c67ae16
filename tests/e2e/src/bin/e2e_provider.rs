//! A small external service provider for the end-to-end tests: it serves one service type over
//! the HTTP contract of docs/modules/service_providers.md, keeps its instances in a JSON file (so
//! a restarted provider still knows them) and reports `provisioning` until `--ready-after-ms`
//! after a create, then `ready`. It is the "bring your own provider" example too.
//!
//! ```text
//! e2e-provider --listen 127.0.0.1:PORT --name NAME --state-file FILE [--ready-after-ms N]
//! ```

use http_body_util::{BodyExt, Full, Limited};
use hyper::body::{Bytes, Incoming};
use hyper::{Method, Request, Response, StatusCode};
use hyper_util::rt::TokioIo;
use serde_json::{Value, json};
use std::collections::BTreeMap;
use std::convert::Infallible;
use std::net::SocketAddr;
use std::path::PathBuf;
use std::sync::{Arc, Mutex};
use std::time::{SystemTime, UNIX_EPOCH};

struct Provider {
    name: String,
    ready_after_ms: u64,
    state_file: PathBuf,
    /// Instance id -> {service_type, spec, created_ms}.
    instances: Mutex<BTreeMap<String, Value>>,
}

fn now_ms() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map(|d| d.as_millis() as u64)
        .unwrap_or(0)
}

fn reply(status: StatusCode, body: Value) -> Response<Full<Bytes>> {
    let mut r = Response::new(Full::new(Bytes::from(body.to_string())));
    *r.status_mut() = status;
    r.headers_mut().insert(
        hyper::header::CONTENT_TYPE,
        hyper::header::HeaderValue::from_static("application/json"),
    );
    r
}

impl Provider {
    fn save(&self, instances: &BTreeMap<String, Value>) {
        let tmp = self.state_file.with_extension("tmp");
        let text = serde_json::to_string_pretty(instances).unwrap_or_default();
        if std::fs::write(&tmp, text).is_ok() {
            let _ = std::fs::rename(&tmp, &self.state_file);
        }
    }

    fn status(&self, id: &str, instance: &Value) -> Value {
        let created = instance["created_ms"].as_u64().unwrap_or(0);
        let ready = now_ms() >= created + self.ready_after_ms;
        json!({
            "state": if ready { "ready" } else { "provisioning" },
            "detail": if ready { format!("served by {}", self.name) } else { format!("{} is preparing it", self.name) },
            "outputs": { "url": format!("{}://{}/{id}", instance["service_type"].as_str().unwrap_or("svc"), self.name) },
        })
    }

    async fn handle(&self, req: Request<Incoming>) -> Response<Full<Bytes>> {
        let method = req.method().clone();
        let path = req.uri().path().to_string();
        let segments: Vec<&str> = path.trim_matches('/').split('/').collect();
        eprintln!("{method} {path}");
        match (&method, segments.as_slice()) {
            (&Method::GET, ["healthz"]) => reply(StatusCode::OK, json!({"ok": true})),
            (&Method::GET, ["v1", "instances"]) => {
                let all = self.instances.lock().map(|m| m.clone()).unwrap_or_default();
                reply(StatusCode::OK, json!({ "instances": all }))
            }
            (&Method::PUT, ["v1", "instances", id]) => {
                let id = id.to_string();
                let body = match Limited::new(req.into_body(), 1 << 20).collect().await {
                    Ok(b) => b.to_bytes(),
                    Err(e) => {
                        return reply(StatusCode::BAD_REQUEST, json!({"error": e.to_string()}));
                    }
                };
                let body: Value = match serde_json::from_slice(&body) {
                    Ok(v) => v,
                    Err(e) => {
                        return reply(
                            StatusCode::BAD_REQUEST,
                            json!({"error": format!("body: {e}")}),
                        );
                    }
                };
                let Some(service_type) = body["service_type"].as_str() else {
                    return reply(
                        StatusCode::BAD_REQUEST,
                        json!({"error": "service_type: missing"}),
                    );
                };
                let Ok(mut m) = self.instances.lock() else {
                    return reply(
                        StatusCode::INTERNAL_SERVER_ERROR,
                        json!({"error": "poisoned"}),
                    );
                };
                let entry = m.entry(id.clone()).or_insert_with(|| {
                    json!({"service_type": service_type, "spec": body["spec"], "created_ms": now_ms()})
                });
                let status = self.status(&id, entry);
                let snapshot = m.clone();
                drop(m);
                self.save(&snapshot);
                reply(StatusCode::CREATED, status)
            }
            (&Method::GET, ["v1", "instances", id]) => {
                let m = self.instances.lock().map(|m| m.clone()).unwrap_or_default();
                match m.get(*id) {
                    Some(i) => reply(StatusCode::OK, self.status(id, i)),
                    None => reply(
                        StatusCode::NOT_FOUND,
                        json!({"error": format!("no instance {id}")}),
                    ),
                }
            }
            (&Method::DELETE, ["v1", "instances", id]) => {
                let Ok(mut m) = self.instances.lock() else {
                    return reply(
                        StatusCode::INTERNAL_SERVER_ERROR,
                        json!({"error": "poisoned"}),
                    );
                };
                let existed = m.remove(*id).is_some();
                let snapshot = m.clone();
                drop(m);
                self.save(&snapshot);
                if existed {
                    reply(StatusCode::OK, json!({"state": "deleted"}))
                } else {
                    reply(
                        StatusCode::NOT_FOUND,
                        json!({"error": format!("no instance {id}")}),
                    )
                }
            }
            _ => reply(
                StatusCode::NOT_FOUND,
                json!({"error": format!("no endpoint {method} {path}")}),
            ),
        }
    }
}

fn arg(args: &[String], flag: &str) -> Option<String> {
    args.iter()
        .position(|a| a == flag)
        .and_then(|i| args.get(i + 1).cloned())
}

#[tokio::main]
async fn main() {
    let args: Vec<String> = std::env::args().collect();
    let usage =
        "usage: e2e-provider --listen ADDR --name NAME --state-file FILE [--ready-after-ms N]";
    let (Some(listen), Some(name), Some(state_file)) = (
        arg(&args, "--listen"),
        arg(&args, "--name"),
        arg(&args, "--state-file"),
    ) else {
        eprintln!("{usage}");
        std::process::exit(2);
    };
    let Ok(addr) = listen.parse::<SocketAddr>() else {
        eprintln!("--listen: {listen:?} is not an address like 127.0.0.1:8080");
        std::process::exit(2);
    };
    let ready_after_ms = arg(&args, "--ready-after-ms")
        .and_then(|v| v.parse().ok())
        .unwrap_or(0);
    let state_file = PathBuf::from(state_file);
    let instances = std::fs::read_to_string(&state_file)
        .ok()
        .and_then(|t| serde_json::from_str(&t).ok())
        .unwrap_or_default();
    let provider = Arc::new(Provider {
        name,
        ready_after_ms,
        state_file,
        instances: Mutex::new(instances),
    });
    let listener = match tokio::net::TcpListener::bind(addr).await {
        Ok(l) => l,
        Err(e) => {
            eprintln!("--listen {addr}: {e}");
            std::process::exit(2);
        }
    };
    eprintln!("provider {} listening on http://{addr}", provider.name);
    loop {
        let Ok((tcp, _)) = listener.accept().await else {
            continue;
        };
        let provider = provider.clone();
        tokio::spawn(async move {
            let service = hyper::service::service_fn(move |req| {
                let provider = provider.clone();
                async move { Ok::<_, Infallible>(provider.handle(req).await) }
            });
            let _ = hyper::server::conn::http1::Builder::new()
                .serve_connection(TokioIo::new(tcp), service)
                .await;
        });
    }
}
