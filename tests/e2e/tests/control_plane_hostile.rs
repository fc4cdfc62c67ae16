//! A hostile crowd against one control-plane replica, on loopback: 2,000 idle connections
//! (1,500 that never start TLS, 500 that finish the handshake and never send a request) and
//! 500 slowloris connections (a request head trickled one byte a second, never finished).
//! While they are all open, a new agent bootstraps and a request through it completes; then
//! every hostile connection is closed by the control plane's timeouts, and its descriptors are
//! released. The timeouts are set short (`--tls-handshake-timeout-ms`,
//! `--header-read-timeout-ms`) so the test takes about half a minute.

use futures::StreamExt;
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::{Duration, Instant};

use harmony::infra::control_plane::Health;
use harmony_agent_protocol::SecretString;
use harmony_e2e::eventually::eventually;
use harmony_e2e::ha::{raise_fd_limit, tls_connector};
use harmony_e2e::multi_region::{Agent, ControlPlaneOptions};
use harmony_e2e::world::{World, WorldOptions};
use tokio::io::{AsyncRead, AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;

const IDLE_TCP: usize = 1_500;
const IDLE_TLS: usize = 500;
const SLOWLORIS: usize = 500;
/// Both the TLS-handshake and the header-read timeout given to the control plane.
const TIMEOUT: Duration = Duration::from_secs(15);
/// How late after its timeout a connection may be closed (a loaded 2-core machine).
const SLACK: Duration = Duration::from_secs(10);
const WAIT: Duration = Duration::from_secs(60);

/// When a hostile connection was opened (its timeout's start) and closed by the server.
struct Outcome {
    kind: &'static str,
    opened: Instant,
    closed: Option<Instant>,
    sent: usize,
}

/// Reads (discarding whatever comes) until the server closes `io` or `until` passes.
async fn closed_by_server(io: &mut (impl AsyncRead + Unpin), until: Instant) -> Option<Instant> {
    let mut buf = [0u8; 512];
    let read_to_end = async { while let Ok(1..) = io.read(&mut buf).await {} };
    let limit = until.saturating_duration_since(Instant::now());
    tokio::time::timeout(limit, read_to_end)
        .await
        .ok()
        .map(|()| Instant::now())
}

/// A request head never finished: one byte a second until the server closes the connection
/// (or `until` passes).
async fn trickle(
    tls: &mut tokio_rustls::client::TlsStream<TcpStream>,
    until: Instant,
) -> (Option<Instant>, usize) {
    let head = b"GET /v1/regions HTTP/1.1\r\nhost: 127.0.0.1\r\nx-slow: ";
    let mut sent = 0;
    let mut buf = [0u8; 512];
    let mut tick = tokio::time::interval(Duration::from_secs(1));
    while Instant::now() < until {
        tokio::select! {
            r = tls.read(&mut buf) => match r {
                Ok(1..) => {}
                _ => return (Some(Instant::now()), sent),
            },
            _ = tick.tick() => {
                let byte = head.get(sent).copied().unwrap_or(b'a');
                if tls.write_all(&[byte]).await.is_err() || tls.flush().await.is_err() {
                    return (Some(Instant::now()), sent);
                }
                sent += 1;
            }
        }
    }
    (None, sent)
}

fn open_fds(pid: u32) -> usize {
    std::fs::read_dir(format!("/proc/{pid}/fd"))
        .map(|d| d.count())
        .unwrap_or(0)
}

/// An agent of `region` (zone `z1`) bootstrapping with `token`, its files in the world's
/// folder, named after the region.
fn bootstrap_agent(w: &World, region: &str, token: &SecretString) -> Agent {
    w.agent(region, &w.agent_options(region, region, "z1", Some(token)))
}

/// Waits until every region of `regions` is healthy, at most [`WAIT`] in all.
async fn wait_healthy(w: &World, regions: &[String]) {
    eventually(WAIT, format!("agents {regions:?} healthy"), || async {
        for region in regions {
            let s = w.status(region).await;
            if s.health != Health::Healthy {
                return Err(s);
            }
        }
        Ok(())
    })
    .await
    .unwrap_or_else(|e| panic!("{e}\n{}", w.logs()));
}

/// A request through `region`'s agent, which must succeed.
async fn inventory_through(w: &World, region: &str, id: &str) {
    let res = w
        .client
        .request(region, id, "get_inventory", serde_json::json!({}), WAIT)
        .await
        .unwrap_or_else(|e| panic!("{e}"));
    assert!(res.ok, "{res:?}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn idle_and_slowloris_connections_are_cut_by_timeouts_while_a_new_agent_gets_through() {
    let fd_limit = raise_fd_limit();
    let needed = 2 * (IDLE_TCP + IDLE_TLS + SLOWLORIS) as u64 + 512;
    assert!(
        fd_limit >= needed,
        "the open-file hard limit is {fd_limit}; this test needs {needed} (raise it with `ulimit -Hn`)"
    );
    let ms = TIMEOUT.as_millis().to_string();
    let w = World::start(
        harmony_e2e::bins!(),
        WorldOptions {
            control_plane: ControlPlaneOptions {
                extra_args: vec![
                    "--tls-handshake-timeout-ms".into(),
                    ms.clone(),
                    "--header-read-timeout-ms".into(),
                    ms,
                ],
                ..ControlPlaneOptions::default()
            },
            ..WorldOptions::default()
        },
    );
    let pid = w.cp().pid().unwrap();
    let created = w.create("calm", "z1").await;
    let baseline = open_fds(pid);
    let tls = tls_connector(&w.pki().ca_pem).unwrap();
    let closed = Arc::new(AtomicUsize::new(0));
    let addr = w.cp().addr;

    // The crowd. Each connection is watched by its own task, bounded by its deadline.
    let mut crowd = Vec::new();
    for _ in 0..IDLE_TCP {
        let mut tcp = TcpStream::connect(addr).await.unwrap();
        let opened = Instant::now();
        let closed = closed.clone();
        crowd.push(tokio::spawn(async move {
            let at = closed_by_server(&mut tcp, opened + TIMEOUT + SLACK).await;
            closed.fetch_add(1, Ordering::Relaxed);
            Outcome {
                kind: "idle TCP",
                opened,
                closed: at,
                sent: 0,
            }
        }));
    }
    let handshakes = Arc::new(tokio::sync::Semaphore::new(32));
    for i in 0..IDLE_TLS + SLOWLORIS {
        let permit = handshakes.clone().acquire_owned().await.unwrap();
        let (tls, closed) = (tls.clone(), closed.clone());
        crowd.push(tokio::spawn(async move {
            let tcp = TcpStream::connect(addr).await.unwrap();
            let name = rustls::pki_types::ServerName::try_from("127.0.0.1").unwrap();
            let mut s = tls.connect(name, tcp).await.expect("TLS handshake");
            drop(permit);
            let opened = Instant::now();
            let until = opened + TIMEOUT + SLACK;
            let outcome = if i < IDLE_TLS {
                let at = closed_by_server(&mut s, until).await;
                Outcome {
                    kind: "idle TLS",
                    opened,
                    closed: at,
                    sent: 0,
                }
            } else {
                let (at, sent) = trickle(&mut s, until).await;
                Outcome {
                    kind: "slowloris",
                    opened,
                    closed: at,
                    sent,
                }
            };
            closed.fetch_add(1, Ordering::Relaxed);
            outcome
        }));
    }
    let _ = handshakes.acquire_many(32).await.unwrap();
    let crowd_ready = Instant::now();
    let held = open_fds(pid);
    println!(
        "{} hostile connections open; control plane descriptors {baseline} -> {held}",
        crowd.len()
    );

    // Meanwhile, a new agent bootstraps and a request goes through it.
    let _agent = bootstrap_agent(&w, "calm", &created.bootstrap_token);
    wait_healthy(&w, &["calm".to_string()]).await;
    inventory_through(&w, "calm", "through-the-crowd").await;
    let done = Instant::now();
    assert_eq!(
        closed.load(Ordering::Relaxed),
        0,
        "hostile connections were closed before the agent got through ({:?} after the crowd was in): the test did not overlap them",
        done - crowd_ready
    );
    println!(
        "agent healthy and request answered {:.1} s after the crowd was in",
        (done - crowd_ready).as_secs_f64()
    );

    // Then the timeouts close every hostile connection, and no sooner.
    let outcomes: Vec<Outcome> = futures::stream::iter(crowd)
        .then(|t| async move { t.await.unwrap() })
        .collect()
        .await;
    for o in &outcomes {
        let at = o.closed.unwrap_or_else(|| {
            panic!(
                "a {} connection was still open after {:?}",
                o.kind,
                TIMEOUT + SLACK
            )
        });
        let after = at - o.opened;
        assert!(
            after + Duration::from_secs(1) >= TIMEOUT,
            "a {} connection was closed after {after:?}, before its {TIMEOUT:?} timeout",
            o.kind
        );
    }
    let trickled = outcomes
        .iter()
        .filter(|o| o.kind == "slowloris")
        .map(|o| o.sent)
        .min();
    assert!(
        trickled >= Some(TIMEOUT.as_secs() as usize - 2),
        "{trickled:?} bytes"
    );
    // The control plane released their descriptors and still serves.
    eventually(
        WAIT,
        "the hostile connections' descriptors released",
        || async {
            let now = open_fds(pid);
            if now > baseline + 16 {
                Err(format!("descriptors: {baseline} before, {now} now"))
            } else {
                Ok(())
            }
        },
    )
    .await
    .unwrap_or_else(|e| panic!("{e}"));
    let res = w
        .client
        .request(
            "calm",
            "after-the-crowd",
            "get_inventory",
            serde_json::json!({}),
            WAIT,
        )
        .await
        .unwrap();
    assert!(res.ok, "{res:?}");
}

/// A silent WebSocket upgrade of the agents' path: the upgrade completes, no hello follows.
const SILENT_UPGRADE: &str = "GET /v1/agent HTTP/1.1\r\nhost: 127.0.0.1\r\nconnection: upgrade\r\nupgrade: websocket\r\nsec-websocket-version: 13\r\nsec-websocket-key: dGhlIHNhbXBsZSBub25jZQ==\r\n\r\n";

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_full_control_plane_sheds_unauthenticated_connections_so_agents_get_in_on_their_first_attempt()
 {
    // A control plane with 1,024 descriptors (so at most 1,024 - 128 connections), and a crowd
    // of 2,000 idle TCP connections, 500 slowloris heads and 200 silent upgrades: three times
    // what it can hold, every timeout two minutes so none frees a descriptor during the test.
    // Before shedding, an agent's connection waited behind the crowd until a timeout fired:
    // every first attempt failed. Now each newcomer sheds the oldest unauthenticated one.
    const OPEN_FILES: u64 = 1_024;
    const CROWD_IDLE: usize = 2_000;
    const CROWD_SLOWLORIS: usize = 500;
    const CROWD_UPGRADES: usize = 200;
    const AGENTS: usize = 3;
    let fd_limit = raise_fd_limit();
    let needed = (CROWD_IDLE + CROWD_SLOWLORIS + CROWD_UPGRADES) as u64 + 512;
    assert!(
        fd_limit >= needed,
        "the open-file hard limit is {fd_limit}; this test needs {needed} (raise it with `ulimit -Hn`)"
    );
    let w = World::start(
        harmony_e2e::bins!(),
        WorldOptions {
            control_plane: ControlPlaneOptions {
                extra_args: [
                    "--tls-handshake-timeout-ms",
                    "120000",
                    "--header-read-timeout-ms",
                    "120000",
                ]
                .map(String::from)
                .to_vec(),
                open_files: Some(OPEN_FILES),
                heartbeat_ms: 1_000,
                unhealthy_after_ms: 3_000,
                unavailable_after_ms: 6_000,
                ..ControlPlaneOptions::default()
            },
            ..WorldOptions::default()
        },
    );
    let pid = w.cp().pid().unwrap();
    let regions: Vec<String> = (0..AGENTS).map(|i| format!("honest{i}")).collect();
    let mut tokens = Vec::new();
    for region in &regions {
        tokens.push(w.create(region, "z1").await.bootstrap_token);
    }
    let (addr, tls) = (w.cp().addr, tls_connector(&w.pki().ca_pem).unwrap());

    // The crowd, oldest first. Every member's connect and handshake is bounded (so a listener
    // that cannot take the crowd does not stall the test) and a member shed on the way just
    // ends: the crowd only has to keep the listener full. Each reports once it is settled.
    let (settled_tx, mut settled) = tokio::sync::mpsc::unbounded_channel::<bool>();
    let mut crowd = Vec::new();
    let until = Instant::now() + Duration::from_secs(180);
    for _ in 0..CROWD_IDLE {
        let settled = settled_tx.clone();
        crowd.push(tokio::spawn(async move {
            let tcp = tokio::time::timeout(Duration::from_secs(5), TcpStream::connect(addr)).await;
            let Ok(Ok(mut tcp)) = tcp else {
                let _ = settled.send(false);
                return;
            };
            let _ = settled.send(true);
            closed_by_server(&mut tcp, until).await;
        }));
        // Oldest first: the connects are made in order.
        tokio::task::yield_now().await;
    }
    let handshakes = Arc::new(tokio::sync::Semaphore::new(128));
    for i in 0..CROWD_SLOWLORIS + CROWD_UPGRADES {
        let permit = handshakes.clone().acquire_owned().await.unwrap();
        let (tls, settled) = (tls.clone(), settled_tx.clone());
        crowd.push(tokio::spawn(async move {
            let name = rustls::pki_types::ServerName::try_from("127.0.0.1").unwrap();
            let open = async {
                let tcp = TcpStream::connect(addr).await?;
                let mut s = tls.connect(name, tcp).await?;
                if i >= CROWD_SLOWLORIS {
                    s.write_all(SILENT_UPGRADE.as_bytes()).await?;
                    let mut head = Vec::new();
                    let mut b = [0u8; 1];
                    while !head.ends_with(b"\r\n\r\n") {
                        s.read_exact(&mut b).await?;
                        head.push(b[0]);
                    }
                }
                Ok::<_, std::io::Error>(s)
            };
            let opened = tokio::time::timeout(Duration::from_secs(5), open).await;
            drop(permit);
            let Ok(Ok(mut s)) = opened else {
                let _ = settled.send(false);
                return;
            };
            let _ = settled.send(true);
            if i < CROWD_SLOWLORIS {
                trickle(&mut s, until).await;
            } else {
                closed_by_server(&mut s, until).await;
            }
        }));
    }
    // (Each task keeps its sender for its life: count the reports, not the channel's end.)
    let mut opened = 0;
    for _ in 0..crowd.len() {
        opened += usize::from(settled.recv().await.unwrap_or(false));
    }
    let held = open_fds(pid);
    println!(
        "crowd of {} in ({opened} opened); control plane descriptors {held} of {OPEN_FILES}",
        crowd.len()
    );
    assert!(
        opened as u64 > OPEN_FILES,
        "only {opened} crowd connections opened: the test proves nothing"
    );

    // Honest agents now: each is served on its first attempt and turns healthy.
    let _agents: Vec<Agent> = regions
        .iter()
        .zip(&tokens)
        .map(|(region, token)| bootstrap_agent(&w, region, token))
        .collect();
    let started = Instant::now();
    wait_healthy(&w, &regions).await;
    println!(
        "{AGENTS} agents healthy {:.1} s after they started",
        started.elapsed().as_secs_f64()
    );
    for region in &regions {
        let text = std::fs::read_to_string(w.log(region)).unwrap_or_default();
        assert!(
            !text.contains("connection to the control plane lost"),
            "an agent's attempt failed before it got in:\n{text}"
        );
    }
    inventory_through(&w, "honest0", "through-a-full-listener").await;
    for c in crowd {
        c.abort();
    }
}
