//! One agent connection over WebSocket: hello, authentication (bootstrap exchange or identity),
//! welcome, then heartbeats, results, progress, services, instance statuses and renewals in, and
//! requests out. WebSocket close codes and frames live here; what they mean lives in
//! [`crate::services`].
//!
//! A frame above the limit the control plane announced closes this connection with 1009, and
//! only it: the request that caused it stays stored and the agent reconnects.

mod frames;

use futures::{SinkExt, StreamExt};
use harmony_agent_protocol::{
    Frame, Hello, PROTOCOL_VERSION, SecretString, Welcome, close, decode_with_limit, encode,
};
use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;
use tokio::io::{AsyncRead, AsyncWrite};
use tokio_tungstenite::WebSocketStream;
use tokio_tungstenite::tungstenite::Message;
use tokio_tungstenite::tungstenite::protocol::CloseFrame;
use tokio_tungstenite::tungstenite::protocol::frame::coding::CloseCode;

use crate::hub::Command;
use crate::services::dispatch::Delivery;
use crate::services::identities::{self, AuthError};
use crate::services::{ControlPlane, sessions};
use crate::store::Refusal;

/// Longest wait for the agent's `hello`.
const HELLO_TIMEOUT: Duration = Duration::from_secs(10);

/// The WebSocket close code for an internal error.
const INTERNAL_ERROR: u16 = 1011;

/// The WebSocket close code for a frame above the announced limit.
const MESSAGE_TOO_BIG: u16 = 1009;

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

/// The close code and reason of a refused agent.
pub fn refusal_close(e: &AuthError) -> (u16, String) {
    let code = match e {
        AuthError::NoCredential => close::UNAUTHORIZED,
        AuthError::Refused { refusal, bootstrap } => match refusal {
            Refusal::Unknown => close::UNAUTHORIZED,
            Refusal::Used => close::BOOTSTRAP_USED,
            Refusal::Expired if *bootstrap => close::BOOTSTRAP_EXPIRED,
            Refusal::Expired => close::IDENTITY_EXPIRED,
            Refusal::Revoked => close::REVOKED,
        },
        AuthError::Mismatch { .. } => close::REGION_MISMATCH,
        AuthError::Store(_) | AuthError::Internal(_) => INTERNAL_ERROR,
    };
    let reason = match e {
        AuthError::Store(_) => "internal error in the control plane's state database".to_string(),
        other => other.to_string(),
    };
    (code, reason)
}

/// The WebSocket side of one connection.
struct Socket<S> {
    ws: WebSocketStream<S>,
}

impl<S: AsyncRead + AsyncWrite + Unpin> Socket<S> {
    async fn close(&mut self, code: u16, reason: &str) {
        let frame = CloseFrame {
            code: CloseCode::from(code),
            reason: fit_reason(reason).to_string().into(),
        };
        let _ = tokio::time::timeout(Duration::from_secs(2), self.ws.close(Some(frame))).await;
    }

    async fn send(&mut self, frame: &Frame) -> bool {
        self.ws.send(Message::text(encode(frame))).await.is_ok()
    }

    /// Reads the first text frame, which must be a v1 hello.
    async fn hello(&mut self, limit: usize) -> Result<Hello, (u16, String)> {
        let protocol_error = |m: String| (close::PROTOCOL, m);
        // A late hello is load or a slow network, not a broken agent: a close it retries after,
        // never a fatal one (an agent stops for good on a protocol close).
        let first = tokio::time::timeout(HELLO_TIMEOUT, self.ws.next())
            .await
            .map_err(|_| {
                (
                    close::TRY_AGAIN_LATER,
                    format!("no hello within {}s; reconnect", HELLO_TIMEOUT.as_secs()),
                )
            })?;
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
        match decode_with_limit(text.as_str(), limit) {
            Ok(Frame::Hello(h)) if h.protocol == PROTOCOL_VERSION => Ok(h),
            Ok(Frame::Hello(h)) => Err(protocol_error(format!(
                "protocol {} is not supported; this control plane speaks protocol {PROTOCOL_VERSION}",
                h.protocol
            ))),
            Ok(_) => Err(protocol_error("the first frame must be hello".into())),
            Err(e) => Err(protocol_error(format!("invalid hello: {e}"))),
        }
    }
}

/// Runs one agent connection to its end. `credential` is the `Authorization` bearer token;
/// `proof`, if given, is told once the agent authenticated (its connection is then never shed
/// to make room on a full listener).
pub async fn run<S>(
    cp: Arc<ControlPlane>,
    ws: WebSocketStream<S>,
    credential: Option<SecretString>,
    peer: SocketAddr,
    proof: Option<crate::http::listener::Proof>,
) where
    S: AsyncRead + AsyncWrite + Unpin,
{
    let mut socket = Socket { ws };
    // Admission (hello, authentication, welcome, session open) is boxed: its future and its
    // locals exist while it runs instead of widening every connection's task for its whole life
    // (an idle agent connection keeps only what `serve` waits on; see docs/benchmarks.md,
    // memory per connection).
    let Some((mut state, inbox)) = Box::pin(admit(&cp, &mut socket, credential, peer, proof)).await
    else {
        return;
    };
    serve(&mut socket, &mut state, inbox).await;
    if let Err(e) = Box::pin(sessions::close(
        &cp,
        &state.region,
        &state.zone,
        &state.conn,
    ))
    .await
    {
        log::error!("{e}");
    }
    log::info!("region {}: agent at {peer} disconnected", state.region);
}

/// Hello, authentication, welcome and session open: the connection's state and its inbox, or
/// `None` once the connection was refused or lost (closed with the reason).
async fn admit<S>(
    cp: &Arc<ControlPlane>,
    socket: &mut Socket<S>,
    credential: Option<SecretString>,
    peer: SocketAddr,
    proof: Option<crate::http::listener::Proof>,
) -> Option<(frames::Connection, crate::hub::Inbox)>
where
    S: AsyncRead + AsyncWrite + Unpin,
{
    let limit = cp.settings.max_frame_bytes;
    // The steps are boxed too: only the one running is allocated.
    let hello = match Box::pin(socket.hello(limit)).await {
        Ok(h) => h,
        Err((code, reason)) => {
            log::info!("refused agent at {peer}: {reason}");
            Box::pin(socket.close(code, &reason)).await;
            return None;
        }
    };
    let auth = match Box::pin(identities::authenticate(
        cp,
        credential.as_ref(),
        &hello.region,
        &hello.zone,
    ))
    .await
    {
        Ok(a) => a,
        Err(e) => {
            let (code, reason) = refusal_close(&e);
            if let AuthError::Store(e) = &e {
                log::error!("{e}");
            }
            log::info!(
                "refused agent at {peer} (region {}): {reason}",
                hello.region
            );
            Box::pin(socket.close(code, &reason)).await;
            return None;
        }
    };
    if let Some(proof) = &proof {
        proof.proven();
    }
    let region = hello.region.clone();
    let welcome = Frame::Welcome(Welcome {
        heartbeat_s: cp.settings.policy.heartbeat.as_secs_f64(),
        identity: auth.issued.clone(),
        protocol: PROTOCOL_VERSION,
        identity_expires_at: auth.expires_at,
        max_frame_bytes: limit as u64,
    });
    let sent = Box::pin(socket.send(&welcome)).await;
    drop(welcome);
    if !sent {
        log::info!("region {region}: connection from {peer} lost before welcome");
        return None;
    }
    let opened = match Box::pin(sessions::open(cp, &hello)).await {
        Ok(Some(o)) => o,
        Ok(None) => {
            log::info!("region {region}: a newer connection holds the session; closing this one");
            socket
                .close(close::REPLACED, sessions::REPLACED_REASON)
                .await;
            return None;
        }
        Err(e) => {
            log::error!("{e}");
            socket
                .close(
                    INTERNAL_ERROR,
                    "internal error in the control plane's state database",
                )
                .await;
            return None;
        }
    };
    log::info!(
        "region {region} connected from {peer}: agent {} zone {} ops [{}], frames up to {} bytes{}",
        hello.agent_version,
        hello.zone,
        hello.ops.join(", "),
        hello.max_frame_bytes,
        if auth.issued.is_some() {
            " (identity issued)"
        } else {
            ""
        }
    );
    let state = frames::Connection {
        cp: cp.clone(),
        region: region.clone(),
        zone: hello.zone.clone(),
        conn: opened.conn,
        identity_hash: auth.identity_hash,
        unconfirmed: auth.unconfirmed,
        services: None,
        delivery: Delivery::new(&region, &hello.zone, hello.max_frame_bytes),
        reachable: None,
        progress: Default::default(),
    };
    Some((state, opened.inbox))
}

/// The connection's loop: frames in, deliveries and commands out, until either side ends it.
async fn serve<S>(
    socket: &mut Socket<S>,
    state: &mut frames::Connection,
    mut inbox: crate::hub::Inbox,
) where
    S: AsyncRead + AsyncWrite + Unpin,
{
    let region = state.region.clone();
    // An agent heartbeats every heartbeat; one not heard by the second heartbeat (or, if that is
    // sooner, by the time its zone turns unavailable) is gone or its flow is dead: the session
    // is closed so a replacement connection is not kept waiting behind it.
    let policy = &state.cp.settings.policy;
    let silence =
        harmony_agent_protocol::silence_limit(policy.heartbeat).min(policy.unavailable_after);
    // Everything unanswered first, in order; then whatever the wake-ups bring.
    inbox.deliver.notify_one();
    // Only frames from the agent count as signs of life, not what this side sends.
    let silent = tokio::time::sleep(silence);
    tokio::pin!(silent);
    loop {
        // Biased, in this order: a close command first; then the agent's frames, so a frame
        // that arrived while this task was busy (a slow store under a reconnect storm) counts
        // before the silence deadline is looked at; then deliveries; silence only when nothing
        // else is ready. Unbiased, a deadline that passed while the task was busy drew lots
        // with the frame waiting to be read, and could close a live agent as silent.
        tokio::select! {
            biased;
            command = &mut inbox.commands => {
                match command {
                    Ok(Command::Close(code, reason)) => {
                        log::info!("region {region}: closing connection: {reason}");
                        Box::pin(socket.close(code, &reason)).await;
                    }
                    Err(_) => Box::pin(socket.close(close::REPLACED, sessions::REPLACED_REASON)).await,
                }
                return;
            }
            incoming = socket.ws.next() => {
                silent.as_mut().reset(tokio::time::Instant::now() + silence);
                let message = match incoming {
                    None | Some(Ok(Message::Close(_))) => return,
                    Some(Err(e)) => {
                        log::info!("region {region}: connection ended: {e}");
                        if matches!(e, tokio_tungstenite::tungstenite::Error::Capacity(_)) {
                            Box::pin(socket.close(MESSAGE_TOO_BIG, "frame too large")).await;
                        }
                        return;
                    }
                    Some(Ok(m)) => m,
                };
                let answers = match message {
                    Message::Text(text) => Box::pin(state.handle_text(text.as_str())).await,
                    Message::Binary(_) => vec![frames::binary_refused()],
                    _ => Vec::new(),
                };
                // By reference: a frame held by value across the send would widen every
                // connection's task by its size.
                for answer in &answers {
                    if !Box::pin(socket.send(answer)).await {
                        return;
                    }
                }
            }
            () = inbox.deliver.notified() => {
                let frames = match Box::pin(state.delivery.next(&state.cp)).await {
                    Ok(f) => f,
                    Err(e) => {
                        // Still stored: the next wake-up or poll delivers it.
                        log::error!("{e}");
                        continue;
                    }
                };
                for frame in &frames {
                    if let Frame::Req(r) = frame {
                        log::debug!("region {region}: delivering request {} ({})", r.id, r.op);
                    }
                    if !Box::pin(socket.send(frame)).await {
                        return;
                    }
                }
            }
            () = &mut silent => {
                log::info!("region {region}: no frame for {} ms, closing", silence.as_millis());
                Box::pin(socket.close(1001, "no heartbeat")).await;
                return;
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn close_reasons_fit_a_control_frame() {
        let long = "é".repeat(100);
        assert!(fit_reason(&long).len() <= 123);
        assert!(fit_reason(&long).chars().all(|c| c == 'é'));
        assert_eq!(fit_reason("short"), "short");
    }

    #[test]
    fn each_refusal_has_its_close_code() {
        let refused = |refusal, bootstrap| AuthError::Refused { refusal, bootstrap };
        let code = |e: AuthError| refusal_close(&e).0;
        assert_eq!(code(AuthError::NoCredential), close::UNAUTHORIZED);
        assert_eq!(code(refused(Refusal::Unknown, true)), close::UNAUTHORIZED);
        assert_eq!(code(refused(Refusal::Used, true)), close::BOOTSTRAP_USED);
        assert_eq!(
            code(refused(Refusal::Expired, true)),
            close::BOOTSTRAP_EXPIRED
        );
        assert_eq!(
            code(refused(Refusal::Expired, false)),
            close::IDENTITY_EXPIRED
        );
        assert_eq!(code(refused(Refusal::Revoked, false)), close::REVOKED);
        let store = AuthError::Store(crate::store::StoreError::new("sqlite", "check", "disk I/O"));
        let (c, reason) = refusal_close(&store);
        assert_eq!(c, INTERNAL_ERROR);
        assert!(!reason.contains("disk"), "{reason}");
    }
}
