//! `/healthz` (the process loop is alive) and `/readyz` (connected to the control plane) over
//! plain HTTP, for kubelet probes. They reveal nothing else.

use http_body_util::Full;
use hyper::body::Bytes;
use hyper::{Response, StatusCode};
use hyper_util::rt::TokioIo;
use std::convert::Infallible;
use std::net::SocketAddr;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};

/// Shared readiness flag.
#[derive(Default)]
pub struct Readiness {
    connected: AtomicBool,
}

impl Readiness {
    /// Sets whether the agent is connected and welcomed.
    pub fn set(&self, connected: bool) {
        self.connected.store(connected, Ordering::Relaxed);
    }

    /// Whether the agent is connected.
    pub fn get(&self) -> bool {
        self.connected.load(Ordering::Relaxed)
    }
}

/// Serves the probes on `addr` until the process ends.
pub async fn serve(addr: SocketAddr, readiness: Arc<Readiness>) -> std::io::Result<()> {
    let listener = tokio::net::TcpListener::bind(addr).await?;
    log::info!("health probes on http://{addr}/healthz and /readyz");
    loop {
        let (tcp, _) = listener.accept().await?;
        let readiness = readiness.clone();
        tokio::spawn(async move {
            let service =
                hyper::service::service_fn(move |req: hyper::Request<hyper::body::Incoming>| {
                    let ready = readiness.get();
                    async move {
                        let (status, text): (StatusCode, &'static str) = match req.uri().path() {
                            "/healthz" => (StatusCode::OK, "ok"),
                            "/readyz" if ready => (StatusCode::OK, "connected"),
                            "/readyz" => (
                                StatusCode::SERVICE_UNAVAILABLE,
                                "not connected to the control plane",
                            ),
                            _ => (StatusCode::NOT_FOUND, "not found"),
                        };
                        let mut r = Response::new(Full::new(Bytes::from_static(text.as_bytes())));
                        *r.status_mut() = status;
                        Ok::<_, Infallible>(r)
                    }
                });
            let _ = hyper::server::conn::http1::Builder::new()
                .serve_connection(TokioIo::new(tcp), service)
                .await;
        });
    }
}
