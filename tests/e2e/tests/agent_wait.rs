//! An apply through a region agent waits until its objects are current (ADR 0021) and reports
//! the same statuses a direct apply does: a real control-plane process, a real agent process
//! and the kube-fixture with its controllers (kube-controller-manager, kube-scheduler, kwok
//! playing the kubelets). The run reaches the region only through `AgentTopology`; the agent
//! waits in the region, forwards its waiting lines as progress and returns each object's status.
//!
//! Run: `cargo test -p harmony_e2e --test agent_wait` (needs the kube-apiserver fixture:
//! `HARMONY_KUBE_FIXTURE=$(bash tests/kube-fixture/build.sh | tail -n 1)`).

use std::sync::{Arc, Mutex};
use std::time::Duration;

use harmony::domain::capability::{ApplyFailure, ApplyOptions, K8sClient, Readiness};
use harmony::domain::{ObjectChange, RunContext, Topology, WaitPolicy, capture_progress};
use harmony_e2e::ApiServer;
use harmony_e2e::multi_region::{Agent, ControlPlaneOptions};
use harmony_e2e::workloads::{
    claim, config_map, deployment, namespace, not_current, objects, status_of, template,
};
use harmony_e2e::world::{World, WorldOptions};
use serde_json::Value;

const REGION: &str = "eu-central";

/// The fixture with its controllers, a control plane with `options`, and region `REGION` with
/// a healthy agent operating the fixture.
async fn start(options: ControlPlaneOptions) -> (World, Agent) {
    let server = ApiServer::start_with_controllers().unwrap_or_else(|e| panic!("fixture: {e}"));
    let w = World::start(
        harmony_e2e::bins!(),
        WorldOptions {
            server: Some(server),
            control_plane: options,
            ..Default::default()
        },
    );
    let agent = w.region_with_agent("agent", REGION, "z1").await;
    (w, agent)
}

fn waiting(timeout: Duration) -> RunContext {
    RunContext {
        wait: WaitPolicy::within(timeout),
        ..RunContext::default()
    }
}

/// What an apply returned, and the progress lines the run saw while it ran.
type Applied = (Result<Vec<ObjectChange>, ApplyFailure>, Vec<String>);

/// Applies `manifests` to `REGION` through its agent with `ctx`'s wait.
async fn through_agent(w: &World, ctx: &RunContext, manifests: Vec<Value>) -> Applied {
    let topology = w.topology(REGION, ctx);
    topology
        .ensure_ready()
        .await
        .unwrap_or_else(|e| panic!("{e}"));
    let lines = Arc::new(Mutex::new(Vec::new()));
    let seen = lines.clone();
    let sink = Arc::new(move |line: String| seen.lock().unwrap().push(line));
    let result = capture_progress(
        sink,
        topology.apply(&objects(manifests), &ApplyOptions::default()),
    )
    .await;
    let lines = lines.lock().unwrap().clone();
    (result, lines)
}

/// Applies `manifests` to the fixture directly (no agent) with `ctx`'s wait.
async fn directly(
    server: &ApiServer,
    ctx: &RunContext,
    manifests: Vec<Value>,
) -> Result<Vec<ObjectChange>, ApplyFailure> {
    let topology = server.topology("direct", ctx);
    topology
        .ensure_ready()
        .await
        .unwrap_or_else(|e| panic!("{e}"));
    topology
        .apply(&objects(manifests), &ApplyOptions::default())
        .await
}

fn jsonpath(server: &ApiServer, kind: &str, ns: &str, name: &str, path: &str) -> String {
    let out = server.kubectl(&[
        "get",
        kind,
        name,
        "-n",
        ns,
        "-o",
        &format!("jsonpath={path}"),
    ]);
    String::from_utf8_lossy(&out.stdout).into_owned()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_rollout_through_the_agent_ends_current_and_no_wait_reports_no_status() {
    let (w, agent) = start(ControlPlaneOptions::default()).await;
    let ns = "shop";
    let (result, lines) = through_agent(
        &w,
        &waiting(Duration::from_secs(240)),
        vec![
            namespace(ns),
            config_map(ns, "settings"),
            deployment(ns, "web", 2, template("web", None, None)),
        ],
    )
    .await;
    let changes = result.unwrap_or_else(|f| {
        panic!(
            "{f}\nagent log:\n{}\nfixture:\n{}",
            agent.log(),
            w.server.log_tail()
        )
    });
    let object = "apps/v1 Deployment shop/web";
    let web = status_of(&changes, object);
    assert_eq!(
        (web.state, web.reason.as_str()),
        (Readiness::Current, "Available"),
        "{web}"
    );
    let waited = changes
        .iter()
        .find(|c| c.object == object)
        .and_then(|c| c.status.as_ref())
        .expect("the Deployment's status");
    let timed = waited.time_to_current_s.expect("time to current");
    assert!(timed > 0.0, "a rollout takes time: {timed}");
    for plain in ["v1 Namespace shop", "v1 ConfigMap shop/settings"] {
        assert_eq!(
            status_of(&changes, plain).state,
            Readiness::Current,
            "{plain}"
        );
    }
    assert!(
        changes.iter().all(|c| c
            .location
            .as_deref()
            .is_some_and(|l| l.starts_with(&format!("region {REGION}")))),
        "every change happened in the region: {changes:#?}"
    );
    // Available for real: the controller's own figures right after the apply returned.
    assert_eq!(
        jsonpath(
            &w.server,
            "deployment",
            ns,
            "web",
            "{.status.availableReplicas}"
        ),
        "2"
    );
    // The agent's waiting lines reached the run as progress, prefixed with the region.
    let waiting_lines: Vec<&String> = lines
        .iter()
        .filter(|l| l.starts_with(&format!("region {REGION}: waiting: ")))
        .collect();
    assert!(
        waiting_lines.iter().any(|l| l.contains("current")),
        "no waiting line from the agent among {lines:#?}"
    );
    assert!(
        waiting_lines
            .iter()
            .any(|l| l.contains("1 of 3 current") || l.contains("2 of 3 current")),
        "a line while the rollout was under way: {lines:#?}"
    );
    assert!(
        waiting_lines
            .last()
            .is_some_and(|l| l.ends_with(": waiting: 3 object(s) current")),
        "the last waiting line says everything is current: {lines:#?}"
    );
    // The stage is said once (`region R: waiting: 1 of 3 current`), and the apply's own lines
    // are stage `applying`.
    assert!(
        !lines.iter().any(|l| l.contains("waiting: waiting:")),
        "{lines:#?}"
    );
    assert!(
        lines
            .iter()
            .any(|l| l.starts_with(&format!("region {REGION}: applying: "))
                && l.contains("namespace(s) and CRD(s) ready")),
        "{lines:#?}"
    );

    // --no-wait: the agent answers once the server accepted the objects, with no statuses:
    // even a claim that never binds (no provisioner) is fine.
    let (result, lines) = through_agent(
        &w,
        &RunContext {
            wait: WaitPolicy::disabled(),
            ..RunContext::default()
        },
        vec![
            claim(ns, "never-bound"),
            deployment(ns, "later", 1, template("later", None, None)),
        ],
    )
    .await;
    let changes = result.unwrap_or_else(|f| panic!("{f}"));
    assert_eq!(changes.len(), 2, "{changes:#?}");
    assert!(changes.iter().all(|c| c.status.is_none()), "{changes:#?}");
    assert!(
        !lines.iter().any(|l| l.contains(": waiting: ")),
        "nothing was waited for: {lines:#?}"
    );
    assert_eq!(
        jsonpath(
            &w.server,
            "persistentvolumeclaim",
            ns,
            "never-bound",
            "{.status.phase}"
        ),
        "Pending"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn failures_through_the_agent_carry_the_statuses_a_direct_apply_gives() {
    // The control plane waits at most 2 s per call, less than these applies take: the caller
    // joins its request again until the agent answers (`--max-request-wait-s` is 300 s by
    // default, below a long `--wait-timeout`).
    let (w, agent) = start(ControlPlaneOptions {
        extra_args: vec!["--max-request-wait-s".into(), "2".into()],
        ..ControlPlaneOptions::default()
    })
    .await;
    // A crash-looping Deployment with a timeout far beyond the test's patience: the failure
    // must come from the state itself (timed_out None), through the agent and directly alike.
    let patient = waiting(Duration::from_secs(600));
    let crash = |ns: &str| {
        vec![
            namespace(ns),
            deployment(ns, "crash", 1, template("crash", Some("crashloop"), None)),
        ]
    };
    let ((via_agent, _), direct) = futures::join!(
        through_agent(&w, &patient, crash("agent-crash")),
        directly(&w.server, &patient, crash("direct-crash")),
    );
    let failure = via_agent.expect_err("a crash loop never ends current");
    let message = failure.to_string();
    let (named, timed_out, applied) = not_current(failure);
    assert_eq!(
        timed_out,
        None,
        "failed fast, not at the timeout\nagent log:\n{}",
        agent.log()
    );
    let object = "apps/v1 Deployment agent-crash/crash";
    assert_eq!(named.len(), 1, "only the Deployment: {named:?}");
    let (name, status) = &named[0];
    assert_eq!(name, object);
    assert_eq!(
        (status.state, status.reason.as_str()),
        (Readiness::Failed, "CrashLoopBackOff"),
        "{status}"
    );
    assert!(
        status.message.to_lowercase().contains("back-off"),
        "the controller's words in {status}"
    );
    assert!(message.contains(object), "{message}");
    // The report carries the same status on the object's change, and the namespace current.
    assert_eq!(status_of(&applied, object), status);
    assert_eq!(
        status_of(&applied, "v1 Namespace agent-crash").state,
        Readiness::Current
    );

    let (direct_named, direct_timed_out, _) =
        not_current(direct.expect_err("a crash loop never ends current"));
    assert_eq!(direct_timed_out, None);
    let (direct_name, direct_status) = &direct_named[0];
    assert_eq!(direct_name, "apps/v1 Deployment direct-crash/crash");
    assert_eq!(
        (status.state, status.reason.as_str()),
        (direct_status.state, direct_status.reason.as_str()),
        "through the agent: {status}; directly: {direct_status}"
    );

    // A claim no provisioner binds: the wait runs out of time, naming it.
    let ns = "claims";
    let (result, lines) = through_agent(
        &w,
        &waiting(Duration::from_secs(5)),
        vec![namespace(ns), claim(ns, "data")],
    )
    .await;
    let failure = result.expect_err("no provisioner: the claim stays Pending");
    let message = failure.to_string();
    let (named, timed_out, _) = not_current(failure);
    assert_eq!(timed_out, Some(Duration::from_secs(5)));
    assert_eq!(named.len(), 1, "only the claim is not current: {named:?}");
    assert_eq!(named[0].0, "v1 PersistentVolumeClaim claims/data");
    assert_eq!(named[0].1.state, Readiness::InProgress, "{}", named[0].1);
    assert!(
        message.contains("v1 PersistentVolumeClaim claims/data") && message.contains("Pending"),
        "{message}"
    );
    assert!(
        lines
            .iter()
            .any(|l| l.starts_with(&format!("region {REGION}: still waiting for its answer"))),
        "the 5 s wait outlasted the control plane's 2 s: joined again {lines:#?}"
    );
}
