//! A simulated agent's raw WebSocket session: the control plane's agent endpoint as a test
//! that speaks the protocol frame by frame sees it (hellos, heartbeats, close frames), for the
//! suites that check what the control plane does to a connection.

use futures::StreamExt;
use serde_json::Value;
use std::time::Duration;

use crate::world::World;

pub use crate::ha::Ws;

/// Opens an agent WebSocket to `w`'s control plane (`/v1/agent`), with `token` as its bearer
/// credential (none: no `Authorization` header), trusting the world's CA. The caller speaks the
/// protocol itself.
pub async fn raw_connect(w: &World, token: Option<&str>) -> Ws {
    let tls = crate::ha::tls_connector(&w.pki().ca_pem).expect("the world's CA");
    crate::ha::ws_connect(w.cp().addr, &tls, token, None)
        .await
        .expect("the agent endpoint upgrades the connection")
}

/// Reads (and ignores) until the control plane closes `ws`, within 60 s; its close frame.
pub async fn closed_by_control_plane(
    ws: &mut Ws,
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
pub async fn next_text(ws: &mut Ws) -> Value {
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
