//! Benchmark: how long Harmony's wait (an apply ends when its objects are current, ADR 0021)
//! takes for N Deployments in one namespace, against what a user scripts after `kubectl
//! apply`: `kubectl wait --for=condition=Available deployment --all`, and `kubectl rollout
//! status` once per Deployment, one after the other.
//!
//! Each run starts three fresh fixtures with their controllers (kube-controller-manager,
//! kube-scheduler, kwok fake nodes, enough for every pod), one after the other, so each tool
//! waits for the same cold rollout of the same objects:
//!
//! 1. Harmony: `apply_with_wait`; the wait is timed from Harmony's own "waiting for N
//!    object(s)" progress line (read through `capture_progress`: the apply was accepted) to
//!    the return. Then, everything current, a re-apply without waiting and one with: the
//!    steady-state wait, timed the same way (the difference of the two re-applies is printed
//!    beside it).
//! 2. `kubectl wait`: the same objects applied by the same Harmony code without waiting, then
//!    `kubectl wait` started at once; then `kubectl wait` again with everything Available.
//! 3. `kubectl rollout status`: the same apply, then one `kubectl rollout status` per
//!    Deployment, in order.
//!
//! Every step is checked (every Deployment reported current / condition met / rolled out)
//! before its time counts. With an audit log restricted to list and watch requests on
//! Deployments and Pods, it also counts the ones each tool sent. Figures are medians of
//! `--runs` runs; the ratio is Harmony's median over the peer's. See docs/benchmarks.md.
//!
//! ```text
//! cargo run --release -p harmony_e2e --bin bench_wait -- [--objects 1000] [--runs 3] [--replicas 1]
//! ```
//!
//! Besides the human output it prints one `BENCH {json}` line on stdout for `bench all`.

use serde_json::{Value, json};
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use harmony::domain::capability::{ApplyOptions, K8sObject, Readiness};
use harmony::domain::capture_progress;
use harmony::domain::{ChangeAction, ObjectChange, RunContext, Topology, WaitPolicy};
use harmony_e2e::bench::{BenchResult, check, kubectl, median, stats};
use harmony_e2e::{ApiServer, ApiServerOptions};

/// The namespace holding every Deployment.
const NAMESPACE: &str = "bench-wait";
/// Pods per kwok node the benchmark plans for (each node allows 110).
const PODS_PER_NODE: usize = 100;
/// A freshly ready fixture still finishes some bootstrap writes; the first step should not
/// pay for them.
const SETTLE: Duration = Duration::from_secs(3);
/// Harmony's wait within 10% of the peer's for the same objects: waiting must never be the
/// slow part of an apply compared with what a user would script after `kubectl apply`.
const GOAL: f64 = 1.1;
/// Harmony's progress line that starts the wait (harmony/src/infra/kube/apply.rs).
const WAIT_STARTS: &str = "waiting for ";

/// Harmony's wait against `kubectl wait` and `kubectl rollout status` on fresh fixtures with
/// controllers.
#[derive(clap::Parser)]
struct Options {
    /// Deployments to wait for, in one namespace; a list (`100,1000`) runs each size in turn.
    #[arg(
        long = "objects",
        value_delimiter = ',',
        default_value = "1000",
        value_parser = harmony_e2e::positive_count
    )]
    sizes: Vec<usize>,
    /// Runs per size; the median is reported.
    #[arg(long, default_value_t = 3, value_parser = harmony_e2e::positive_count)]
    runs: usize,
    /// Replicas per Deployment: each pod is scheduled on a kwok node and run there.
    #[arg(long, default_value_t = 1)]
    replicas: usize,
    /// How long every tool may wait, in seconds (`--timeout` of kubectl, `WaitPolicy`).
    #[arg(long, default_value_t = 600, value_parser = harmony_e2e::positive_count)]
    timeout_s: usize,
}

fn deployment(name: &str, replicas: usize) -> BenchResult<K8sObject> {
    K8sObject::new(json!({"apiVersion": "apps/v1", "kind": "Deployment",
        "metadata": {"name": name, "namespace": NAMESPACE,
            "labels": {"harmony.bench/run": "wait", "app": name}},
        "spec": {"replicas": replicas, "selector": {"matchLabels": {"app": name}},
            "template": {"metadata": {"labels": {"app": name}},
                "spec": {"containers": [{"name": "web", "image": "nginx:1.27",
                    "resources": {"requests": {"cpu": "10m", "memory": "32Mi"}}}]}}}}))
    .map_err(|e| format!("generated Deployment: {e}"))
}

/// The audit policy: one event per list or watch request on Deployments or Pods (at
/// RequestReceived), nothing else, so the log costs the server next to nothing.
const AUDIT_POLICY: &str = r#"apiVersion: audit.k8s.io/v1
kind: Policy
omitStages: ["ResponseStarted", "ResponseComplete", "Panic"]
rules:
  - level: Metadata
    verbs: ["list", "watch"]
    resources:
      - group: "apps"
        resources: ["deployments"]
      - group: ""
        resources: ["pods"]
  - level: None
"#;

/// One fresh fixture with controllers and an audit log of list and watch requests.
struct Fixture {
    server: ApiServer,
    audit_log: PathBuf,
    _dir: tempfile::TempDir,
}

impl Fixture {
    async fn start(nodes: usize) -> BenchResult<Self> {
        let dir = tempfile::Builder::new()
            .prefix("harmony-bench-wait-")
            .tempdir()
            .map_err(|e| format!("temp dir: {e}"))?;
        let policy = dir.path().join("audit-policy.yaml");
        std::fs::write(&policy, AUDIT_POLICY).map_err(|e| format!("{}: {e}", policy.display()))?;
        let audit_log = dir.path().join("audit.log");
        let server = ApiServer::start_with_options(&ApiServerOptions {
            controllers: true,
            nodes: Some(nodes),
            extra_flags: vec![
                format!("--audit-policy-file={}", policy.display()),
                format!("--audit-log-path={}", audit_log.display()),
            ],
        })?;
        tokio::time::sleep(SETTLE).await;
        Ok(Self {
            server,
            audit_log,
            _dir: dir,
        })
    }

    /// Where the audit log ends now, to count the requests of the step that follows.
    fn mark(&self) -> u64 {
        std::fs::metadata(&self.audit_log).map_or(0, |m| m.len())
    }

    /// List and watch requests logged since `mark` from clients other than the fixture's own
    /// components (controller-manager, scheduler, kwok, the apiserver itself): the tool's.
    fn requests_since(&self, mark: u64) -> BenchResult<Requests> {
        let text = std::fs::read(&self.audit_log)
            .map_err(|e| format!("{}: {e}", self.audit_log.display()))?;
        let tail = text.get(mark as usize..).unwrap_or_default();
        let mut r = Requests::default();
        for line in String::from_utf8_lossy(tail).lines() {
            let Ok(event) = serde_json::from_str::<Value>(line) else {
                continue;
            };
            let agent = event["userAgent"].as_str().unwrap_or("");
            if [
                "kube-controller-manager",
                "kube-scheduler",
                "kwok",
                "kube-apiserver",
            ]
            .iter()
            .any(|c| agent.starts_with(c))
            {
                continue;
            }
            match event["verb"].as_str() {
                Some("list") => r.list += 1,
                Some("watch") => r.watch += 1,
                _ => {}
            }
            *r.agents.entry(agent.to_string()).or_default() += 1;
        }
        Ok(r)
    }
}

#[derive(Default)]
struct Requests {
    list: usize,
    watch: usize,
    /// Requests per user agent, to show which client sent them.
    agents: BTreeMap<String, usize>,
}

impl std::fmt::Display for Requests {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{} list + {} watch", self.list, self.watch)
    }
}

/// What a Harmony apply took: the whole call, and the wait within it (from the "waiting for"
/// progress line to the return; zero without waiting).
struct HarmonyApply {
    total: Duration,
    wait: Duration,
    changes: Vec<ObjectChange>,
}

/// Applies `objects` with `wait`, timing the apply and its wait.
async fn harmony_apply(
    server: &ApiServer,
    objects: &[K8sObject],
    wait: WaitPolicy,
) -> BenchResult<HarmonyApply> {
    let k8s = server.topology("bench", &RunContext::default());
    k8s.ensure_ready()
        .await
        .map_err(|e| format!("harmony ensure_ready: {e}\n{}", server.log_tail()))?;
    let wait_started: Arc<Mutex<Option<Instant>>> = Arc::default();
    let seen = wait_started.clone();
    let sink = Arc::new(move |line: String| {
        if line.starts_with(WAIT_STARTS) {
            *seen.lock().unwrap_or_else(|e| e.into_inner()) = Some(Instant::now());
        }
    });
    let started = Instant::now();
    let result = capture_progress(
        sink,
        k8s.apply_with_wait(objects, &ApplyOptions::default(), wait),
    )
    .await;
    let ended = Instant::now();
    let changes = result.map_err(|e| {
        format!(
            "harmony apply failed after {} object(s): {}",
            e.applied.len(),
            e.error
        )
    })?;
    let wait_started = *wait_started.lock().unwrap_or_else(|e| e.into_inner());
    let wait = match (wait.enabled, wait_started) {
        (false, _) => Duration::ZERO,
        (true, Some(at)) => ended - at,
        (true, None) => return Err(format!("harmony printed no {WAIT_STARTS:?} line")),
    };
    Ok(HarmonyApply {
        total: ended - started,
        wait,
        changes,
    })
}

/// `want` of each action and, with `current`, every object reported current.
fn check_changes(
    who: &str,
    changes: &[ObjectChange],
    want: ChangeAction,
    current: bool,
) -> BenchResult<()> {
    let n = changes.len();
    let as_wanted = changes.iter().filter(|c| c.action == want).count();
    let reported_current = changes
        .iter()
        .filter(|c| {
            c.status
                .as_ref()
                .is_some_and(|s| s.status.state == Readiness::Current)
        })
        .count();
    check(
        as_wanted == n && (!current || reported_current == n),
        format!(
            "{who}: {as_wanted} of {n} {want:?}{}",
            if current {
                format!(", {reported_current} of {n} current")
            } else {
                String::new()
            }
        ),
    )
}

/// Runs one kubectl command; its stdout, or an error with its output.
fn run_kubectl(server: &ApiServer, args: &[String]) -> BenchResult<String> {
    let out = kubectl(server)?
        .args(args)
        .output()
        .map_err(|e| format!("cannot run kubectl: {e}"))?;
    let stdout = String::from_utf8_lossy(&out.stdout).to_string();
    if out.status.success() {
        Ok(stdout)
    } else {
        Err(format!(
            "kubectl {} exited with {}:\n{}\n{}",
            args.join(" "),
            out.status,
            stdout.lines().take(20).collect::<Vec<_>>().join("\n"),
            String::from_utf8_lossy(&out.stderr)
        ))
    }
}

/// `kubectl wait --for=condition=Available deployment --all`, checked: one "condition met"
/// line per Deployment.
fn kubectl_wait(
    server: &ApiServer,
    n: usize,
    timeout_s: usize,
    cache: &Path,
) -> BenchResult<Duration> {
    let args: Vec<String> = [
        "wait",
        "--for=condition=Available",
        "deployment",
        "--all",
        "-n",
        NAMESPACE,
    ]
    .map(String::from)
    .into_iter()
    .chain([
        format!("--timeout={timeout_s}s"),
        format!("--cache-dir={}", cache.display()),
    ])
    .collect();
    let started = Instant::now();
    let out = run_kubectl(server, &args)?;
    let took = started.elapsed();
    let met = out.lines().filter(|l| l.ends_with("condition met")).count();
    check(
        met == n,
        format!("kubectl wait: exit 0, {met} \"condition met\" (want {n})"),
    )?;
    Ok(took)
}

/// One `kubectl rollout status deployment/NAME` per Deployment, in order, as a script would.
fn kubectl_rollout_status(
    server: &ApiServer,
    names: &[String],
    timeout_s: usize,
    cache: &Path,
) -> BenchResult<Duration> {
    let started = Instant::now();
    let mut rolled_out = 0;
    for name in names {
        let out = run_kubectl(
            server,
            &[
                "rollout".into(),
                "status".into(),
                format!("deployment/{name}"),
                "-n".into(),
                NAMESPACE.into(),
                format!("--timeout={timeout_s}s"),
                format!("--cache-dir={}", cache.display()),
            ],
        )?;
        if out.contains("successfully rolled out") {
            rolled_out += 1;
        }
    }
    let took = started.elapsed();
    check(
        rolled_out == names.len(),
        format!(
            "kubectl rollout status: {rolled_out} of {} exit 0, \"successfully rolled out\"",
            names.len()
        ),
    )?;
    Ok(took)
}

/// The figures of one run, in seconds, and the requests counted.
struct Run {
    /// Harmony's apply phase before its wait (context: the same apply precedes every peer).
    harmony_apply: f64,
    harmony_wait: f64,
    kubectl_wait: f64,
    rollout_status: f64,
    harmony_steady_wait: f64,
    /// Re-apply with wait minus re-apply without: the steady wait by the other method.
    harmony_steady_difference: f64,
    kubectl_steady_wait: f64,
    harmony_requests: Requests,
    harmony_steady_requests: Requests,
    kubectl_requests: Requests,
    kubectl_steady_requests: Requests,
    rollout_requests: Requests,
}

/// One figure of a [`Run`], in seconds.
type Figure = fn(&Run) -> f64;

/// One table row: figure, peer, Harmony's and the peer's seconds, and their requests.
type Row = (
    String,
    &'static str,
    Figure,
    Figure,
    fn(&Run) -> &Requests,
    fn(&Run) -> &Requests,
);

/// Creates the namespace with Harmony, neither timed nor waited for, so every timed apply
/// holds exactly the Deployments.
async fn prepare(server: &ApiServer, namespace: &K8sObject) -> BenchResult<()> {
    let ns = harmony_apply(
        server,
        std::slice::from_ref(namespace),
        WaitPolicy::disabled(),
    )
    .await?;
    check_changes("namespace", &ns.changes, ChangeAction::Create, false)
}

async fn one_run(
    objects: &[K8sObject],
    namespace: &K8sObject,
    nodes: usize,
    timeout_s: usize,
) -> BenchResult<Run> {
    let n = objects.len();
    let names: Vec<String> = objects.iter().map(|o| o.reference().name.clone()).collect();
    let timeout = Duration::from_secs(timeout_s as u64);
    let cache = tempfile::Builder::new()
        .prefix("harmony-bench-kube-cache-")
        .tempdir()
        .map_err(|e| format!("temp dir: {e}"))?;

    eprintln!("  harmony: fresh fixture ({nodes} node(s)), apply with wait ...");
    let f = Fixture::start(nodes).await?;
    prepare(&f.server, namespace).await?;
    let mark = f.mark();
    let first = harmony_apply(&f.server, objects, WaitPolicy::within(timeout)).await?;
    let harmony_requests = f.requests_since(mark)?;
    check_changes(
        "harmony apply with wait",
        &first.changes,
        ChangeAction::Create,
        true,
    )?;
    eprintln!("  harmony: re-apply without wait, then with wait ...");
    let again = harmony_apply(&f.server, objects, WaitPolicy::disabled()).await?;
    check_changes(
        "harmony re-apply without wait",
        &again.changes,
        ChangeAction::Unchanged,
        false,
    )?;
    let mark = f.mark();
    let steady = harmony_apply(&f.server, objects, WaitPolicy::within(timeout)).await?;
    let harmony_steady_requests = f.requests_since(mark)?;
    check_changes(
        "harmony re-apply with wait",
        &steady.changes,
        ChangeAction::Unchanged,
        true,
    )?;
    drop(f);

    eprintln!("  kubectl wait: fresh fixture, harmony apply without wait, kubectl wait ...");
    let f = Fixture::start(nodes).await?;
    prepare(&f.server, namespace).await?;
    let applied = harmony_apply(&f.server, objects, WaitPolicy::disabled()).await?;
    let mark = f.mark();
    let kubectl_cold = kubectl_wait(&f.server, n, timeout_s, cache.path())?;
    let kubectl_requests = f.requests_since(mark)?;
    check_changes(
        "harmony apply without wait",
        &applied.changes,
        ChangeAction::Create,
        false,
    )?;
    eprintln!("  kubectl wait again, everything Available ...");
    let mark = f.mark();
    let kubectl_steady = kubectl_wait(&f.server, n, timeout_s, cache.path())?;
    let kubectl_steady_requests = f.requests_since(mark)?;
    drop(f);

    eprintln!(
        "  kubectl rollout status: fresh fixture, harmony apply without wait, {n} rollout status ..."
    );
    let f = Fixture::start(nodes).await?;
    prepare(&f.server, namespace).await?;
    let applied = harmony_apply(&f.server, objects, WaitPolicy::disabled()).await?;
    let mark = f.mark();
    let rollout = kubectl_rollout_status(&f.server, &names, timeout_s, cache.path())?;
    let rollout_requests = f.requests_since(mark)?;
    check_changes(
        "harmony apply without wait",
        &applied.changes,
        ChangeAction::Create,
        false,
    )?;
    drop(f);

    Ok(Run {
        harmony_apply: (first.total - first.wait).as_secs_f64(),
        harmony_wait: first.wait.as_secs_f64(),
        kubectl_wait: kubectl_cold.as_secs_f64(),
        rollout_status: rollout.as_secs_f64(),
        harmony_steady_wait: steady.wait.as_secs_f64(),
        harmony_steady_difference: steady.total.as_secs_f64() - again.total.as_secs_f64(),
        kubectl_steady_wait: kubectl_steady.as_secs_f64(),
        harmony_requests,
        harmony_steady_requests,
        kubectl_requests,
        kubectl_steady_requests,
        rollout_requests,
    })
}

async fn run(options: Options) -> BenchResult<()> {
    let mut figures = Vec::new();
    let r = options.replicas;
    for &n in &options.sizes {
        let nodes = (n * r).div_ceil(PODS_PER_NODE).max(1);
        let namespace = K8sObject::new(json!({"apiVersion": "v1", "kind": "Namespace",
            "metadata": {"name": NAMESPACE, "labels": {"harmony.bench/run": "wait"}}}))
        .map_err(|e| format!("generated Namespace: {e}"))?;
        let objects = (0..n)
            .map(|i| deployment(&format!("app-{i:05}"), r))
            .collect::<BenchResult<Vec<_>>>()?;
        eprintln!(
            "bench_wait: {n} Deployment(s) × {r} replica(s) in {NAMESPACE}, {nodes} kwok node(s), {} run(s)",
            options.runs
        );
        let mut runs = Vec::new();
        for i in 1..=options.runs {
            eprintln!(" run {i} of {} ({n} Deployments)", options.runs);
            runs.push(one_run(&objects, &namespace, nodes, options.timeout_s).await?);
        }
        let secs = |f: Figure| -> Vec<f64> { runs.iter().map(f).collect() };
        let steps: [(&str, Figure); 7] = [
            ("harmony apply phase (before its wait)", |r| r.harmony_apply),
            ("harmony wait after first apply", |r| r.harmony_wait),
            ("kubectl wait after first apply", |r| r.kubectl_wait),
            ("kubectl rollout status × N after first apply", |r| {
                r.rollout_status
            }),
            ("harmony wait, all current (re-apply)", |r| {
                r.harmony_steady_wait
            }),
            ("  re-apply with wait − without", |r| {
                r.harmony_steady_difference
            }),
            ("kubectl wait, all Available", |r| r.kubectl_steady_wait),
        ];
        println!();
        println!(
            "{n} Deployments × {r} replica(s), {nodes} kwok node(s), median of {} run(s) (min / max)",
            options.runs
        );
        println!("{:<46} {:>10} {:>17}", "step", "seconds", "min / max");
        for (label, f) in steps {
            let (med, min, max) = stats(secs(f));
            println!(
                "{label:<46} {med:>10.2} {:>17}",
                format!("{min:.2} / {max:.2}")
            );
        }
        let last = runs.last().ok_or("no runs")?;
        println!(
            "list/watch requests on Deployments and Pods (last run): harmony {} (re-apply {}), kubectl wait {} (again {}), rollout status {}",
            last.harmony_requests,
            last.harmony_steady_requests,
            last.kubectl_requests,
            last.kubectl_steady_requests,
            last.rollout_requests
        );
        for (who, req) in [
            ("harmony", &last.harmony_requests),
            ("kubectl wait", &last.kubectl_requests),
        ] {
            let agents: Vec<String> = req
                .agents
                .iter()
                .map(|(a, c)| format!("{a}: {c}"))
                .collect();
            eprintln!("  user agents of {who}'s requests: {}", agents.join(", "));
        }

        let rows: [Row; 3] = [
            (
                format!("wait after first apply, {n} Deployments × {r} replica(s)"),
                "kubectl wait --for=condition=Available deployment --all",
                |r| r.harmony_wait,
                |r| r.kubectl_wait,
                |r| &r.harmony_requests,
                |r| &r.kubectl_requests,
            ),
            (
                format!("wait after first apply, {n} Deployments × {r} replica(s)"),
                "kubectl rollout status, one per Deployment, in turn",
                |r| r.harmony_wait,
                |r| r.rollout_status,
                |r| &r.harmony_requests,
                |r| &r.rollout_requests,
            ),
            (
                format!("confirm already current (re-apply), {n} Deployments"),
                "kubectl wait --for=condition=Available deployment --all",
                |r| r.harmony_steady_wait,
                |r| r.kubectl_steady_wait,
                |r| &r.harmony_steady_requests,
                |r| &r.kubectl_steady_requests,
            ),
        ];
        println!();
        println!(
            "harmony / peer, from the medians (per-run min / max); < 1 means harmony is faster"
        );
        for (figure, peer, h, k, h_req, k_req) in rows {
            let (hm, km) = (median(secs(h)), median(secs(k)));
            let ratio = hm / km;
            let (_, lo, hi) = stats(runs.iter().map(|run| h(run) / k(run)).collect());
            let met = ratio <= GOAL;
            let mut measured = format!(
                "{ratio:.2}× ({hm:.2} s / {km:.2} s; median of {} run(s), per-run {lo:.2}–{hi:.2}); list/watch requests {} / {}",
                options.runs,
                h_req(last),
                k_req(last)
            );
            if figure.starts_with("confirm") {
                measured.push_str(&format!(
                    "; re-apply with wait − without: {:.2} s",
                    median(secs(|r| r.harmony_steady_difference))
                ));
            }
            println!(
                "{figure:<52} vs {peer}: {measured}  goal ≤ {GOAL}×: {}",
                if met { "met" } else { "not met" }
            );
            figures.push(json!({
                "figure": figure,
                "peer": peer,
                "goal": format!("≤ {GOAL}×"),
                "measured": measured,
                "met": met,
            }));
        }
    }
    println!("BENCH {}", json!({"bench": "wait", "figures": figures}));
    Ok(())
}

#[tokio::main]
async fn main() {
    let options = <Options as clap::Parser>::parse();
    if let Err(e) = run(options).await {
        eprintln!("bench_wait: {e}");
        std::process::exit(1);
    }
}
