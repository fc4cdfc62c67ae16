//! The services over a real SQLite store, with a stand-in agent that answers what
//! [`Delivery`] hands it: durable requests and their idempotency, size refusal, revocation,
//! the bootstrap exchange and renewals, and service instances through the request path.

use harmony_agent_protocol::{
    AgentStatus, Frame, Hello, InstanceState, InstanceStatus, ProviderHealth, RawJson, Req, Res,
    SecretString, ServiceOffer, Services, close,
};
use serde_json::{Map, json};
use std::sync::Arc;
use std::time::Duration;

use super::dispatch::{self, Delivery};
use super::identities::{self, AuthError};
use super::instances::{self, Deleted, NewInstance};
use super::requests::{self, RequestError, Submission, Update};
use super::{ControlPlane, HealthPolicy, Settings, regions, sessions, start};
use crate::hub::Command;
use crate::store::{Event, Refusal, sqlite::SqliteStore};

pub(crate) fn settings() -> Settings {
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

pub(super) async fn control_plane(dir: &std::path::Path) -> Arc<ControlPlane> {
    control_plane_with(dir, settings()).await
}

/// [`control_plane`] with other settings.
pub(super) async fn control_plane_with(
    dir: &std::path::Path,
    settings: Settings,
) -> Arc<ControlPlane> {
    let store = Arc::new(SqliteStore::open(&dir.join("cp.sqlite")).unwrap());
    let cp = ControlPlane::new(store, settings);
    start(cp.clone()).await.unwrap();
    cp
}

/// A stand-in agent's hello for `region`/`zone`: agent `version`, no ops, 1 MiB frames.
pub(crate) fn zone_hello(region: &str, zone: &str, version: &str) -> Hello {
    Hello {
        agent_version: version.into(),
        region: region.into(),
        zone: zone.into(),
        ops: vec![],
        protocol: 1,
        max_frame_bytes: 1 << 20,
        cluster_scoped: Vec::new(),
    }
}

/// A stand-in agent opening its session with `hello` and, with a `status`, sending one
/// heartbeat carrying it (flushed to the store).
pub(crate) async fn stand_in(
    cp: &ControlPlane,
    hello: &Hello,
    status: Option<AgentStatus>,
) -> sessions::Opened {
    let opened = sessions::open(cp, hello).await.unwrap().unwrap();
    if let Some(status) = status {
        sessions::heartbeat(cp, &hello.region, &opened.conn, &status);
        sessions::flush_heartbeats(cp).await.unwrap();
    }
    opened
}

fn hello(region: &str, max_frame_bytes: u64) -> Hello {
    Hello {
        max_frame_bytes,
        ..zone_hello(region, "z", "0.1.0")
    }
}

/// A connected stand-in agent of `region`: reports its cluster reachable, advertises
/// `services`, answers each delivered request with `answer` (none: never answers) and reports
/// close commands on the returned channel.
pub(super) async fn agent(
    cp: &Arc<ControlPlane>,
    region: &str,
    max_frame_bytes: u64,
    services: Services,
    answer: Option<fn(&Req) -> Res>,
) -> tokio::sync::oneshot::Receiver<Command> {
    let opened = sessions::open(cp, &hello(region, max_frame_bytes))
        .await
        .unwrap()
        .expect("the newest connection");
    let status = AgentStatus {
        k8s_reachable: true,
        ..AgentStatus::default()
    };
    sessions::heartbeat(cp, region, &opened.conn, &status);
    sessions::flush_heartbeats(cp).await.unwrap();
    sessions::set_services(cp, region, &opened.conn, &services)
        .await
        .unwrap();
    let (closed_tx, closed_rx) = tokio::sync::oneshot::channel();
    let (cp, region) = (cp.clone(), region.to_string());
    tokio::spawn(async move {
        let mut inbox = opened.inbox;
        let mut delivery = Delivery::new(&region, "z", max_frame_bytes);
        inbox.deliver.notify_one();
        loop {
            tokio::select! {
                c = &mut inbox.commands => {
                    let _ = closed_tx.send(c.unwrap());
                    return;
                }
                () = inbox.deliver.notified() => {
                    for frame in delivery.next(&cp).await.unwrap() {
                        let (Frame::Req(req), Some(answer)) = (frame, answer) else { continue };
                        let res = answer(&req);
                        dispatch::record_result(&cp, &region, "z", &res).await.unwrap();
                    }
                }
            }
        }
    });
    closed_rx
}

pub(super) fn inventory(req: &Req) -> Res {
    Res::ok_raw(
        &req.id,
        RawJson::from_string(r#"{"nodes": 1e0}"#.into()).unwrap(),
    )
}

pub(super) fn sub(id: &str, params: &str) -> Submission {
    Submission {
        id: Some(id.into()),
        op: "get_inventory".into(),
        params: RawJson::from_string(params.into()).unwrap(),
        scope: None,
        zone: None,
        by_admin: false,
    }
}

pub(super) async fn region(cp: &ControlPlane, name: &str) -> SecretString {
    regions::create(cp, name, "z", None).await.unwrap().token
}

#[tokio::test]
async fn a_request_is_stored_before_delivery_answered_once_and_joined_by_its_id() {
    let dir = tempfile::tempdir().unwrap();
    let cp = control_plane(dir.path()).await;
    region(&cp, "eu").await;
    // Accepted while no agent is connected: it waits in the store.
    let waiting = {
        let cp = cp.clone();
        tokio::spawn(async move {
            requests::call(&cp, "eu", sub("r1", "{}"), Duration::from_secs(10)).await
        })
    };
    while cp
        .store
        .unanswered_counts()
        .await
        .unwrap()
        .get(&("eu".into(), "z".into()))
        != Some(&1)
    {
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    let _closed = agent(&cp, "eu", 1 << 20, Services::default(), Some(inventory)).await;
    let res = waiting.await.unwrap().unwrap();
    // Byte for byte: 1e0 is not re-encoded as 1.0.
    assert_eq!(res.result.as_ref().unwrap().get(), r#"{"nodes": 1e0}"#);
    // The same id and body: the stored result, without a second delivery.
    let again = requests::call(&cp, "eu", sub("r1", "{}"), Duration::from_secs(1))
        .await
        .unwrap();
    assert_eq!(again, res);
    let status = requests::status(&cp, "r1", None).await.unwrap();
    assert_eq!(status.deliveries, 1);
    assert_eq!(status.state, harmony_api::RequestState::Done);
    // The same params spelled differently join it; other params are refused.
    let joined = requests::call(&cp, "eu", sub("r1", "{ }"), Duration::from_secs(1))
        .await
        .unwrap();
    assert_eq!(joined, res);
    match requests::call(&cp, "eu", sub("r1", r#"{"x":1}"#), Duration::from_secs(1)).await {
        Err(RequestError::DuplicateId { op, .. }) => assert_eq!(op, "get_inventory"),
        other => panic!("{other:?}"),
    }
    assert!(matches!(
        requests::call(&cp, "nowhere", sub("r2", "{}"), Duration::from_secs(1)).await,
        Err(RequestError::UnknownRegion(_))
    ));
}

#[tokio::test]
async fn a_streamed_request_relays_progress_then_its_result() {
    let dir = tempfile::tempdir().unwrap();
    let cp = control_plane(dir.path()).await;
    region(&cp, "eu").await;
    let (accepted, mut updates) =
        requests::stream(cp.clone(), "eu", sub("s1", "{}"), Duration::from_secs(10))
            .await
            .unwrap();
    assert!(accepted.created);
    // What the holder of the agent's connection publishes when a progress frame arrives.
    let progress = Event::Progress {
        id: "s1".into(),
        stage: "applying".into(),
        detail: "1/2".into(),
    };
    cp.store.publish(&progress).await.unwrap();
    match updates.recv().await.unwrap() {
        Update::Progress { stage, detail } => {
            assert_eq!((stage.as_str(), detail.as_str()), ("applying", "1/2"))
        }
        other => panic!("{other:?}"),
    }
    let _closed = agent(&cp, "eu", 1 << 20, Services::default(), Some(inventory)).await;
    match updates.recv().await.unwrap() {
        Update::Finished(Ok(res)) => assert!(res.ok),
        other => panic!("{other:?}"),
    }
    assert!(updates.recv().await.is_none());
    // A refusal at submit comes before any stream.
    assert!(matches!(
        requests::stream(cp.clone(), "eu", sub("s1", "[]"), Duration::from_secs(1)).await,
        Err(RequestError::DuplicateId { .. })
    ));
}

#[tokio::test]
async fn a_request_over_the_agents_frame_limit_is_refused_and_never_queued() {
    let dir = tempfile::tempdir().unwrap();
    let cp = control_plane(dir.path()).await;
    region(&cp, "eu").await;
    let _closed = agent(&cp, "eu", 300, Services::default(), Some(inventory)).await;
    let big = format!(r#"{{"pad": "{}"}}"#, "x".repeat(400));
    match requests::call(&cp, "eu", sub("big", &big), Duration::from_secs(1)).await {
        Err(RequestError::TooLarge { limit, size, .. }) => {
            assert_eq!(limit, 300);
            assert!(size > 400, "{size}");
        }
        other => panic!("{other:?}"),
    }
    assert!(matches!(
        requests::status(&cp, "big", None).await,
        Err(RequestError::NotFound(_))
    ));
    // The region carries on.
    let small = requests::call(&cp, "eu", sub("small", "{}"), Duration::from_secs(5)).await;
    assert!(small.unwrap().ok);
}

#[tokio::test]
async fn revocation_drops_unanswered_requests_and_closes_the_agent_at_once() {
    let dir = tempfile::tempdir().unwrap();
    let cp = control_plane(dir.path()).await;
    region(&cp, "eu").await;
    let closed = agent(&cp, "eu", 1 << 20, Services::default(), None).await;
    let waiting = {
        let cp = cp.clone();
        tokio::spawn(async move {
            requests::call(&cp, "eu", sub("r1", "{}"), Duration::from_secs(10)).await
        })
    };
    while requests::status(&cp, "r1", None)
        .await
        .map_or(true, |s| s.deliveries == 0)
    {
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    assert!(identities::revoke(&cp, "eu").await.unwrap());
    match waiting.await.unwrap() {
        Err(RequestError::Cancelled { message, .. }) => {
            assert!(message.contains("decommissioned"), "{message}")
        }
        other => panic!("{other:?}"),
    }
    assert_eq!(
        closed.await.unwrap(),
        Command::Close(close::REVOKED, identities::REVOKED_REASON.into())
    );
    assert!(!identities::revoke(&cp, "nowhere").await.unwrap());
    assert!(matches!(
        requests::call(&cp, "eu", sub("r2", "{}"), Duration::from_secs(1)).await,
        Err(RequestError::Decommissioned(_))
    ));
}

#[tokio::test]
async fn a_lost_welcome_is_repaired_until_the_identity_is_used_and_renewal_overlaps() {
    let dir = tempfile::tempdir().unwrap();
    let cp = control_plane(dir.path()).await;
    let token = region(&cp, "eu").await;
    let first = identities::authenticate(&cp, Some(&token), "eu", "z")
        .await
        .unwrap();
    let identity = first.issued.clone().unwrap();
    assert!(first.unconfirmed && first.expires_at.is_some());
    // The welcome was lost: the same token gives the same identity.
    let again = identities::authenticate(&cp, Some(&token), "eu", "z")
        .await
        .unwrap();
    assert_eq!(again.issued, Some(identity.clone()));
    // The agent spoke after welcome: the token is spent for good.
    identities::confirm(&cp, &first.identity_hash)
        .await
        .unwrap();
    match identities::authenticate(&cp, Some(&token), "eu", "z").await {
        Err(AuthError::Refused { refusal, .. }) => assert_eq!(refusal, Refusal::Used),
        other => panic!("{other:?}"),
    }
    assert!(matches!(
        identities::authenticate(&cp, Some(&identity), "eu", "other").await,
        Err(AuthError::Mismatch { .. })
    ));
    let with_identity = identities::authenticate(&cp, Some(&identity), "eu", "z")
        .await
        .unwrap();
    assert!(with_identity.issued.is_none());
    // Renewal: a new identity; the old one stays valid for the overlap.
    let renewed = identities::renew(&cp, "eu", &with_identity.identity_hash)
        .await
        .unwrap();
    assert_ne!(renewed.identity, identity);
    for id in [&identity, &renewed.identity] {
        identities::authenticate(&cp, Some(id), "eu", "z")
            .await
            .unwrap();
    }
    assert!(matches!(
        identities::authenticate(&cp, None, "eu", "z").await,
        Err(AuthError::NoCredential)
    ));
}

pub(super) fn provider(req: &Req) -> Res {
    let instance_id = req.params.parse::<serde_json::Value>().unwrap()["instance_id"]
        .as_str()
        .unwrap()
        .to_string();
    let state = if req.op == "service_create" {
        InstanceState::Provisioning
    } else {
        InstanceState::Deleted
    };
    Res::ok(
        &req.id,
        InstanceStatus {
            instance_id,
            service_type: "queue".into(),
            provider: "q".into(),
            state,
            detail: String::new(),
            outputs: Map::new(),
        },
    )
}

pub(super) fn offers(health: ProviderHealth) -> Services {
    Services {
        offers: vec![ServiceOffer {
            service_type: "queue".into(),
            provider: "q".into(),
            builtin: false,
            health,
            detail: String::new(),
        }],
    }
}

pub(super) fn new_queue(id: &str) -> NewInstance {
    NewInstance {
        service_type: "queue".into(),
        spec: Some(json!({"size": 1})),
        region: None,
        id: Some(id.into()),
        owner: None,
        parent: None,
    }
}

#[tokio::test]
async fn instances_are_created_and_deleted_through_durable_requests() {
    let dir = tempfile::tempdir().unwrap();
    let cp = control_plane(dir.path()).await;
    region(&cp, "eu").await;
    let _closed = agent(
        &cp,
        "eu",
        1 << 20,
        offers(ProviderHealth::Healthy),
        Some(provider),
    )
    .await;
    let created = instances::create(&cp, new_queue("i1")).await.unwrap();
    assert!(created.settled);
    let rec = created.record.unwrap();
    assert_eq!(
        (rec.state, rec.provider.as_deref()),
        (InstanceState::Provisioning, Some("q"))
    );
    let status = requests::status(&cp, "i1.create.1", None).await.unwrap();
    assert_eq!(status.op, "service_create");
    assert!(matches!(
        instances::create(&cp, new_queue("i1")).await,
        Err(instances::InstanceError::Exists(_))
    ));
    assert_eq!(
        instances::delete(&cp, "i1").await.unwrap(),
        Deleted::Gone(None)
    );
    assert!(cp.store.service("i1").await.unwrap().is_none());
}

#[tokio::test]
async fn a_queued_create_is_sent_once_its_type_is_advertised_and_a_cancelled_one_never() {
    let dir = tempfile::tempdir().unwrap();
    let cp = control_plane(dir.path()).await;
    region(&cp, "eu").await;
    let _closed = agent(
        &cp,
        "eu",
        1 << 20,
        offers(ProviderHealth::Unhealthy),
        Some(provider),
    )
    .await;
    let q1 = instances::create(&cp, new_queue("q1")).await.unwrap();
    assert_eq!(q1.record.unwrap().state, InstanceState::Queued);
    let q2 = instances::create(&cp, new_queue("q2")).await.unwrap();
    assert!(!q2.settled);
    assert_eq!(
        instances::delete(&cp, "q1").await.unwrap(),
        Deleted::Cancelled
    );
    // The provider turns healthy: the queued create goes out (once), the cancelled one never.
    let conn = cp.hub.holds("eu", "z").unwrap();
    sessions::set_services(&cp, "eu", &conn, &offers(ProviderHealth::Healthy))
        .await
        .unwrap();
    instances::dispatch_queued(&cp, Some("eu")).await.unwrap();
    for _ in 0..200 {
        let state = cp.store.service("q2").await.unwrap().unwrap().state;
        if state == InstanceState::Provisioning {
            break;
        }
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    assert_eq!(
        cp.store.service("q2").await.unwrap().unwrap().state,
        InstanceState::Provisioning
    );
    assert_eq!(
        requests::status(&cp, "q2.create.1", None)
            .await
            .unwrap()
            .deliveries,
        1
    );
    assert!(requests::status(&cp, "q1.create.1", None).await.is_err());
}

#[tokio::test]
async fn a_restart_on_sqlite_marks_every_session_of_a_previous_run_disconnected() {
    use crate::store::Store;
    let dir = tempfile::tempdir().unwrap();
    let store = Arc::new(SqliteStore::open(&dir.path().join("cp.sqlite")).unwrap());
    // Sessions left connected by two earlier runs (replica ids differ between runs).
    for (i, replica) in ["run-1", "run-1", "run-2", "run-2", "run-2"]
        .iter()
        .enumerate()
    {
        let region = format!("r{i}");
        assert!(store.create_region(&region, "z").await.unwrap());
        let s = crate::store::SessionRecord {
            region,
            zone: "z".into(),
            replica: replica.to_string(),
            conn: format!("c{i}"),
            connected: true,
            connected_at: 1,
            disconnected_at: None,
            last_heartbeat_at: 1,
            hello_json: "{}".into(),
            status_json: None,
            services_json: None,
            max_frame_bytes: 1024,
        };
        assert!(store.session_open(&s).await.unwrap());
    }
    let cp = ControlPlane::new(store.clone(), settings());
    start(cp.clone()).await.unwrap();
    let sessions = store.sessions().await.unwrap();
    assert_eq!(sessions.len(), 5);
    assert!(
        sessions
            .iter()
            .all(|s| !s.connected && s.disconnected_at.is_some()),
        "{sessions:?}"
    );
}

#[tokio::test]
async fn a_retry_with_the_same_params_in_another_key_order_joins_the_request() {
    let dir = tempfile::tempdir().unwrap();
    let cp = control_plane(dir.path()).await;
    region(&cp, "eu").await;
    let first = requests::submit(&cp, "eu", sub("same", r#"{"a":1,"b":{"c":[1,2],"d":"x"}}"#))
        .await
        .unwrap();
    assert!(first.created);
    let again = requests::submit(
        &cp,
        "eu",
        sub("same", r#"{ "b": {"d":"x", "c":[1,2]}, "a":1 }"#),
    )
    .await
    .unwrap();
    assert!(!again.created, "re-serialized params are the same request");
    assert!(matches!(
        requests::submit(&cp, "eu", sub("same", r#"{"a":2,"b":{"c":[1,2],"d":"x"}}"#)).await,
        Err(RequestError::DuplicateId { .. })
    ));
}
