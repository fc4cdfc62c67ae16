//! ControlPlaneClient against a real HTTPS server on loopback (hyper over tokio-rustls, a test
//! CA): no mock of the HTTP client, so TLS, headers, NDJSON chunking and timeouts are real.

use futures::StreamExt;
use harmony_agent_protocol::{ErrorBody, RawJson, Res, SecretString};
use harmony_api::{ApiError, Health, RequestEvent, RequestEventKind};
use http_body_util::{BodyExt, Full, StreamBody, combinators::UnsyncBoxBody};
use hyper::body::{Bytes, Frame, Incoming};
use hyper::{Request, Response};
use hyper_util::rt::TokioIo;
use rcgen::{BasicConstraints, CertificateParams, IsCa, KeyPair, KeyUsagePurpose};
use std::convert::Infallible;
use std::sync::{Arc, Mutex};
use std::time::Duration;
use tokio::sync::mpsc;

use super::client::{ControlPlaneClient, ControlPlaneError};

/// A request as the server saw it.
#[derive(Debug, Clone)]
pub(super) struct Seen {
    pub method: String,
    /// Path and query.
    pub uri: String,
    pub authorization: String,
    pub accept: String,
    pub body: String,
}

/// What the server answers.
pub(super) enum Reply {
    /// One body.
    Full {
        status: u16,
        content_type: &'static str,
        body: String,
    },
    /// NDJSON lines as the test pushes them; the stream ends when the sender is dropped.
    Lines(mpsc::UnboundedReceiver<String>),
}

impl Reply {
    /// A JSON body.
    pub(super) fn json(status: u16, body: impl serde::Serialize) -> Self {
        Reply::Full {
            status,
            content_type: "application/json",
            body: serde_json::to_string(&body).unwrap(),
        }
    }
}

type Handler = Arc<dyn Fn(&Seen) -> Reply + Send + Sync>;

/// An HTTPS server on 127.0.0.1 with its own CA.
pub(super) struct TestServer {
    pub url: String,
    pub ca_pem: String,
    pub seen: Arc<Mutex<Vec<Seen>>>,
}

impl TestServer {
    /// Starts a server answering every request with `handler`.
    pub(super) async fn start(handler: impl Fn(&Seen) -> Reply + Send + Sync + 'static) -> Self {
        let handler: Handler = Arc::new(handler);
        let (ca_pem, tls) = pki();
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let url = format!(
            "https://127.0.0.1:{}",
            listener.local_addr().unwrap().port()
        );
        let seen = Arc::new(Mutex::new(Vec::new()));
        let acceptor = tokio_rustls::TlsAcceptor::from(Arc::new(tls));
        let log = seen.clone();
        tokio::spawn(async move {
            while let Ok((tcp, _)) = listener.accept().await {
                let (acceptor, handler, log) = (acceptor.clone(), handler.clone(), log.clone());
                tokio::spawn(async move {
                    let Ok(stream) = acceptor.accept(tcp).await else {
                        return;
                    };
                    let service = hyper::service::service_fn(move |req: Request<Incoming>| {
                        let (handler, log) = (handler.clone(), log.clone());
                        async move { Ok::<_, Infallible>(answer(req, &handler, &log).await) }
                    });
                    let _ = hyper::server::conn::http1::Builder::new()
                        .serve_connection(TokioIo::new(stream), service)
                        .await;
                });
            }
        });
        Self { url, ca_pem, seen }
    }

    /// A client trusting this server's CA.
    pub(super) fn client(&self) -> ControlPlaneClient {
        ControlPlaneClient::new(
            &self.url,
            SecretString::new("admin-test-token"),
            Some(self.ca_pem.as_bytes()),
        )
        .unwrap()
    }

    /// The requests seen so far.
    pub(super) fn seen(&self) -> Vec<Seen> {
        self.seen.lock().unwrap().clone()
    }
}

type Body = UnsyncBoxBody<Bytes, Infallible>;

async fn answer(
    req: Request<Incoming>,
    handler: &Handler,
    log: &Mutex<Vec<Seen>>,
) -> Response<Body> {
    let header = |name: &str| {
        req.headers()
            .get(name)
            .and_then(|v| v.to_str().ok())
            .unwrap_or_default()
            .to_string()
    };
    let mut seen = Seen {
        method: req.method().to_string(),
        uri: req.uri().to_string(),
        authorization: header("authorization"),
        accept: header("accept"),
        body: String::new(),
    };
    let bytes = req.into_body().collect().await.unwrap().to_bytes();
    seen.body = String::from_utf8(bytes.to_vec()).unwrap();
    log.lock().unwrap().push(seen.clone());
    match handler(&seen) {
        Reply::Full {
            status,
            content_type,
            body,
        } => Response::builder()
            .status(status)
            .header("content-type", content_type)
            .body(Full::new(Bytes::from(body)).boxed_unsync())
            .unwrap(),
        Reply::Lines(rx) => {
            let lines = futures::stream::unfold(rx, |mut rx| async move {
                let line = rx.recv().await?;
                Some((Ok::<_, Infallible>(Frame::data(Bytes::from(line))), rx))
            });
            Response::builder()
                .status(200)
                .header("content-type", harmony_api::NDJSON)
                .body(StreamBody::new(lines.boxed()).boxed_unsync())
                .unwrap()
        }
    }
}

/// A CA (PEM) and a server config for 127.0.0.1 signed by it.
fn pki() -> (String, tokio_rustls::rustls::ServerConfig) {
    use tokio_rustls::rustls::pki_types::{PrivateKeyDer, PrivatePkcs8KeyDer};
    let ca_key = KeyPair::generate().unwrap();
    let mut ca_params = CertificateParams::new(Vec::<String>::new()).unwrap();
    ca_params.is_ca = IsCa::Ca(BasicConstraints::Unconstrained);
    ca_params.key_usages = vec![KeyUsagePurpose::KeyCertSign];
    let ca = ca_params.self_signed(&ca_key).unwrap();
    let issuer = rcgen::Issuer::new(ca_params, ca_key);
    let key = KeyPair::generate().unwrap();
    let cert = CertificateParams::new(vec!["127.0.0.1".into()])
        .unwrap()
        .signed_by(&key, &issuer)
        .unwrap();
    let config = tokio_rustls::rustls::ServerConfig::builder_with_provider(Arc::new(
        tokio_rustls::rustls::crypto::ring::default_provider(),
    ))
    .with_safe_default_protocol_versions()
    .unwrap()
    .with_no_client_auth()
    .with_single_cert(
        vec![cert.der().clone()],
        PrivateKeyDer::Pkcs8(PrivatePkcs8KeyDer::from(key.serialize_der())),
    )
    .unwrap();
    (ca.pem(), config)
}

/// An NDJSON line.
pub(super) fn line(event: &RequestEvent) -> String {
    format!("{}\n", serde_json::to_string(event).unwrap())
}

/// A handler streaming whatever the test pushes into the returned sender.
pub(super) fn streaming() -> (mpsc::UnboundedSender<String>, impl Fn(&Seen) -> Reply) {
    let (tx, rx) = mpsc::unbounded_channel();
    let rx = Mutex::new(Some(rx));
    let handler = move |_: &Seen| Reply::Lines(rx.lock().unwrap().take().expect("one request"));
    (tx, handler)
}

const WAIT: Duration = Duration::from_secs(10);

#[tokio::test]
async fn progress_lines_reach_the_callback_before_the_result_is_sent() {
    let (tx, handler) = streaming();
    let server = TestServer::start(handler).await;
    let client = server.client();
    let params = RawJson::from_string(r#"{"manifests":[],"n":1e2}"#.into()).unwrap();
    let (saw_progress, mut progress_seen) = mpsc::unbounded_channel();
    // The result is only sent once the client has reported the progress: a client that
    // buffered the whole body would wait forever here.
    let feeder = tokio::spawn(async move {
        tx.send(line(&RequestEvent::progress(
            "r1",
            "applying",
            "1/2 objects",
        )))
        .unwrap();
        progress_seen.recv().await.unwrap();
        // Split a line across two chunks, too.
        let result = line(&RequestEvent::result(Res::ok(
            "r1",
            serde_json::json!({"changes": []}),
        )));
        let (a, b) = result.split_at(10);
        tx.send(a.to_string()).unwrap();
        tx.send(b.to_string()).unwrap();
    });
    let mut events = Vec::new();
    let res = tokio::time::timeout(
        WAIT,
        client.request_streaming("east", "r1", "apply_manifests", &params, WAIT, |e| {
            events.push(e.clone());
            let _ = saw_progress.send(());
        }),
    )
    .await
    .expect("the client read the stream incrementally")
    .unwrap();
    feeder.await.unwrap();
    assert!(res.ok && res.id == "r1", "{res:?}");
    assert_eq!(events.len(), 1);
    assert_eq!(events[0].kind, RequestEventKind::Progress);
    assert_eq!(events[0].detail.as_deref(), Some("1/2 objects"));
    let seen = &server.seen()[0];
    assert_eq!(seen.method, "POST");
    assert_eq!(seen.uri, "/v1/regions/east/requests?stream=ndjson");
    assert_eq!(seen.accept, harmony_api::NDJSON);
    assert_eq!(seen.authorization, "Bearer admin-test-token");
    // Params travel byte for byte: 1e2 is not re-encoded as 100.0.
    assert!(
        seen.body.contains(r#""params":{"manifests":[],"n":1e2}"#),
        "{}",
        seen.body
    );
    assert!(seen.body.contains(r#""id":"r1""#) && seen.body.contains(r#""op":"apply_manifests""#));
}

#[tokio::test]
async fn a_plain_json_answer_is_accepted_without_progress() {
    let server =
        TestServer::start(|_| Reply::json(200, Res::err("r2", ErrorBody::new("conflict", "x"))))
            .await;
    let mut calls = 0;
    let res = server
        .client()
        .request_streaming("east", "r2", "get_objects", &RawJson::null(), WAIT, |_| {
            calls += 1
        })
        .await
        .unwrap();
    assert_eq!((res.ok, calls), (false, 0));
    assert_eq!(res.error.unwrap().code, "conflict");
}

#[tokio::test]
async fn an_error_line_is_the_status_a_plain_call_would_have_had() {
    let (tx, handler) = streaming();
    let server = TestServer::start(handler).await;
    tx.send(line(&RequestEvent::progress("r3", "queued", "")))
        .unwrap();
    tx.send(line(&RequestEvent::error(
        "r3",
        504,
        ApiError::new("no answer within 1 s"),
    )))
    .unwrap();
    let e = server
        .client()
        .request_streaming("east", "r3", "get_objects", &RawJson::null(), WAIT, |_| {})
        .await
        .unwrap_err();
    assert!(
        matches!(&e, ControlPlaneError::Status { status: 504, error, .. } if error.error.contains("no answer")),
        "{e}"
    );
}

#[tokio::test]
async fn a_stream_cut_before_the_result_is_a_transport_failure() {
    let (tx, handler) = streaming();
    let server = TestServer::start(handler).await;
    tx.send(line(&RequestEvent::progress("r4", "applying", "")))
        .unwrap();
    drop(tx);
    let e = server
        .client()
        .request_streaming("east", "r4", "get_objects", &RawJson::null(), WAIT, |_| {})
        .await
        .unwrap_err();
    assert!(matches!(e, ControlPlaneError::Unreachable { .. }), "{e}");
}

#[tokio::test]
async fn an_unreadable_line_is_an_invalid_answer() {
    let (tx, handler) = streaming();
    let server = TestServer::start(handler).await;
    tx.send("{\"type\":\"progress\"\n".into()).unwrap();
    let e = server
        .client()
        .request_streaming("east", "r5", "get_objects", &RawJson::null(), WAIT, |_| {})
        .await
        .unwrap_err();
    assert!(e.to_string().contains("unreadable NDJSON line"), "{e}");
}

#[tokio::test]
async fn refusals_keep_the_servers_error_body() {
    let server = TestServer::start(|_| {
        Reply::json(
            413,
            ApiError {
                error: "request too large".into(),
                code: Some("too_large".into()),
                limit_bytes: Some(4_194_304),
                size_bytes: Some(6_000_000),
                ..ApiError::default()
            },
        )
    })
    .await;
    let e = server
        .client()
        .request("east", "r6", "apply_manifests", serde_json::json!({}), WAIT)
        .await
        .unwrap_err();
    let ControlPlaneError::Status { status, error, .. } = e else {
        panic!("{e}")
    };
    assert_eq!((status, error.limit_bytes), (413, Some(4_194_304)));
}

#[tokio::test]
async fn admin_calls_read_the_shared_api_types() {
    let server = TestServer::start(|seen| match seen.uri.as_str() {
        "/v1/regions" => Reply::Full {
            status: 200,
            content_type: "application/json",
            body: r#"{"regions":[{"region":"east","zone":"z1","health":"unhealthy","health_reason":"late"}]}"#.into(),
        },
        "/v1/admin/regions" => Reply::json(409, ApiError::new("region east exists")),
        _ => Reply::json(404, ApiError::new("no such region")),
    })
    .await;
    let client = server.client();
    let regions = client.regions().await.unwrap();
    assert_eq!(regions[0].health, Health::Unhealthy);
    assert!(!regions[0].is_healthy());
    assert_eq!(client.region("west").await.unwrap(), None);
    let region = harmony_types::RegionId::parse("east").unwrap();
    let zone = harmony_types::ZoneId::parse("z1").unwrap();
    assert!(
        client
            .create_region(&region, &zone)
            .await
            .unwrap()
            .is_none()
    );
    let body = &server.seen()[2].body;
    assert_eq!(body, r#"{"region":"east","zone":"z1"}"#);
}

#[tokio::test]
async fn a_server_outside_the_ca_bundle_is_refused() {
    let server = TestServer::start(|_| Reply::json(200, serde_json::json!({}))).await;
    let (other_ca, _) = pki();
    let client = ControlPlaneClient::new(
        &server.url,
        SecretString::new("t"),
        Some(other_ca.as_bytes()),
    )
    .unwrap();
    let e = client.regions().await.unwrap_err();
    assert!(matches!(e, ControlPlaneError::Unreachable { .. }), "{e}");
    assert!(e.to_string().contains("certificate"), "{e}");
    assert!(server.seen().is_empty());
}

#[test]
fn the_client_refuses_plain_http_and_bad_bundles() {
    let e = ControlPlaneClient::new("http://cp:8443", SecretString::new("t"), None).unwrap_err();
    assert!(
        e.to_string()
            .starts_with("control plane url: scheme \"http\""),
        "{e}"
    );
    let e = ControlPlaneClient::new("https://cp:8443", SecretString::new("t"), Some(b"junk"))
        .unwrap_err();
    assert!(
        e.to_string().starts_with("ca bundle: no CERTIFICATE block"),
        "{e}"
    );
}

#[tokio::test]
async fn an_admin_call_is_bounded_by_the_admin_timeout_the_client_was_given() {
    // The answer's body never ends while `_tx` lives: only the client's bound ends the call.
    let (_tx, handler) = streaming();
    let server = TestServer::start(handler).await;
    let wait = Duration::from_millis(300);
    let e = server
        .client()
        .with_admin_timeout(wait)
        .regions()
        .await
        .unwrap_err();
    match e {
        ControlPlaneError::Timeout { after, .. } => assert_eq!(after, wait),
        other => panic!("expected a timeout after {wait:?}, got {other}"),
    }
}
