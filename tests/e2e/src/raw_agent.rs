//! A simulated agent's raw WebSocket session: the control plane's agent endpoint as a test
//! that speaks the protocol frame by frame sees it (hellos, heartbeats, close frames), for the
//! suites that check what the control plane does to a connection.

use futures::StreamExt;
use serde_json::Value;
use std::sync::Arc;
use std::time::Duration;

use crate::world::World;

/// An agent's WebSocket to the control plane, over TLS.
pub type RawWs =
    tokio_tungstenite::WebSocketStream<tokio_rustls::client::TlsStream<tokio::net::TcpStream>>;

/// Opens an agent WebSocket to `w`'s control plane (`/v1/agent`), with `token` as its bearer
/// credential, trusting the world's CA. The caller speaks the protocol itself.
pub async fn raw_connect(w: &World, token: Option<&str>) -> RawWs {
    use tokio_tungstenite::tungstenite::client::IntoClientRequest;
    let mut roots = rustls::RootCertStore::empty();
    for c in rustls::pki_types::pem::PemObject::pem_file_iter(w.pki().ca()).unwrap() {
        roots.add(c.unwrap()).unwrap();
    }
    let config = rustls::ClientConfig::builder_with_provider(Arc::new(
        rustls::crypto::ring::default_provider(),
    ))
    .with_safe_default_protocol_versions()
    .unwrap()
    .with_root_certificates(roots)
    .with_no_client_auth();
    let tcp = tokio::net::TcpStream::connect(w.cp().addr).await.unwrap();
    let tls = tokio_rustls::TlsConnector::from(Arc::new(config))
        .connect(
            rustls::pki_types::ServerName::try_from("127.0.0.1").unwrap(),
            tcp,
        )
        .await
        .unwrap();
    let mut request = format!("wss://{}/v1/agent", w.cp().addr)
        .into_client_request()
        .unwrap();
    if let Some(t) = token {
        request
            .headers_mut()
            .insert("authorization", format!("Bearer {t}").parse().unwrap());
    }
    tokio_tungstenite::client_async(request, tls)
        .await
        .unwrap()
        .0
}

/// Reads (and ignores) until the control plane closes `ws`, within 60 s; its close frame.
pub async fn closed_by_control_plane(
    ws: &mut RawWs,
) -> tokio_tungstenite::tungstenite::protocol::CloseFrame {
    use tokio_tungstenite::tungstenite::Message;
    let closed = tokio::time::timeout(Duration::from_secs(60), async {
        loop {
            match ws.next().await {
                Some(Ok(Message::Close(f))) => return f,
                None | Some(Err(_)) => return None,
                Some(Ok(_)) => {}
            }
        }
    })
    .await
    .expect("the control plane ends the connection within 60 s");
    closed.expect("with a close frame")
}

/// The next text frame as JSON (other frames skipped), within 20 s.
pub async fn next_text(ws: &mut RawWs) -> Value {
    loop {
        match tokio::time::timeout(Duration::from_secs(20), ws.next()).await {
            Ok(Some(Ok(tokio_tungstenite::tungstenite::Message::Text(t)))) => {
                return serde_json::from_str(t.as_str()).unwrap();
            }
            Ok(Some(Ok(_))) => continue,
            other => panic!("expected a text frame, got {other:?}"),
        }
    }
}
