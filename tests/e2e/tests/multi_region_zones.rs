//! Zones and containment end to end: one region with two zones, each a real kube-apiserver
//! fixture operated by its own agent process, behind a real control-plane process (TLS on
//! loopback). Requests are placed by zone name and by health; one zone's agent is killed and
//! the region stays healthy with the other. Children labelled (or parented) for another region
//! or zone are refused with 422 `containment`, and nothing reaches any agent.
//!
//! Run: `cargo test -p harmony_e2e --test multi_region_zones` (needs the kube-apiserver fixture:
//! `HARMONY_KUBE_FIXTURE=$(bash tests/kube-fixture/build.sh | tail -n 1)`).

use serde_json::{Value, json};
use std::cell::RefCell;

use harmony::domain::RunContext;
use harmony::domain::capability::{ApplyOptions, CapabilityError, K8sClient, K8sObject};
use harmony::infra::control_plane::{AgentTopology, ControlPlaneError, NewService, RegionStatus};
use harmony_api::Health;
use harmony_e2e::ApiServer;
use harmony_e2e::eventually::eventually;
use harmony_e2e::multi_region::{Agent, AgentOptions};
use harmony_e2e::world::{HEALTH_WAIT as WAIT, World, WorldOptions, region, zone};

/// A world whose agents operate `server` unless told otherwise.
fn world(server: ApiServer) -> World {
    World::start(
        harmony_e2e::bins!(),
        WorldOptions {
            server: Some(server),
            ..Default::default()
        },
    )
}

/// Starts the agent of `r`/`z` (presenting `token`) operating `server`.
fn zone_agent(
    w: &World,
    r: &str,
    z: &str,
    token: &harmony_agent_protocol::SecretString,
    server: &ApiServer,
) -> Agent {
    let name = format!("{r}-{z}");
    let o = AgentOptions {
        extra_args: vec!["--discovery-interval-s".into(), "1".into()],
        kubeconfig: server.kubeconfig(),
        ..w.agent_options(&name, r, z, Some(token))
    };
    w.agent(&name, &o)
}

fn zone_health(s: &RegionStatus, z: &str) -> Health {
    s.zone(z)
        .unwrap_or_else(|| panic!("no zone {z} in {s:#?}"))
        .health
}

fn configmap(name: &str, labels: Value) -> Value {
    json!({"manifests": [{"apiVersion": "v1", "kind": "ConfigMap",
        "metadata": {"name": name, "namespace": "default", "labels": labels},
        "data": {"k": "v"}}]})
}

fn has_configmap(server: &ApiServer, name: &str) -> bool {
    server
        .kubectl(&["get", "configmap", name, "-n", "default", "-o", "name"])
        .status
        .success()
}

fn status_error(e: ControlPlaneError) -> (u16, harmony_api::ApiError) {
    match e {
        ControlPlaneError::Status { status, error, .. } => (status, *error),
        other => panic!("expected an error status, got {other}"),
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn two_zones_take_requests_by_name_and_by_health_and_the_region_outlives_one_zone() {
    let server_b = ApiServer::start().unwrap_or_else(|e| panic!("{e}"));
    let w = world(ApiServer::start().unwrap_or_else(|e| panic!("{e}")));
    let server_a = &w.server;
    let first = w.create("eu", "a").await;
    let second = w
        .client
        .add_zone(&region("eu"), &zone("b"), None)
        .await
        .unwrap_or_else(|e| panic!("{e}"))
        .expect("a new zone");
    assert_eq!((second.region.as_str(), second.zone.as_str()), ("eu", "b"));
    // Adding it again: its token was shown once.
    assert!(
        w.client
            .add_zone(&region("eu"), &zone("b"), None)
            .await
            .unwrap()
            .is_none()
    );

    let mut agent_a = zone_agent(&w, "eu", "a", &first.bootstrap_token, server_a);
    let _agent_b = zone_agent(&w, "eu", "b", &second.bootstrap_token, &server_b);
    let s = w
        .wait_region("eu", "healthy in both zones", |s| {
            zone_health(s, "a") == Health::Healthy && zone_health(s, "b") == Health::Healthy
        })
        .await;
    assert_eq!(s.health, Health::Healthy);
    assert_eq!(s.zone, "a", "the legacy zone field names the first zone");
    for z in &s.zones {
        assert_eq!(z.connected, Some(true), "{z:?}");
        assert!(z.agent_version.is_some(), "{z:?}");
    }
    // The agents report what they can list of their clusters (node count and capacity).
    let s = w
        .wait_region("eu", "reporting nodes", |s| {
            s.zones.iter().all(|z| z.node_count.is_some())
        })
        .await;
    assert!(s.zones.iter().all(|z| z.capacity.is_some()), "{s:#?}");

    // By name: each zone's request lands in its own cluster only.
    for (z, server, other) in [("a", server_a, &server_b), ("b", &server_b, server_a)] {
        let name = format!("placed-in-{z}");
        let id = format!("req-{z}");
        let res = w
            .client
            .request_in_zone(
                "eu",
                Some(z),
                &id,
                "apply_manifests",
                configmap(&name, json!({})),
                WAIT,
            )
            .await
            .unwrap_or_else(|e| panic!("{e}"));
        assert!(res.ok, "{res:?}");
        assert!(
            has_configmap(server, &name),
            "{name} missing in zone {z}'s cluster"
        );
        assert!(
            !has_configmap(other, &name),
            "{name} leaked into the other zone's cluster"
        );
        let stored = w.client.request_status(&id).await.unwrap().unwrap();
        assert_eq!(stored.zone.as_deref(), Some(z));
    }
    // An unknown zone is refused, naming the region's zones.
    let e = w
        .client
        .request_in_zone("eu", Some("c"), "req-c", "get_inventory", json!({}), WAIT)
        .await
        .unwrap_err();
    let (status, body) = status_error(e);
    assert_eq!(status, 404);
    assert!(
        body.error.contains("no active zone c") && body.error.contains("a, b"),
        "{}",
        body.error
    );

    // Zone a's agent dies: the region stays healthy (zone b), zone a goes unavailable.
    agent_a.kill9();
    let seen_a = RefCell::new(Vec::new());
    eventually(WAIT, "zone a unavailable", || async {
        let s = w.status("eu").await;
        assert_eq!(
            s.health,
            Health::Healthy,
            "the region follows its healthy zone: {s:#?}"
        );
        let h = zone_health(&s, "a");
        let mut seen = seen_a.borrow_mut();
        if seen.last() != Some(&h) {
            seen.push(h);
        }
        if h != Health::Unavailable {
            return Err(format!("zone a was {seen:?}"));
        }
        assert_eq!(zone_health(&s, "b"), Health::Healthy);
        assert_eq!(s.zone("a").unwrap().connected, Some(false));
        Ok(())
    })
    .await
    .unwrap_or_else(|e| panic!("{e}\n{}", w.logs()));
    let seen_a = seen_a.into_inner();
    // Health only degrades: healthy, then (maybe seen) unhealthy, then unavailable.
    let rank = |h: &Health| match h {
        Health::Healthy => 0,
        Health::Unhealthy => 1,
        Health::Unavailable => 2,
    };
    assert!(
        seen_a.windows(2).all(|p| rank(&p[0]) < rank(&p[1])),
        "{seen_a:?}"
    );

    // Without a zone, placement picks the healthy zone b.
    let res = w
        .client
        .request(
            "eu",
            "req-any",
            "apply_manifests",
            configmap("placed-by-health", json!({})),
            WAIT,
        )
        .await
        .unwrap_or_else(|e| panic!("{e}"));
    assert!(res.ok, "{res:?}");
    let stored = w.client.request_status("req-any").await.unwrap().unwrap();
    assert_eq!(stored.zone.as_deref(), Some("b"));
    assert!(has_configmap(&server_b, "placed-by-health"));
    assert!(!has_configmap(server_a, "placed-by-health"));

    // Decommissioning zone a leaves the region (and zone b) working.
    w.client.decommission_zone("eu", "a").await.unwrap();
    let s = w.status("eu").await;
    assert_eq!(s.zone("a").unwrap().decommissioned, Some(true));
    assert_eq!(s.health, Health::Healthy);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn children_in_another_region_or_zone_are_refused_and_nothing_reaches_an_agent() {
    let w = world(ApiServer::start().unwrap_or_else(|e| panic!("{e}")));
    let server = &w.server;
    let eu = w.create("eu", "a").await;
    w.create("us", "x").await;
    // Zone b exists (no agent): only a's agent runs.
    w.client
        .add_zone(&region("eu"), &zone("b"), None)
        .await
        .unwrap()
        .expect("new");
    let agent = zone_agent(&w, "eu", "a", &eu.bootstrap_token, server);
    w.wait_region("eu", "healthy with container advertised", |s| {
        zone_health(s, "a") == Health::Healthy
            && s.advertised_services.iter().any(|t| t == "container")
    })
    .await;

    // 1. A manifest labelled for another region than the request's.
    let refused = [
        (
            "region-label",
            json!({"harmony.io/region": "us"}),
            None,
            "us",
        ),
        (
            "zone-label",
            json!({"harmony.io/zone": "b"}),
            Some("a"),
            "b",
        ),
    ];
    for (id, labels, zone, elsewhere) in refused {
        let e = w
            .client
            .request_in_zone(
                "eu",
                zone,
                id,
                "apply_manifests",
                configmap(id, labels),
                WAIT,
            )
            .await
            .unwrap_err();
        let (status, body) = status_error(e);
        assert_eq!(
            (status, body.code.as_deref()),
            (422, Some("containment")),
            "{body:?}"
        );
        assert!(
            body.error.contains(&format!("ConfigMap default/{id}"))
                && body.error.contains("region eu")
                && body.error.contains(&format!("={elsewhere}")),
            "{}",
            body.error
        );
        // Nothing stored, nothing sent: no such request, no such object, nothing in the log.
        assert!(w.client.request_status(id).await.unwrap().is_none());
        assert!(!has_configmap(server, id));
        assert!(!agent.log().contains(id), "{}", agent.log());
    }

    // 2. AgentTopology refuses the same object before sending anything.
    let topology = AgentTopology::new(
        "eu-a",
        region("eu"),
        w.cp().client(),
        &RunContext::default(),
    )
    .with_zone(zone("a"));
    let object = K8sObject::new(
        configmap("topology-zone-label", json!({"harmony.io/zone": "b"}))["manifests"][0].clone(),
    )
    .unwrap();
    let failure = topology
        .apply(&[object], &ApplyOptions::default())
        .await
        .expect_err("an object of zone b sent to zone a");
    match &failure.error {
        CapabilityError::InvalidObject { object, problem } => {
            assert_eq!(object, "ConfigMap default/topology-zone-label");
            assert!(
                problem.contains("harmony.io/zone=b") && problem.contains("region eu zone a"),
                "{problem}"
            );
        }
        other => panic!("expected InvalidObject, got {other:?}"),
    }
    assert!(!has_configmap(server, "topology-zone-label"));
    let s = w.status("eu").await;
    assert_eq!(s.zone("a").unwrap().pending_requests, Some(0));

    // 3. A service instance whose parent is in another region.
    let parent = w
        .client
        .create_service(&NewService {
            service_type: "container".into(),
            spec: json!({"image": "registry.example.com/web:1", "port": 8080}),
            region: Some("eu".into()),
            id: Some("parent".into()),
            parent: None,
        })
        .await
        .unwrap_or_else(|e| panic!("{e}\n{}", w.cp().logs()));
    assert_eq!(
        (parent.region.as_str(), parent.zone.as_deref()),
        ("eu", Some("a"))
    );
    let e = w
        .client
        .create_service(&NewService {
            service_type: "container".into(),
            spec: json!({"image": "registry.example.com/worker:1"}),
            region: Some("us".into()),
            id: Some("child".into()),
            parent: Some("parent".into()),
        })
        .await
        .unwrap_err();
    let (status, body) = status_error(e);
    assert_eq!(
        (status, body.code.as_deref()),
        (422, Some("containment")),
        "{body:?}"
    );
    for word in ["\"child\"", "\"parent\"", "\"us\"", "\"eu\""] {
        assert!(body.error.contains(word), "{word} missing: {}", body.error);
    }
    assert!(w.client.service("child").await.unwrap().is_none());
    assert!(
        w.client
            .request_status("child.create.1")
            .await
            .unwrap()
            .is_none()
    );
    // Without a region the child inherits its parent's region and zone.
    let child = w
        .client
        .create_service(&NewService {
            service_type: "container".into(),
            spec: json!({"image": "registry.example.com/worker:1"}),
            region: None,
            id: Some("child".into()),
            parent: Some("parent".into()),
        })
        .await
        .unwrap_or_else(|e| panic!("{e}"));
    assert_eq!(
        (
            child.region.as_str(),
            child.zone.as_deref(),
            child.parent.as_deref()
        ),
        ("eu", Some("a"), Some("parent"))
    );
}
