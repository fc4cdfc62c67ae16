//! What the control plane does to an agent's connection while its own work for that connection
//! is slow: a busy store must not make a live agent look silent. A real control-plane process on
//! loopback with its SQLite store; the agents are raw WebSocket sessions that play the agent's
//! part frame by frame (`harmony_e2e::raw_agent`).

use futures::{SinkExt, StreamExt};
use serde_json::json;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;
use tokio_tungstenite::tungstenite::Message;

use harmony_e2e::multi_region::ControlPlaneOptions;
use harmony_e2e::raw_agent::{Ws, next_text, raw_connect};
use harmony_e2e::world::{World, WorldOptions};

/// Sessions in the test: each would have been closed with even odds before, so all of them
/// surviving by chance would have been 1 in 256.
const AGENTS: usize = 8;

/// How long the test holds the store's write lock: past the control plane's silence limit at a
/// 1 s heartbeat (1 s + 2 s grace), within SQLite's busy timeout (5 s) of its store.
const LOCKED: Duration = Duration::from_millis(4_500);

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_live_agent_is_not_closed_as_silent_while_its_connection_waits_for_the_store() {
    // An agent's first heartbeat records its zone's state, on the connection's own task. The
    // store is locked while it does, so the task waits past the silence limit while the agent
    // keeps heartbeating every 250 ms. When the task gets back, those heartbeats are waiting
    // to be read: they count before the passed deadline. Before, the deadline and the waiting
    // frame drew lots, and a live agent was closed as silent ("no heartbeat") half the time.
    let w = World::start(
        harmony_e2e::bins!(),
        WorldOptions {
            control_plane: ControlPlaneOptions {
                heartbeat_ms: 1_000,
                unhealthy_after_ms: 3_000,
                unavailable_after_ms: 600_000,
                ..Default::default()
            },
            ..Default::default()
        },
    );
    let names: Vec<String> = (0..AGENTS).map(|i| format!("busy{i}")).collect();
    let mut tokens = Vec::new();
    for name in &names {
        tokens.push(w.create(name, "z").await.bootstrap_token);
    }
    let mut sessions: Vec<Ws> = Vec::new();
    for (name, token) in names.iter().zip(&tokens) {
        let mut ws = raw_connect(&w, Some(token.expose())).await;
        ws.send(Message::text(
            json!({"type": "hello", "agent_version": "raw", "region": name, "zone": "z", "ops": [], "protocol": 1}).to_string(),
        ))
        .await
        .unwrap();
        assert_eq!(next_text(&mut ws).await["type"], "welcome");
        // The sessions opened so far stay live while the others open (a WebSocket ping is a
        // sign of life, and touches no store).
        for open in sessions.iter_mut() {
            open.send(Message::Ping(Vec::new().into())).await.unwrap();
        }
        sessions.push(ws);
    }

    // A writer of the test's own takes SQLite's write lock on the control plane's state file.
    let db = w.cp().dir().join("state.sqlite");
    let (locked_tx, locked_rx) = std::sync::mpsc::channel();
    let holder = std::thread::spawn(move || {
        let c = rusqlite::Connection::open(&db).unwrap();
        c.busy_timeout(Duration::from_secs(5)).unwrap();
        c.execute_batch("BEGIN IMMEDIATE").unwrap();
        locked_tx.send(()).unwrap();
        std::thread::sleep(LOCKED);
        c.execute_batch("COMMIT").unwrap();
    });
    locked_rx.recv().unwrap();

    // The agents heartbeat through the lock and until every region is healthy after it.
    let stop = Arc::new(AtomicBool::new(false));
    let mut beating: Vec<_> = sessions
        .into_iter()
        .map(|ws| tokio::spawn(heartbeat(ws, stop.clone())))
        .collect();
    tokio::task::spawn_blocking(move || holder.join().unwrap())
        .await
        .unwrap();
    for (name, beat) in names.iter().zip(beating.iter_mut()) {
        tokio::select! {
            _ = w.wait_health(name, "healthy") => {}
            ended = beat => panic!("region {name}: {:?}\n{}", ended.unwrap(), w.logs()),
        }
    }
    stop.store(true, Ordering::Relaxed);
    for (name, beat) in names.iter().zip(beating) {
        let sent = beat
            .await
            .unwrap()
            .unwrap_or_else(|e| panic!("region {name}: {e}\n{}", w.logs()));
        // At 4 a second through the lock's 4.5 s and after.
        assert!(sent > 16, "region {name}: {sent} heartbeats sent");
    }
}

/// Heartbeats on `ws` every 250 ms until `stop`, reading what the control plane sends; how many
/// were sent, or how the control plane ended the connection.
async fn heartbeat(mut ws: Ws, stop: Arc<AtomicBool>) -> Result<u64, String> {
    let mut tick = tokio::time::interval(Duration::from_millis(250));
    let mut seq = 0u64;
    while !stop.load(Ordering::Relaxed) {
        tokio::select! {
            _ = tick.tick() => {
                seq += 1;
                let ping = json!({"type": "ping", "seq": seq, "status": {"k8s_reachable": true}});
                ws.send(Message::text(ping.to_string()))
                    .await
                    .map_err(|e| format!("heartbeat {seq} not sent: {e}"))?;
            }
            incoming = ws.next() => match incoming {
                Some(Ok(Message::Close(f))) => {
                    return Err(format!("closed by the control plane after {seq} heartbeats: {f:?}"));
                }
                None | Some(Err(_)) => return Err(format!("connection ended after {seq} heartbeats")),
                Some(Ok(_)) => {}
            }
        }
    }
    Ok(seq)
}
