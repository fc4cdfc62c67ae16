//! Issue 32 part 4's figures, for `bench all`: how the control plane and its agents fare when
//! the world misbehaves. Each scenario is `harmony_e2e::resilience`'s, which the test suites
//! also run (and assert on); this program reports them.
//!
//! ```text
//! cargo run --release -p harmony_e2e --bin bench_resilience -- [--tiny]
//! ```
//!
//! - a load balancer black-holes the agent's idle flow: how soon the agent notices (goal:
//!   within 2 heartbeats, 10 s) and is back;
//! - 2,000 idle TCP connections, 500 slowloris heads and 200 silent upgrades fill a control
//!   plane allowed 1,024 descriptors: whether honest agents get in on their first attempt;
//! - PostgreSQL restarts under 32 callers of 3 replicas: whether every answer is a success or
//!   a retryable 503 with `Retry-After`.
//!
//! `--tiny` (CI) runs a crowd of 400 against 256 descriptors and 4 callers. Ends with one
//! `BENCH {json}` line. Needs the e2e binaries beside it (`cargo build -p harmony_e2e --bins`),
//! the kube-apiserver fixture, PostgreSQL and haproxy (`tests/setup.sh`).

use harmony_e2e::resilience::crowd::{CrowdSize, honest_agents_through_a_crowd};
use harmony_e2e::resilience::database_restart::callers_through_a_database_restart;
use harmony_e2e::resilience::dead_flow::{HEARTBEAT, black_holed_flow};
use harmony_e2e::world::Bins;

type BenchResult<T> = Result<T, String>;

async fn run(tiny: bool) -> BenchResult<()> {
    let exe = std::env::current_exe().map_err(|e| format!("cannot find this program: {e}"))?;
    let bins = Bins::in_folder(exe.parent().ok_or("this program has no folder")?);
    for path in [bins.control_plane(), bins.agent()] {
        if !path.is_file() {
            return Err(format!(
                "{} not found; build it with `cargo build --release -p harmony_e2e --bins`",
                path.display()
            ));
        }
    }
    let mut figures = Vec::new();

    println!("A black-holed flow (heartbeat {} s):", HEARTBEAT.as_secs());
    let flow = black_holed_flow(bins).await?;
    let limit = HEARTBEAT * 2;
    println!(
        "  noticed by the agent {:.1} s after the cut; reconnected and healthy {:.1} s after it",
        flow.noticed.as_secs_f64(),
        flow.back.as_secs_f64()
    );
    figures.push(serde_json::json!({
        "key": "dead-flow",
        "figure": "dead connection noticed by the agent when a load balancer black-holes an idle flow",
        "peer": "Linux TCP keepalive defaults: 2 h 11 min",
        "goal": format!("≤ 2 heartbeats ({} s)", limit.as_secs()),
        "measured": format!(
            "{:.1} s (heartbeat {} s); reconnected and healthy {:.1} s after the cut",
            flow.noticed.as_secs_f64(),
            HEARTBEAT.as_secs(),
            flow.back.as_secs_f64()
        ),
        "met": flow.noticed <= limit,
    }));

    let size = if tiny {
        CrowdSize {
            open_files: 256,
            idle: 300,
            slowloris: 60,
            upgrades: 40,
            agents: 2,
        }
    } else {
        CrowdSize::ISSUE
    };
    println!(
        "A crowd of {} idle, {} slowloris and {} silent upgrades against {} descriptors, then {} agents:",
        size.idle, size.slowloris, size.upgrades, size.open_files, size.agents
    );
    let crowd = honest_agents_through_a_crowd(bins, size).await?;
    println!(
        "  {} of {} crowd connections opened (control plane holding {} descriptors); {} of {} agents in on their first attempt, all healthy {:.1} s after they started",
        crowd.opened,
        crowd.members,
        crowd.descriptors,
        crowd.first_attempt,
        crowd.agents,
        crowd.healthy_after.as_secs_f64()
    );
    figures.push(serde_json::json!({
        "key": "crowd",
        "figure": format!(
            "honest agents while {} idle + {} slowloris + {} silent upgrades hold a {}-fd control plane",
            size.idle, size.slowloris, size.upgrades, size.open_files
        ),
        "peer": "-",
        "goal": "every agent in on its first attempt",
        "measured": format!(
            "{} of {} on the first attempt, all healthy {:.1} s after they started; {} of {} crowd connections opened",
            crowd.first_attempt,
            crowd.agents,
            crowd.healthy_after.as_secs_f64(),
            crowd.opened,
            crowd.members
        ),
        "met": crowd.first_attempt == crowd.agents,
    }));

    let callers = if tiny { 4 } else { 32 };
    println!("PostgreSQL restarted under {callers} callers of 3 replicas:");
    let answers = callers_through_a_database_restart(bins, callers).await?;
    let other: Vec<String> = answers
        .other
        .iter()
        .map(|(k, v)| format!("{v} × {k}"))
        .collect();
    let measured = format!(
        "{} calls during and around a {:.2} s restart: {} succeeded, {} answered 503 with Retry-After (then retried), {} other{}; {} requests completed",
        answers.calls(),
        answers.restart.as_secs_f64(),
        answers.ok,
        answers.retryable,
        other.len(),
        if other.is_empty() {
            String::new()
        } else {
            format!(" ({})", other.join(", "))
        },
        answers.requests_done
    );
    println!("  {measured}");
    figures.push(serde_json::json!({
        "key": "database-restart",
        "figure": format!("callers during a PostgreSQL restart (3 replicas, {callers} callers)"),
        "peer": "-",
        "goal": "retryable answers only (503 + Retry-After)",
        "measured": measured,
        "met": answers.other.is_empty() && answers.calls() > 0,
    }));

    println!(
        "BENCH {}",
        serde_json::json!({"bench": "resilience", "figures": figures})
    );
    Ok(())
}

#[tokio::main(flavor = "multi_thread", worker_threads = 4)]
async fn main() {
    let mut tiny = false;
    for arg in std::env::args().skip(1) {
        match arg.as_str() {
            "--tiny" => tiny = true,
            "-h" | "--help" => {
                println!("usage: bench_resilience [--tiny]");
                return;
            }
            other => {
                eprintln!(
                    "bench_resilience: unknown argument {other:?}; usage: bench_resilience [--tiny]"
                );
                std::process::exit(2);
            }
        }
    }
    if let Err(e) = run(tiny).await {
        eprintln!("bench_resilience: {e}");
        std::process::exit(1);
    }
}
