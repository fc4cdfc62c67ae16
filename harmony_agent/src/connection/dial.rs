//! Dialling the control plane: TLS (rustls with ring, the given CA bundle or the system roots),
//! then the WebSocket upgrade carrying the credential as a bearer token.

use harmony_agent_protocol::SecretString;
use rustls::pki_types::ServerName;
use std::sync::Arc;
use tokio_tungstenite::tungstenite::client::IntoClientRequest;
use tokio_tungstenite::tungstenite::http::HeaderValue;
use tokio_tungstenite::tungstenite::protocol::WebSocketConfig;

use super::{CONNECT_TIMEOUT, Ws};
use crate::error::AgentError;

/// The rustls client config the agent dials with: Harmony's one shared TLS setup
/// (`harmony_http`, ring provider) trusting `ca_bundle`, or the system roots.
pub fn tls_config(
    ca_bundle: Option<&std::path::Path>,
) -> Result<Arc<rustls::ClientConfig>, AgentError> {
    let pem = match ca_bundle {
        Some(path) => Some(std::fs::read(path).map_err(|e| AgentError::Config {
            field: "--ca-bundle",
            problem: format!("{}: {e}", path.display()),
        })?),
        None => None,
    };
    let config = harmony_http::tls_config(pem.as_deref()).map_err(|e| AgentError::Config {
        field: "--ca-bundle",
        problem: match ca_bundle {
            Some(path) => format!("{}: {}", path.display(), e.problem),
            None => e.problem,
        },
    })?;
    Ok(Arc::new(config))
}

/// The agent endpoint for a control-plane URL given as `wss://`/`https://` host[:port].
pub fn agent_url(base: &str) -> Result<url::Url, AgentError> {
    let bad = |problem: String| AgentError::Config {
        field: "--control-plane",
        problem,
    };
    let mut u = url::Url::parse(base).map_err(|e| bad(format!("{base:?}: {e}")))?;
    match u.scheme() {
        "wss" => {}
        "https" => {
            let _ = u.set_scheme("wss");
        }
        other => {
            return Err(bad(format!(
                "scheme {other:?} is not supported; the agent only dials TLS (wss:// or https://)"
            )));
        }
    }
    if u.host_str().is_none() {
        return Err(bad(format!("{base:?} has no host")));
    }
    u.set_path(harmony_agent_protocol::AGENT_PATH);
    Ok(u)
}

/// The WebSocket settings: incoming frames up to `max_frame` bytes (the hello's
/// `max_frame_bytes`), writes flushed at once.
pub fn ws_config(max_frame: u64) -> WebSocketConfig {
    let max = usize::try_from(max_frame).unwrap_or(usize::MAX);
    WebSocketConfig::default()
        .read_buffer_size(16 * 1024)
        .write_buffer_size(0)
        .max_message_size(Some(max))
        .max_frame_size(Some(max))
}

/// Dials `url` over TLS and upgrades to WebSocket, presenting `credential`; frames above
/// `max_frame` bytes are refused by the WebSocket layer.
pub(super) async fn dial(
    url: &url::Url,
    tls: &tokio_rustls::TlsConnector,
    credential: &SecretString,
    max_frame: u64,
) -> Result<Ws, String> {
    let host = url
        .host_str()
        .unwrap_or_default()
        .trim_matches(['[', ']'])
        .to_string();
    let port = url.port_or_known_default().unwrap_or(443);
    let tcp = tokio::time::timeout(
        CONNECT_TIMEOUT,
        tokio::net::TcpStream::connect((host.as_str(), port)),
    )
    .await
    .map_err(|_| format!("TCP connect to {host}:{port} timed out"))?
    .map_err(|e| format!("TCP connect to {host}:{port}: {e}"))?;
    let _ = tcp.set_nodelay(true);
    let name =
        ServerName::try_from(host.clone()).map_err(|e| format!("server name {host:?}: {e}"))?;
    let tls = tokio::time::timeout(CONNECT_TIMEOUT, tls.connect(name, tcp))
        .await
        .map_err(|_| "TLS handshake timed out".to_string())?
        .map_err(|e| format!("TLS handshake with {host}:{port}: {e}"))?;
    let mut request = url
        .as_str()
        .into_client_request()
        .map_err(|e| format!("building the upgrade request: {e}"))?;
    let auth = HeaderValue::from_str(&format!("Bearer {}", credential.expose()))
        .map_err(|_| "the token contains characters not allowed in a header".to_string())?;
    request.headers_mut().insert("authorization", auth);
    let (ws, _) = tokio::time::timeout(
        CONNECT_TIMEOUT,
        tokio_tungstenite::client_async_with_config(request, tls, Some(ws_config(max_frame))),
    )
    .await
    .map_err(|_| "WebSocket upgrade timed out".to_string())?
    .map_err(|e| format!("WebSocket upgrade: {e}"))?;
    Ok(ws)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn control_plane_urls_must_be_tls() {
        assert_eq!(
            agent_url("https://cp.example.com").unwrap().as_str(),
            "wss://cp.example.com/v1/agent"
        );
        assert_eq!(
            agent_url("wss://127.0.0.1:8443/").unwrap().as_str(),
            "wss://127.0.0.1:8443/v1/agent"
        );
        let e = agent_url("ws://cp").unwrap_err().to_string();
        assert!(e.starts_with("--control-plane") && e.contains("TLS"), "{e}");
    }
}
