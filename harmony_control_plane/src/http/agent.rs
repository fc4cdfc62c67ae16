//! `GET /v1/agent`: the agents' WebSocket upgrade, handed to [`crate::session`].
//!
//! The upgrade is hyper's own (`OnUpgrade` from the request) with tokio-tungstenite on top, not
//! axum's `ws` feature, so one tungstenite version serves the whole workspace.

use axum::extract::{ConnectInfo, Request, State};
use axum::http::header::{CONNECTION, SEC_WEBSOCKET_ACCEPT, SEC_WEBSOCKET_KEY, UPGRADE};
use axum::http::{HeaderValue, StatusCode};
use axum::response::{IntoResponse, Response};
use hyper::upgrade::OnUpgrade;
use hyper_util::rt::TokioIo;
use std::net::SocketAddr;
use tokio_tungstenite::WebSocketStream;
use tokio_tungstenite::tungstenite::handshake::derive_accept_key;
use tokio_tungstenite::tungstenite::protocol::{Role, WebSocketConfig};

use super::{AppState, Failure, bearer};
use crate::session;

/// The WebSocket settings of an agent connection: frames up to what the control plane announces
/// in `welcome`, a small read buffer (thousands of idle agents), writes flushed at once.
pub fn ws_config(max_frame_bytes: usize, read_buffer_bytes: usize) -> WebSocketConfig {
    WebSocketConfig::default()
        .read_buffer_size(read_buffer_bytes)
        .write_buffer_size(0)
        .max_message_size(Some(max_frame_bytes))
        .max_frame_size(Some(max_frame_bytes))
}

/// Upgrades to a WebSocket and runs the agent session on it.
pub async fn upgrade(State(s): State<AppState>, mut req: Request) -> Response {
    let headers = req.headers();
    let is_ws = headers
        .get(UPGRADE)
        .and_then(|v| v.to_str().ok())
        .is_some_and(|v| v.eq_ignore_ascii_case("websocket"));
    let Some(key) = headers.get(SEC_WEBSOCKET_KEY).cloned() else {
        return Failure::new(
            StatusCode::BAD_REQUEST,
            "agents must upgrade /v1/agent to a WebSocket (Sec-WebSocket-Key missing)",
        )
        .into_response();
    };
    if !is_ws {
        return Failure::new(StatusCode::BAD_REQUEST, "expected Upgrade: websocket")
            .into_response();
    }
    let credential = bearer(headers);
    let peer = req
        .extensions()
        .get::<ConnectInfo<SocketAddr>>()
        .map_or(SocketAddr::from(([0, 0, 0, 0], 0)), |c| c.0);
    let Some(on_upgrade) = req.extensions_mut().remove::<OnUpgrade>() else {
        return Failure::new(
            StatusCode::INTERNAL_SERVER_ERROR,
            "this connection cannot be upgraded (the server was not started with upgrades)",
        )
        .into_response();
    };
    let proof = req.extensions().get::<super::listener::Proof>().cloned();
    let config = ws_config(s.cp.settings.max_frame_bytes, s.ws_buffer_bytes);
    let cp = s.cp.clone();
    tokio::spawn(async move {
        match on_upgrade.await {
            Ok(upgraded) => {
                let ws = WebSocketStream::from_raw_socket(
                    TokioIo::new(upgraded),
                    Role::Server,
                    Some(config),
                )
                .await;
                session::run(cp, ws, credential, peer, proof).await;
            }
            Err(e) => log::debug!("upgrade from {peer} failed: {e}"),
        }
    });
    let mut r = StatusCode::SWITCHING_PROTOCOLS.into_response();
    let h = r.headers_mut();
    h.insert(CONNECTION, HeaderValue::from_static("upgrade"));
    h.insert(UPGRADE, HeaderValue::from_static("websocket"));
    if let Ok(v) = HeaderValue::from_str(&derive_accept_key(key.as_bytes())) {
        h.insert(SEC_WEBSOCKET_ACCEPT, v);
    }
    r
}
