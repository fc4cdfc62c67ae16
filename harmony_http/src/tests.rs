//! Real TLS over loopback: a tokio-rustls server with a test CA, reqwest clients built here.

use super::*;
use rcgen::{BasicConstraints, CertificateParams, IsCa, KeyPair, KeyUsagePurpose};
use rustls::pki_types::{PrivateKeyDer, PrivatePkcs8KeyDer};
use std::net::SocketAddr;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpListener;

/// A CA (PEM) and a server config whose certificate it signed, for 127.0.0.1 and localhost.
fn pki() -> (String, rustls::ServerConfig) {
    let ca_key = KeyPair::generate().unwrap();
    let mut ca_params = CertificateParams::new(Vec::<String>::new()).unwrap();
    ca_params.is_ca = IsCa::Ca(BasicConstraints::Unconstrained);
    ca_params.key_usages = vec![KeyUsagePurpose::KeyCertSign];
    let ca = ca_params.self_signed(&ca_key).unwrap();
    let issuer = rcgen::Issuer::new(ca_params, ca_key);
    let key = KeyPair::generate().unwrap();
    let params = CertificateParams::new(vec!["localhost".into(), "127.0.0.1".into()]).unwrap();
    let cert = params.signed_by(&key, &issuer).unwrap();
    let server = rustls::ServerConfig::builder_with_provider(Arc::new(
        rustls::crypto::ring::default_provider(),
    ))
    .with_safe_default_protocol_versions()
    .unwrap()
    .with_no_client_auth()
    .with_single_cert(
        vec![cert.der().clone()],
        PrivateKeyDer::Pkcs8(PrivatePkcs8KeyDer::from(key.serialize_der())),
    )
    .unwrap();
    (ca.pem(), server)
}

/// Serves HTTPS on loopback: every request is answered 200 with `hello`, after `delay`.
async fn serve(server: rustls::ServerConfig, delay: Duration) -> SocketAddr {
    let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    let acceptor = tokio_rustls::TlsAcceptor::from(Arc::new(server));
    tokio::spawn(async move {
        while let Ok((tcp, _)) = listener.accept().await {
            let acceptor = acceptor.clone();
            tokio::spawn(async move {
                let Ok(mut tls) = acceptor.accept(tcp).await else {
                    return;
                };
                let mut seen = Vec::new();
                let mut buf = [0u8; 1024];
                while !seen.windows(4).any(|w| w == b"\r\n\r\n") {
                    match tls.read(&mut buf).await {
                        Ok(0) | Err(_) => return,
                        Ok(n) => seen.extend_from_slice(&buf[..n]),
                    }
                }
                tokio::time::sleep(delay).await;
                let _ = tls
                    .write_all(
                        b"HTTP/1.1 200 OK\r\ncontent-length: 5\r\nconnection: close\r\n\r\nhello",
                    )
                    .await;
                let _ = tls.shutdown().await;
            });
        }
    });
    addr
}

/// `GET /x` of the test server at `addr`: its status and body.
async fn get_x(client: &reqwest::Client, addr: SocketAddr) -> (u16, String) {
    let answer = client
        .get(format!("https://127.0.0.1:{}/x", addr.port()))
        .send()
        .await
        .unwrap();
    (answer.status().as_u16(), answer.text().await.unwrap())
}

#[tokio::test]
async fn a_client_trusting_the_ca_bundle_talks_tls_with_ring() {
    let (ca, server) = pki();
    let addr = serve(server, Duration::ZERO).await;
    let client = ClientSettings::new()
        .ca_pem(Some(ca.as_bytes()))
        .https_only(true)
        .build()
        .unwrap();
    assert_eq!(get_x(&client, addr).await, (200, "hello".to_string()));
}

#[tokio::test]
async fn a_server_signed_by_another_ca_is_refused() {
    let (_, server) = pki();
    let (other_ca, _) = pki();
    let addr = serve(server, Duration::ZERO).await;
    let client = ClientSettings::new()
        .ca_pem(Some(other_ca.as_bytes()))
        .build()
        .unwrap();
    let e = client
        .get(format!("https://127.0.0.1:{}/", addr.port()))
        .send()
        .await
        .unwrap_err();
    let text = describe(&e);
    assert!(text.contains("certificate"), "{text}");
}

#[tokio::test]
async fn accepting_any_certificate_talks_to_a_server_no_trusted_ca_signed() {
    let (_, server) = pki();
    let (other_ca, _) = pki();
    let addr = serve(server, Duration::ZERO).await;
    let client = ClientSettings::new()
        .ca_pem(Some(other_ca.as_bytes()))
        .accept_any_certificate(true)
        .build()
        .unwrap();
    assert_eq!(get_x(&client, addr).await, (200, "hello".to_string()));
}

#[tokio::test]
async fn the_read_timeout_ends_a_silent_answer() {
    let (ca, server) = pki();
    let addr = serve(server, Duration::from_secs(5)).await;
    let client = ClientSettings::new()
        .ca_pem(Some(ca.as_bytes()))
        .read_timeout(Some(Duration::from_millis(200)))
        .build()
        .unwrap();
    let started = std::time::Instant::now();
    let e = client
        .get(format!("https://127.0.0.1:{}/", addr.port()))
        .send()
        .await
        .unwrap_err();
    assert!(e.is_timeout(), "{}", describe(&e));
    assert!(started.elapsed() < Duration::from_secs(3));
}

#[tokio::test]
async fn https_only_refuses_plain_http() {
    let client = ClientSettings::new().https_only(true).build().unwrap();
    let e = client.get("http://127.0.0.1:9/").send().await.unwrap_err();
    assert!(describe(&e).contains("URL scheme is not allowed"), "{e}");
}

#[test]
fn bundle_errors_name_the_field_and_the_fix() {
    let e = ca_roots(b"").unwrap_err();
    assert_eq!(e.field, "ca bundle");
    assert!(e.problem.starts_with("no CERTIFICATE block"), "{e}");
    let e =
        ca_roots(b"-----BEGIN PRIVATE KEY-----\nAAAA\n-----END PRIVATE KEY-----\n").unwrap_err();
    assert!(
        e.to_string().starts_with("ca bundle: no CERTIFICATE block"),
        "{e}"
    );
    let e =
        ca_roots(b"-----BEGIN CERTIFICATE-----\n!!!!\n-----END CERTIFICATE-----\n").unwrap_err();
    assert!(e.to_string().starts_with("ca bundle: malformed PEM"), "{e}");
    let e =
        ca_roots(b"-----BEGIN CERTIFICATE-----\nAAAA\n-----END CERTIFICATE-----\n").unwrap_err();
    assert!(e.to_string().contains("certificate #1"), "{e}");
}

#[test]
fn a_bundle_with_two_cas_trusts_both() {
    let (a, _) = pki();
    let (b, _) = pki();
    assert_eq!(ca_roots(format!("{a}{b}").as_bytes()).unwrap().len(), 2);
    let config = tls_config(Some(a.as_bytes())).unwrap();
    assert_eq!(config.alpn_protocols, vec![b"http/1.1".to_vec()]);
}

#[test]
fn describe_keeps_the_source_chain() {
    #[derive(Debug, thiserror::Error)]
    #[error("outer")]
    struct Outer(#[source] std::io::Error);
    let e = Outer(std::io::Error::other("inner"));
    assert_eq!(describe(&e), "outer: inner");
}
