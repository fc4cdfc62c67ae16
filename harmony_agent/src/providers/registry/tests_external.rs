//! Registry tests against a provider speaking the external contract over HTTP.

use super::tests::{registry, set_health};
use super::*;
use harmony_agent_protocol::InstanceState;

/// A provider speaking the external contract, healthy while `healthy` is set.
async fn fake_provider(healthy: Arc<std::sync::atomic::AtomicBool>) -> std::net::SocketAddr {
    use http_body_util::Full;
    use hyper::body::Bytes;
    use std::sync::atomic::Ordering;
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    let instances = Arc::new(Mutex::new(std::collections::BTreeSet::<String>::new()));
    tokio::spawn(async move {
        loop {
            let (tcp, _) = listener.accept().await.unwrap();
            let healthy = healthy.clone();
            let instances = instances.clone();
            tokio::spawn(async move {
                let service = hyper::service::service_fn(
                    move |req: hyper::Request<hyper::body::Incoming>| {
                        let healthy = healthy.load(Ordering::SeqCst);
                        let instances = instances.clone();
                        async move {
                            let path = req.uri().path().to_string();
                            let id = path
                                .strip_prefix("/v1/instances/")
                                .unwrap_or_default()
                                .to_string();
                            let mut set = instances.lock().unwrap();
                            let (status, body) = match (req.method().as_str(), path.as_str()) {
                                ("GET", "/healthz") if healthy => (200, String::new()),
                                ("GET", "/healthz") => (503, String::new()),
                                ("PUT", _) if id == "bad" => (500, r#"{"error": "boom"}"#.into()),
                                ("PUT", _) => {
                                    set.insert(id);
                                    (
                                        201,
                                        r#"{"state": "provisioning", "outputs": {"url": "q://x"}}"#
                                            .into(),
                                    )
                                }
                                ("GET", _) if set.contains(&id) => (
                                    200,
                                    r#"{"state": "Ready", "outputs": {"url": "q://x"}}"#.into(),
                                ),
                                ("GET", _) => (404, String::new()),
                                ("DELETE", _) => {
                                    set.remove(&id);
                                    (204, String::new())
                                }
                                _ => (405, String::new()),
                            };
                            let mut r = hyper::Response::new(Full::new(Bytes::from(body)));
                            *r.status_mut() = hyper::StatusCode::from_u16(status).unwrap();
                            Ok::<_, std::convert::Infallible>(r)
                        }
                    },
                );
                let _ = hyper::server::conn::http1::Builder::new()
                    .serve_connection(hyper_util::rt::TokioIo::new(tcp), service)
                    .await;
            });
        }
    });
    addr
}

#[tokio::test]
async fn an_external_provider_serves_instances_through_its_contract() {
    use std::sync::atomic::{AtomicBool, Ordering};
    let healthy = Arc::new(AtomicBool::new(true));
    let addr = fake_provider(healthy.clone()).await;
    let (r, mut rx) = registry(vec![], None);
    r.register(Registration {
        name: "p1".into(),
        service_types: vec!["queue".into()],
        endpoint: format!("http://{addr}/"),
        health_url: format!("http://{addr}/healthz?probe=1"),
    })
    .unwrap();
    r.health_round().await;
    assert_eq!(r.services().advertised(), vec!["queue"]);
    let mut frames = Vec::new();
    while let Ok(f) = rx.try_recv() {
        frames.push(f);
    }
    assert!(
        frames
            .iter()
            .any(|f| matches!(f, Frame::Services(s) if s.advertised() == vec!["queue"]))
    );
    let s = r
        .create("i1", "queue", &serde_json::json!({"size": 1}))
        .await
        .unwrap();
    assert_eq!(
        (s.state, s.provider.as_str()),
        (InstanceState::Provisioning, "p1")
    );
    assert_eq!(s.outputs["url"], "q://x");
    r.poll_instances().await;
    assert!(matches!(rx.try_recv(), Ok(Frame::Instance(i)) if i.state == InstanceState::Ready));
    r.poll_instances().await;
    assert!(
        rx.try_recv().is_err(),
        "an unchanged status is not pushed again"
    );
    assert_eq!(r.instance_frames().len(), 1);
    let e = r.create("bad", "queue", &Value::Null).await.unwrap_err();
    assert_eq!(e.code(), "provider_error");
    let msg = e.to_string();
    assert!(
        msg.contains("\"p1\"")
            && msg.contains(&format!("http://{addr}/v1/instances/bad"))
            && msg.contains("500")
            && msg.contains("boom"),
        "{msg}"
    );
    let s = r.delete("i1", "queue").await.unwrap();
    assert_eq!(s.state, InstanceState::Deleted);
    assert!(r.instance_frames().is_empty());
    assert_eq!(
        r.status("i1", "queue").await.unwrap().state,
        InstanceState::Deleted
    );
    // Failing checks: unhealthy (still held, not advertised), then unavailable (withdrawn).
    healthy.store(false, Ordering::SeqCst);
    r.health_round().await;
    set_health(
        &r,
        "p1",
        Some(Instant::now() - Duration::from_millis(400)),
        Instant::now(),
    );
    r.health_round().await;
    let s = r.services();
    assert_eq!(s.offers.len(), 1);
    assert_eq!(s.offers[0].health, ProviderHealth::Unhealthy);
    assert!(s.offers[0].detail.contains("503"), "{}", s.offers[0].detail);
    assert_eq!(
        r.create("i2", "queue", &Value::Null)
            .await
            .unwrap_err()
            .code(),
        "provider_unavailable"
    );
    set_health(
        &r,
        "p1",
        Some(Instant::now() - Duration::from_secs(5)),
        Instant::now(),
    );
    r.health_round().await;
    assert!(r.services().offers.is_empty());
    let mut last = None;
    while let Ok(f) = rx.try_recv() {
        if let Frame::Services(s) = f {
            last = Some(s);
        }
    }
    assert_eq!(
        last.map(|s| s.offers.len()),
        Some(0),
        "the withdrawal is pushed"
    );
    let view = r.view("p1").unwrap();
    assert_eq!(view.health, ProviderHealth::Unavailable);
    assert!(view.last_healthy_at.is_some());
}
