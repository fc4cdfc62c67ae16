//! One connection to the control plane: hello, welcome (storing an issued identity), the
//! services snapshot, then heartbeats, requests, results and identity renewal until it drops.
//! Every frame sent is sized against the control plane's `max_frame_bytes` first: a result too
//! large is answered with `result_too_large`, never sent (which would cost the connection).

use futures::{SinkExt, StreamExt};
use harmony_agent_protocol::{
    ErrorFrame, Frame, Hello, IdentityFrame, MAX_FRAME_BYTES, Op, PROTOCOL_VERSION, Ping, Renew,
    SecretString, Welcome, close, decode_with_limit, encode,
};
use std::sync::atomic::Ordering;
use std::time::{Duration, Instant};
use tokio::sync::{mpsc, watch};
use tokio_tungstenite::tungstenite::Message;

use super::renewal::{self, now_ms};
use super::{CONNECT_TIMEOUT, DRAIN_TIMEOUT, End, Fallback, Ws, dial};
use crate::error::AgentError;
use crate::exec::limits;
use crate::identity::StoredIdentity;

/// Sends `frame` when it fits in `limit` bytes; a `res` that does not is replaced by its
/// `result_too_large` answer, any other frame is dropped with a warning.
async fn send(ws: &mut Ws, frame: Frame, limit: u64) -> Result<(), String> {
    let mut text = encode(&frame);
    let size = text.len() as u64;
    if size > limit {
        match frame {
            Frame::Res(res) => {
                log::warn!(
                    "request {}: the result is {size} bytes encoded, above the control plane's {limit}-byte frame limit; answering result_too_large",
                    res.id
                );
                text = encode(&Frame::Res(limits::too_large(&res.id, size, limit)));
            }
            _ => {
                log::warn!(
                    "a frame of {size} bytes is above the control plane's {limit}-byte limit; not sent"
                );
                return Ok(());
            }
        }
    }
    ws.send(Message::text(text))
        .await
        .map_err(|e| e.to_string())
}

fn close_of(frame: Option<tokio_tungstenite::tungstenite::protocol::CloseFrame>) -> (u16, String) {
    frame
        .map(|f| (u16::from(f.code), f.reason.to_string()))
        .unwrap_or((1005, "no reason given".into()))
}

impl super::Agent {
    /// The credential to present, and whether it is the bootstrap token.
    fn credential(&self) -> Result<(SecretString, bool), AgentError> {
        if let Some(id) = &self.identity {
            return Ok((id.identity.clone(), false));
        }
        let path = self
            .config
            .bootstrap_token_file
            .as_ref()
            .ok_or(AgentError::Config {
                field: "--bootstrap-token-file",
                problem: "no identity is stored and no bootstrap token was given".into(),
            })?;
        let text = std::fs::read_to_string(path).map_err(|e| AgentError::Config {
            field: "--bootstrap-token-file",
            problem: format!("{}: {e}", path.display()),
        })?;
        Ok((SecretString::new(text.trim()), true))
    }

    fn hello(&self, cluster_scoped: Vec<String>) -> Frame {
        Frame::Hello(Hello {
            agent_version: env!("CARGO_PKG_VERSION").into(),
            region: self.config.region.clone(),
            zone: self.config.zone.clone(),
            ops: Op::ALL.iter().map(|o| o.as_str().to_string()).collect(),
            protocol: PROTOCOL_VERSION,
            max_frame_bytes: self.config.max_frame_bytes,
            cluster_scoped,
        })
    }

    /// A close before the welcome: fatal codes stop the agent, unless the refused credential
    /// is a new identity never connected with and an older credential is still usable.
    fn refused(
        &mut self,
        code: u16,
        reason: String,
        bootstrapping: bool,
    ) -> Result<End, AgentError> {
        if !close::is_fatal(code) {
            return Ok(End::Lost {
                reason: format!("closed before welcome ({code}): {reason}"),
                welcomed: false,
            });
        }
        if !bootstrapping
            && !self.confirmed
            && code == close::UNAUTHORIZED
            && let Some(fallback) = self.fallback.take()
        {
            let back_to = match fallback {
                Fallback::Bootstrap => {
                    self.identity = None;
                    "the bootstrap token"
                }
                Fallback::Identity(previous) => {
                    self.identity = Some(previous);
                    "the previous identity"
                }
            };
            return Ok(End::Lost {
                reason: format!(
                    "the control plane refused the new identity before it was ever used ({code}: {reason}); presenting {back_to} again"
                ),
                welcomed: false,
            });
        }
        Err(AgentError::Refused { code, reason })
    }

    /// Stores `stored` and uses it from the next connection on. A failed write keeps it in
    /// memory: the connection works, and the old credential stays valid for a while.
    async fn adopt(&mut self, stored: StoredIdentity) {
        match self.store.save(&stored).await {
            Ok(()) => log::info!("identity stored"),
            Err(e) => {
                log::error!("identity received but not stored, it will be lost on restart: {e}")
            }
        }
        self.identity = Some(stored);
        self.confirmed = false;
    }

    /// Takes the welcome's identity facts; returns when to send `renew` on this connection.
    async fn welcomed(&mut self, welcome: &Welcome, bootstrapping: bool) -> Option<Instant> {
        let now = now_ms();
        if let Some(identity) = &welcome.identity {
            log::info!("bootstrap complete");
            self.adopt(StoredIdentity {
                identity: identity.clone(),
                issued_at: Some(now),
                expires_at: welcome.identity_expires_at,
            })
            .await;
            // The token stays usable until the identity was connected with once.
            self.fallback = self
                .config
                .bootstrap_token_file
                .is_some()
                .then_some(Fallback::Bootstrap);
        } else if bootstrapping {
            log::warn!(
                "the control plane accepted the bootstrap token without issuing an identity"
            );
            return None;
        } else {
            self.confirmed = true;
            self.fallback = None;
            let current = self.identity.as_mut()?;
            if current.expires_at != welcome.identity_expires_at {
                current.expires_at = welcome.identity_expires_at;
                let copy = current.clone();
                if let Err(e) = self.store.save(&copy).await {
                    log::warn!("the identity's expiry could not be stored: {e}");
                }
            }
        }
        // The control plane renews the identity this connection stands for, the one issued
        // on it after a bootstrap included.
        let current = self.identity.as_ref()?;
        let expires = current.expires_at?;
        let renew_before = self.config.renew_before_s.map(Duration::from_secs);
        let at = renewal::renew_at(now, expires, current.issued_at, renew_before);
        log::info!(
            "the identity expires in {} s; renewing in {} s",
            (expires - now) / 1000,
            renewal::delay_until(now, at).as_secs()
        );
        Some(Instant::now() + renewal::delay_until(now, at))
    }

    pub(super) async fn session(
        &mut self,
        outbox: &mut mpsc::UnboundedReceiver<Frame>,
        shutdown: &mut watch::Receiver<bool>,
    ) -> Result<End, AgentError> {
        let lost = |reason: String| {
            Ok(End::Lost {
                reason,
                welcomed: false,
            })
        };
        let (credential, bootstrapping) = self.credential()?;
        let max_frame = self.config.max_frame_bytes;
        // Discovered before dialling: the control plane waits a bounded time for the hello.
        let cluster_scoped = tokio::select! {
            kinds = self.executor.cluster_scoped_kinds() => kinds,
            _ = shutdown.wait_for(|s| *s) => return Ok(End::Shutdown),
        };
        let mut ws = tokio::select! {
            dialled = dial::dial(&self.url, &self.tls, &credential, max_frame) => match dialled {
                Ok(ws) => ws,
                Err(reason) => return lost(reason),
            },
            _ = shutdown.wait_for(|s| *s) => return Ok(End::Shutdown),
        };
        let hello = self.hello(cluster_scoped);
        if let Err(e) = send(&mut ws, hello, MAX_FRAME_BYTES as u64).await {
            return lost(format!("sending hello: {e}"));
        }
        let welcome = match tokio::time::timeout(CONNECT_TIMEOUT, ws.next()).await {
            Err(_) => return lost("no welcome within 10s".into()),
            Ok(None) => return lost("closed before welcome".into()),
            Ok(Some(Err(e))) => return lost(format!("reading welcome: {e}")),
            Ok(Some(Ok(Message::Close(frame)))) => {
                let (code, reason) = close_of(frame);
                return self.refused(code, reason, bootstrapping);
            }
            Ok(Some(Ok(Message::Text(t)))) => {
                match decode_with_limit(t.as_str(), max_frame as usize) {
                    Ok(Frame::Welcome(w)) => w,
                    Ok(_) => return lost("expected welcome".into()),
                    Err(e) => return lost(format!("invalid welcome: {e}")),
                }
            }
            Ok(Some(Ok(_))) => return lost("expected a text welcome".into()),
        };
        let mut renew_at = self.welcomed(&welcome, bootstrapping).await;
        let limit = welcome.max_frame_bytes;
        self.executor.set_peer_max_frame(limit);
        self.executor.new_connection();
        let heartbeat = Duration::from_secs_f64(welcome.heartbeat_s.clamp(0.05, 3600.0));
        self.heartbeat_ms
            .store(heartbeat.as_millis() as u64, Ordering::Relaxed);
        self.readiness.set(true);
        log::info!(
            "connected to the control plane; heartbeat every {} ms, frames up to {limit} bytes",
            heartbeat.as_millis()
        );
        let lost = |reason: String| {
            Ok(End::Lost {
                reason,
                welcomed: true,
            })
        };
        // The control plane forgets a region's offers on each connection until this arrives.
        let mut snapshot = vec![Frame::Services(self.registry.services())];
        snapshot.extend(self.registry.instance_frames());
        for frame in snapshot {
            if let Err(e) = send(&mut ws, frame, limit).await {
                return lost(format!("sending the services frame: {e}"));
            }
        }
        let mut ticker = tokio::time::interval(heartbeat);
        ticker.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
        let silence_limit = harmony_agent_protocol::silence_limit(heartbeat);
        let mut last_heard = Instant::now();
        let mut seq = 0u64;
        // Far in the future when no renewal is due on this connection.
        let never = Instant::now() + Duration::from_secs(100 * 365 * 24 * 3600);
        loop {
            let renew_due = tokio::time::Instant::from_std(renew_at.unwrap_or(never));
            tokio::select! {
                _ = shutdown.wait_for(|s| *s) => {
                    self.drain(&mut ws, outbox, limit).await;
                    return Ok(End::Shutdown);
                }
                _ = ticker.tick() => {
                    if last_heard.elapsed() > silence_limit {
                        return lost(format!("nothing heard from the control plane for {} ms", last_heard.elapsed().as_millis()));
                    }
                    seq += 1;
                    let mut status = self.status.lock().map(|s| s.clone()).unwrap_or_default();
                    status.in_flight = self.executor.in_flight() as u32;
                    let ping = Frame::Ping(Ping { seq, status });
                    if send(&mut ws, ping, limit).await.is_err()
                        || ws.send(Message::Ping(Default::default())).await.is_err()
                    {
                        return lost("sending a heartbeat failed".into());
                    }
                }
                _ = tokio::time::sleep_until(renew_due) => {
                    log::info!("asking the control plane for a fresh identity");
                    if let Err(e) = send(&mut ws, Frame::Renew(Renew {}), limit).await {
                        return lost(format!("sending renew: {e}"));
                    }
                    // Asked again if no identity arrives meanwhile.
                    renew_at = Some(Instant::now() + renewal::RETRY);
                }
                incoming = ws.next() => {
                    last_heard = Instant::now();
                    match incoming {
                        None => return lost("connection closed".into()),
                        Some(Err(e)) => return lost(e.to_string()),
                        Some(Ok(Message::Close(frame))) => {
                            let (code, reason) = close_of(frame);
                            if close::is_fatal(code) {
                                return Err(AgentError::Refused { code, reason });
                            }
                            return lost(format!("closed by the control plane ({code}): {reason}"));
                        }
                        Some(Ok(Message::Text(text))) => {
                            if let Some(answer) = self.handle(text.as_str(), &mut renew_at).await
                                && let Err(e) = send(&mut ws, answer, limit).await
                            {
                                return lost(format!("sending failed: {e}"));
                            }
                        }
                        Some(Ok(_)) => {}
                    }
                }
                out = outbox.recv() => {
                    // A services frame queued while disconnected may be stale: send the current one.
                    let out = match out {
                        Some(Frame::Services(_)) => Some(Frame::Services(self.registry.services())),
                        other => other,
                    };
                    if let Some(frame) = out
                        && let Err(e) = send(&mut ws, frame, limit).await
                    {
                        return lost(format!("sending a result failed ({e}); it is re-sent after the redelivery"));
                    }
                }
            }
        }
    }

    async fn handle(&mut self, text: &str, renew_at: &mut Option<Instant>) -> Option<Frame> {
        match decode_with_limit(text, self.config.max_frame_bytes as usize) {
            Ok(Frame::Req(req)) => {
                self.executor.submit(req);
                None
            }
            Ok(Frame::Identity(IdentityFrame {
                identity,
                expires_at,
            })) => {
                let now = now_ms();
                log::info!(
                    "fresh identity received (expires in {} s); it is used from the next connection",
                    (expires_at - now) / 1000
                );
                let previous = self.identity.take();
                self.adopt(StoredIdentity {
                    identity,
                    issued_at: Some(now),
                    expires_at: Some(expires_at),
                })
                .await;
                self.fallback = previous.map(Fallback::Identity);
                let renew_before = self.config.renew_before_s.map(Duration::from_secs);
                let at = renewal::renew_at(now, expires_at, Some(now), renew_before);
                *renew_at = Some(Instant::now() + renewal::delay_until(now, at));
                None
            }
            Ok(Frame::Error(e)) => {
                log::warn!("the control plane reported {}: {}", e.code, e.message);
                None
            }
            Ok(_) => Some(Frame::Error(ErrorFrame {
                code: harmony_agent_protocol::code::MALFORMED_FRAME.into(),
                message: "the agent only expects req, identity and error frames after welcome"
                    .into(),
                id: None,
            })),
            Err(e) => {
                log::debug!("invalid frame from the control plane: {e}");
                Some(Frame::Error(ErrorFrame::from_decode(&e)))
            }
        }
    }

    /// Graceful stop: finish in-flight requests (bounded), send their results, then close.
    async fn drain(&self, ws: &mut Ws, outbox: &mut mpsc::UnboundedReceiver<Frame>, limit: u64) {
        log::info!(
            "shutting down: waiting for {} in-flight request(s)",
            self.executor.in_flight()
        );
        let deadline = Instant::now() + DRAIN_TIMEOUT;
        loop {
            while let Ok(frame) = outbox.try_recv() {
                let _ = send(ws, frame, limit).await;
            }
            if self.executor.in_flight() == 0 || Instant::now() > deadline {
                break;
            }
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
        while let Ok(frame) = outbox.try_recv() {
            let _ = send(ws, frame, limit).await;
        }
        let _ = ws
            .close(Some(tokio_tungstenite::tungstenite::protocol::CloseFrame {
                code: tokio_tungstenite::tungstenite::protocol::frame::coding::CloseCode::Away,
                reason: "agent shutting down".into(),
            }))
            .await;
    }
}
