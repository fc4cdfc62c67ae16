//! A flow black-holed between the agent and the control plane (a load balancer that lost the
//! flow's state: nothing arrives, nothing is closed) is noticed by the agent from its own
//! heartbeats, which it drops and replaces with a new connection, real processes on loopback,
//! with the production heartbeat (5 s). The agent reaches the control plane through
//! `harmony_e2e::blackhole`, a TCP proxy playing the load balancer; the scenario is
//! `harmony_e2e::resilience::dead_flow`, which `bench_resilience` also reports.
//!
//! The time from the cut to the agent's "nothing heard" is printed (the goal is within two
//! heartbeats, 10 s); it is not asserted, as no timing is.
//!
//! Run: `cargo test -p harmony_e2e --test agent_dead_flow -- --nocapture`.

use harmony_e2e::resilience::dead_flow::{HEARTBEAT, black_holed_flow};

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_black_holed_flow_is_dropped_by_the_agent_and_replaced() {
    // Fails when the agent never logs the silence, or no newer session turns healthy.
    let flow = black_holed_flow(harmony_e2e::bins!())
        .await
        .unwrap_or_else(|e| panic!("{e}"));
    println!(
        "dead flow noticed by the agent {:.1} s after the cut (heartbeat {} s; goal within 2 heartbeats, 10 s); reconnected and healthy {:.1} s after the cut",
        flow.noticed.as_secs_f64(),
        HEARTBEAT.as_secs(),
        flow.back.as_secs_f64()
    );
    assert!(flow.back >= flow.noticed, "{flow:?}");
}
