//! A flow black-holed between the agent and the control plane (a load balancer that lost the
//! flow's state: nothing arrives, nothing is closed) is noticed by the agent from its own
//! heartbeats, which it drops and replaces with a new connection, real processes on loopback,
//! with the production heartbeat (5 s). The agent reaches the control plane through
//! `harmony_e2e::blackhole`, a TCP proxy playing the load balancer.
//!
//! The time from the cut to the agent's "nothing heard" is printed (the goal is within two
//! heartbeats, 10 s); it is not asserted, as no timing is.
//!
//! Run: `cargo test -p harmony_e2e --test agent_dead_flow -- --nocapture`.

use std::time::{Duration, Instant};

use harmony::types::{RegionId, ZoneId};
use harmony_e2e::ApiServer;
use harmony_e2e::blackhole::BlackholeProxy;
use harmony_e2e::multi_region::{Agent, AgentOptions, ControlPlane, ControlPlaneOptions, Pki};

const CP_BIN: &str = env!("CARGO_BIN_EXE_e2e-control-plane");
const AGENT_BIN: &str = env!("CARGO_BIN_EXE_e2e-agent");
const WAIT: Duration = Duration::from_secs(90);

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_black_holed_flow_is_dropped_by_the_agent_and_replaced() {
    let server = ApiServer::start().unwrap_or_else(|e| panic!("{e}"));
    let pki = Pki::new().unwrap();
    // Production timing: heartbeat 5 s, unhealthy after 15 s, unavailable after 30 s.
    let cp = ControlPlane::start(
        CP_BIN.as_ref(),
        &pki,
        ControlPlaneOptions {
            heartbeat_ms: 5_000,
            unhealthy_after_ms: 15_000,
            unavailable_after_ms: 30_000,
            ..Default::default()
        },
    )
    .unwrap_or_else(|e| panic!("{e}"));
    let admin = cp.client();
    let created = admin
        .create_region(
            &RegionId::parse("eu").unwrap(),
            &ZoneId::parse("z1").unwrap(),
        )
        .await
        .unwrap()
        .expect("a new region");
    let dir = tempfile::tempdir().unwrap();
    let token_file = dir.path().join("bootstrap-token");
    std::fs::write(&token_file, created.bootstrap_token.expose()).unwrap();
    let proxy = BlackholeProxy::start(cp.addr).await.unwrap();
    let options = AgentOptions {
        bootstrap_token_file: Some(token_file),
        ..AgentOptions::new(
            &format!("https://{}", proxy.addr),
            "eu",
            "z1",
            pki.ca(),
            server.kubeconfig(),
            dir.path().join("identity"),
        )
    };
    let agent = Agent::start(AGENT_BIN.as_ref(), &options, &dir.path().join("agent.log")).unwrap();

    let connected_at = |deadline: Instant, after: Option<i64>| {
        let admin = &admin;
        let agent = &agent;
        async move {
            loop {
                let r = admin.region("eu").await.unwrap().expect("region eu");
                if r.connected
                    && r.connected_at.is_some()
                    && r.connected_at > after
                    && r.is_healthy()
                {
                    return r.connected_at;
                }
                assert!(
                    Instant::now() < deadline,
                    "region eu not (re)connected: {r:?}\n{}",
                    agent.log()
                );
                tokio::time::sleep(Duration::from_millis(100)).await;
            }
        }
    };
    let first = connected_at(Instant::now() + WAIT, None).await;

    // The load balancer loses the flow: nothing passes, nothing is closed.
    proxy.cut_existing();
    let cut = Instant::now();
    let deadline = cut + WAIT;
    let noticed = loop {
        if agent
            .log()
            .contains("nothing heard from the control plane for")
        {
            break cut.elapsed();
        }
        assert!(
            Instant::now() < deadline,
            "the agent never noticed the dead flow:\n{}",
            agent.log()
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    };
    // A new connection (through the same address, now forwarded) replaces the dead one.
    let second = connected_at(Instant::now() + WAIT, first).await;
    let back = cut.elapsed();
    println!(
        "dead flow noticed by the agent {:.1} s after the cut (heartbeat 5 s; goal within 2 heartbeats, 10 s); reconnected and healthy {:.1} s after the cut",
        noticed.as_secs_f64(),
        back.as_secs_f64()
    );
    assert!(second > first);
}
