//! Service providers end to end, all real processes on loopback: the control plane, the region
//! agent (operating a real kube-apiserver fixture) and an external provider (`e2e-provider`, a
//! small HTTP service) that registers through the agent's provider API. No mocks.
//!
//! Thresholds are small and every wait is generous: the tests assert sequences of states; the one
//! measured threshold is the withdrawal of a type after its provider stops, which the issue asks
//! for.

use serde_json::{Value, json};
use std::collections::BTreeSet;
use std::time::{Duration, Instant};

use harmony::infra::control_plane::{NewService, RegionStatus, ServiceInstance};
use harmony_agent_protocol::ProviderHealth;
use harmony_e2e::eventually::{eventually, eventually_blocking};
use harmony_e2e::multi_region::{AgentOptions, free_port};
use harmony_e2e::providers::{ProviderProcess, http_json};
use harmony_e2e::world::{World, WorldOptions, region, zone};

const PROVIDER_BIN: &str = env!("CARGO_BIN_EXE_e2e-provider");
const WAIT: Duration = Duration::from_secs(60);

/// Provider health checks every 200 ms; unhealthy after 600 ms without a good check.
const CHECK_MS: u64 = 200;

/// A stand-in for KubeVirt's VirtualMachine CRD: its group, version, kind, an open schema.
const KUBEVIRT_VM_CRD: &str = r#"apiVersion: apiextensions.k8s.io/v1
kind: CustomResourceDefinition
metadata:
  name: virtualmachines.kubevirt.io
spec:
  group: kubevirt.io
  scope: Namespaced
  names: {kind: VirtualMachine, listKind: VirtualMachineList, plural: virtualmachines, singular: virtualmachine, shortNames: [vm, vms]}
  versions:
    - name: v1
      served: true
      storage: true
      schema:
        openAPIV3Schema: {type: object, x-kubernetes-preserve-unknown-fields: true}
"#;
const UNHEALTHY_MS: u64 = 600;

/// The world and the port of the agent's provider API.
struct Providers {
    world: World,
    api_port: u16,
}

impl Providers {
    fn new() -> Self {
        Self {
            world: World::start(harmony_e2e::bins!(), WorldOptions::default()),
            api_port: free_port().unwrap(),
        }
    }

    /// Creates region `r` and returns options for its agent, with the provider API on a fixed
    /// loopback port and provider health unavailable after `unavailable_ms`.
    async fn region(&self, r: &str, unavailable_ms: u64, extra: &[&str]) -> AgentOptions {
        let created = self.world.create(r, "z1").await;
        let mut extra_args: Vec<String> = [
            "--provider-listen".to_string(),
            format!("127.0.0.1:{}", self.api_port),
            "--provider-health-interval-ms".into(),
            CHECK_MS.to_string(),
            "--provider-unhealthy-after-ms".into(),
            UNHEALTHY_MS.to_string(),
            "--provider-unavailable-after-ms".into(),
            unavailable_ms.to_string(),
            "--instance-poll-ms".into(),
            "200".into(),
            "--discovery-interval-s".into(),
            "1".into(),
        ]
        .into();
        extra_args.extend(extra.iter().map(|s| s.to_string()));
        AgentOptions {
            extra_args,
            rust_log: Some("harmony_agent=debug,info".into()),
            ..self
                .world
                .agent_options(r, r, "z1", Some(&created.bootstrap_token))
        }
    }

    fn api(&self, path: &str) -> String {
        format!("http://127.0.0.1:{}{path}", self.api_port)
    }

    /// Registers a provider with the agent; returns the HTTP status and body.
    fn register(&self, name: &str, types: &[&str], url: &str) -> (u16, Value) {
        http_json(
            "POST",
            &self.api("/v1/providers"),
            Some(&json!({
                "name": name,
                "service_types": types,
                "endpoint": url,
                "health_url": format!("{url}/healthz"),
            })),
            None,
        )
        .unwrap_or_else(|e| panic!("{e}"))
    }

    /// Waits until the agent's provider API answers (it starts with the agent).
    fn wait_api(&self) {
        eventually_blocking(WAIT, "the agent's provider API to answer", || {
            http_json("GET", &self.api("/healthz"), None, None)
        })
        .unwrap_or_else(|e| panic!("{e}"));
    }

    async fn wait_instance(&self, id: &str, state: &str) -> ServiceInstance {
        eventually(WAIT, format!("instance {id} {state}"), || async {
            match self
                .world
                .client
                .service(id)
                .await
                .unwrap_or_else(|e| panic!("{e}"))
            {
                Some(s) if s.state == state => Ok(s),
                other => Err(other),
            }
        })
        .await
        .unwrap_or_else(|e| panic!("{e}\n{}", self.world.logs()))
    }

    /// Runs the fixture's kubectl and fails the test with its stderr when it fails.
    fn kubectl_ok(&self, args: &[&str]) -> Vec<u8> {
        let out = self.world.server.kubectl(args);
        assert!(
            out.status.success(),
            "kubectl {}: {}",
            args.join(" "),
            String::from_utf8_lossy(&out.stderr)
        );
        out.stdout
    }

    /// The object `resource`/`name` of namespace `harmony-services`, as JSON.
    fn get_json(&self, resource: &str, name: &str) -> Value {
        let out = self.kubectl_ok(&[
            "get",
            resource,
            "-n",
            "harmony-services",
            name,
            "-o",
            "json",
        ]);
        serde_json::from_slice(&out).unwrap()
    }

    /// The objects the built-in providers make (Deployments, Services, CNPG Clusters, KubeVirt
    /// VirtualMachines) in every namespace, as `namespace/kind/name`; with `instance`, only those
    /// labelled as that instance's.
    fn provider_objects(&self, instance: Option<&str>) -> BTreeSet<String> {
        let label = instance.map(|id| format!("harmony.io/service-instance={id}"));
        let mut args = vec![
            "get",
            "deployments.apps,services,clusters.postgresql.cnpg.io,virtualmachines.kubevirt.io",
            "--all-namespaces",
            "-o",
            "json",
        ];
        if let Some(l) = &label {
            args.extend(["-l", l.as_str()]);
        }
        let list: Value = serde_json::from_slice(&self.kubectl_ok(&args)).unwrap();
        list["items"]
            .as_array()
            .unwrap()
            .iter()
            .map(|o| {
                format!(
                    "{}/{}/{}",
                    o["metadata"]["namespace"].as_str().unwrap_or_default(),
                    o["kind"].as_str().unwrap_or_default(),
                    o["metadata"]["name"].as_str().unwrap_or_default()
                )
            })
            .collect()
    }

    /// Waits until the control plane no longer knows instance `id`.
    async fn wait_removed(&self, id: &str) {
        eventually(WAIT, format!("instance {id} deleted"), || async {
            match self.world.client.service(id).await.unwrap() {
                None => Ok(()),
                Some(s) => Err(s),
            }
        })
        .await
        .unwrap_or_else(|e| panic!("{e}\n{}", self.world.logs()));
    }

    async fn create(&self, t: &str, region: Option<&str>, spec: Value) -> ServiceInstance {
        self.world
            .client
            .create_service(&new_service(t, region, spec))
            .await
            .unwrap_or_else(|e| panic!("creating a {t}: {e}\n{}", self.world.cp().logs()))
    }
}

fn new_service(t: &str, region: Option<&str>, spec: Value) -> NewService {
    NewService {
        service_type: t.into(),
        spec,
        region: region.map(str::to_string),
        id: None,
        parent: None,
    }
}

fn advertises(s: &RegionStatus, t: &str) -> bool {
    s.advertised_services.iter().any(|a| a == t)
}

fn offer_health(s: &RegionStatus, t: &str) -> Option<ProviderHealth> {
    s.services
        .iter()
        .find(|o| o.service_type == t)
        .map(|o| o.health)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn an_external_provider_registers_serves_creates_is_withdrawn_when_stopped_and_comes_back() {
    let w = Providers::new();
    // Unavailable after 5 s: a window in which the stopped provider is unhealthy (creates queue).
    let unavailable_ms = 5000;
    let o = w.region("east", unavailable_ms, &[]).await;
    let mut agent = w.world.agent("agent", &o);
    // A second region whose agent never connects: naming it must be refused.
    w.world
        .client
        .create_region(&region("west"), &zone("z1"))
        .await
        .unwrap();
    w.wait_api();
    w.world
        .wait_region("east", "healthy", |s| s.is_healthy())
        .await;

    // Registration: bad input is refused before anything is held.
    let (status, body) = w.register("Bad_Name", &["queue"], "http://127.0.0.1:1");
    assert_eq!(status, 400, "{body}");
    assert!(body["error"].as_str().unwrap().contains("name"), "{body}");

    let mut q1 =
        ProviderProcess::start(PROVIDER_BIN.as_ref(), "q1", w.world.dir.path(), 300).unwrap();
    let (status, body) = w.register("q1", &["queue"], &q1.url());
    assert_eq!(status, 201, "{body}");
    // The same registration again is idempotent.
    let (status, body) = w.register("q1", &["queue"], &q1.url());
    assert_eq!(status, 200, "{body}");
    // One provider per type per agent: another provider for `queue` is refused, naming q1.
    let (status, body) = w.register("q2", &["queue"], "http://127.0.0.1:9");
    assert_eq!(status, 409, "{body}");
    assert_eq!(body["holder"], "q1", "{body}");
    let message = body["error"].as_str().unwrap();
    assert!(
        message.contains("q1") && message.contains("queue"),
        "{body}"
    );
    // ... and so is one for a type a built-in provider holds.
    let (status, body) = w.register("q3", &["container"], "http://127.0.0.1:9");
    assert_eq!(status, 409, "{body}");
    assert_eq!(body["holder"], "kubernetes-workloads", "{body}");
    assert!(
        body["error"]
            .as_str()
            .unwrap()
            .contains("--builtin-providers"),
        "{body}"
    );

    let s = w
        .world
        .wait_region("east", "queue advertised", |s| advertises(s, "queue"))
        .await;
    assert!(advertises(&s, "container"), "{s:?}");

    // A create routed to the provider; its status flows back to the control plane.
    let created = w.create("queue", None, json!({"size": 3})).await;
    assert_eq!(created.region, "east");
    assert!(
        ["pending", "provisioning", "ready"].contains(&created.state.as_str()),
        "{created:?}"
    );
    let ready = w.wait_instance(&created.id, "ready").await;
    assert_eq!(ready.provider.as_deref(), Some("q1"));
    assert_eq!(
        ready.outputs["url"],
        json!(format!("queue://q1/{}", created.id))
    );
    let held = q1.instances().unwrap();
    assert_eq!(held[&created.id]["spec"], json!({"size": 3}), "{held:?}");

    // Naming regions: unknown -> error; a region without the type -> error listing where it is.
    let e = w
        .world
        .client
        .create_service(&new_service("queue", Some("nowhere"), json!({})))
        .await
        .unwrap_err()
        .to_string();
    assert!(e.contains("nowhere") && e.contains("404"), "{e}");
    let e = w
        .world
        .client
        .create_service(&new_service("queue", Some("west"), json!({})))
        .await
        .unwrap_err()
        .to_string();
    assert!(
        e.contains("409") && e.contains("west") && e.contains("available in: east"),
        "{e}"
    );

    // The provider stops: unhealthy first (creates are queued), then withdrawn.
    q1.kill9();
    let stopped = Instant::now();
    w.world
        .wait_region("east", "queue unhealthy", |s| {
            offer_health(s, "queue") == Some(ProviderHealth::Unhealthy)
        })
        .await;
    let s = w.world.status("east").await;
    assert!(
        !advertises(&s, "queue"),
        "advertised while unhealthy: {s:?}"
    );
    let queued = w.create("queue", None, json!({"size": 1})).await;
    assert_eq!(queued.state, "queued", "{queued:?}");
    assert_eq!(queued.region, "east");
    // Deleting a queued create cancels it: it never reaches the provider.
    let cancelled = w.world.client.delete_service(&queued.id).await.unwrap();
    assert_eq!(cancelled.state, "cancelled", "{cancelled:?}");
    assert!(w.world.client.service(&queued.id).await.unwrap().is_none());
    let waiting = w.create("queue", None, json!({"size": 2})).await;
    assert_eq!(waiting.state, "queued", "{waiting:?}");
    // Back before the unavailable threshold: the queued create goes through.
    assert!(
        stopped.elapsed() < Duration::from_millis(unavailable_ms - 1000),
        "the test took too long to stay inside the unhealthy window"
    );
    q1.restart().unwrap();
    w.wait_instance(&waiting.id, "ready").await;
    let held = q1.instances().unwrap();
    assert!(held.contains_key(&waiting.id), "{held:?}");
    assert!(
        !held.contains_key(&queued.id),
        "a cancelled create reached the provider: {held:?}"
    );

    // Stopped for good: withdrawn within the thresholds, then creates are refused.
    q1.kill9();
    let stopped = Instant::now();
    w.world
        .wait_region("east", "queue withdrawn", |s| {
            offer_health(s, "queue").is_none()
        })
        .await;
    let after = stopped.elapsed();
    // The last good check was at most one interval before the stop.
    assert!(
        after >= Duration::from_millis(unavailable_ms - CHECK_MS - 100),
        "withdrawn after {after:?}, before the {unavailable_ms} ms threshold"
    );
    assert!(
        after < Duration::from_millis(unavailable_ms + 10_000),
        "withdrawn only after {after:?}"
    );
    let e = w
        .world
        .client
        .create_service(&new_service("queue", None, json!({})))
        .await
        .unwrap_err()
        .to_string();
    assert!(
        e.contains("409") && e.contains("no region advertises service type \"queue\""),
        "{e}"
    );
    let e = w
        .world
        .client
        .create_service(&new_service("queue", Some("east"), json!({})))
        .await
        .unwrap_err()
        .to_string();
    assert!(e.contains("not available in region \"east\""), "{e}");

    // Restarted: advertised again, and creates work.
    q1.restart().unwrap();
    w.world
        .wait_region("east", "queue advertised again", |s| advertises(s, "queue"))
        .await;
    // The example program's library: create and wait until ready, seeing every state.
    let mut seen = Vec::new();
    let again = example_service_instance::create_and_wait(
        &w.world.client,
        &new_service("queue", Some("east"), json!({})),
        WAIT,
        |i| seen.push(i.state.clone()),
    )
    .await
    .unwrap_or_else(|e| panic!("{e}\n{}", w.world.cp().logs()));
    assert_eq!(again.state, "ready");
    assert_eq!(seen.last().map(String::as_str), Some("ready"), "{seen:?}");

    // Registrations survive an agent restart.
    agent.kill9();
    let agent = w.world.agent("agent-2", &o);
    w.wait_api();
    let (status, body) = http_json("GET", &w.api("/v1/providers/q1"), None, None).unwrap();
    assert_eq!(status, 200, "{body}\n{}", agent.log());
    assert_eq!(body["service_types"], json!(["queue"]));
    w.world
        .wait_region("east", "queue advertised after the agent restart", |s| {
            s.connected && advertises(s, "queue")
        })
        .await;

    // Deleting a live instance goes through the provider.
    let gone = w.world.client.delete_service(&again.id).await.unwrap();
    assert!(
        ["deleted", "deleting"].contains(&gone.state.as_str()),
        "{gone:?}"
    );
    w.wait_removed(&again.id).await;
    assert!(!q1.instances().unwrap().contains_key(&again.id));
    // Deregistration withdraws the type at once.
    let (status, body) = http_json("DELETE", &w.api("/v1/providers/q1"), None, None).unwrap();
    assert_eq!(status, 200, "{body}");
    w.world
        .wait_region("east", "queue withdrawn after deregistration", |s| {
            offer_health(s, "queue").is_none()
        })
        .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_type_is_never_advertised_while_no_healthy_provider_serves_it() {
    let w = Providers::new();
    let o = w.region("north", 1500, &[]).await;
    let _agent = w.world.agent("agent", &o);
    w.wait_api();
    w.world
        .wait_region("north", "healthy", |s| s.is_healthy())
        .await;
    // A provider that is down from the start: registered, never healthy.
    let mut ghost =
        ProviderProcess::start(PROVIDER_BIN.as_ref(), "ghost", w.world.dir.path(), 0).unwrap();
    ghost.kill9();
    let (status, body) = w.register("ghost", &["ghost"], &ghost.url());
    assert_eq!(status, 201, "{body}");
    assert_ne!(body["health"], "healthy", "{body}");
    // Sample both views past the unavailable threshold: never advertised.
    let mut saw_unhealthy = false;
    let started = Instant::now();
    while started.elapsed() < Duration::from_millis(2500) {
        let s = w.world.status("north").await;
        assert!(
            !advertises(&s, "ghost"),
            "advertised with no healthy provider: {s:?}"
        );
        saw_unhealthy |= offer_health(&s, "ghost") == Some(ProviderHealth::Unhealthy);
        let (_, local) = http_json("GET", &w.api("/v1/services"), None, None).unwrap();
        assert!(
            !local["advertised"]
                .as_array()
                .unwrap()
                .contains(&json!("ghost")),
            "the agent advertises ghost: {local}"
        );
        tokio::time::sleep(Duration::from_millis(25)).await;
    }
    assert!(
        saw_unhealthy,
        "the held-but-unhealthy state was never reported"
    );
    let s = w.world.status("north").await;
    assert_eq!(offer_health(&s, "ghost"), None, "{s:?}");
    let (_, view) = http_json("GET", &w.api("/v1/providers/ghost"), None, None).unwrap();
    assert_eq!(view["health"], "unavailable", "{view}");
    // The same sampler sees an advertisement as soon as the provider is healthy.
    ghost.restart().unwrap();
    w.world
        .wait_region("north", "ghost advertised once healthy", |s| {
            advertises(s, "ghost")
        })
        .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn built_in_providers_follow_api_discovery_and_the_container_provider_creates_its_workload() {
    let w = Providers::new();
    let o = w.region("south", 1500, &[]).await;
    let _agent = w.world.agent("agent", &o);
    w.wait_api();
    let s = w
        .world
        .wait_region("south", "container advertised", |s| {
            s.is_healthy() && advertises(s, "container")
        })
        .await;
    // No CloudNativePG or KubeVirt API on this server: those types are not held at all.
    assert_eq!(offer_health(&s, "postgresql"), None, "{s:?}");
    assert_eq!(offer_health(&s, "vm"), None, "{s:?}");

    let created = w
        .create(
            "container",
            Some("south"),
            json!({"image": "registry.example.com/web:1.4", "replicas": 2, "port": 8080, "env": {"MODE": "demo"}}),
        )
        .await;
    let id = created.id.clone();
    // The fixture runs no controllers: the Deployment exists and never becomes ready.
    let d = w.get_json("deployment", &id);
    assert_eq!(d["spec"]["replicas"], 2);
    let container = &d["spec"]["template"]["spec"]["containers"][0];
    assert_eq!(container["image"], "registry.example.com/web:1.4");
    assert_eq!(
        container["env"][0],
        json!({"name": "MODE", "value": "demo"})
    );
    assert_eq!(
        d["metadata"]["labels"]["harmony.io/service-instance"],
        json!(id)
    );
    let service = w.get_json("service", &id);
    assert_eq!(service["spec"]["ports"][0]["port"], 8080, "{service}");
    let record = w.wait_instance(&id, "provisioning").await;
    assert_eq!(record.provider.as_deref(), Some("kubernetes-workloads"));
    assert!(record.detail.contains("0/2"), "{record:?}");
    assert_eq!(
        record.outputs["service"],
        json!(format!("{id}.harmony-services.svc:8080"))
    );

    // What the cluster reports flows back: the Deployment's status says both replicas are ready.
    w.kubectl_ok(&[
        "patch",
        "deployment",
        "-n",
        "harmony-services",
        &id,
        "--subresource=status",
        "--type=merge",
        "-p",
        r#"{"status":{"replicas":2,"readyReplicas":2,"availableReplicas":2}}"#,
    ]);
    w.wait_instance(&id, "ready").await;

    let gone = w.world.client.delete_service(&id).await.unwrap();
    assert!(
        ["deleted", "deleting"].contains(&gone.state.as_str()),
        "{gone:?}"
    );
    w.wait_removed(&id).await;
    let out = w
        .world
        .server
        .kubectl(&["get", "deployment", "-n", "harmony-services", &id]);
    assert!(
        !out.status.success(),
        "the Deployment outlived its instance"
    );

    // The CloudNativePG API appears: discovery enables the postgresql provider.
    w.world.server.install_crds().unwrap();
    w.world
        .wait_region("south", "postgresql advertised", |s| {
            advertises(s, "postgresql")
        })
        .await;
    let pg = w
        .create("postgresql", None, json!({"version": 17, "storage": "2Gi"}))
        .await;
    let cluster = w.get_json("clusters.postgresql.cnpg.io", &pg.id);
    assert_eq!(cluster["spec"]["storage"]["size"], "2Gi");
    assert!(
        cluster["spec"]["imageName"]
            .as_str()
            .unwrap_or_default()
            .contains("17"),
        "{cluster}"
    );
    let record = w.wait_instance(&pg.id, "provisioning").await;
    assert_eq!(
        record.outputs["host"],
        json!(format!("{}-rw.harmony-services.svc", pg.id))
    );
    assert!(!format!("{record:?}").contains("password"), "{record:?}");
    // KubeVirt's API appears. tests/crds has no KubeVirt CRD, so this stand-in declares its
    // group, version and kind (VirtualMachine, kubevirt.io/v1) with an open schema: enough for
    // discovery and for the provider's objects, not a KubeVirt installation.
    let crd = w.world.dir.path().join("kubevirt-vm-crd.yaml");
    std::fs::write(&crd, KUBEVIRT_VM_CRD).unwrap();
    w.kubectl_ok(&["apply", "-f", &crd.display().to_string()]);
    w.kubectl_ok(&[
        "wait",
        "--for=condition=Established",
        "--timeout=60s",
        "crd/virtualmachines.kubevirt.io",
    ]);
    w.world
        .wait_region("south", "vm advertised", |s| advertises(s, "vm"))
        .await;
    let vm = w
        .create(
            "vm",
            Some("south"),
            json!({"image": "quay.io/containerdisks/fedora:41", "cpu": 2, "memory": "2Gi"}),
        )
        .await;
    let object = w.get_json("virtualmachines.kubevirt.io", &vm.id);
    let template = &object["spec"]["template"]["spec"];
    assert_eq!(template["domain"]["cpu"]["cores"], 2, "{object}");
    assert_eq!(
        template["volumes"][0]["containerDisk"]["image"],
        "quay.io/containerdisks/fedora:41"
    );
    w.wait_instance(&vm.id, "provisioning").await;
    w.kubectl_ok(&[
        "patch",
        "virtualmachines.kubevirt.io",
        "-n",
        "harmony-services",
        &vm.id,
        "--type=merge",
        "-p",
        r#"{"status":{"printableStatus":"Running"}}"#,
    ]);
    w.wait_instance(&vm.id, "ready").await;

    // A spec error names the field, and nothing is created.
    let before = w.provider_objects(None);
    assert!(
        before.iter().any(|o| o.contains(&vm.id)),
        "the listing must see the providers' objects: {before:?}"
    );
    let e = w
        .world
        .client
        .create_service(&new_service("container", None, json!({"replicas": 1})))
        .await;
    let text = match e {
        Ok(i) => {
            let failed = w.wait_instance(&i.id, "failed").await;
            let labelled = w.provider_objects(Some(&i.id));
            assert!(
                labelled.is_empty(),
                "the instance with a spec error has objects: {labelled:?}"
            );
            format!("{failed:?}")
        }
        Err(e) => e.to_string(),
    };
    assert!(text.contains("image"), "{text}");
    let after = w.provider_objects(None);
    assert_eq!(
        after.difference(&before).collect::<Vec<_>>(),
        Vec::<&String>::new(),
        "a spec error must create nothing, yet these objects appeared"
    );
}
