//! The render of every site and the state read; the same render runs against the real
//! CloudNativePG CRD in `tests/e2e/tests/multisite_switchover.rs` and `multisite_postgres.rs`.

use serde_json::{Value, json};

use super::{cluster_manifest, member_state};
use crate::domain::capability::{
    ComputeResources, DistributedCluster, MemberRole, MemberState, PostgresCluster,
    PrimaryExposure, ReplicaShape,
};
use harmony_types::{Dns1123Label, HostName, Quantity};

const PARIS: &str = "finance-db-tenant-a.apps.site-paris.example.com";
const NEWYORK: &str = "finance-db-tenant-a.apps.site-newyork.example.com";

fn cluster(tokyo_exposed: bool) -> DistributedCluster {
    let c = PostgresCluster {
        name: Dns1123Label::parse("finance-db").unwrap(),
        namespace: Dns1123Label::parse("tenant-a").unwrap(),
        major_version: 17,
        image: None,
        instances: 1,
        storage: Quantity::parse("10Gi").unwrap(),
        resources: ComputeResources::default(),
        server_alt_dns_names: Vec::new(),
        wal_keep_size: Some("2GB".into()),
    };
    let route = |h: &str| {
        Some(PrimaryExposure::PassthroughRoute {
            host: HostName::parse(h).unwrap(),
        })
    };
    let tokyo = tokyo_exposed.then_some("finance-db-tenant-a.apps.site-tokyo.example.com");
    // Declared out of order: the render sorts by site.
    DistributedCluster::new(
        c,
        vec![
            ("site-paris".into(), route(PARIS)),
            ("site-tokyo".into(), tokyo.and_then(route)),
            ("site-newyork".into(), route(NEWYORK)),
        ],
    )
    .unwrap()
}

fn spec(v: &Value) -> &Value {
    &v["spec"]
}

fn names(v: &Value) -> Vec<&str> {
    spec(v)["externalClusters"]
        .as_array()
        .unwrap()
        .iter()
        .map(|e| e["name"].as_str().unwrap())
        .collect()
}

#[test]
fn every_site_lists_the_sites_it_may_stream_from_and_names_the_primary() {
    let c = cluster(false);
    let paris = MemberRole::primary_is("site-paris");
    let ny = cluster_manifest(&c, "site-newyork", &paris, None);
    let externals = spec(&ny)["externalClusters"].as_array().unwrap();
    // site-tokyo has no host: nobody can stream from it, so only it lists itself.
    assert_eq!(
        names(&ny),
        ["finance-db-site-newyork", "finance-db-site-paris"]
    );
    // Its own entry (only `self` names it) uses its own operator secrets; the other, the copies.
    assert_eq!(externals[0]["sslCert"]["name"], "finance-db-replication");
    assert_eq!(externals[0]["sslRootCert"]["name"], "finance-db-ca");
    assert_eq!(externals[0]["connectionParameters"]["host"], NEWYORK);
    let p = &externals[1];
    assert_eq!(p["sslCert"]["name"], "finance-db-site-paris-replication");
    assert_eq!(p["sslKey"]["name"], "finance-db-site-paris-replication");
    assert_eq!(p["sslRootCert"]["name"], "finance-db-site-paris-ca");
    assert_eq!(p["connectionParameters"]["host"], PARIS);
    assert_eq!(p["connectionParameters"]["port"], "443");
    assert_eq!(p["connectionParameters"]["sslnegotiation"], "direct");
    assert_eq!(
        spec(&ny)["replica"],
        json!({"primary": "finance-db-site-paris", "self": "finance-db-site-newyork", "source": "finance-db-site-paris"})
    );
    assert!(spec(&ny)["replica"].get("enabled").is_none());
    assert_eq!(
        spec(&ny)["bootstrap"],
        json!({"pg_basebackup": {"source": "finance-db-site-paris"}})
    );
    assert_eq!(
        spec(&ny)["certificates"]["serverAltDNSNames"],
        json!([NEWYORK])
    );

    let p = cluster_manifest(&c, "site-paris", &paris, None);
    assert_eq!(
        spec(&p)["replica"],
        json!({"primary": "finance-db-site-paris", "self": "finance-db-site-paris", "source": "finance-db-site-newyork"})
    );
    assert!(spec(&p).get("bootstrap").is_none(), "{p}");
    assert_eq!(
        spec(&p)["certificates"]["serverAltDNSNames"],
        json!([PARIS])
    );
    assert_eq!(
        names(&p),
        ["finance-db-site-newyork", "finance-db-site-paris"]
    );
    assert_eq!(
        spec(&p)["externalClusters"][0]["sslCert"]["name"],
        "finance-db-site-newyork-replication"
    );

    let tokyo = cluster_manifest(&c, "site-tokyo", &paris, None);
    assert_eq!(
        names(&tokyo),
        [
            "finance-db-site-newyork",
            "finance-db-site-paris",
            "finance-db-site-tokyo"
        ]
    );
    let own = &spec(&tokyo)["externalClusters"][2];
    assert_eq!(
        own["connectionParameters"]["host"],
        "finance-db-rw.tenant-a.svc"
    );
    assert!(
        spec(&tokyo).get("certificates").is_none(),
        "no host, no extra name"
    );
}

#[test]
fn a_switchover_changes_only_the_replica_stanza_and_keeps_the_live_bootstrap() {
    let c = cluster(true);
    let paris = MemberRole::primary_is("site-paris");
    let before = cluster_manifest(&c, "site-paris", &paris, None);
    let live = member_state(&before);
    let demoted = cluster_manifest(
        &c,
        "site-paris",
        &MemberRole::primary_is("site-newyork"),
        Some(&live),
    );
    let without = |v: &Value| {
        let mut v = v.clone();
        v["spec"].as_object_mut().unwrap().remove("replica");
        v
    };
    assert_eq!(
        without(&before),
        without(&demoted),
        "a demotion changes only spec.replica"
    );
    assert_eq!(
        spec(&demoted)["replica"],
        json!({"primary": "finance-db-site-newyork", "self": "finance-db-site-paris", "source": "finance-db-site-newyork"})
    );
    let ny = member_state(&cluster_manifest(&c, "site-newyork", &paris, None));
    let promote = MemberRole {
        primary: "site-newyork".into(),
        promotion_token: Some("TOKEN".into()),
    };
    let promoted = cluster_manifest(&c, "site-newyork", &promote, Some(&ny));
    assert_eq!(
        spec(&promoted)["replica"],
        json!({"primary": "finance-db-site-newyork", "self": "finance-db-site-newyork", "source": "finance-db-site-paris", "promotionToken": "TOKEN"})
    );
    assert_eq!(
        spec(&promoted)["bootstrap"],
        json!({"pg_basebackup": {"source": "finance-db-site-paris"}}),
        "the bootstrap it was created with stays"
    );
}

fn live(replica: Value, status: Value) -> MemberState {
    member_state(
        &json!({"metadata": {"name": "finance-db"}, "spec": {"replica": replica}, "status": status}),
    )
}

#[test]
fn the_state_read_follows_cloudnative_pg_rules() {
    let standalone = live(json!({"enabled": true, "source": "x"}), json!({}));
    assert_eq!(standalone.shape, ReplicaShape::Standalone { enabled: true });
    assert!(!standalone.claims_primary());
    assert_eq!(member_state(&json!({"spec": {}})).shape, ReplicaShape::None);
    // Without `self`, the Cluster's own name is compared with `primary` (IsReplica).
    assert!(live(json!({"primary": "finance-db", "source": "x"}), json!({})).claims_primary());
    let r = |status: Value| {
        live(
            json!({"primary": "finance-db-site-newyork", "self": "finance-db-site-paris", "source": "x"}),
            status,
        )
    };
    let demoting =
        r(json!({"demotionToken": "T", "switchReplicaClusterStatus": {"inProgress": true}}));
    assert_eq!(
        demoting.demotion_done(),
        None,
        "not before the transition ends"
    );
    let demoted =
        r(json!({"demotionToken": "T", "switchReplicaClusterStatus": {"inProgress": false}}));
    assert_eq!(demoted.demotion_done(), Some("T"));
    let mut promoted: MemberState = live(
        json!({"primary": "finance-db-site-newyork", "self": "finance-db-site-newyork", "source": "x"}),
        json!({"lastPromotionToken": "T", "timelineID": 2}),
    );
    assert!(promoted.promoted_with("T") && !promoted.promoted_with("U"));
    assert_eq!(promoted.timeline, Some(2));
    promoted.shape = ReplicaShape::None;
    assert!(
        !promoted.promoted_with("T"),
        "a token counts only on a primary"
    );
}
