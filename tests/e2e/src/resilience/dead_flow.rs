//! A flow black-holed between the agent and the control plane (a load balancer that lost the
//! flow's state: nothing arrives, nothing is closed), with the production heartbeat (5 s). The
//! agent reaches the control plane through [`BlackholeProxy`], which plays the load balancer.

use std::time::{Duration, Instant};

use crate::blackhole::BlackholeProxy;
use crate::eventually::eventually;
use crate::multi_region::{AgentOptions, ControlPlaneOptions};
use crate::world::{Bins, World, WorldOptions};

/// The production heartbeat the scenario runs with.
pub const HEARTBEAT: Duration = Duration::from_secs(5);
const WAIT: Duration = Duration::from_secs(90);

/// What happened after the cut.
#[derive(Debug, Clone, Copy)]
pub struct DeadFlow {
    /// From the cut to the agent's "nothing heard from the control plane".
    pub noticed: Duration,
    /// From the cut to the region connected again (a newer session) and healthy.
    pub back: Duration,
}

/// Starts a world (production timing: heartbeat 5 s, unhealthy after 15 s, unavailable after
/// 30 s) and an agent behind a black-hole proxy; once healthy, cuts its flow and measures how
/// soon the agent notices and a new session replaces the dead one. An error says what was not
/// seen within 90 s, with the agent's log.
pub async fn black_holed_flow(bins: Bins) -> Result<DeadFlow, String> {
    let w = tokio::task::block_in_place(|| {
        World::start(
            bins,
            WorldOptions {
                control_plane: ControlPlaneOptions {
                    heartbeat_ms: HEARTBEAT.as_millis() as u64,
                    unhealthy_after_ms: 15_000,
                    unavailable_after_ms: 30_000,
                    ..Default::default()
                },
                ..Default::default()
            },
        )
    });
    let created = w.create("eu", "z1").await;
    let proxy = BlackholeProxy::start(w.cp().addr)
        .await
        .map_err(|e| format!("black-hole proxy: {e}"))?;
    let options = AgentOptions {
        url: format!("https://{}", proxy.addr),
        ..w.agent_options("agent", "eu", "z1", Some(&created.bootstrap_token))
    };
    let agent = w.agent("agent", &options);
    let (admin, agent) = (&w.client, &agent);

    let connected_after = |after: Option<i64>| async move {
        eventually(WAIT, "region eu (re)connected and healthy", || async {
            let r = admin.region("eu").await.map_err(|e| e.to_string())?;
            match r {
                Some(r)
                    if r.connected
                        && r.connected_at.is_some()
                        && r.connected_at > after
                        && r.is_healthy() =>
                {
                    Ok(r.connected_at)
                }
                other => Err(format!("{other:?}")),
            }
        })
        .await
        .map_err(|e| format!("{e}\n{}", agent.log()))
    };
    let first = connected_after(None).await?;

    // The load balancer loses the flow: nothing passes, nothing is closed.
    proxy.cut_existing();
    let cut = Instant::now();
    let noticed = eventually(WAIT, "the agent to notice the dead flow", || async {
        agent
            .log()
            .contains("nothing heard from the control plane for")
            .then(|| cut.elapsed())
    })
    .await
    .map_err(|e| format!("{e}\n{}", agent.log()))?;
    // A new connection (through the same address, now forwarded) replaces the dead one.
    connected_after(first).await?;
    Ok(DeadFlow {
        noticed,
        back: cut.elapsed(),
    })
}
