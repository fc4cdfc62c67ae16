//! Zones in the services, over a real SQLite store: requests are placed by name and by health,
//! delivered to their zone's connection only, answered by their zone's agent only; unknown zones
//! and misplaced objects are refused before anything is stored.

use harmony_agent_protocol::{AgentStatus, Frame, RawJson, Res};
use std::time::Duration;

use super::dispatch::{self, Delivery};
use super::requests::{self, RequestError, Submission};
use super::{ControlPlane, HealthPolicy, Settings, regions, sessions, start};
use crate::store::sqlite::SqliteStore;

fn settings() -> Settings {
    Settings {
        replica_id: "test".into(),
        policy: HealthPolicy {
            heartbeat: Duration::from_millis(100),
            unhealthy_after: Duration::from_secs(30),
            unavailable_after: Duration::from_secs(60),
        },
        bootstrap_ttl: Duration::from_secs(60),
        identity_ttl: Duration::from_secs(3600),
        identity_overlap: Duration::from_secs(60),
        max_request_wait: Duration::from_secs(10),
        request_retention: Duration::from_secs(3600),
        max_frame_bytes: harmony_agent_protocol::MAX_FRAME_BYTES,
    }
}

/// A healthy stand-in agent connection of zone `zone` of region `eu`.
async fn connect(cp: &ControlPlane, zone: &str) -> sessions::Opened {
    let reachable = AgentStatus {
        k8s_reachable: true,
        ..AgentStatus::default()
    };
    let hello = super::tests::zone_hello("eu", zone, "0.1.0");
    super::tests::stand_in(cp, &hello, Some(reachable)).await
}

fn submission(id: &str, op: &str, params: &str, zone: Option<&str>) -> Submission {
    Submission {
        id: Some(id.into()),
        op: op.into(),
        params: RawJson::from_string(params.into()).unwrap(),
        zone: zone.map(str::to_string),
        by_admin: false,
        scope: None,
    }
}

#[tokio::test]
async fn requests_go_to_the_named_or_a_healthy_zone_and_only_its_agent_answers() {
    let dir = tempfile::tempdir().unwrap();
    let store = std::sync::Arc::new(SqliteStore::open(&dir.path().join("cp.sqlite")).unwrap());
    let cp = ControlPlane::new(store, settings());
    start(cp.clone()).await.unwrap();
    regions::create(&cp, "eu", "a", None).await.unwrap();
    regions::add_zone(&cp, "eu", "b", None).await.unwrap();
    // Only zone b has an agent: placement picks it although a is the first zone.
    let _b = connect(&cp, "b").await;
    let placed = requests::submit(&cp, "eu", submission("r1", "get_inventory", "{}", None))
        .await
        .unwrap();
    assert_eq!(placed.zone, "b");
    let named = requests::submit(
        &cp,
        "eu",
        submission("r2", "get_inventory", "{}", Some("a")),
    )
    .await
    .unwrap();
    assert_eq!(named.zone, "a");

    // Each zone's connection is handed its own requests only.
    let ids = |frames: Vec<Frame>| {
        frames
            .into_iter()
            .filter_map(|f| match f {
                Frame::Req(r) => Some(r.id),
                _ => None,
            })
            .collect::<Vec<_>>()
    };
    let mut to_b = Delivery::new("eu", "b", 1 << 20);
    let mut to_a = Delivery::new("eu", "a", 1 << 20);
    assert_eq!(ids(to_b.next(&cp).await.unwrap()), ["r1"]);
    assert_eq!(ids(to_a.next(&cp).await.unwrap()), ["r2"]);
    // Zone a's agent cannot answer zone b's request; b's can.
    let res = Res::ok_raw("r1", RawJson::from_string("{}".into()).unwrap());
    assert!(!dispatch::record_result(&cp, "eu", "a", &res).await.unwrap());
    assert!(dispatch::record_result(&cp, "eu", "b", &res).await.unwrap());

    // An unknown zone is refused, naming the region's zones; nothing is stored.
    match requests::submit(
        &cp,
        "eu",
        submission("r3", "get_inventory", "{}", Some("c")),
    )
    .await
    {
        Err(RequestError::UnknownZone { known, .. }) => assert_eq!(known, "a, b"),
        other => panic!("{other:?}"),
    }
    assert!(cp.store.request("r3").await.unwrap().is_none());

    // Objects labelled for another region or zone are refused; nothing is stored.
    let labelled = |label: &str| {
        format!(
            r#"{{"manifests":[{{"apiVersion":"v1","kind":"ConfigMap","metadata":{{"name":"c","namespace":"ns","labels":{{{label}}}}}}}]}}"#
        )
    };
    for (id, label, zone) in [
        ("r4", r#""harmony.io/region":"us""#, None),
        ("r5", r#""harmony.io/zone":"b""#, Some("a")),
    ] {
        let sub = submission(id, "apply_manifests", &labelled(label), zone);
        match requests::submit(&cp, "eu", sub).await {
            Err(RequestError::Containment(m)) => {
                assert!(
                    m.contains("ConfigMap ns/c") && m.contains("region eu"),
                    "{m}"
                )
            }
            other => panic!("{id}: {other:?}"),
        }
        assert!(cp.store.request(id).await.unwrap().is_none());
    }
    // Without a zone, objects labelled for zone a go to zone a.
    let sub = submission(
        "r6",
        "apply_manifests",
        &labelled(r#""harmony.io/zone":"a""#),
        None,
    );
    assert_eq!(requests::submit(&cp, "eu", sub).await.unwrap().zone, "a");
}
