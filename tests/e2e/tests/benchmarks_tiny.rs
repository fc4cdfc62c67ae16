//! `bench all --tiny` still works: every benchmark runs at tens of objects, Deployments, hosts
//! and agents, checks its own output, and the table has every row. Never asserts a time
//! (issue 18).
//! Needs the kube-apiserver fixture (`HARMONY_KUBE_FIXTURE`), PostgreSQL 18 and haproxy, as the
//! suites the benchmarks borrow from do.

const BENCH: &str = env!("CARGO_BIN_EXE_bench");

#[test]
fn every_benchmark_runs_at_a_tiny_size_and_reports_every_figure() {
    let out = std::process::Command::new(BENCH)
        .args(["all", "--tiny"])
        .output()
        .unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success(),
        "{stdout}\n{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let table = stdout
        .split_once("| figure | peer | goal | measured | met? |")
        .map(|(_, t)| t)
        .unwrap_or_else(|| panic!("no table:\n{stdout}"));
    for row in [
        "| first apply, 20 objects | kubectl apply --server-side | ≤ 0.2×, or ≤ 1.1× the server-bound floor |",
        "| re-apply, nothing changed, 20 objects | kubectl apply --server-side | ≤ 0.1× |",
        "| plan, nothing changed, 20 objects | kubectl diff --server-side | ≤ 0.2× |",
        "| plan, 10% changed, 20 objects | kubectl diff --server-side | ≤ 0.2× |",
        "| wait after first apply, 20 Deployments × 1 replica(s) | kubectl wait --for=condition=Available deployment --all | ≤ 1.1× |",
        "| wait after first apply, 20 Deployments × 1 replica(s) | kubectl rollout status, one per Deployment, in turn | ≤ 1.1× |",
        "| confirm already current (re-apply), 20 Deployments | kubectl wait --for=condition=Available deployment --all | ≤ 1.1× |",
        "| render 20 bare-metal hosts (DHCP, per-MAC iPXE, haproxy) | - | ≤ 0.5 s |",
        "| memory per agent connection at 24 agents |",
        "| all agents healthy again after a control-plane restart (24 agents, one process) |",
        "| agents held, all replicas (3 replicas on PostgreSQL, 24 agents, heartbeat 1 s) |",
        "| all agents healthy again after killing cp-",
        "| 12 concurrent requests, 3 replica(s) on PostgreSQL, to a replica not holding the agent: p99, warm | - | ≤ 50 ms |",
        "| all agents healthy after every replica was killed at once (3 replicas, 24 agents) | - | ≤ 15 s after the control plane is back |",
        "| dead connection noticed by the agent when a load balancer black-holes an idle flow | Linux TCP keepalive defaults: 2 h 11 min | ≤ 2 heartbeats (10 s) |",
        "| honest agents while 300 idle + 60 slowloris + 40 silent upgrades hold a 256-fd control plane | - | every agent in on its first attempt |",
        "| callers during a PostgreSQL restart (3 replicas, 4 callers) | - | retryable answers only (503 + Retry-After) |",
    ] {
        assert!(table.contains(row), "{row:?} missing:\n{table}");
    }
    // Each figure once: no row printed by two runs.
    for once in [
        "| plan, 10% changed, 20 objects |",
        "| all agents healthy again after killing cp-",
    ] {
        assert_eq!(
            table.matches(once).count(),
            1,
            "{once:?} more than once:\n{table}"
        );
    }
    // Seventeen figures, each a row marked as a tiny run, and no benchmark failed.
    let rows: Vec<&str> = table
        .lines()
        .filter(|l| l.ends_with("| — (tiny) |"))
        .collect();
    assert_eq!(rows.len(), 17, "{table}");
    assert!(!table.contains("failed:"), "{table}");
}
