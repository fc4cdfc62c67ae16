//! Runs the benchmarks and prints one table of their figures against the goals of issue 18
//! (and issue 26's wait).
//!
//! ```text
//! cargo run --release -p harmony_e2e --bin bench -- all [--tiny] [--runs N] [--objects 1000,10000] [--deployments 1000] [--hosts 10000] [--agents 10000]
//! cargo run --release -p harmony_e2e --bin bench -- apply|wait|render|agents [same flags]
//! cargo run --release -p harmony_e2e --bin bench -- hostile [--cases 100000]
//! ```
//!
//! `hostile` is not a performance figure and is not part of `all`: it runs the control plane's
//! hostile-body property test (`harmony_control_plane::http::hostile_tests`, 48 cases per
//! endpoint in CI) at 100,000 cases per endpoint, through `cargo test --release`, and fails
//! when any endpoint answered a 5xx.
//!
//! Each benchmark (`bench_apply`, `bench_wait`, `bench_render`, `bench_agents`) runs as a child process from
//! the folder this binary sits in, so `cargo build --release -p harmony_e2e --bins` builds them
//! all. Their human output passes through; each ends with one `BENCH {json}` line on stdout
//! (`{"bench": ..., "figures": [{"figure", "peer", "goal", "measured", "met"}]}`), which this
//! program collects into the table. `--tiny` runs each at a size of tens of objects, hosts and
//! agents to prove it still works (CI: tests/benchmarks_tiny.rs); its "met?" column then says
//! nothing, since goals hold for the full sizes only.

use std::io::{BufRead, BufReader};
use std::path::PathBuf;
use std::process::{Command, Stdio};
use std::time::Instant;

use serde_json::Value;

type BenchResult<T> = Result<T, String>;

/// The benchmarks `all` runs, in order: name and binary. `agents` on the command line runs
/// both agent runs: 10,000 agents on one process (memory per connection, the restart storm)
/// and the most one process can hold (100,000 asked).
const BENCHES: [(&str, &str); 7] = [
    ("apply", "bench_apply"),
    ("wait", "bench_wait"),
    ("render", "bench_render"),
    ("agents", "bench_agents"),
    ("agents-ha", "bench_agents"),
    ("agents-scale", "bench_agents"),
    ("resilience", "bench_resilience"),
];

struct Options {
    selected: Vec<&'static str>,
    tiny: bool,
    runs: Option<String>,
    objects: Option<String>,
    deployments: Option<String>,
    hosts: Option<String>,
    agents: Option<String>,
    scale_agents: Option<String>,
}

const USAGE: &str = "usage: bench all|apply|wait|render|agents|resilience|hostile [--tiny] [--runs N] [--objects N[,N...]] [--deployments N] [--hosts N] [--agents N] [--scale-agents N]";

fn parse_args() -> BenchResult<Options> {
    let mut args = std::env::args().skip(1);
    let which = args.next().ok_or(format!("which benchmark? {USAGE}"))?;
    let selected: Vec<&'static str> = match which.as_str() {
        "all" => BENCHES.iter().map(|(name, _)| *name).collect(),
        "-h" | "--help" => {
            println!("{USAGE}");
            std::process::exit(0);
        }
        other => {
            let picked: Vec<&'static str> = BENCHES
                .iter()
                .map(|(name, _)| *name)
                .filter(|name| {
                    *name == other || name.strip_prefix(other).is_some_and(|r| r.starts_with('-'))
                })
                .collect();
            if picked.is_empty() {
                return Err(format!("unknown benchmark {other:?}; {USAGE}"));
            }
            picked
        }
    };
    let mut o = Options {
        selected,
        tiny: false,
        runs: None,
        objects: None,
        deployments: None,
        hosts: None,
        agents: None,
        scale_agents: None,
    };
    while let Some(flag) = args.next() {
        let mut value = || args.next().ok_or(format!("{flag} needs a value; {USAGE}"));
        match flag.as_str() {
            "--tiny" => o.tiny = true,
            "--runs" => o.runs = Some(value()?),
            "--objects" => o.objects = Some(value()?),
            "--deployments" => o.deployments = Some(value()?),
            "--hosts" => o.hosts = Some(value()?),
            "--agents" => o.agents = Some(value()?),
            "--scale-agents" => o.scale_agents = Some(value()?),
            other => return Err(format!("unknown argument {other:?}; {USAGE}")),
        }
    }
    Ok(o)
}

/// The child's arguments: the full sizes of issue 18, or tens of each with `--tiny`; the
/// flags given override either.
fn child_args(name: &str, o: &Options) -> Vec<String> {
    let pick = |given: &Option<String>, full: &str, tiny: &str| {
        given
            .clone()
            .unwrap_or_else(|| if o.tiny { tiny } else { full }.to_string())
    };
    let runs = pick(&o.runs, "3", "1");
    let args: Vec<String> = match name {
        "apply" => vec![
            "--objects".into(),
            pick(&o.objects, "1000,10000", "20"),
            "--runs".into(),
            runs,
        ],
        // 1,000 Deployments (1 replica each) on fresh fixtures with controllers (issue 26).
        "wait" => vec![
            "--objects".into(),
            pick(&o.deployments, "1000", "20"),
            "--runs".into(),
            runs,
        ],
        "render" => vec![
            "--hosts".into(),
            pick(&o.hosts, "10000", "20"),
            "--runs".into(),
            runs,
        ],
        // One process: memory per connection and the restart storm at 10,000 agents.
        "agents" => {
            let mut a = vec![
                "--replicas".into(),
                "1".into(),
                "--agents".into(),
                pick(&o.agents, "10000", "24"),
                "--figures".into(),
                "memory,restart".into(),
            ];
            if o.tiny {
                a.extend(
                    ["--requests", "12", "--heartbeat-s", "1", "--window-s", "1"].map(String::from),
                );
            }
            a
        }
        // 3 replicas on PostgreSQL behind haproxy: 1,000 concurrent requests to replicas not
        // holding the agents, one replica killed, then every replica killed at once.
        "agents-ha" => {
            let (agents, requests) = if o.tiny {
                ("24", "12")
            } else {
                ("1000", "1000")
            };
            let mut a: Vec<String> = [
                "--replicas",
                "3",
                "--agents",
                agents,
                "--requests",
                requests,
                "--restart",
                "0",
                "--figures",
                "requests,failover,outage",
            ]
            .map(String::from)
            .to_vec();
            a.extend(if o.tiny {
                ["--heartbeat-s", "1", "--window-s", "1"].map(String::from)
            } else {
                ["--heartbeat-s", "5", "--window-s", "5"].map(String::from)
            });
            a
        }
        // A black-holed flow, a crowd at the descriptor limit, a database restart (issue 32
        // part 4); tiny shrinks the crowd and the callers.
        "resilience" => {
            if o.tiny {
                vec!["--tiny".into()]
            } else {
                Vec::new()
            }
        }
        // The most agents one process holds (100,000 asked). Tiny: 3 replicas behind haproxy,
        // so CI keeps that path working too.
        _ => {
            if o.tiny {
                let agents = pick(&o.scale_agents, "", "24");
                [
                    "--replicas",
                    "3",
                    "--agents",
                    &agents,
                    "--requests",
                    "12",
                    "--heartbeat-s",
                    "1",
                    "--window-s",
                    "1",
                    "--figures",
                    "held",
                ]
                .map(String::from)
                .to_vec()
            } else {
                // 100,000 agents over 6 replicas on one PostgreSQL (each replica's share under
                // its open-file limit), simulated by several processes, then every replica
                // killed at once: the reconnect storm. Heartbeat 15 s: at 5 s, 100,000 agents'
                // heartbeats alone need more than this machine's 2 cores (docs/benchmarks.md,
                // "100,000 agents across replicas"); the dead-flow row keeps 5 s.
                let agents = pick(&o.scale_agents, "100000", "");
                [
                    "--replicas",
                    "6",
                    "--agents",
                    &agents,
                    "--heartbeat-s",
                    "15",
                    "--requests",
                    "200",
                    "--window-s",
                    "10",
                    "--restart",
                    "0",
                    "--figures",
                    "held,outage",
                ]
                .map(String::from)
                .to_vec()
            }
        }
    };
    args
}

fn binary(name: &str) -> BenchResult<PathBuf> {
    let exe = std::env::current_exe().map_err(|e| format!("cannot find this program: {e}"))?;
    let path = exe.parent().ok_or("this program has no folder")?.join(name);
    if path.is_file() {
        Ok(path)
    } else {
        Err(format!(
            "{} not found; build the benchmarks with `cargo build --release -p harmony_e2e --bins`",
            path.display()
        ))
    }
}

/// One table row.
struct Row {
    figure: String,
    peer: String,
    goal: String,
    measured: String,
    met: Option<bool>,
}

/// Runs one benchmark, passing its human output through; its figures, or why there are none.
fn run_child(name: &str, bin: &str, o: &Options) -> BenchResult<Vec<Row>> {
    let args = child_args(name, o);
    eprintln!("== {bin} {}", args.join(" "));
    // Inherited by everything the benchmark starts, so what it leaves behind can be found.
    let tag = format!("{name}-{}", std::process::id());
    let mut child = Command::new(binary(bin)?)
        .args(&args)
        .env(LEFTOVER_TAG, &tag)
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::inherit())
        .spawn()
        .map_err(|e| format!("cannot start {bin}: {e}"))?;
    let stdout = child.stdout.take().ok_or("no stdout")?;
    let mut summary = None;
    for line in BufReader::new(stdout).lines() {
        let line = line.map_err(|e| format!("reading {bin}'s output: {e}"))?;
        match line.strip_prefix("BENCH ") {
            Some(json) => summary = Some(json.to_string()),
            None => println!("{line}"),
        }
    }
    let status = child
        .wait()
        .map_err(|e| format!("waiting for {bin}: {e}"))?;
    // A benchmark that failed may not have stopped its replicas, haproxies or simulators: the
    // next one would measure a busy machine.
    let left = stop_leftovers(&tag);
    if left > 0 {
        eprintln!("stopped {left} process(es) {bin} left behind");
    }
    if !status.success() {
        return Err(format!("{bin} failed ({status}); its error is above"));
    }
    let summary = summary.ok_or(format!("{bin} printed no BENCH line"))?;
    let value: Value = serde_json::from_str(&summary)
        .map_err(|e| format!("{bin}'s BENCH line is not JSON: {e}"))?;
    let figures = value["figures"]
        .as_array()
        .ok_or(format!("{bin}'s BENCH line has no figures"))?;
    let text = |f: &Value, key: &str| f[key].as_str().unwrap_or("?").to_string();
    Ok(figures
        .iter()
        .map(|f| Row {
            figure: text(f, "figure"),
            peer: text(f, "peer"),
            goal: text(f, "goal"),
            measured: text(f, "measured"),
            met: f["met"].as_bool(),
        })
        .collect())
}

/// The environment variable that marks the processes of one benchmark run.
const LEFTOVER_TAG: &str = "HARMONY_BENCH_RUN";

/// Kills every process whose environment carries `LEFTOVER_TAG=tag` (those of one benchmark
/// run still alive after it ended); how many. Processes whose environment this user cannot
/// read are not seen.
fn stop_leftovers(tag: &str) -> usize {
    let marker = format!("{LEFTOVER_TAG}={tag}");
    let Ok(entries) = std::fs::read_dir("/proc") else {
        return 0;
    };
    let pids: Vec<String> = entries
        .flatten()
        .filter_map(|e| e.file_name().to_str().map(str::to_string))
        .filter(|pid| pid.bytes().all(|b| b.is_ascii_digit()))
        .filter(|pid| {
            std::fs::read(format!("/proc/{pid}/environ"))
                .is_ok_and(|env| env.split(|b| *b == 0).any(|v| v == marker.as_bytes()))
        })
        .collect();
    if !pids.is_empty() {
        let _ = Command::new("kill")
            .arg("-KILL")
            .args(&pids)
            .stderr(Stdio::null())
            .status();
    }
    pids.len()
}

/// `bench hostile [--cases N]`: the property test at N cases per endpoint (default 100,000).
fn hostile(args: &[String]) -> ! {
    let cases = match args {
        [] => "100000".to_string(),
        [flag, n] if flag == "--cases" && n.parse::<u32>().is_ok_and(|n| n > 0) => n.clone(),
        _ => {
            eprintln!("bench: usage: bench hostile [--cases N] (N a positive number)");
            std::process::exit(2);
        }
    };
    let started = Instant::now();
    let status = Command::new(std::env::var("CARGO").unwrap_or_else(|_| "cargo".into()))
        .args([
            "test",
            "--release",
            "--locked",
            "-p",
            "harmony_control_plane",
            "--lib",
            "http::hostile_tests",
        ])
        .env("HARMONY_HOSTILE_CASES", &cases)
        .status();
    let ok = status.as_ref().is_ok_and(|s| s.success());
    println!();
    println!(
        "## Hostile bodies: {cases} cases per endpoint, {} ({:.0} s)",
        if ok { "no 5xx" } else { "FAILED" },
        started.elapsed().as_secs_f64()
    );
    if let Err(e) = status {
        eprintln!("bench: cannot run cargo: {e}");
    }
    std::process::exit(if ok { 0 } else { 1 });
}

fn main() {
    let argv: Vec<String> = std::env::args().skip(1).collect();
    if argv.first().is_some_and(|a| a == "hostile") {
        hostile(&argv[1..]);
    }
    let o = match parse_args() {
        Ok(o) => o,
        Err(e) => {
            eprintln!("bench: {e}");
            std::process::exit(2);
        }
    };
    let started = Instant::now();
    let mut rows = Vec::new();
    let mut failed = 0;
    for (name, bin) in BENCHES.iter().filter(|(n, _)| o.selected.contains(n)) {
        match run_child(name, bin, &o) {
            Ok(r) => rows.extend(r),
            // The other benchmarks still run; the table says which one failed.
            Err(e) => {
                failed += 1;
                eprintln!("bench: {e}");
                rows.push(Row {
                    figure: bin.to_string(),
                    peer: "-".into(),
                    goal: "-".into(),
                    measured: format!("failed: {e}"),
                    met: None,
                });
            }
        }
    }
    println!();
    println!(
        "## Benchmarks{} ({:.0} s)",
        if o.tiny {
            ", tiny sizes (not results)"
        } else {
            ""
        },
        started.elapsed().as_secs_f64()
    );
    println!();
    println!("| figure | peer | goal | measured | met? |");
    println!("| --- | --- | --- | --- | --- |");
    for r in &rows {
        let met = match (o.tiny, r.met) {
            (true, _) => "— (tiny)",
            (false, Some(true)) => "met",
            (false, Some(false)) => "not met",
            (false, None) => "—",
        };
        println!(
            "| {} | {} | {} | {} | {met} |",
            r.figure, r.peer, r.goal, r.measured
        );
    }
    if failed > 0 {
        eprintln!("bench: {failed} benchmark(s) failed");
        std::process::exit(1);
    }
}
