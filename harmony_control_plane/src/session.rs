//! One agent connection: hello, authentication (bootstrap exchange or identity), welcome, then
//! heartbeats, results and progress in, requests out.

use futures::{SinkExt, StreamExt};
use harmony_agent_protocol::{
    ErrorFrame, Frame, Hello, PROTOCOL_VERSION, SecretString, Welcome, close, code, decode, encode,
};
use hyper::upgrade::Upgraded;
use hyper_util::rt::TokioIo;
use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;
use tokio::sync::mpsc;
use tokio_tungstenite::WebSocketStream;
use tokio_tungstenite::tungstenite::Message;
use tokio_tungstenite::tungstenite::protocol::CloseFrame;
use tokio_tungstenite::tungstenite::protocol::frame::coding::CloseCode;

use crate::hub::Outgoing;
use crate::store::{Credential, Refusal};
use crate::tokens;
use crate::{App, services};

type Ws = WebSocketStream<TokioIo<Upgraded>>;

const HELLO_TIMEOUT: Duration = Duration::from_secs(10);

/// A close frame's reason must fit in 123 bytes (RFC 6455 5.5); longer reasons are cut at a
/// character boundary, which is why every reason puts its point first.
pub fn fit_reason(reason: &str) -> &str {
    const MAX: usize = 123;
    if reason.len() <= MAX {
        return reason;
    }
    let mut end = MAX;
    while !reason.is_char_boundary(end) {
        end -= 1;
    }
    &reason[..end]
}

async fn close_with(ws: &mut Ws, code: u16, reason: &str) {
    let frame = CloseFrame {
        code: CloseCode::from(code),
        reason: fit_reason(reason).to_string().into(),
    };
    let _ = tokio::time::timeout(Duration::from_secs(2), ws.close(Some(frame))).await;
}

async fn send(ws: &mut Ws, frame: &Frame) -> bool {
    ws.send(Message::text(encode(frame))).await.is_ok()
}

/// Reads the first text frame, which must be a v1 hello.
async fn read_hello(ws: &mut Ws) -> Result<Hello, (u16, String)> {
    let protocol_error = |m: String| (close::PROTOCOL, m);
    let first = tokio::time::timeout(HELLO_TIMEOUT, ws.next())
        .await
        .map_err(|_| protocol_error(format!("no hello within {}s", HELLO_TIMEOUT.as_secs())))?;
    let text = match first {
        Some(Ok(Message::Text(t))) => t,
        Some(Ok(_)) => {
            return Err(protocol_error(
                "the first frame must be a JSON text hello".into(),
            ));
        }
        Some(Err(e)) => return Err(protocol_error(format!("reading hello: {e}"))),
        None => return Err(protocol_error("closed before hello".into())),
    };
    match decode(text.as_str()) {
        Ok(Frame::Hello(h)) if h.protocol == PROTOCOL_VERSION => Ok(h),
        Ok(Frame::Hello(h)) => Err(protocol_error(format!(
            "protocol {} is not supported; this control plane speaks protocol {PROTOCOL_VERSION}",
            h.protocol
        ))),
        Ok(_) => Err(protocol_error("the first frame must be hello".into())),
        Err(e) => Err(protocol_error(format!("invalid hello: {e}"))),
    }
}

fn refusal(r: Refusal) -> (u16, String) {
    match r {
        Refusal::Unknown => (
            close::UNAUTHORIZED,
            "unknown or superseded token; use the bootstrap token from POST /v1/admin/regions".into(),
        ),
        Refusal::Used => (
            close::BOOTSTRAP_USED,
            "bootstrap token already used; start the agent with its stored identity".into(),
        ),
        Refusal::Expired => (
            close::BOOTSTRAP_EXPIRED,
            "bootstrap token expired; mint one: POST /v1/admin/regions/<region>/bootstrap-token".into(),
        ),
        Refusal::Revoked => (
            close::REVOKED,
            "identity revoked: the region is decommissioned; re-create it and bootstrap a new agent".into(),
        ),
    }
}

/// Authenticates and, for a bootstrap token, exchanges it for a fresh identity.
fn authenticate(
    app: &App,
    credential: Option<&SecretString>,
    hello: &Hello,
) -> Result<Option<SecretString>, (u16, String)> {
    let Some(credential) = credential else {
        return Err((
            close::UNAUTHORIZED,
            "no credential: send `Authorization: Bearer <bootstrap token or identity>`".into(),
        ));
    };
    let internal = |e: crate::store::StoreError| {
        log::error!("{e}");
        (
            1011,
            "internal error in the control plane's state database".to_string(),
        )
    };
    let checked = app.store.check(credential.expose()).map_err(internal)?;
    let credential_ok = checked.map_err(refusal)?;
    let (region, zone) = match &credential_ok {
        Credential::Bootstrap { region, zone, .. } | Credential::Identity { region, zone } => {
            (region.clone(), zone.clone())
        }
    };
    if region != hello.region || zone != hello.zone {
        return Err((
            close::REGION_MISMATCH,
            format!(
                "credential is for {region}/{zone}, hello says {}/{}; fix --region/--zone",
                hello.region, hello.zone
            ),
        ));
    }
    match credential_ok {
        Credential::Identity { .. } => Ok(None),
        Credential::Bootstrap { id, .. } => {
            let identity = tokens::mint(harmony_agent_protocol::IDENTITY_PREFIX).map_err(|e| {
                log::error!("cannot mint an identity: {e}");
                (1011, "internal error: no randomness".to_string())
            })?;
            if !app
                .store
                .exchange(id, &region, &tokens::hash(identity.expose()))
                .map_err(internal)?
            {
                return Err(refusal(Refusal::Used));
            }
            log::info!(
                "region {region}: bootstrap token exchanged for identity {}",
                tokens::fingerprint(identity.expose())
            );
            Ok(Some(identity))
        }
    }
}

/// Runs one agent connection to its end.
pub async fn run(app: Arc<App>, mut ws: Ws, credential: Option<SecretString>, peer: SocketAddr) {
    let hello = match read_hello(&mut ws).await {
        Ok(h) => h,
        Err((code, reason)) => {
            log::info!("refused agent at {peer}: {reason}");
            close_with(&mut ws, code, &reason).await;
            return;
        }
    };
    let identity = match authenticate(&app, credential.as_ref(), &hello) {
        Ok(i) => i,
        Err((code, reason)) => {
            log::info!(
                "refused agent at {peer} (region {}): {reason}",
                hello.region
            );
            close_with(&mut ws, code, &reason).await;
            return;
        }
    };
    let region = hello.region.clone();
    let policy = *app.hub.policy();
    let welcome = Frame::Welcome(Welcome {
        heartbeat_s: policy.heartbeat.as_secs_f64(),
        identity: identity.clone(),
        protocol: PROTOCOL_VERSION,
    });
    if !send(&mut ws, &welcome).await {
        log::info!("region {region}: connection from {peer} lost before welcome");
        return;
    }
    log::info!(
        "region {region} connected from {peer}: agent {} zone {} ops [{}]{}",
        hello.agent_version,
        hello.zone,
        hello.ops.join(", "),
        if identity.is_some() {
            " (new identity issued)"
        } else {
            ""
        }
    );
    let (tx, mut rx) = mpsc::unbounded_channel();
    let conn = app.hub.connect(&region, hello, tx);
    let silence = policy.unavailable_after;
    loop {
        tokio::select! {
            incoming = tokio::time::timeout(silence, ws.next()) => {
                match incoming {
                    Err(_) => {
                        log::info!("region {region}: no frame for {} ms, closing", silence.as_millis());
                        close_with(&mut ws, 1001, "no heartbeat").await;
                        break;
                    }
                    Ok(None) => break,
                    Ok(Some(Err(e))) => {
                        log::info!("region {region}: connection ended: {e}");
                        if matches!(e, tokio_tungstenite::tungstenite::Error::Capacity(_)) {
                            close_with(&mut ws, 1009, "frame too large").await;
                        }
                        break;
                    }
                    Ok(Some(Ok(Message::Text(text)))) => {
                        if let Some(answer) = handle(&app, &region, text.as_str())
                            && !send(&mut ws, &answer).await
                        {
                            break;
                        }
                    }
                    Ok(Some(Ok(Message::Binary(_)))) => {
                        let answer = Frame::Error(ErrorFrame {
                            code: code::MALFORMED_FRAME.into(),
                            message: "binary frames are not part of protocol v1; send JSON text frames".into(),
                            id: None,
                        });
                        if !send(&mut ws, &answer).await {
                            break;
                        }
                    }
                    Ok(Some(Ok(Message::Close(_)))) => break,
                    Ok(Some(Ok(_))) => {}
                }
            }
            outgoing = rx.recv() => {
                match outgoing {
                    Some(Outgoing::Frame(frame)) => {
                        if !send(&mut ws, &frame).await {
                            break;
                        }
                    }
                    Some(Outgoing::Close(code, reason)) => {
                        log::info!("region {region}: closing connection: {reason}");
                        close_with(&mut ws, code, &reason).await;
                        break;
                    }
                    None => break,
                }
            }
        }
    }
    app.hub.disconnect(&region, conn);
    log::info!("region {region}: agent at {peer} disconnected");
}

/// Handles one text frame from a welcomed agent; returns the answer to send, if any.
fn handle(app: &Arc<App>, region: &str, text: &str) -> Option<Frame> {
    let frame = match decode(text) {
        Ok(f) => f,
        Err(e) => {
            log::debug!("region {region}: invalid frame: {e}");
            return Some(Frame::Error(ErrorFrame::from_decode(&e)));
        }
    };
    let unexpected = |what: &str| {
        Some(Frame::Error(ErrorFrame {
            code: code::MALFORMED_FRAME.into(),
            message: format!("{what} frames are not sent by agents after hello"),
            id: None,
        }))
    };
    match frame {
        Frame::Ping(p) => {
            log::trace!("region {region}: heartbeat {}", p.seq);
            app.hub.heartbeat(region, p.status);
            None
        }
        Frame::Res(res) => {
            let id = res.id.clone();
            if !app.hub.resolve(region, res) {
                log::debug!(
                    "region {region}: result for {id} that nobody awaits (duplicate or abandoned)"
                );
            }
            None
        }
        Frame::Progress(p) => {
            log::debug!(
                "region {region}: request {} {}: {}",
                p.id,
                p.stage,
                p.detail
            );
            app.hub.progress(region);
            None
        }
        Frame::Error(e) => {
            log::warn!("region {region}: agent reported {}: {}", e.code, e.message);
            None
        }
        Frame::Services(s) => {
            let summary: Vec<String> = s
                .offers
                .iter()
                .map(|o| format!("{} by {} ({})", o.service_type, o.provider, o.health))
                .collect();
            if app.hub.set_services(region, s) {
                log::info!("region {region}: services now [{}]", summary.join(", "));
            }
            services::dispatch_queued(app, Some(region));
            None
        }
        Frame::Instance(status) => {
            services::apply_instance(app, region, status);
            None
        }
        Frame::Hello(_) => unexpected("hello"),
        Frame::Welcome(_) => unexpected("welcome"),
        Frame::Req(_) => unexpected("req"),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn close_reasons_fit_a_control_frame() {
        for r in [
            Refusal::Unknown,
            Refusal::Used,
            Refusal::Expired,
            Refusal::Revoked,
        ] {
            let (_, reason) = refusal(r);
            assert!(reason.len() <= 123, "{reason}");
        }
        let long = "é".repeat(100);
        assert!(fit_reason(&long).len() <= 123);
        assert!(fit_reason(&long).chars().all(|c| c == 'é'));
    }
}
