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

use harmony_e2e::blackhole::BlackholeProxy;
use harmony_e2e::eventually::eventually;
use harmony_e2e::multi_region::{AgentOptions, ControlPlaneOptions};
use harmony_e2e::world::{World, WorldOptions};

const WAIT: Duration = Duration::from_secs(90);

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_black_holed_flow_is_dropped_by_the_agent_and_replaced() {
    // Production timing: heartbeat 5 s, unhealthy after 15 s, unavailable after 30 s.
    let w = World::start(
        harmony_e2e::bins!(),
        WorldOptions {
            control_plane: ControlPlaneOptions {
                heartbeat_ms: 5_000,
                unhealthy_after_ms: 15_000,
                unavailable_after_ms: 30_000,
                ..Default::default()
            },
            ..Default::default()
        },
    );
    let created = w.create("eu", "z1").await;
    let proxy = BlackholeProxy::start(w.cp().addr).await.unwrap();
    let options = AgentOptions {
        url: format!("https://{}", proxy.addr),
        ..w.agent_options("agent", "eu", "z1", Some(&created.bootstrap_token))
    };
    let agent = w.agent("agent", &options);
    let admin = &w.client;

    let connected_at = |after: Option<i64>| {
        let agent = &agent;
        async move {
            eventually(WAIT, "region eu (re)connected and healthy", || async {
                let r = admin.region("eu").await.unwrap().expect("region eu");
                if r.connected
                    && r.connected_at.is_some()
                    && r.connected_at > after
                    && r.is_healthy()
                {
                    Ok(r.connected_at)
                } else {
                    Err(r)
                }
            })
            .await
            .unwrap_or_else(|w| panic!("{w}\n{}", agent.log()))
        }
    };
    let first = connected_at(None).await;

    // The load balancer loses the flow: nothing passes, nothing is closed.
    proxy.cut_existing();
    let cut = Instant::now();
    let noticed = eventually(WAIT, "the agent to notice the dead flow", || async {
        let log = agent.log();
        log.contains("nothing heard from the control plane for")
            .then(|| cut.elapsed())
    })
    .await
    .unwrap_or_else(|w| panic!("{w}\n{}", agent.log()));
    // A new connection (through the same address, now forwarded) replaces the dead one.
    let second = connected_at(first).await;
    let back = cut.elapsed();
    println!(
        "dead flow noticed by the agent {:.1} s after the cut (heartbeat 5 s; goal within 2 heartbeats, 10 s); reconnected and healthy {:.1} s after the cut",
        noticed.as_secs_f64(),
        back.as_secs_f64()
    );
    assert!(second > first);
}
