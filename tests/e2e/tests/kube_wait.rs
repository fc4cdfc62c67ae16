//! An apply waits until its objects are current (ADR 0021), against the kube-fixture with its
//! real controllers: kube-controller-manager and kube-scheduler from the Kubernetes modules,
//! kwok playing the kubelets (its `harmony.test/fail` stages make chosen pods fail as a kubelet
//! reports it). Each test starts its own fixture.

use std::time::Duration;

use harmony::domain::capability::{ApplyOptions, K8sClient, Readiness};
use harmony::domain::{RunContext, Topology, WaitPolicy};
use harmony::infra::kube::K8sTopology;
use harmony_e2e::ApiServer;
use harmony_e2e::workloads::{
    claim, config_map, deployment, job, namespace, not_current, objects, status_of, template,
};
use serde_json::json;

fn start() -> ApiServer {
    ApiServer::start_with_controllers().unwrap_or_else(|e| panic!("fixture: {e}"))
}

async fn waiting(server: &ApiServer, timeout: Duration) -> K8sTopology {
    let ctx = RunContext {
        wait: WaitPolicy::within(timeout),
        ..RunContext::default()
    };
    let topology = server.topology("waiting", &ctx);
    topology
        .ensure_ready()
        .await
        .unwrap_or_else(|e| panic!("{e}\n{}", server.log_tail()));
    topology
}

#[tokio::test(flavor = "multi_thread")]
async fn workloads_that_roll_out_end_the_wait_current_and_no_wait_does_not_wait() {
    let server = start();
    let k8s = waiting(&server, Duration::from_secs(240)).await;
    let ns = "rollout";
    let sts = json!({"apiVersion": "apps/v1", "kind": "StatefulSet",
        "metadata": {"name": "db", "namespace": ns},
        "spec": {"replicas": 2, "serviceName": "db", "selector": {"matchLabels": {"app": "db"}},
                 "template": template("db", None, None)}});
    let svc = json!({"apiVersion": "v1", "kind": "Service", "metadata": {"name": "web", "namespace": ns},
        "spec": {"selector": {"app": "web"}, "ports": [{"port": 80}]}});
    let cm = config_map(ns, "cfg");
    let applied = objects(vec![
        namespace(ns),
        cm,
        svc,
        deployment(ns, "web", 2, template("web", None, None)),
        sts,
        job(ns, "migrate", None),
    ]);
    let changes = k8s
        .apply(&applied, &ApplyOptions::default())
        .await
        .unwrap_or_else(|f| panic!("{f}\n{}", server.log_tail()));

    let web = status_of(&changes, "apps/v1 Deployment rollout/web");
    assert_eq!(
        (web.state, web.reason.as_str()),
        (Readiness::Current, "Available"),
        "{web}"
    );
    // The wait ended because the Deployment was available, not because time passed: the
    // controller's own figures say so right after.
    let live = server.kubectl(&[
        "get",
        "deployment",
        "web",
        "-n",
        ns,
        "-o",
        "jsonpath={.status.availableReplicas}",
    ]);
    assert_eq!(String::from_utf8_lossy(&live.stdout), "2");
    let timed = changes
        .iter()
        .find(|c| c.object == "apps/v1 Deployment rollout/web")
        .and_then(|c| c.status.as_ref())
        .and_then(|s| s.time_to_current_s)
        .expect("time to current");
    assert!(timed > 0.0, "a rollout takes time: {timed}");

    let db = status_of(&changes, "apps/v1 StatefulSet rollout/db");
    assert_eq!(db.state, Readiness::Current, "{db}");
    let migrate = status_of(&changes, "batch/v1 Job rollout/migrate");
    assert_eq!(migrate.state, Readiness::Current, "{migrate}");
    let done = server.kubectl(&[
        "get",
        "job",
        "migrate",
        "-n",
        ns,
        "-o",
        "jsonpath={.status.succeeded}",
    ]);
    assert_eq!(
        String::from_utf8_lossy(&done.stdout),
        "1",
        "the Job completed for real"
    );
    for plain in [
        "v1 ConfigMap rollout/cfg",
        "v1 Service rollout/web",
        "v1 Namespace rollout",
    ] {
        assert_eq!(
            status_of(&changes, plain).state,
            Readiness::Current,
            "{plain}"
        );
    }

    // --no-wait: the apply ends when the server accepted the objects, with no statuses; even a
    // claim that never binds (no provisioner) is fine. (Whether the Deployment is available
    // by the time kubectl looks is a race with kwok, so the claim is the witness.)
    let ctx = RunContext {
        wait: WaitPolicy::disabled(),
        ..RunContext::default()
    };
    let no_wait = server.topology("no-wait", &ctx);
    no_wait.ensure_ready().await.unwrap();
    let changes = no_wait
        .apply(
            &objects(vec![
                claim(ns, "never-bound"),
                deployment(ns, "later", 1, template("later", None, None)),
            ]),
            &ApplyOptions::default(),
        )
        .await
        .unwrap();
    assert_eq!(changes.len(), 2, "{changes:#?}");
    assert!(changes.iter().all(|c| c.status.is_none()), "{changes:#?}");
    let phase = server.kubectl(&[
        "get",
        "pvc",
        "never-bound",
        "-n",
        ns,
        "-o",
        "jsonpath={.status.phase}",
    ]);
    assert_eq!(String::from_utf8_lossy(&phase.stdout), "Pending");
}

#[tokio::test(flavor = "multi_thread")]
async fn hopeless_states_fail_fast_with_the_controllers_words() {
    let server = start();
    // A timeout far beyond the test's patience: each failure below must come from the state
    // itself (timed_out is None), not from running out of time.
    let k8s = waiting(&server, Duration::from_secs(3_600)).await;
    let ns = "hopeless";
    k8s.apply(&objects(vec![namespace(ns)]), &ApplyOptions::default())
        .await
        .unwrap();
    let cases = [
        (
            deployment(ns, "crash", 1, template("crash", Some("crashloop"), None)),
            "apps/v1 Deployment hopeless/crash",
            "CrashLoopBackOff",
            "back-off",
        ),
        (
            deployment(ns, "pull", 1, template("pull", Some("image-pull"), None)),
            "apps/v1 Deployment hopeless/pull",
            "ImagePullBackOff",
            "registry.example/app:1",
        ),
        (
            deployment(
                ns,
                "nowhere",
                1,
                template(
                    "nowhere",
                    None,
                    Some(json!({"disk": "ssd-that-no-node-has"})),
                ),
            ),
            "apps/v1 Deployment hopeless/nowhere",
            "Unschedulable",
            "node(s) didn't match Pod's node affinity/selector",
        ),
        (
            job(ns, "broken", Some("exit")),
            "batch/v1 Job hopeless/broken",
            "BackoffLimitExceeded",
            "backoff limit",
        ),
    ];
    let runs = cases.iter().map(|(manifest, ..)| {
        let k8s = &k8s;
        async move {
            k8s.apply(&objects(vec![manifest.clone()]), &ApplyOptions::default())
                .await
        }
    });
    let results = futures::future::join_all(runs).await;
    for ((_, object, reason, words), result) in cases.iter().zip(results) {
        let failure = result.expect_err(&format!("{object} must not end current"));
        let (named, timed_out, applied) = not_current(failure);
        assert_eq!(timed_out, None, "{object}: failed fast, not at the timeout");
        let (name, status) = &named[0];
        assert_eq!(name, object);
        assert_eq!(status.state, Readiness::Failed, "{object}: {status}");
        assert_eq!(status.reason, *reason, "{object}: {status}");
        assert!(
            status
                .message
                .to_lowercase()
                .contains(&words.to_lowercase()),
            "{object}: the controller's words ({words}) in {status}"
        );
        // The report carries the same status on the object's change.
        assert_eq!(status_of(&applied, object), status);
    }
}

#[tokio::test(flavor = "multi_thread")]
async fn a_claim_that_stays_pending_times_out_naming_it() {
    let server = start();
    let k8s = waiting(&server, Duration::from_secs(5)).await;
    let ns = "claims";
    let pvc = claim(ns, "data");
    let failure = k8s
        .apply(&objects(vec![namespace(ns), pvc]), &ApplyOptions::default())
        .await
        .expect_err("no provisioner: the claim stays Pending");
    let message = failure.to_string();
    let (named, timed_out, _) = not_current(failure);
    assert_eq!(timed_out, Some(Duration::from_secs(5)));
    assert_eq!(named.len(), 1, "only the claim is not current: {named:?}");
    assert_eq!(named[0].0, "v1 PersistentVolumeClaim claims/data");
    assert_eq!(named[0].1.state, Readiness::InProgress);
    assert!(
        message.contains("v1 PersistentVolumeClaim claims/data") && message.contains("Pending"),
        "{message}"
    );
}

/// A Deployment whose pods crash-loop before the wait starts (an unchanged re-apply): the
/// wait's first reading of the Deployment must already weigh the pods its pod watch listed,
/// whatever order the two watches answer in (no pod event follows: the pod's state is final).
#[tokio::test(flavor = "multi_thread")]
async fn a_deployment_already_crash_looping_fails_at_once_on_reapply() {
    let server = start();
    let ns = "already";
    let manifests = || {
        objects(vec![
            namespace(ns),
            deployment(ns, "crash", 1, template("crash", Some("crashloop"), None)),
        ])
    };
    let no_wait = server.topology(
        "no-wait",
        &RunContext {
            wait: WaitPolicy::disabled(),
            ..RunContext::default()
        },
    );
    no_wait.ensure_ready().await.unwrap();
    no_wait
        .apply(&manifests(), &ApplyOptions::default())
        .await
        .unwrap();
    let crashing = harmony_e2e::eventually::eventually_blocking(
        Duration::from_secs(120),
        "a pod in CrashLoopBackOff",
        || {
            let out = server.kubectl(&[
                "get",
                "pods",
                "-n",
                ns,
                "-o",
                "jsonpath={.items[*].status.containerStatuses[*].state.waiting.reason}",
            ]);
            String::from_utf8_lossy(&out.stdout)
                .contains("CrashLoopBackOff")
                .then_some(())
        },
    );
    assert!(crashing.is_ok(), "kwok's crashloop stage never applied");
    let k8s = waiting(&server, Duration::from_secs(3_600)).await;
    for _ in 0..3 {
        let failure = k8s
            .apply(&manifests(), &ApplyOptions::default())
            .await
            .expect_err("a crash loop never ends current");
        let (named, timed_out, _) = not_current(failure);
        assert_eq!(timed_out, None, "failed at once, not at the timeout");
        assert_eq!(named[0].1.reason, "CrashLoopBackOff", "{named:?}");
    }
}
