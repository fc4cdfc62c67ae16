//! Unit tests of where a switchover stands and where the live primary is, from what the sites'
//! `Cluster`s say (the render and the state read are tested in `harmony::infra::cnpg::distributed`).

use serde_json::{Value, json};
use std::collections::BTreeMap;

use harmony::domain::capability::PrimaryExposure;
use harmony::types::HostName;

use super::live_primary::{LivePrimary, classify};
use super::progress::{Progress, locate, newest_claimant};
use super::steps::human;
use crate::postgresql::ClusterSpec;
use harmony::domain::capability::{DistributedCluster, MemberState, ReplicaShape};
use harmony::infra::cnpg::distributed::member_state;

const PARIS: &str = "finance-db-tenant-a.apps.site-paris.example.com";
const NEWYORK: &str = "finance-db-tenant-a.apps.site-newyork.example.com";

fn members() -> DistributedCluster {
    let cluster = ClusterSpec::new("10Gi")
        .resolve("finance-db", "tenant-a")
        .unwrap();
    let route = |h: &str| {
        Some(PrimaryExposure::PassthroughRoute {
            host: HostName::parse(h).unwrap(),
        })
    };
    DistributedCluster::new(
        cluster,
        vec![
            ("site-paris".into(), route(PARIS)),
            ("site-newyork".into(), route(NEWYORK)),
        ],
    )
    .unwrap()
}

fn cluster(replica: Value, status: Value) -> Value {
    json!({"metadata": {"name": "finance-db"}, "spec": {"replica": replica}, "status": status})
}

fn member(primary: &str, me: &str, status: Value) -> MemberState {
    member_state(&cluster(
        json!({"primary": format!("finance-db-{primary}"), "self": format!("finance-db-{me}"), "source": "x"}),
        status,
    ))
}

fn states(list: &[(&str, MemberState)]) -> BTreeMap<String, MemberState> {
    list.iter()
        .map(|(s, m)| (s.to_string(), m.clone()))
        .collect()
}

#[test]
fn a_switchover_resumes_where_it_stopped() {
    let m = members();
    let ny = "site-newyork";
    let start = states(&[
        ("site-paris", member("site-paris", "site-paris", json!({}))),
        (ny, member("site-paris", ny, json!({}))),
    ]);
    assert_eq!(
        locate(&m, &start, ny),
        Ok(Progress::Start {
            from: "site-paris".into()
        })
    );
    let demoting = states(&[
        ("site-paris", member(ny, "site-paris", json!({}))),
        (ny, member("site-paris", ny, json!({}))),
    ]);
    assert_eq!(
        locate(&m, &demoting, ny),
        Ok(Progress::Demoting {
            from: "site-paris".into()
        })
    );
    let mut target = member(ny, ny, json!({}));
    if let ReplicaShape::Distributed {
        promotion_token, ..
    } = &mut target.shape
    {
        *promotion_token = Some("T".into());
    }
    let promoting = states(&[
        (
            "site-paris",
            member(ny, "site-paris", json!({"demotionToken": "T"})),
        ),
        (ny, target.clone()),
    ]);
    assert_eq!(
        locate(&m, &promoting, ny),
        Ok(Progress::Promoting {
            from: "site-paris".into(),
            token: "T".into()
        })
    );
    target.last_promotion_token = Some("T".into());
    let promoted = states(&[
        (
            "site-paris",
            member(ny, "site-paris", json!({"demotionToken": "T"})),
        ),
        (ny, target),
    ]);
    assert_eq!(
        locate(&m, &promoted, ny),
        Ok(Progress::Promoted {
            from: Some("site-paris".into())
        })
    );
    assert_eq!(
        locate(&m, &start, "site-paris"),
        Ok(Progress::Promoted { from: None }),
        "already the primary"
    );
}

#[test]
fn a_switchover_refuses_two_primaries_and_none() {
    let m = members();
    let two = states(&[
        ("site-paris", member("site-paris", "site-paris", json!({}))),
        (
            "site-newyork",
            member("site-newyork", "site-newyork", json!({})),
        ),
    ]);
    let err = locate(&m, &two, "site-newyork").unwrap_err();
    assert!(err.problem.contains("site-newyork and site-paris"), "{err}");
    assert!(err.fix.contains("PostgreSQLFailoverScore"), "{err}");
    let none = states(&[
        ("site-paris", member("site-tokyo", "site-paris", json!({}))),
        (
            "site-newyork",
            member("site-tokyo", "site-newyork", json!({})),
        ),
    ]);
    let err = locate(&m, &none, "site-newyork").unwrap_err();
    assert!(
        err.problem.contains("no site's Cluster is the primary"),
        "{err}"
    );
}

#[test]
fn lag_figures_read_as_people_write_them() {
    assert_eq!(human(512), "512 B");
    assert_eq!(human(48 * 1024 * 1024), "48.0 MiB");
    assert_eq!(human(1536), "1.5 KiB");
}

fn timeline(primary: &str, me: &str, t: u64) -> MemberState {
    member(primary, me, json!({"timelineID": t}))
}

#[test]
fn of_two_primaries_the_newer_timeline_wins() {
    let mut found = BTreeMap::new();
    found.insert(
        "site-paris".to_string(),
        timeline("site-paris", "site-paris", 1),
    );
    assert_eq!(newest_claimant(&found), Ok(Some("site-paris".into())));
    found.insert(
        "site-newyork".to_string(),
        timeline("site-newyork", "site-newyork", 2),
    );
    found.insert(
        "site-tokyo".to_string(),
        timeline("site-newyork", "site-tokyo", 2),
    );
    assert_eq!(newest_claimant(&found), Ok(Some("site-newyork".into())));
    found.insert(
        "site-paris".to_string(),
        timeline("site-paris", "site-paris", 2),
    );
    let err = newest_claimant(&found).unwrap_err();
    assert!(
        err.problem
            .contains("site-newyork (timeline 2), site-paris (timeline 2)"),
        "{err}"
    );
}

#[test]
fn the_live_primary_is_read_from_the_clusters() {
    let m = members();
    let c = m.cluster();
    let (p, ny) = ("site-paris", "site-newyork");
    assert_eq!(classify(c, &BTreeMap::new()), Ok(LivePrimary::Absent));
    let standalone = member_state(&cluster(json!({"enabled": true, "source": "x"}), json!({})));
    let old = states(&[(p, member(p, p, json!({}))), (ny, standalone)]);
    assert_eq!(classify(c, &old), Ok(LivePrimary::NotDistributed));
    let steady = states(&[(p, member(p, p, json!({}))), (ny, member(p, ny, json!({})))]);
    assert_eq!(classify(c, &steady), Ok(LivePrimary::Primary(p.into())));
    let handed_over = states(&[
        (p, member(ny, p, json!({}))),
        (ny, member(p, ny, json!({}))),
    ]);
    assert_eq!(
        classify(c, &handed_over),
        Ok(LivePrimary::Switching {
            from: None,
            to: None
        }),
        "two sites naming each other: only the switchover's target tells them apart"
    );
    let demoting = states(&[
        (
            p,
            member(
                ny,
                p,
                json!({"switchReplicaClusterStatus": {"inProgress": true}}),
            ),
        ),
        (ny, member(p, ny, json!({}))),
    ]);
    assert_eq!(
        classify(c, &demoting),
        Ok(LivePrimary::Switching {
            from: Some(p.into()),
            to: Some(ny.into())
        })
    );
    let mut target = member(ny, ny, json!({}));
    if let ReplicaShape::Distributed {
        promotion_token, ..
    } = &mut target.shape
    {
        *promotion_token = Some("T".into());
    }
    let promoting = states(&[
        (p, member(ny, p, json!({"demotionToken": "T"}))),
        (ny, target.clone()),
    ]);
    assert_eq!(
        classify(c, &promoting),
        Ok(LivePrimary::Switching {
            from: Some(p.into()),
            to: Some(ny.into())
        })
    );
    target.last_promotion_token = Some("T".into());
    let done = states(&[
        (p, member(ny, p, json!({"demotionToken": "T"}))),
        (ny, target),
    ]);
    assert_eq!(classify(c, &done), Ok(LivePrimary::Primary(ny.into())));
    let failed_over = states(&[(p, timeline(p, p, 1)), (ny, timeline(ny, ny, 2))]);
    assert_eq!(
        classify(c, &failed_over),
        Ok(LivePrimary::Primary(ny.into()))
    );
}
