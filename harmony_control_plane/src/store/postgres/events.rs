//! Events between replicas over PostgreSQL LISTEN/NOTIFY: one dedicated connection per replica
//! listens on [`CHANNEL`] and forwards notifications to the replica's broadcast channel. It
//! pings the server, reconnects with backoff when the connection drops, and then sends
//! [`Event::Resync`] because notifications sent meanwhile are lost.

use std::future::poll_fn;
use std::time::Duration;
use tokio::sync::broadcast;
use tokio::task::JoinHandle;
use tokio_postgres::{AsyncMessage, Client, Config, Connection, Socket};
use tokio_postgres_rustls::MakeRustlsConnect;

use super::chain;
use super::tls::{TlsStream, explain};
use crate::store::Event;

/// The NOTIFY channel.
pub const CHANNEL: &str = "harmony_cp";
/// PostgreSQL refuses payloads of 8000 bytes or more; keep a margin.
pub const MAX_PAYLOAD: usize = 7900;
/// How often the listener checks that its connection still answers (a silently dead peer
/// would otherwise go unnoticed until TCP keepalive gives up).
const PING_EVERY: Duration = Duration::from_secs(15);
/// How long a ping may take before the connection is declared dead.
const PING_TIMEOUT: Duration = Duration::from_secs(10);
const BACKOFF_MIN: Duration = Duration::from_millis(100);
const BACKOFF_MAX: Duration = Duration::from_secs(5);
/// Appended to a truncated detail or reason.
const ELLIPSIS: char = '…';

/// The JSON payload of `e`, its progress detail or close reason truncated to fit one NOTIFY.
pub(super) fn encode(e: &Event) -> Result<String, String> {
    let mut e = e.clone();
    loop {
        let s = serde_json::to_string(&e).map_err(|x| format!("encoding an event: {x}"))?;
        if s.len() <= MAX_PAYLOAD {
            return Ok(s);
        }
        let field = match &mut e {
            Event::Progress { detail, .. } => detail,
            Event::CloseRegion { reason, .. } => reason,
            _ => return Err(too_large(s.len())),
        };
        if field.chars().all(|c| c == ELLIPSIS) {
            return Err(too_large(s.len()));
        }
        let over = s.len() - MAX_PAYLOAD;
        let mut keep = field
            .len()
            .saturating_sub(over + ELLIPSIS.len_utf8())
            .min(field.len().saturating_sub(ELLIPSIS.len_utf8() + 1));
        while !field.is_char_boundary(keep) {
            keep -= 1;
        }
        field.truncate(keep);
        field.push(ELLIPSIS);
    }
}

fn too_large(len: usize) -> String {
    format!(
        "an event of {len} bytes does not fit a NOTIFY payload ({MAX_PAYLOAD} bytes); its ids are too long"
    )
}

/// One live LISTEN connection.
pub(super) struct Listener {
    client: Client,
    conn: Connection<Socket, TlsStream>,
}

/// Opens a connection (TLS as the pool's, through the same connector) and runs `LISTEN` on it.
pub(super) async fn connect(config: &Config, tls: &MakeRustlsConnect) -> Result<Listener, String> {
    let (client, mut conn) = config.connect(tls.clone()).await.map_err(|e| explain(&e))?;
    // The connection only makes progress while polled, so LISTEN runs while we drive it.
    {
        let sql = format!("LISTEN {CHANNEL}");
        let listen = client.batch_execute(&sql);
        tokio::pin!(listen);
        loop {
            tokio::select! {
                r = &mut listen => {
                    r.map_err(|e| chain(&e))?;
                    break;
                }
                m = poll_fn(|cx| conn.poll_message(cx)) => drive(m, None)?,
            }
        }
    }
    Ok(Listener { client, conn })
}

/// Handles one message of the connection: forwards notifications; `Err` when it ended.
fn drive(
    m: Option<Result<AsyncMessage, tokio_postgres::Error>>,
    events: Option<&broadcast::Sender<Event>>,
) -> Result<(), String> {
    match m {
        Some(Ok(AsyncMessage::Notification(n))) if n.channel() == CHANNEL => {
            match serde_json::from_str::<Event>(n.payload()) {
                // No subscriber is not an error: nobody is waiting.
                Ok(e) => {
                    if let Some(tx) = events {
                        let _ = tx.send(e);
                    }
                }
                Err(e) => log::warn!(
                    "ignoring a {CHANNEL} notification that is not an event ({e}); is another program using the channel?"
                ),
            }
            Ok(())
        }
        Some(Ok(_)) => Ok(()),
        Some(Err(e)) => Err(chain(&e)),
        None => Err("the server closed the connection".to_string()),
    }
}

/// Serves `l` until its connection fails; returns why.
async fn serve(l: &mut Listener, events: &broadcast::Sender<Event>) -> String {
    let mut tick = tokio::time::interval_at(tokio::time::Instant::now() + PING_EVERY, PING_EVERY);
    loop {
        tokio::select! {
            m = poll_fn(|cx| l.conn.poll_message(cx)) => {
                if let Err(reason) = drive(m, Some(events)) {
                    return reason;
                }
            }
            _ = tick.tick() => {
                if let Err(reason) = ping(&l.client, &mut l.conn, events).await {
                    return reason;
                }
            }
        }
    }
}

/// Runs a trivial query while still forwarding notifications; `Err` when it fails or hangs.
async fn ping(
    client: &Client,
    conn: &mut Connection<Socket, TlsStream>,
    events: &broadcast::Sender<Event>,
) -> Result<(), String> {
    let query = client.simple_query("SELECT 1");
    tokio::pin!(query);
    let deadline = tokio::time::sleep(PING_TIMEOUT);
    tokio::pin!(deadline);
    loop {
        tokio::select! {
            r = &mut query => return r.map(|_| ()).map_err(|e| chain(&e)),
            m = poll_fn(|cx| conn.poll_message(cx)) => drive(m, Some(events))?,
            _ = &mut deadline => {
                return Err(format!("the server did not answer a ping within {PING_TIMEOUT:?}"));
            }
        }
    }
}

/// Serves `first`, then reconnects forever (with backoff) whenever the connection is lost,
/// sending [`Event::Resync`] after each reconnection. Abort the task to stop it.
pub(super) fn spawn(
    config: Config,
    tls: MakeRustlsConnect,
    first: Listener,
    events: broadcast::Sender<Event>,
) -> JoinHandle<()> {
    tokio::spawn(async move {
        let mut current = first;
        loop {
            let reason = serve(&mut current, &events).await;
            log::warn!("PostgreSQL event listener lost its connection ({reason}); reconnecting");
            let mut backoff = BACKOFF_MIN;
            current = loop {
                match connect(&config, &tls).await {
                    Ok(l) => break l,
                    Err(e) => {
                        log::warn!(
                            "PostgreSQL event listener cannot reconnect ({e}); retrying in {backoff:?}"
                        );
                        tokio::time::sleep(backoff).await;
                        backoff = (backoff * 2).min(BACKOFF_MAX);
                    }
                }
            };
            log::info!("PostgreSQL event listener reconnected; asking consumers to resync");
            let _ = events.send(Event::Resync);
        }
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_oversized_progress_detail_is_truncated_to_fit_one_notification() {
        let detail = "é\"\n".repeat(10_000);
        let e = Event::Progress {
            id: "r1".into(),
            stage: "applying".into(),
            detail: detail.clone(),
        };
        let payload = encode(&e).unwrap();
        assert!(payload.len() <= MAX_PAYLOAD);
        let Event::Progress {
            id, detail: got, ..
        } = serde_json::from_str(&payload).unwrap()
        else {
            panic!("not a progress event: {payload}");
        };
        assert_eq!(id, "r1");
        assert!(got.ends_with(ELLIPSIS) && detail.starts_with(got.trim_end_matches(ELLIPSIS)));
        let small = Event::RequestDone { id: "r2".into() };
        assert_eq!(
            serde_json::from_str::<Event>(&encode(&small).unwrap()).unwrap(),
            small
        );
    }

    #[test]
    fn an_event_that_cannot_be_truncated_enough_is_refused() {
        let e = Event::RequestDone {
            id: "x".repeat(MAX_PAYLOAD),
        };
        assert!(encode(&e).unwrap_err().contains("does not fit"));
    }
}
