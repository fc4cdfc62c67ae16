//! Benchmark: Harmony's server-side apply against `kubectl apply --server-side`.
//!
//! Each tool gets its own fresh kube-apiserver fixture, so both start from an empty cluster
//! and neither sees the other's field manager. See docs/benchmarks.md for what the figures mean.
//!
//! ```text
//! cargo run --release -p harmony_e2e --bin bench_apply -- [--objects N] [--concurrency N]
//! ```

use serde_json::{Value, json};
use std::path::Path;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use harmony::domain::capability::{ApplyOptions, K8sClient, K8sObject};
use harmony::domain::{ChangeAction, ObjectChange, RunContext, Topology};
use harmony_e2e::ApiServer;

type BenchResult<T> = Result<T, String>;

/// Objects are spread over this many namespaces, declared alongside them.
const NAMESPACES: usize = 4;
/// Every generated object carries it, so the end-of-run count only sees benchmark objects.
const LABEL: &str = "harmony.bench/run=apply";
/// A freshly ready apiserver still finishes some bootstrap writes; the first timed step
/// should not pay for them.
const SETTLE: Duration = Duration::from_secs(3);

struct Options {
    objects: usize,
    /// `None` keeps K8sTopology's own default, which is what users get.
    concurrency: Option<usize>,
}

fn parse_args() -> BenchResult<Options> {
    let mut options = Options {
        objects: 1000,
        concurrency: None,
    };
    let mut args = std::env::args().skip(1);
    while let Some(arg) = args.next() {
        let mut number = |flag: &str| -> BenchResult<usize> {
            let value = args.next().ok_or(format!("{flag} needs a number"))?;
            value
                .parse::<usize>()
                .ok()
                .filter(|n| *n > 0)
                .ok_or(format!("{flag}: expected a positive number, got {value:?}"))
        };
        match arg.as_str() {
            "--objects" => options.objects = number("--objects")?,
            "--concurrency" => options.concurrency = Some(number("--concurrency")?),
            "-h" | "--help" => {
                println!("usage: bench_apply [--objects N (default 1000)] [--concurrency N]");
                std::process::exit(0);
            }
            other => return Err(format!("unknown argument {other:?} (try --help)")),
        }
    }
    Ok(options)
}

fn labels(app: &str) -> Value {
    json!({"harmony.bench/run": "apply", "app": app})
}

fn deployment(ns: &str, app: &str, i: usize) -> Value {
    json!({"apiVersion": "apps/v1", "kind": "Deployment",
        "metadata": {"name": app, "namespace": ns, "labels": labels(app)},
        "spec": {"replicas": 2, "selector": {"matchLabels": {"app": app}},
            "template": {"metadata": {"labels": {"app": app}},
                "spec": {"containers": [{"name": "web", "image": "nginx:1.27",
                    "ports": [{"containerPort": 8080}],
                    "env": [{"name": "INDEX", "value": i.to_string()}],
                    "resources": {"requests": {"cpu": "10m", "memory": "32Mi"}}}]}}}})
}

fn service(ns: &str, app: &str) -> Value {
    json!({"apiVersion": "v1", "kind": "Service",
        "metadata": {"name": app, "namespace": ns, "labels": labels(app)},
        "spec": {"selector": {"app": app},
            "ports": [{"name": "http", "port": 80, "targetPort": 8080}]}})
}

fn config_map(ns: &str, app: &str, i: usize) -> Value {
    let name = format!("cm-{i:05}");
    let settings = format!("log.level=info\nworkers=4\nname={name}\n");
    json!({"apiVersion": "v1", "kind": "ConfigMap",
        "metadata": {"name": name, "namespace": ns, "labels": labels(app)},
        "data": {"index": i.to_string(), "settings.properties": settings, "payload": "x".repeat(256)}})
}

/// Namespaces first, then `n` objects: per ten, eight ConfigMaps, one Deployment, one Service.
fn generate(n: usize) -> BenchResult<Vec<K8sObject>> {
    let mut values = Vec::with_capacity(n + NAMESPACES);
    for ns in 0..NAMESPACES {
        values.push(json!({"apiVersion": "v1", "kind": "Namespace",
            "metadata": {"name": format!("bench-{ns}"), "labels": labels("bench")}}));
    }
    for i in 0..n {
        let ns = format!("bench-{}", i % NAMESPACES);
        let app = format!("app-{i:05}");
        values.push(match i % 10 {
            0 => deployment(&ns, &app, i),
            1 => service(&ns, &app),
            _ => config_map(&ns, &app, i),
        });
    }
    values
        .into_iter()
        .map(|v| K8sObject::new(v).map_err(|e| format!("generated object: {e}")))
        .collect()
}

/// One file per object. JSON is valid YAML, which spares a YAML dependency; the zero-padded
/// index keeps namespaces first, since kubectl applies a directory in lexical order.
fn write_manifests(dir: &Path, objects: &[K8sObject]) -> BenchResult<()> {
    for (i, object) in objects.iter().enumerate() {
        let r = object.reference();
        let file = dir.join(format!("{i:05}-{}-{}.yaml", r.kind.to_lowercase(), r.name));
        let text = serde_json::to_string_pretty(object.value())
            .map_err(|e| format!("serialising {r}: {e}"))?;
        std::fs::write(&file, text).map_err(|e| format!("writing {}: {e}", file.display()))?;
    }
    Ok(())
}

struct Counts {
    create: usize,
    update: usize,
    unchanged: usize,
    other: usize,
}

fn count(changes: &[ObjectChange]) -> Counts {
    let mut c = Counts {
        create: 0,
        update: 0,
        unchanged: 0,
        other: 0,
    };
    for change in changes {
        match change.action {
            ChangeAction::Create => c.create += 1,
            ChangeAction::Update => c.update += 1,
            ChangeAction::Unchanged => c.unchanged += 1,
            ChangeAction::Delete => c.other += 1,
        }
    }
    c
}

/// Timed from topology creation, so connecting counts as it does in a kubectl process.
async fn harmony_apply(
    server: &ApiServer,
    objects: &[K8sObject],
    concurrency: Option<usize>,
    plan: bool,
) -> BenchResult<(Duration, Counts)> {
    let started = Instant::now();
    let ctx = RunContext {
        plan,
        ..RunContext::default()
    };
    let mut k8s = server.topology("bench", &ctx);
    if let Some(n) = concurrency {
        k8s = k8s.with_concurrency(n);
    }
    k8s.ensure_ready()
        .await
        .map_err(|e| format!("harmony ensure_ready: {e}\n{}", server.log_tail()))?;
    let changes = k8s
        .apply(objects, &ApplyOptions::default())
        .await
        .map_err(|e| {
            format!(
                "harmony apply failed after {} object(s): {e}",
                e.applied.len()
            )
        })?;
    Ok((started.elapsed(), count(&changes)))
}

struct KubectlRun {
    elapsed: Duration,
    applied_lines: usize,
    throttled: usize,
}

/// The fixture's kubectl, built from the same Kubernetes modules as the apiserver.
/// Unlike `ApiServer::kubectl`, a missing binary is an error rather than a panic.
fn kubectl(server: &ApiServer) -> BenchResult<Command> {
    let mut cmd = Command::new(ApiServer::binary()?);
    cmd.arg("kubectl")
        .env("KUBECONFIG", server.kubeconfig())
        .stdin(Stdio::null());
    Ok(cmd)
}

/// Its discovery cache lives in `cache_dir` so the re-apply sees a warm cache, as on a
/// workstation, without touching ~/.kube.
fn kubectl_apply(server: &ApiServer, dir: &Path, cache_dir: &Path) -> BenchResult<KubectlRun> {
    let mut cmd = kubectl(server)?;
    cmd.arg("apply")
        .arg("--server-side")
        .arg("-f")
        .arg(dir)
        .arg("--cache-dir")
        .arg(cache_dir);
    let started = Instant::now();
    let out = cmd
        .output()
        .map_err(|e| format!("cannot run kubectl: {e}"))?;
    let elapsed = started.elapsed();
    let stderr = String::from_utf8_lossy(&out.stderr);
    if !out.status.success() {
        return Err(format!(
            "kubectl apply exited with {}:\n{stderr}",
            out.status
        ));
    }
    let stdout = String::from_utf8_lossy(&out.stdout);
    Ok(KubectlRun {
        elapsed,
        applied_lines: stdout
            .lines()
            .filter(|l| l.ends_with("serverside-applied"))
            .count(),
        throttled: stderr.matches("client-side throttling").count(),
    })
}

/// How many benchmark objects the server holds, outside any timing.
fn stored_objects(server: &ApiServer) -> BenchResult<usize> {
    let out = kubectl(server)?
        .args([
            "get",
            "namespaces,configmaps,deployments,services",
            "--all-namespaces",
            "-l",
            LABEL,
            "-o",
            "name",
        ])
        .output()
        .map_err(|e| format!("cannot run kubectl: {e}"))?;
    if !out.status.success() {
        return Err(format!(
            "kubectl get: {}",
            String::from_utf8_lossy(&out.stderr)
        ));
    }
    Ok(String::from_utf8_lossy(&out.stdout).lines().count())
}

fn check(ok: bool, what: String) -> BenchResult<()> {
    if ok {
        eprintln!("  ok: {what}");
        Ok(())
    } else {
        Err(format!("check failed: {what}"))
    }
}

fn per_second(total: usize, d: Duration) -> f64 {
    total as f64 / d.as_secs_f64()
}

async fn run(options: Options) -> BenchResult<()> {
    let objects = generate(options.objects)?;
    let total = objects.len();
    let concurrency = options
        .concurrency
        .map_or("default (16)".to_string(), |n| n.to_string());
    eprintln!(
        "bench_apply: {total} objects ({} + {NAMESPACES} namespaces), harmony concurrency {concurrency}",
        options.objects
    );

    let work = tempfile::Builder::new()
        .prefix("harmony-bench-")
        .tempdir()
        .map_err(|e| format!("temp dir: {e}"))?;
    let manifests = work.path().join("manifests");
    let kube_cache = work.path().join("kube-cache");
    std::fs::create_dir(&manifests).map_err(|e| format!("{}: {e}", manifests.display()))?;
    write_manifests(&manifests, &objects)?;

    eprintln!("starting two fresh kube-apiserver fixtures ...");
    let harmony_server = ApiServer::start()?;
    let kubectl_server = ApiServer::start()?;
    tokio::time::sleep(SETTLE).await;

    eprintln!("harmony first apply ...");
    let (h_first, c) = harmony_apply(&harmony_server, &objects, options.concurrency, false).await?;
    check(
        c.create == total && c.update == 0 && c.unchanged == 0 && c.other == 0,
        format!(
            "harmony first apply: {} create, {} update, {} unchanged (want {total} create)",
            c.create, c.update, c.unchanged
        ),
    )?;

    eprintln!("kubectl first apply ...");
    let k_first = kubectl_apply(&kubectl_server, &manifests, &kube_cache)?;
    check(
        k_first.applied_lines == total,
        format!(
            "kubectl first apply: exit 0, {} serverside-applied (want {total})",
            k_first.applied_lines
        ),
    )?;

    eprintln!("harmony re-apply ...");
    let (h_again, c) = harmony_apply(&harmony_server, &objects, options.concurrency, false).await?;
    check(
        c.unchanged == total && c.create + c.update + c.other == 0,
        format!(
            "harmony re-apply: {} unchanged, {} create, {} update (want {total} unchanged)",
            c.unchanged, c.create, c.update
        ),
    )?;

    eprintln!("kubectl re-apply ...");
    let k_again = kubectl_apply(&kubectl_server, &manifests, &kube_cache)?;
    check(
        k_again.applied_lines == total,
        format!(
            "kubectl re-apply: exit 0, {} serverside-applied (want {total})",
            k_again.applied_lines
        ),
    )?;

    eprintln!("harmony plan ...");
    let (h_plan, c) = harmony_apply(&harmony_server, &objects, options.concurrency, true).await?;
    check(
        c.unchanged == total && c.create + c.update + c.other == 0,
        format!(
            "harmony plan: {} unchanged, {} create, {} update (want {total} unchanged)",
            c.unchanged, c.create, c.update
        ),
    )?;

    for (who, server) in [("harmony", &harmony_server), ("kubectl", &kubectl_server)] {
        let stored = stored_objects(server)?;
        check(
            stored == total,
            format!("{who}'s server holds {stored} benchmark objects (want {total})"),
        )?;
    }
    if k_first.throttled + k_again.throttled > 0 {
        eprintln!(
            "  note: kubectl reported client-side throttling {} time(s)",
            k_first.throttled + k_again.throttled
        );
    }

    let rows = [
        ("harmony first apply", h_first),
        ("kubectl first apply", k_first.elapsed),
        ("harmony re-apply (unchanged)", h_again),
        ("kubectl re-apply (unchanged)", k_again.elapsed),
        ("harmony plan (unchanged)", h_plan),
    ];
    println!();
    println!("{total} objects, harmony concurrency {concurrency}");
    println!("{:<30} {:>10} {:>12}", "step", "seconds", "objects/s");
    for (step, d) in rows {
        println!(
            "{step:<30} {:>10.2} {:>12.0}",
            d.as_secs_f64(),
            per_second(total, d)
        );
    }
    let ratio = |h: Duration, k: Duration| h.as_secs_f64() / k.as_secs_f64();
    println!();
    println!("harmony/kubectl (< 1 means harmony is faster)");
    println!(
        "{:<30} {:>10.2}",
        "first apply",
        ratio(h_first, k_first.elapsed)
    );
    println!(
        "{:<30} {:>10.2}",
        "re-apply",
        ratio(h_again, k_again.elapsed)
    );
    Ok(())
}

#[tokio::main]
async fn main() {
    let result = match parse_args() {
        Ok(options) => run(options).await,
        Err(e) => Err(e),
    };
    if let Err(e) = result {
        eprintln!("bench_apply: {e}");
        std::process::exit(1);
    }
}
