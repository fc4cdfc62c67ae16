//! Service instances.

use super::Db;
use harmony_agent_protocol::InstanceState;
use harmony_control_plane::store::{Outcome, ServiceRecord};
use serde_json::Map;

fn record(id: &str, state: InstanceState) -> ServiceRecord {
    ServiceRecord {
        id: id.into(),
        service_type: "queue".into(),
        region: "eu".into(),
        zone: "z1".into(),
        parent: None,
        state,
        detail: "queued: provider unhealthy".into(),
        provider: None,
        outputs: Map::new(),
        spec: serde_json::json!({"size": 3}),
        created_at: 1,
        updated_at: 1,
        attempts: 0,
        owner: None,
    }
}

pub(super) async fn service_instance_cancel_and_claim_exclude_each_other(db: Db) {
    let s = db.open().await;
    assert!(
        s.insert_service(&record("a", InstanceState::Queued))
            .await
            .unwrap()
    );
    assert!(
        !s.insert_service(&record("a", InstanceState::Queued))
            .await
            .unwrap()
    );
    assert!(
        s.insert_service(&record("b", InstanceState::Queued))
            .await
            .unwrap()
    );
    // Claimed first: the cancel loses and the record is pending at attempt 1.
    let claimed = s.claim_queued("a", "sent").await.unwrap().unwrap();
    assert_eq!(
        (claimed.state, claimed.attempts, claimed.detail.as_str()),
        (InstanceState::Pending, 1, "sent")
    );
    assert!(!s.cancel_queued("a").await.unwrap());
    assert!(s.claim_queued("a", "sent").await.unwrap().is_none());
    // Cancelled first: the claim loses, so the create is never sent.
    assert!(s.cancel_queued("b").await.unwrap());
    assert!(s.claim_queued("b", "sent").await.unwrap().is_none());
    assert!(s.service("b").await.unwrap().is_none());
    // A late answer to an old attempt does not overwrite a newer decision.
    let deleting = s
        .next_attempt(
            "a",
            (InstanceState::Pending, 1),
            InstanceState::Deleting,
            "deleting",
        )
        .await
        .unwrap()
        .unwrap();
    assert_eq!(
        (deleting.state, deleting.attempts),
        (InstanceState::Deleting, 2)
    );
    assert!(
        s.next_attempt(
            "a",
            (InstanceState::Pending, 1),
            InstanceState::Deleting,
            "again"
        )
        .await
        .unwrap()
        .is_none()
    );
    let ready = Outcome {
        state: InstanceState::Ready,
        detail: String::new(),
        provider: Some("q".into()),
        outputs: None,
    };
    assert!(
        !s.settle("a", (InstanceState::Pending, 1), &ready)
            .await
            .unwrap()
    );
    assert!(
        !s.remove_service_if("a", (InstanceState::Deleting, 1))
            .await
            .unwrap()
    );
    assert!(
        s.remove_service_if("a", (InstanceState::Deleting, 2))
            .await
            .unwrap()
    );
    assert!(s.service("a").await.unwrap().is_none());
}

pub(super) async fn service_instances_survive_reopening_the_store(db: Db) {
    let mut pending = record("r", InstanceState::Pending);
    pending.attempts = 1;
    {
        let s = db.open().await;
        s.insert_service(&record("q", InstanceState::Queued))
            .await
            .unwrap();
        s.insert_service(&pending).await.unwrap();
        s.insert_service(&ServiceRecord {
            region: "ap".into(),
            ..record("f", InstanceState::Failed)
        })
        .await
        .unwrap();
        let outcome = Outcome {
            state: InstanceState::Ready,
            detail: "up".into(),
            provider: Some("q1".into()),
            outputs: Some(
                [("url".to_string(), serde_json::json!("queue://r"))]
                    .into_iter()
                    .collect(),
            ),
        };
        assert!(
            s.settle("r", (InstanceState::Pending, 1), &outcome)
                .await
                .unwrap()
        );
    }
    let s = db.open().await;
    let all = s.services().await.unwrap();
    assert_eq!(all.len(), 3);
    assert_eq!(
        all[0],
        ServiceRecord {
            region: "ap".into(),
            ..record("f", InstanceState::Failed)
        }
    );
    let r = s.service("r").await.unwrap().unwrap();
    assert_eq!(
        (r.state, r.provider.as_deref(), r.detail.as_str()),
        (InstanceState::Ready, Some("q1"), "up")
    );
    assert_eq!(r.outputs["url"], "queue://r");
    assert_eq!(r.spec, serde_json::json!({"size": 3}));
    assert!(r.updated_at > 1);
    // A settle without provider/outputs keeps the stored ones.
    let keep = Outcome {
        state: InstanceState::Failed,
        detail: "gone".into(),
        provider: None,
        outputs: None,
    };
    assert!(
        s.settle("r", (InstanceState::Ready, 1), &keep)
            .await
            .unwrap()
    );
    let r = s.service("r").await.unwrap().unwrap();
    assert_eq!(
        (r.provider.as_deref(), r.outputs["url"].as_str()),
        (Some("q1"), Some("queue://r"))
    );
    assert_eq!(
        s.services_in_state(InstanceState::Queued)
            .await
            .unwrap()
            .len(),
        1
    );
    let live = s.live_services_by_region().await.unwrap();
    assert_eq!(
        (live.get("eu"), live.get("ap")),
        (Some(&1), None),
        "failed instances do not count"
    );
    assert!(!s.remove_service("r", "ap").await.unwrap());
    assert!(s.remove_service("r", "eu").await.unwrap());
    assert!(s.service("r").await.unwrap().is_none());
}
