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

use harmony_e2e::eventually::eventually;
use harmony_e2e::ha::{raise_fd_limit, tls_connector};
use harmony_e2e::multi_region::ControlPlaneOptions;
use harmony_e2e::resilience::crowd::{
    CrowdSize, bootstrap_agent, closed_by_server, honest_agents_through_a_crowd, inventory_through,
    open_fds, trickle, wait_healthy,
};
use harmony_e2e::world::{World, WorldOptions};
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
    wait_healthy(&w, &["calm".to_string()], WAIT)
        .await
        .unwrap_or_else(|e| panic!("{e}"));
    inventory_through(&w, "calm", "through-the-crowd", WAIT)
        .await
        .unwrap_or_else(|e| panic!("{e}"));
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

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_full_control_plane_sheds_unauthenticated_connections_so_agents_get_in_on_their_first_attempt()
 {
    // A control plane with 1,024 descriptors (so at most 1,024 - 128 connections), and a crowd
    // of 2,000 idle TCP connections, 500 slowloris heads and 200 silent upgrades: three times
    // what it can hold, every timeout two minutes so none frees a descriptor during the test.
    // Before shedding, an agent's connection waited behind the crowd until a timeout fired:
    // every first attempt failed. Now each newcomer sheds the oldest unauthenticated one. The
    // scenario (harmony_e2e::resilience::crowd) fails when the crowd does not fill the control
    // plane, an agent never turns healthy, or the request through the first one fails.
    let out = honest_agents_through_a_crowd(harmony_e2e::bins!(), CrowdSize::ISSUE)
        .await
        .unwrap_or_else(|e| panic!("{e}"));
    println!(
        "crowd of {} in ({} opened); control plane descriptors {} of {}; {} agents healthy {:.1} s after they started",
        out.members,
        out.opened,
        out.descriptors,
        CrowdSize::ISSUE.open_files,
        out.agents,
        out.healthy_after.as_secs_f64()
    );
    assert_eq!(
        out.first_attempt, out.agents,
        "an agent's attempt failed before it got in: {out:?}"
    );
}
