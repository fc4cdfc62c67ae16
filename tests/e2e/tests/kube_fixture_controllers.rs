//! The kube-fixture with `--controllers` runs the real kube-controller-manager and
//! kube-scheduler, with kwok playing the kubelets: each test starts its own fixture and checks
//! an outcome only a real controller (or the scheduler, or kwok's stages) produces.

use std::time::Duration;

use base64::Engine;
use serde_json::Value;
use x509_cert::der::Decode;

use harmony_e2e::ApiServer;
use harmony_e2e::eventually::eventually_blocking;
use harmony_e2e::x509::{COMMON_NAME, name_attributes};

/// How long one controller outcome may take (informers start, a few reconcile rounds; two
/// fixtures share two cores when the tests run in parallel).
const TIMEOUT: Duration = Duration::from_secs(120);

fn start() -> ApiServer {
    ApiServer::start_with_controllers().unwrap_or_else(|e| panic!("fixture: {e}"))
}

/// `kubectl get ARGS -o json`, parsed; `None` if kubectl fails (e.g. not created yet).
fn get_json(server: &ApiServer, args: &[&str]) -> Option<Value> {
    let mut all = vec!["get"];
    all.extend_from_slice(args);
    all.extend_from_slice(&["-o", "json"]);
    let out = server.kubectl(&all);
    if !out.status.success() {
        return None;
    }
    serde_json::from_slice(&out.stdout).ok()
}

/// The condition of `type` in `obj.status.conditions`, if present.
fn condition<'a>(obj: &'a Value, type_: &str) -> Option<&'a Value> {
    obj["status"]["conditions"]
        .as_array()?
        .iter()
        .find(|c| c["type"] == type_)
}

/// The end of each component's log, for failure messages.
fn logs(server: &ApiServer) -> String {
    server.component_log_tails(
        &["apiserver", "controller-manager", "scheduler", "kwok"],
        15,
    )
}

/// Polls `check` until it returns `Some`, or fails the test with `what` and the logs.
fn eventually<T>(server: &ApiServer, what: &str, check: impl FnMut() -> Option<T>) -> T {
    eventually_blocking(TIMEOUT, what, check).unwrap_or_else(|w| panic!("{w}\n{}", logs(server)))
}

fn deployment(name: &str, replicas: u32, image: &str, fail: Option<&str>) -> String {
    let annotations = match fail {
        Some(mode) => format!("\n      annotations:\n        harmony.test/fail: {mode}"),
        None => String::new(),
    };
    format!(
        "apiVersion: apps/v1
kind: Deployment
metadata:
  name: {name}
spec:
  replicas: {replicas}
  selector:
    matchLabels:
      app: {name}
  template:
    metadata:
      labels:
        app: {name}{annotations}
    spec:
      containers:
      - name: app
        image: {image}
"
    )
}

fn job(name: &str, fail: Option<&str>) -> String {
    let annotations = match fail {
        Some(mode) => format!("\n      annotations:\n        harmony.test/fail: {mode}"),
        None => String::new(),
    };
    format!(
        "apiVersion: batch/v1
kind: Job
metadata:
  name: {name}
spec:
  backoffLimit: 0
  template:
    metadata:
      labels:
        app: {name}{annotations}
    spec:
      restartPolicy: Never
      containers:
      - name: app
        image: busybox:1.36
        command: [\"true\"]
"
    )
}

/// The pods with label `app=NAME`.
fn pods(server: &ApiServer, app: &str) -> Vec<Value> {
    get_json(server, &["pods", "-l", &format!("app={app}")])
        .and_then(|list| list["items"].as_array().cloned())
        .unwrap_or_default()
}

#[test]
fn deployment_becomes_available_on_kwok_nodes() {
    let server = start();
    let nodes = server.node_names();
    assert_eq!(nodes.len(), 3, "default node count");
    server
        .apply(&deployment("web", 2, "nginx:1.27", None))
        .unwrap();

    let deploy = eventually(&server, "Deployment web with 2 ready replicas", || {
        let d = get_json(&server, &["deployment", "web"])?;
        (d["status"]["readyReplicas"] == 2).then_some(d)
    });
    let available = condition(&deploy, "Available").expect("Available condition");
    assert_eq!(available["status"], "True", "{deploy:#}");

    let pods = pods(&server, "web");
    assert_eq!(pods.len(), 2, "{pods:#?}");
    for pod in &pods {
        // Made by the ReplicaSet controller from a ReplicaSet the Deployment controller made.
        assert_eq!(pod["metadata"]["ownerReferences"][0]["kind"], "ReplicaSet");
        // Bound by the scheduler to one of the fixture's kwok nodes...
        let node = pod["spec"]["nodeName"].as_str().unwrap_or_default();
        assert!(
            nodes.iter().any(|n| n == node),
            "pod on {node:?}, not a kwok node"
        );
        // ...where kwok's pod-ready stage ran it.
        assert_eq!(pod["status"]["phase"], "Running");
        assert_eq!(pod["status"]["containerStatuses"][0]["ready"], true);
        assert!(
            pod["status"]["podIP"]
                .as_str()
                .is_some_and(|ip| !ip.is_empty())
        );
    }
    // The serviceaccount controller made the namespace's default ServiceAccount.
    eventually(&server, "ServiceAccount default/default", || {
        get_json(&server, &["serviceaccount", "default"])
    });
}

#[test]
fn kwok_manages_a_node_a_test_creates_with_the_annotation() {
    let server = start();
    let node = |name: &str, annotations: &str| {
        format!(
            "apiVersion: v1
kind: Node
metadata:
  name: {name}
  labels:
    kubernetes.io/hostname: {name}{annotations}
status:
  allocatable: {{cpu: \"4\", memory: 8Gi, pods: \"10\"}}
  capacity: {{cpu: \"4\", memory: 8Gi, pods: \"10\"}}
---
"
        )
    };
    let managed = node(
        "test-managed",
        "\n  annotations:\n    kwok.x-k8s.io/node: fake",
    );
    let unmanaged = node("test-unmanaged", "");
    server.apply(&format!("{managed}{unmanaged}")).unwrap();

    let ready = |name: &str| {
        let n = get_json(&server, &["node", name])?;
        condition(&n, "Ready").map(|c| c["status"] == "True")
    };
    eventually(&server, "node test-managed Ready", || {
        ready("test-managed").filter(|r| *r)
    });
    // kwok saw both at the same time and left the other one alone (no conditions, or Unknown
    // once the node-lifecycle controller's grace period has passed).
    assert_ne!(ready("test-unmanaged"), Some(true), "not managed by kwok");
    // A pod pinned to the managed node runs there.
    server
        .apply(
            "apiVersion: v1
kind: Pod
metadata:
  name: pinned
spec:
  nodeSelector:
    kubernetes.io/hostname: test-managed
  containers:
  - name: app
    image: nginx:1.27
",
        )
        .unwrap();
    let pod = eventually(&server, "pod pinned Running", || {
        let p = get_json(&server, &["pod", "pinned"])?;
        (p["status"]["phase"] == "Running").then_some(p)
    });
    assert_eq!(pod["spec"]["nodeName"], "test-managed");
}

#[test]
fn jobs_complete_or_fail_through_the_job_controller() {
    let server = start();
    server.apply(&job("ok", None)).unwrap();
    server.apply(&job("bad", Some("exit"))).unwrap();

    let ok = eventually(&server, "Job ok Complete", || {
        let j = get_json(&server, &["job", "ok"])?;
        (condition(&j, "Complete")?["status"] == "True").then_some(j)
    });
    assert_eq!(ok["status"]["succeeded"], 1, "{ok:#}");
    let ok_pods = pods(&server, "ok");
    assert_eq!(ok_pods.len(), 1, "{ok_pods:#?}");
    assert_eq!(ok_pods[0]["status"]["phase"], "Succeeded");

    let bad = eventually(&server, "Job bad Failed", || {
        let j = get_json(&server, &["job", "bad"])?;
        condition(&j, "Failed")
            .is_some_and(|c| c["status"] == "True")
            .then_some(j)
    });
    let failed = condition(&bad, "Failed").unwrap();
    assert_eq!(failed["reason"], "BackoffLimitExceeded", "{bad:#}");
    assert_eq!(bad["status"]["failed"], 1, "{bad:#}");
    assert!(condition(&bad, "Complete").is_none(), "{bad:#}");
    let bad_pods = pods(&server, "bad");
    assert_eq!(bad_pods.len(), 1, "backoffLimit 0: one pod, no retry");
    let terminated = &bad_pods[0]["status"]["containerStatuses"][0]["state"]["terminated"];
    assert_eq!(terminated["exitCode"], 1, "{:#}", bad_pods[0]);
}

#[test]
fn failing_pods_look_like_the_kubelet_reports_them() {
    let server = start();
    let bad_image = "registry.invalid/harmony/missing:0.0.1";
    server
        .apply(&deployment("crash", 1, "busybox:1.36", Some("crashloop")))
        .unwrap();
    server
        .apply(&deployment("pull", 1, bad_image, Some("image-pull")))
        .unwrap();

    // The first container's waiting state of an app's pod, once it has one.
    let waiting = |app: &str| {
        let pod = pods(&server, app).into_iter().next()?;
        let state = pod["status"]["containerStatuses"][0]["state"]["waiting"].clone();
        state.is_object().then_some((pod, state))
    };

    let (pod, state) = eventually(&server, "crash pod waiting", || waiting("crash"));
    let name = pod["metadata"]["name"].as_str().unwrap();
    assert_eq!(state["reason"], "CrashLoopBackOff", "{pod:#}");
    let message = state["message"].as_str().unwrap_or_default();
    assert!(
        message.starts_with("back-off 10s restarting failed container=app pod=")
            && message.contains(name),
        "{message}"
    );
    let status = &pod["status"]["containerStatuses"][0];
    assert!(status["restartCount"].as_u64().unwrap_or(0) > 0, "{pod:#}");
    assert_eq!(status["lastState"]["terminated"]["exitCode"], 1, "{pod:#}");
    assert_eq!(pod["status"]["phase"], "Running");
    assert_eq!(condition(&pod, "Ready").unwrap()["status"], "False");

    let (pod, state) = eventually(&server, "pull pod waiting", || waiting("pull"));
    assert_eq!(state["reason"], "ImagePullBackOff", "{pod:#}");
    assert_eq!(
        state["message"],
        format!("Back-off pulling image \"{bad_image}\"")
    );
    assert_eq!(pod["status"]["phase"], "Pending");
    assert_eq!(condition(&pod, "Ready").unwrap()["status"], "False");

    // The Deployment controller sees neither pod as available.
    for app in ["crash", "pull"] {
        let deploy = eventually(&server, &format!("Deployment {app} unavailable"), || {
            let d = get_json(&server, &["deployment", app])?;
            (d["status"]["unavailableReplicas"] == 1).then_some(d)
        });
        assert_eq!(
            condition(&deploy, "Available").unwrap()["status"],
            "False",
            "{deploy:#}"
        );
        assert!(deploy["status"]["readyReplicas"].is_null(), "{deploy:#}");
    }
}

#[test]
fn pod_matching_no_node_is_unschedulable() {
    let server = start();
    server
        .apply(
            "apiVersion: v1
kind: Pod
metadata:
  name: nowhere
spec:
  nodeSelector:
    disktype: nonexistent
  containers:
  - name: app
    image: nginx:1.27
",
        )
        .unwrap();
    let scheduled = eventually(&server, "PodScheduled=False on nowhere", || {
        let pod = get_json(&server, &["pod", "nowhere"])?;
        condition(&pod, "PodScheduled").cloned()
    });
    assert_eq!(scheduled["status"], "False", "{scheduled:#}");
    assert_eq!(scheduled["reason"], "Unschedulable", "{scheduled:#}");
    let message = scheduled["message"].as_str().unwrap_or_default();
    let nodes = server.node_names().len();
    assert!(
        message.starts_with(&format!("0/{nodes} nodes are available"))
            && message.contains("didn't match Pod's node affinity/selector"),
        "{message}"
    );
    let pod = get_json(&server, &["pod", "nowhere"]).unwrap();
    assert!(pod["spec"]["nodeName"].is_null(), "{pod:#}");
    assert_eq!(pod["status"]["phase"], "Pending");
}

#[test]
fn approved_csr_gets_a_certificate_from_the_signer() {
    let server = start();
    let user = "harmony-e2e-user";
    let key = rcgen::KeyPair::generate().unwrap();
    let mut params = rcgen::CertificateParams::new(Vec::<String>::new()).unwrap();
    params
        .distinguished_name
        .push(rcgen::DnType::CommonName, user);
    let request = params.serialize_request(&key).unwrap().pem().unwrap();
    let request_b64 = base64::engine::general_purpose::STANDARD.encode(request);
    server
        .apply(&format!(
            "apiVersion: certificates.k8s.io/v1
kind: CertificateSigningRequest
metadata:
  name: {user}
spec:
  request: {request_b64}
  signerName: kubernetes.io/kube-apiserver-client
  expirationSeconds: 3600
  usages:
  - client auth
"
        ))
        .unwrap();
    // Not signed before approval (the signer only handles approved requests).
    let csr = get_json(&server, &["csr", user]).unwrap();
    assert!(csr["status"]["certificate"].is_null(), "{csr:#}");

    let out = server.kubectl(&["certificate", "approve", user]);
    assert!(out.status.success(), "{out:?}");
    let cert_b64 = eventually(&server, "status.certificate", || {
        let csr = get_json(&server, &["csr", user])?;
        csr["status"]["certificate"].as_str().map(str::to_string)
    });

    let cert_pem = base64::engine::general_purpose::STANDARD
        .decode(cert_b64)
        .expect("base64 certificate");
    let block = pem::parse(&cert_pem).expect("a PEM block");
    assert_eq!(block.tag(), "CERTIFICATE");
    let cert = x509_cert::Certificate::from_der(block.contents()).expect("an X.509 certificate");
    assert_eq!(
        common_name(&cert.tbs_certificate.subject).as_deref(),
        Some(user)
    );
    // Signed by the fixture's CA (pki.go), which the controller-manager was given.
    assert_eq!(
        common_name(&cert.tbs_certificate.issuer).as_deref(),
        Some("kube-fixture-ca")
    );

    // The API server accepts it: it authenticates as the requested user.
    let dir = tempfile::tempdir().unwrap();
    let (cert_file, key_file, empty) = (
        dir.path().join("user.crt"),
        dir.path().join("user.key"),
        dir.path().join("empty-kubeconfig"),
    );
    std::fs::write(&cert_file, &cert_pem).unwrap();
    std::fs::write(&key_file, key.serialize_pem()).unwrap();
    std::fs::write(&empty, "").unwrap();
    let ca = server.data_dir().join("ca.crt");
    let out = server.kubectl(&[
        "auth",
        "whoami",
        &format!("--kubeconfig={}", empty.display()),
        &format!("--server={}", server.url()),
        &format!("--certificate-authority={}", ca.display()),
        &format!("--client-certificate={}", cert_file.display()),
        &format!("--client-key={}", key_file.display()),
        "-o",
        "jsonpath={.status.userInfo.username}",
    ]);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert_eq!(String::from_utf8_lossy(&out.stdout), user);
}

/// The first common name in an X.509 name.
fn common_name(name: &x509_cert::name::Name) -> Option<String> {
    name_attributes(name, COMMON_NAME).into_iter().next()
}

/// The pids of `pid`'s direct children, with their command lines.
fn children(pid: u32) -> Vec<(u32, String)> {
    let mut out = Vec::new();
    let Ok(tasks) = std::fs::read_dir(format!("/proc/{pid}/task")) else {
        return out;
    };
    for task in tasks.flatten() {
        let list = std::fs::read_to_string(task.path().join("children")).unwrap_or_default();
        for child in list
            .split_whitespace()
            .filter_map(|p| p.parse::<u32>().ok())
        {
            let cmdline = std::fs::read(format!("/proc/{child}/cmdline")).unwrap_or_default();
            let cmdline = String::from_utf8_lossy(&cmdline).replace('\0', " ");
            out.push((child, cmdline));
        }
    }
    out
}

/// True while `pid` exists and is not a zombie.
fn alive(pid: u32) -> bool {
    std::fs::read_to_string(format!("/proc/{pid}/stat"))
        .ok()
        .and_then(|stat| {
            let state = stat
                .rsplit_once(')')?
                .1
                .split_whitespace()
                .next()?
                .to_string();
            Some(state != "Z" && state != "X")
        })
        .unwrap_or(false)
}

fn kill(pid: u32, signal: i32) {
    // SAFETY: kill(2) only sends a signal; the pids are this test's fixture processes.
    let rc = unsafe { libc::kill(pid as libc::pid_t, signal) };
    assert_eq!(rc, 0, "kill {pid}: {}", std::io::Error::last_os_error());
}

#[test]
fn a_dead_child_is_reported_and_children_die_with_serve() {
    let server = start();
    let kids = children(server.pid());
    let find = |name: &str| {
        kids.iter()
            .find(|(_, cmd)| cmd.contains(name))
            .map(|(pid, _)| *pid)
            .unwrap_or_else(|| panic!("no {name} child of serve: {kids:?}"))
    };
    let (kwok, manager, scheduler) = (
        find("/kwok "),
        find("kube-fixture controller-manager "),
        find("kube-fixture scheduler "),
    );

    kill(kwok, libc::SIGKILL);
    let line = format!("kube-fixture serve: kwok (pid {kwok}) exited unexpectedly: signal: killed");
    eventually(&server, "the apiserver log reporting kwok's death", || {
        server
            .component_log("apiserver")
            .contains(&line)
            .then_some(())
    });
    assert!(alive(server.pid()), "serve keeps running without kwok");

    // serve killed outright: Pdeathsig takes its children with it.
    kill(server.pid(), libc::SIGKILL);
    eventually(&server, "controller-manager and scheduler gone", || {
        (!alive(manager) && !alive(scheduler)).then_some(())
    });
}
