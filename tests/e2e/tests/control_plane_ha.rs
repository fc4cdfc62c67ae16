//! Three control-plane replicas on one real PostgreSQL 18, agents connecting through a real
//! haproxy (TCP, TLS passed through), each agent operating a real kube-apiserver fixture whose
//! audit log counts every write. Everything is started by the test on loopback; no mocks.
//!
//! What is checked: a replica killed mid-request loses nothing and doubles nothing; a restart
//! of every replica keeps accepted requests; size limits and idempotency keys are enforced at
//! submit; a lost `welcome` and identity rotation keep the agent in; an agent killed mid-apply
//! reports what it created. Plus the agents benchmark at a tiny size, so it cannot rot.

use futures::{SinkExt, StreamExt};
use serde_json::{Value, json};
use std::collections::BTreeMap;
use std::path::PathBuf;
use std::time::{Duration, Instant};

use harmony::infra::control_plane::{ControlPlaneError, CreatedRegion, Health, RegionStatus};
use harmony_agent_protocol::{MAX_FRAME_BYTES, Res, close};
use harmony_api::{RequestState, RequestStatus};
use harmony_e2e::ApiServer;
use harmony_e2e::eventually::eventually;
use harmony_e2e::ha::{self, Replicas};
use harmony_e2e::multi_region::{Agent, AgentOptions, ControlPlaneOptions};
use harmony_e2e::raw_api::answer;
use harmony_e2e::world::{Plane, World, WorldOptions};
use tokio_tungstenite::tungstenite::Message;

const BENCH_BIN: &str = env!("CARGO_BIN_EXE_bench_agents");
const WAIT: Duration = Duration::from_secs(90);
const REPLICAS: usize = 3;

/// Audit every write to ConfigMaps outside the agents' own namespace (their request records).
const AUDIT_POLICY: &str = "apiVersion: audit.k8s.io/v1
kind: Policy
omitStages: [RequestReceived]
rules:
- level: None
  namespaces: [harmony-agent]
- level: Metadata
  verbs: [create, update, patch, delete]
  resources:
  - group: \"\"
    resources: [configmaps]
- level: None
";

/// The shared world with [`REPLICAS`] replicas, its API server auditing ConfigMap writes to
/// `audit_log`.
struct Ha {
    world: World,
    audit_log: PathBuf,
    // Declared after `world`: removed once the API server writing there has stopped.
    _audit_dir: tempfile::TempDir,
}

impl Ha {
    fn new(extra_cp_args: &[&str]) -> Self {
        let audit_dir = tempfile::tempdir().unwrap();
        let policy = audit_dir.path().join("audit-policy.yaml");
        std::fs::write(&policy, AUDIT_POLICY).unwrap();
        let audit_log = audit_dir.path().join("audit.log");
        let server = ApiServer::start_with_flags(&[
            format!("--audit-policy-file={}", policy.display()),
            format!("--audit-log-path={}", audit_log.display()),
            "--audit-log-mode=blocking".into(),
        ])
        .unwrap_or_else(|e| panic!("{e}"));
        let world = World::start(
            harmony_e2e::bins!(),
            WorldOptions {
                server: Some(server),
                plane: Plane::Replicas {
                    count: REPLICAS,
                    max_agents: 64,
                },
                control_plane: ControlPlaneOptions {
                    extra_args: extra_cp_args.iter().map(|s| s.to_string()).collect(),
                    ..ControlPlaneOptions::default()
                },
            },
        );
        Self {
            world,
            audit_log,
            _audit_dir: audit_dir,
        }
    }

    /// The replicas, their haproxy and database.
    fn ha(&self) -> &Replicas {
        self.world.replicas()
    }

    /// [`Self::ha`], to kill or restart replicas.
    fn ha_mut(&mut self) -> &mut Replicas {
        self.world.replicas_mut()
    }

    async fn create(&self, r: &str) -> CreatedRegion {
        self.world.create(r, "z1").await
    }

    /// An agent of `r` dialling haproxy, with its own identity file, presenting `token` if any.
    fn agent_options(&self, name: &str, r: &str, token: Option<&CreatedRegion>) -> AgentOptions {
        self.world
            .agent_options(name, r, "z1", token.map(|t| &t.bootstrap_token))
    }

    fn agent(&self, name: &str, o: &AgentOptions) -> Agent {
        self.world.agent(name, o)
    }

    /// The region as replica `ask` sees it.
    async fn status(&self, ask: usize, r: &str) -> RegionStatus {
        self.ha()
            .client(ask)
            .region(r)
            .await
            .unwrap_or_else(|e| panic!("{e}"))
            .expect("region exists")
    }

    async fn wait_healthy(&self, ask: usize, r: &str) -> RegionStatus {
        eventually(WAIT, format!("region {r} healthy on cp-{ask}"), || async {
            let s = self.status(ask, r).await;
            if s.health == Health::Healthy {
                Ok(s)
            } else {
                Err(s)
            }
        })
        .await
        .unwrap_or_else(|w| panic!("{w}\n{}", self.world.logs()))
    }

    fn kubectl(&self, args: &[&str]) -> String {
        let out = self.world.server.kubectl(args);
        assert!(
            out.status.success(),
            "kubectl {args:?}: {}",
            String::from_utf8_lossy(&out.stderr)
        );
        String::from_utf8_lossy(&out.stdout).into_owned()
    }

    /// The verbs of every write the API server audited, per ConfigMap name in `ns`.
    fn all_writes(&self, ns: &str) -> BTreeMap<String, Vec<String>> {
        let text = std::fs::read_to_string(&self.audit_log).unwrap_or_default();
        let mut writes: BTreeMap<String, Vec<String>> = BTreeMap::new();
        for e in text
            .lines()
            .filter_map(|l| serde_json::from_str::<Value>(l).ok())
        {
            if e["stage"] == "ResponseComplete" && e["objectRef"]["namespace"] == ns {
                let name = e["objectRef"]["name"].as_str().unwrap_or_default();
                let verb = e["verb"].as_str().unwrap_or_default();
                writes.entry(name.into()).or_default().push(verb.into());
            }
        }
        writes
    }

    /// The verbs of every write the API server audited for ConfigMap `ns/name`.
    fn writes(&self, ns: &str, name: &str) -> Vec<String> {
        self.all_writes(ns).remove(name).unwrap_or_default()
    }
}

/// `GET /v1/requests/{id}` on replica `i`: the request as stored, `None` when unknown.
async fn request_status(w: &Ha, i: usize, id: &str) -> Option<RequestStatus> {
    w.ha()
        .client(i)
        .request_status(id)
        .await
        .unwrap_or_else(|e| panic!("replica {i}: {e}"))
}

fn config_maps(ns: &str, prefix: &str, n: usize) -> Value {
    let manifests: Vec<Value> = (0..n)
        .map(|i| {
            json!({"apiVersion": "v1", "kind": "ConfigMap",
                "metadata": {"name": format!("{prefix}-{i}"), "namespace": ns},
                "data": {"k": format!("v{i}")}})
        })
        .collect();
    json!({ "manifests": manifests })
}

/// The (object, action) pairs of an apply's result.
fn changes(res: &Res) -> Vec<(String, String)> {
    assert!(res.ok, "{res:?}");
    let v: Value = res.result_as().unwrap();
    let field = |c: &Value, f: &str| c[f].as_str().unwrap_or_default().to_string();
    v["changes"]
        .as_array()
        .unwrap_or_else(|| panic!("no changes in {v}"))
        .iter()
        .map(|c| (field(c, "object"), field(c, "action")))
        .collect()
}

fn actions(res: &Res) -> Vec<String> {
    changes(res).into_iter().map(|(_, a)| a).collect()
}

fn agent_log(w: &Ha, name: &str) -> String {
    std::fs::read_to_string(w.world.log(name)).unwrap_or_default()
}

async fn wait_log(w: &Ha, name: &str, needle: &str) {
    eventually(WAIT, format!("{needle:?} in the {name} log"), || async {
        agent_log(w, name).contains(needle).then_some(())
    })
    .await
    .unwrap_or_else(|e| panic!("{e}:\n{}", agent_log(w, name)));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn killing_the_replica_that_holds_the_agent_mid_request_applies_once_and_keeps_the_result() {
    const OBJECTS: usize = 400;
    let mut w = Ha::new(&[]);
    let created = w.create("ha-a").await;
    let o = w.agent_options("agent", "ha-a", Some(&created));
    let _agent = w.agent("agent", &o);
    w.wait_healthy(0, "ha-a").await;
    w.kubectl(&["create", "namespace", "ha-a"]);
    let holder = w.ha().holder(0, "ha-a").await.unwrap().expect("held");
    let submitter = (holder + 1) % REPLICAS;

    // The request goes to a replica that does not hold the agent...
    let client = w.ha().client(submitter);
    let params = config_maps("ha-a", "cm", OBJECTS);
    let pending = tokio::spawn({
        let params = params.clone();
        async move {
            client
                .request("ha-a", "inflight-1", "apply_manifests", params, WAIT)
                .await
        }
    });
    // ...and the holder dies while the agent executes it.
    wait_log(&w, "agent", "executing request inflight-1 (").await;
    w.ha_mut().replicas[holder].kill9();
    let res = pending
        .await
        .unwrap()
        .unwrap_or_else(|e| panic!("{e}\n{}", w.world.logs()));
    let acts = actions(&res);
    assert_eq!(acts.len(), OBJECTS, "{res:?}");
    assert!(acts.iter().all(|a| a == "create"), "{acts:?}");

    // The agent came back through haproxy, to another replica.
    w.wait_healthy(submitter, "ha-a").await;
    let now = w.ha().holder(submitter, "ha-a").await.unwrap();
    assert!(now.is_some_and(|n| n != holder), "held by {now:?}");

    // Exactly once: one execution, one write per object on the API server, one field manager.
    let log = agent_log(&w, "agent");
    let redelivered: Vec<&str> = log
        .lines()
        .filter(|l| l.contains("inflight-1 redelivered"))
        .collect();
    println!("replica cp-{holder} killed mid-request; agent: {redelivered:?}");
    assert_eq!(
        log.matches("executing request inflight-1 (").count(),
        1,
        "{log}"
    );
    for i in [0, OBJECTS / 2, OBJECTS - 1] {
        let name = format!("cm-{i}");
        assert_eq!(w.writes("ha-a", &name), ["patch"], "writes of {name}");
        let managers = w.kubectl(&[
            "get",
            "configmap",
            &name,
            "-n",
            "ha-a",
            "-o",
            "jsonpath={range .metadata.managedFields[*]}{.manager}/{.operation};{end}",
        ]);
        assert_eq!(managers, "harmony-agent/Apply;", "managedFields of {name}");
    }
    let all = w.all_writes("ha-a");
    assert_eq!(all.len(), OBJECTS, "objects written: {}", all.len());
    let twice: Vec<_> = all.iter().filter(|(_, v)| v.len() != 1).collect();
    assert!(twice.is_empty(), "written more than once: {twice:?}");
    // No write after the answer either (a late duplicate would bump a resourceVersion).
    let versions = || {
        let path = "jsonpath={range .items[*]}{.metadata.name}={.metadata.resourceVersion};{end}";
        w.kubectl(&["get", "configmaps", "-n", "ha-a", "-o", path])
    };
    let before = versions();
    tokio::time::sleep(Duration::from_secs(2)).await;
    assert_eq!(
        before,
        versions(),
        "an object changed after the request completed"
    );

    // The result is readable from every replica, the killed one restarted.
    w.ha_mut().replicas[holder].start_again().unwrap();
    for i in 0..REPLICAS {
        let status = request_status(&w, i, "inflight-1")
            .await
            .unwrap_or_else(|| panic!("replica {i} does not know inflight-1"));
        assert_eq!(status.state, RequestState::Done, "replica {i}: {status:?}");
        assert_eq!(status.res.as_ref(), Some(&res), "replica {i}");
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn requests_accepted_before_every_replica_restarts_are_delivered_once_after() {
    const QUEUED: usize = 6;
    let mut w = Ha::new(&[]);
    let created = w.create("ha-b").await;
    let o = w.agent_options("agent", "ha-b", Some(&created));
    let mut agent = w.agent("agent", &o);
    w.wait_healthy(0, "ha-b").await;
    w.kubectl(&["create", "namespace", "ha-b"]);
    agent.kill9();

    // Accepted while the agent is away, each through another replica: the short wait ends
    // with a timeout that says the request stays queued.
    for i in 0..QUEUED {
        let id = format!("queued-{i}");
        let e = w
            .ha()
            .client(i % REPLICAS)
            .request(
                "ha-b",
                &id,
                "apply_manifests",
                config_maps("ha-b", &id, 1),
                Duration::from_millis(500),
            )
            .await
            .expect_err("no agent is connected");
        assert!(
            matches!(&e, ControlPlaneError::Status { status: 504, .. }),
            "{e}"
        );
        let stored = request_status(&w, (i + 1) % REPLICAS, &id).await;
        assert_eq!(stored.map(|s| s.state), Some(RequestState::Queued), "{id}");
    }

    // Every replica restarts; then the agent comes back with its stored identity.
    for r in &mut w.ha_mut().replicas {
        r.kill9();
    }
    for r in &mut w.ha_mut().replicas {
        r.start_again().unwrap();
    }
    let _agent = w.agent(
        "agent",
        &AgentOptions {
            bootstrap_token_file: None,
            ..o.clone()
        },
    );
    w.wait_healthy(2, "ha-b").await;

    for i in 0..QUEUED {
        let id = format!("queued-{i}");
        // Re-sending the same id and body joins the stored request instead of acting again.
        let res = w
            .ha()
            .client(i % REPLICAS)
            .request(
                "ha-b",
                &id,
                "apply_manifests",
                config_maps("ha-b", &id, 1),
                WAIT,
            )
            .await
            .unwrap_or_else(|e| panic!("{id}: {e}\n{}", w.world.logs()));
        assert_eq!(actions(&res), ["create"], "{id}");
        assert_eq!(w.writes("ha-b", &format!("{id}-0")), ["patch"], "{id}");
    }
    let log = agent_log(&w, "agent");
    for i in 0..QUEUED {
        let line = format!("executing request queued-{i} (");
        assert_eq!(log.matches(&line).count(), 1, "{line}\n{log}");
    }
    assert_eq!(w.status(1, "ha-b").await.pending_requests, 0);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn oversized_requests_are_refused_at_submit_and_an_oversized_result_fails_alone() {
    let w = Ha::new(&[]);
    let created = w.create("ha-c").await;
    let o = w.agent_options("agent", "ha-c", Some(&created));
    let _agent = w.agent("agent", &o);
    let before = w.wait_healthy(0, "ha-c").await;
    w.kubectl(&["create", "namespace", "ha-c"]);

    // A request above the agent's frame limit: 413 with the limit, never queued.
    let big = json!({"manifests": [{"apiVersion": "v1", "kind": "ConfigMap",
        "metadata": {"name": "big", "namespace": "ha-c"},
        "data": {"k": "x".repeat(MAX_FRAME_BYTES + 1024)}}]});
    let e = w
        .ha()
        .client(1)
        .request("ha-c", "too-big", "apply_manifests", big, WAIT)
        .await
        .expect_err("above the agent's limit");
    match &e {
        ControlPlaneError::Status {
            status: 413, error, ..
        } => {
            assert_eq!(error.code.as_deref(), Some("too_large"), "{e}");
            assert_eq!(error.limit_bytes, Some(MAX_FRAME_BYTES as u64), "{e}");
            assert!(
                error.size_bytes.is_some_and(|s| s > MAX_FRAME_BYTES as u64),
                "{e}"
            );
        }
        other => panic!("expected 413 too_large, got {other}"),
    }
    assert!(request_status(&w, 2, "too-big").await.is_none());
    assert_eq!(w.status(0, "ha-c").await.pending_requests, 0);

    // A result above the limit: five ConfigMaps of ~950 KB read in one get_objects.
    let blob = w.world.dir.path().join("blob");
    std::fs::write(&blob, "y".repeat(950_000)).unwrap();
    let objects: Vec<Value> = (0..5)
        .map(|i| {
            let name = format!("blob-{i}");
            w.kubectl(&[
                "create",
                "configmap",
                &name,
                "-n",
                "ha-c",
                &format!("--from-file=k={}", blob.display()),
            ]);
            json!({"api_version": "v1", "kind": "ConfigMap", "namespace": "ha-c", "name": name})
        })
        .collect();
    let client = w.ha().client(2);
    let res = client
        .request(
            "ha-c",
            "huge-result",
            "get_objects",
            json!({"objects": objects}),
            WAIT,
        )
        .await
        .unwrap_or_else(|e| panic!("{e}"));
    assert!(!res.ok, "{res:?}");
    assert_eq!(
        res.error.as_ref().unwrap().code,
        "result_too_large",
        "{res:?}"
    );
    // The region's next request succeeds on the same connection (the time is printed, not
    // asserted: what made it slow before was the agent reconnecting, checked below).
    let started = Instant::now();
    let next = client
        .request("ha-c", "after-huge", "get_inventory", json!({}), WAIT)
        .await
        .unwrap();
    assert!(next.ok, "{next:?}");
    eprintln!(
        "the request after a too-large result answered in {:?}",
        started.elapsed()
    );
    let after = w.status(0, "ha-c").await;
    assert_eq!(
        after.connected_at, before.connected_at,
        "the agent reconnected"
    );

    // Same id, different body: 409 from any replica; the same body returns the first result.
    let e = w
        .ha()
        .client(1)
        .request(
            "ha-c",
            "after-huge",
            "apply_manifests",
            config_maps("ha-c", "dup", 1),
            WAIT,
        )
        .await
        .expect_err("same id, different op");
    match &e {
        ControlPlaneError::Status {
            status: 409, error, ..
        } => {
            assert_eq!(error.code.as_deref(), Some("duplicate_id"), "{e}");
            assert!(error.error.contains("after-huge"), "{e}");
        }
        other => panic!("expected 409 duplicate_id, got {other}"),
    }
    let same = w
        .ha()
        .client(0)
        .request("ha-c", "after-huge", "get_inventory", json!({}), WAIT)
        .await
        .unwrap();
    assert_eq!(same, next);
    assert!(
        w.writes("ha-c", "dup-0").is_empty(),
        "the refused request ran"
    );
}

/// A raw agent connection through haproxy presenting `bearer`.
async fn raw_ws(w: &Ha, bearer: &str) -> ha::Ws {
    let tls = ha::tls_connector(&w.ha().pki.ca_pem).unwrap();
    ha::ws_connect(w.ha().haproxy.addr(), &tls, Some(bearer), None)
        .await
        .unwrap()
}

fn hello(region: &str) -> Message {
    Message::text(
        json!({"type": "hello", "agent_version": "raw", "region": region, "zone": "z1",
            "ops": [], "protocol": 1})
        .to_string(),
    )
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_lost_welcome_returns_the_same_identity_and_identities_rotate_without_a_gap() {
    // Identities live 6 s (renewed after 4 s); a replaced one stays valid 2 s more.
    let mut w = Ha::new(&["--identity-ttl-s", "6", "--identity-overlap-s", "2"]);
    let created = w.create("ha-e").await;

    // A connection cut right after the welcome: its identity never reached the agent.
    let mut ws = raw_ws(&w, created.bootstrap_token.expose()).await;
    ws.send(hello("ha-e")).await.unwrap();
    let welcome = loop {
        match tokio::time::timeout(WAIT, ws.next()).await {
            Ok(Some(Ok(Message::Text(t)))) => break serde_json::from_str::<Value>(&t).unwrap(),
            Ok(Some(Ok(_))) => continue,
            other => panic!("no welcome: {other:?}"),
        }
    };
    assert_eq!(welcome["type"], "welcome", "{welcome}");
    let lost = welcome["identity"]
        .as_str()
        .expect("an identity")
        .to_string();
    drop(ws);

    // The agent repeats the exchange with the same token and gets that same identity.
    let o = w.agent_options("agent", "ha-e", Some(&created));
    let _agent = w.agent("agent", &o);
    w.wait_healthy(0, "ha-e").await;
    let identity = || std::fs::read_to_string(&o.identity_file).unwrap_or_default();
    assert_eq!(identity().trim(), lost, "the agent got another identity");

    // Rotation: healthy at every look for 15 s while the identity changes at least twice.
    let mut seen = vec![lost.clone()];
    let started = Instant::now();
    while started.elapsed() < Duration::from_secs(15) {
        let s = w.status(1, "ha-e").await;
        assert_eq!(
            s.health,
            Health::Healthy,
            "gap at {:?}: {s:?}",
            started.elapsed()
        );
        let now = identity().trim().to_string();
        if !now.is_empty() && seen.last() != Some(&now) {
            seen.push(now);
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    assert!(seen.len() >= 3, "identities seen: {}", seen.len());

    // The first identity, long expired, is refused; the current one works on another replica.
    let mut ws = raw_ws(&w, &lost).await;
    let _ = ws.send(hello("ha-e")).await;
    match tokio::time::timeout(WAIT, ws.next()).await {
        // Expired, or already forgotten as superseded: either way refused for good.
        Ok(Some(Ok(Message::Close(Some(f))))) => assert!(
            [close::IDENTITY_EXPIRED, close::UNAUTHORIZED].contains(&u16::from(f.code)),
            "{f:?}"
        ),
        other => panic!("the expired identity was not refused: {other:?}"),
    }
    let holder = w.ha().holder(0, "ha-e").await.unwrap().expect("held");
    w.ha_mut().replicas[holder].kill9();
    let ask = (holder + 1) % REPLICAS;
    eventually(WAIT, "the agent back on another replica", || async {
        match w.ha().holder(ask, "ha-e").await.unwrap() {
            Some(h) if h != holder => Ok(()),
            other => Err(other),
        }
    })
    .await
    .unwrap_or_else(|e| panic!("the agent did not come back: {e}\n{}", w.world.logs()));
    w.wait_healthy(ask, "ha-e").await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn an_agent_killed_mid_apply_reports_the_objects_as_created_after_its_restart() {
    const OBJECTS: usize = 1000;
    let w = Ha::new(&[]);
    let created = w.create("ha-f").await;
    let o = w.agent_options("agent", "ha-f", Some(&created));
    let mut agent = w.agent("agent", &o);
    w.wait_healthy(0, "ha-f").await;

    // The namespace does not exist: the apply creates it first, then the ConfigMaps.
    let client = w.ha().client(1);
    let pending = tokio::spawn(async move {
        client
            .request(
                "ha-f",
                "midway-1",
                "apply_manifests",
                config_maps("ha-f", "cm", OBJECTS),
                WAIT,
            )
            .await
    });
    let count = || {
        w.kubectl(&["get", "configmaps", "-n", "ha-f", "-o", "name"])
            .lines()
            .filter(|l| l.starts_with("configmap/cm-"))
            .count()
    };
    eventually(WAIT, "the apply's first ConfigMap", || async {
        (count() > 0).then_some(())
    })
    .await
    .unwrap_or_else(|e| panic!("the apply never started: {e}"));
    agent.kill9();
    let at_kill = count();
    assert!(
        at_kill < OBJECTS,
        "the apply finished before the kill ({at_kill} objects): it was not interrupted"
    );
    println!("agent killed with {at_kill} of {OBJECTS} ConfigMaps applied");
    let _agent = w.agent(
        "agent",
        &AgentOptions {
            bootstrap_token_file: None,
            ..o.clone()
        },
    );
    let res = pending
        .await
        .unwrap()
        .unwrap_or_else(|e| panic!("{e}\n{}", w.world.logs()));
    // Every object of the request, and the namespace it created, reported as created once.
    let changes = changes(&res);
    let mut objects: Vec<&str> = changes.iter().map(|(o, _)| o.as_str()).collect();
    objects.sort();
    let mut expected: Vec<String> = (0..OBJECTS)
        .map(|i| format!("v1 ConfigMap ha-f/cm-{i}"))
        .chain(["v1 Namespace ha-f".to_string()])
        .collect();
    expected.sort();
    assert_eq!(objects, expected, "the objects reported");
    let not_created: Vec<_> = changes.iter().filter(|(_, a)| a != "create").collect();
    assert!(
        not_created.is_empty(),
        "{at_kill} objects existed at the kill; reported otherwise: {:?}",
        &not_created[..not_created.len().min(10)]
    );
    assert_eq!(count(), OBJECTS);
}

#[test]
fn the_agents_benchmark_runs_at_a_tiny_size() {
    let out = std::process::Command::new(BENCH_BIN)
        .args(["--replicas", "3", "--agents", "24", "--requests", "12"])
        .args(["--heartbeat-s", "1", "--window-s", "1"])
        .output()
        .unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success(),
        "{stdout}\n{}",
        String::from_utf8_lossy(&out.stderr)
    );
    for line in [
        "| agents connected / healthy | 24 / 24 |",
        "| memory per connection",
        "requests to a replica not holding the agent, warm: p50 / p99 / max",
        "| all agents healthy again after killing",
        "\"key\":\"outage\"",
    ] {
        assert!(stdout.contains(line), "{line:?} missing:\n{stdout}");
    }
}

/// The shared world with one replica (haproxy accepting 16 connections) started with `options`.
fn one_replica(options: ControlPlaneOptions) -> World {
    tokio::task::block_in_place(|| {
        World::start(
            harmony_e2e::bins!(),
            WorldOptions {
                plane: Plane::Replicas {
                    count: 1,
                    max_agents: 16,
                },
                control_plane: options,
                ..WorldOptions::default()
            },
        )
    })
}

/// A replica whose only pooled PostgreSQL connection is stuck (its query waits on a table lock
/// the test holds) answers every call while the lock is held: those that cannot get the
/// connection, and those combined into the statement that waits on the lock (ADR 0027), are
/// answered 503 with `Retry-After` and the `overloaded` code after the pool wait, never 500 and
/// never left waiting; once the lock goes, it answers normally again.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_busy_database_pool_is_answered_503_with_retry_after_not_500() {
    let options = ControlPlaneOptions {
        extra_args: [
            "--database-pool-size",
            "1",
            "--database-pool-wait-ms",
            "300",
        ]
        .map(String::from)
        .to_vec(),
        ..ControlPlaneOptions::default()
    };
    let w = one_replica(options);
    let ha = w.replicas();
    let admin = ha.client(0);
    w.create("eu", "z1").await;

    // Hold a lock every request's first read waits on, from a connection of our own.
    let (db, conn) = tokio_postgres::connect(&ha.pg.url("harmony"), tokio_postgres::NoTls)
        .await
        .unwrap();
    let driver = tokio::spawn(conn);
    db.batch_execute("BEGIN; LOCK TABLE regions IN ACCESS EXCLUSIVE MODE")
        .await
        .unwrap();

    let http = harmony_http::ClientSettings::new()
        .ca_pem(Some(ha.pki.ca_pem.as_bytes()))
        .build()
        .unwrap();
    let url = format!("{}/v1/regions/eu/requests", ha.replicas[0].url());
    let calls = (0..8).map(|i| {
        let (http, url, token) = (http.clone(), url.clone(), ha.admin_token.clone());
        async move {
            let r = http
                .post(&url)
                .bearer_auth(token)
                .json(&json!({"id": format!("busy-{i}"), "op": "get_inventory", "params": {}, "timeout_s": 1}))
                .send()
                .await
                .unwrap();
            answer(r).await
        }
    });
    // Every call is answered while the lock is still held: none waits on it past the pool
    // wait, whether alone or combined with the call that holds the connection.
    let mut pending: futures::stream::FuturesUnordered<_> = calls.collect();
    let mut answers = Vec::new();
    while let Some(next) = tokio::time::timeout(WAIT, pending.next())
        .await
        .unwrap_or_else(|_| {
            panic!("a call was left waiting on the lock; answered so far: {answers:?}")
        })
    {
        answers.push(next);
    }
    db.batch_execute("ROLLBACK").await.unwrap();

    let busy: Vec<_> = answers.iter().filter(|(s, ..)| *s == 503).collect();
    assert_eq!(
        busy.len(),
        8,
        "no call could read the locked table: {answers:?}"
    );
    for (status, retry_after, body) in &answers {
        assert_ne!(*status, 500, "overload must not be a 500: {body}");
        if *status == 503 {
            assert_eq!(retry_after.as_deref(), Some("1"), "{body}");
            assert_eq!(body["code"], "overloaded", "{body}");
            let message = body["error"].as_str().unwrap_or_default();
            assert!(
                message.starts_with("the control plane is overloaded"),
                "{message}"
            );
        }
    }
    // The lock gone, the same replica answers again.
    let regions = admin.regions().await.unwrap();
    assert_eq!(regions.len(), 1);
    drop(db);
    let _ = driver.await;
}

/// PostgreSQL stopped under a replica (and started again): every call in between is answered
/// 503 with `Retry-After` and the `store_unavailable` code, never a 500 (a caller retries with
/// the same request id and joins, never acts twice), and the replica answers normally once the
/// database is back, without a restart of its own.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_database_restart_is_answered_503_with_retry_after_never_500() {
    let mut w = one_replica(ControlPlaneOptions::default());
    let admin = w.replicas().client(0);
    w.create("eu", "z1").await;
    tokio::task::block_in_place(|| w.replicas_mut().pg.stop()).unwrap();
    let ha = w.replicas();

    let http = harmony_http::ClientSettings::new()
        .ca_pem(Some(ha.pki.ca_pem.as_bytes()))
        .build()
        .unwrap();
    let base = ha.replicas[0].url();
    for i in 0..3 {
        let calls = [
            http.get(format!("{base}/v1/regions")),
            http.post(format!("{base}/v1/regions/eu/requests"))
                .json(&json!({
                "id": format!("down-{i}"), "op": "get_inventory", "params": {}, "timeout_s": 1})),
        ];
        for call in calls {
            let r = call.bearer_auth(&ha.admin_token).send().await.unwrap();
            let (status, retry_after, body) = answer(r).await;
            assert_eq!(status, 503, "{body}\n{}", ha.replicas[0].logs());
            assert_eq!(retry_after.as_deref(), Some("1"), "{body}");
            assert_eq!(body["code"], "store_unavailable", "{body}");
        }
    }

    tokio::task::block_in_place(|| w.replicas_mut().pg.restart()).unwrap();
    eventually(WAIT, "the replica to list the region again", || async {
        match admin.regions().await {
            Ok(regions) if regions.len() == 1 => Ok(()),
            other => Err(other),
        }
    })
    .await
    .unwrap_or_else(|e| panic!("the replica never answered again: {e}"));
}
