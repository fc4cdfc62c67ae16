use super::*;
use crate::store::SessionRecord;
use harmony_agent_protocol::{ProviderHealth, ServiceOffer};

fn policy() -> HealthPolicy {
    HealthPolicy {
        heartbeat: Duration::from_millis(200),
        unhealthy_after: Duration::from_millis(600),
        unavailable_after: Duration::from_millis(1500),
    }
}

fn record(decommissioned: bool) -> RegionRecord {
    RegionRecord {
        name: "eu".into(),
        zone: "paris".into(),
        created_at: 1,
        decommissioned_at: decommissioned.then_some(5),
        has_identity: true,
    }
}

fn zone(name: &str, decommissioned: bool) -> ZoneRecord {
    ZoneRecord {
        region: "eu".into(),
        zone: name.into(),
        created_at: 1,
        decommissioned_at: decommissioned.then_some(5),
        has_identity: true,
        live_identity: true,
    }
}

fn session(zone: &str, status: Option<&str>, last: i64) -> SessionRecord {
    let services = Services {
        offers: vec![ServiceOffer {
            service_type: "queue".into(),
            provider: "q".into(),
            builtin: false,
            health: ProviderHealth::Healthy,
            detail: String::new(),
        }],
    };
    SessionRecord {
        region: "eu".into(),
        zone: zone.into(),
        replica: "r1".into(),
        conn: format!("c-{zone}"),
        connected: true,
        connected_at: 1000,
        disconnected_at: None,
        last_heartbeat_at: last,
        hello_json: format!(
            r#"{{"agent_version":"1.2.3","region":"eu","zone":"{zone}","ops":["get_inventory"],"protocol":1}}"#
        ),
        status_json: status.map(str::to_string),
        services_json: Some(serde_json::to_string(&services).unwrap()),
        max_frame_bytes: 1024,
    }
}

fn snap(zones: Vec<ZoneRecord>, sessions: Vec<SessionRecord>, pending: u64) -> Snapshot {
    Snapshot {
        zones,
        sessions: sessions
            .into_iter()
            .map(|s| ((s.region.clone(), s.zone.clone()), s))
            .collect(),
        pending: [(("eu".to_string(), "paris".to_string()), pending)].into(),
        states: Default::default(),
        by_region: Default::default(),
    }
}

const HEALTHY: &str = r#"{"k8s_reachable":true,"node_count":3,"allocatable":{"cpu_millis":6000,"memory_bytes":1024,"pods":110}}"#;

#[test]
fn a_one_zone_region_view_is_computed_from_its_session_row() {
    let p = policy();
    let never = describe(&record(false), &snap(vec![], vec![], 0), 2000, &p);
    assert_eq!(never.health, Health::Unavailable);
    assert!(!never.connected && never.agent_version.is_none());
    assert_eq!(
        never.zones.len(),
        1,
        "the region's own zone when none is stored"
    );

    // Connected, no heartbeat yet: unhealthy, nothing advertised.
    let fresh = describe(
        &record(false),
        &snap(
            vec![zone("paris", false)],
            vec![session("paris", None, 1000)],
            2,
        ),
        1100,
        &p,
    );
    assert_eq!(fresh.health, Health::Unhealthy);
    assert!(fresh.advertised_services.is_empty());
    assert_eq!(fresh.services.len(), 1);
    assert_eq!(fresh.pending_requests, 2);
    assert_eq!(fresh.agent_version.as_deref(), Some("1.2.3"));
    assert_eq!(fresh.ops, ["get_inventory"]);
    assert_eq!(fresh.replica.as_deref(), Some("r1"));
    assert_eq!(fresh.max_frame_bytes, Some(1024));

    let s = snap(
        vec![zone("paris", false)],
        vec![session("paris", Some(HEALTHY), 1000)],
        0,
    );
    let healthy = describe(&record(false), &s, 1100, &p);
    assert_eq!(healthy.health, Health::Healthy, "{}", healthy.health_reason);
    assert!(healthy.k8s_reachable);
    assert_eq!(healthy.advertised_services, ["queue"]);
    assert_eq!(healthy.health_reason, "heartbeats on time");
    let z = healthy.zone("paris").unwrap();
    assert_eq!(
        (z.node_count, z.capacity.as_ref().map(|c| c.cpu_millis)),
        (Some(3), Some(6000))
    );

    let gone = describe(&record(true), &s, 1100, &p);
    assert_eq!(gone.health, Health::Unavailable);
    assert_eq!(gone.health_reason, "decommissioned");
    assert!(gone.advertised_services.is_empty() && gone.decommissioned);
    assert!(
        !gone.connected,
        "a revoked connection is not shown connected"
    );
}

#[test]
fn a_region_is_healthy_while_any_zone_is_and_legacy_fields_describe_the_first_zone() {
    let p = policy();
    // The first zone's agent went silent (unavailable), the second is healthy.
    let s = snap(
        vec![zone("paris", false), zone("lyon", false)],
        vec![
            session("paris", Some(HEALTHY), 0),
            session("lyon", Some(HEALTHY), 5000),
        ],
        0,
    );
    let view = describe(&record(false), &s, 5100, &p);
    assert_eq!(view.health, Health::Healthy, "{}", view.health_reason);
    assert_eq!(view.zone, "paris");
    assert_eq!(
        view.last_heartbeat,
        Some(0),
        "legacy fields: the first zone"
    );
    let names: Vec<&str> = view.zones.iter().map(|z| z.zone.as_str()).collect();
    assert_eq!(names, ["paris", "lyon"]);
    assert_eq!(view.zone("paris").unwrap().health, Health::Unavailable);
    assert_eq!(view.zone("lyon").unwrap().health, Health::Healthy);
    assert!(
        view.health_reason.contains("zone paris: unavailable")
            && view.health_reason.contains("zone lyon: healthy"),
        "{}",
        view.health_reason
    );
    // Services are those of the zone placement picks: the healthy one.
    assert_eq!(view.advertised_services, ["queue"]);
    assert_eq!(
        s.placement_zone(&record(false), 5100, &p).map(|z| z.zone),
        Some("lyon".into())
    );

    // A decommissioned zone counts for nothing.
    let s = snap(
        vec![zone("paris", false), zone("lyon", true)],
        vec![
            session("paris", Some(HEALTHY), 0),
            session("lyon", Some(HEALTHY), 5000),
        ],
        0,
    );
    let view = describe(&record(false), &s, 5100, &p);
    assert_eq!(view.health, Health::Unavailable, "{}", view.health_reason);
    assert_eq!(view.zone("lyon").unwrap().decommissioned, Some(true));
    assert_eq!(
        s.placement_zone(&record(false), 5100, &p).map(|z| z.zone),
        Some("paris".into())
    );
}

#[test]
fn placement_picks_a_healthy_zone_then_an_unhealthy_one_then_the_first() {
    use Health::*;
    assert_eq!(
        pick_zone([("a", Unavailable), ("b", Unhealthy), ("c", Healthy)]),
        Some("c")
    );
    assert_eq!(
        pick_zone([("a", Unavailable), ("b", Unhealthy), ("c", Unhealthy)]),
        Some("b")
    );
    assert_eq!(
        pick_zone([("a", Unavailable), ("b", Unavailable)]),
        Some("a")
    );
    assert_eq!(pick_zone::<&str>([]), None);
}

#[test]
fn a_bootstrap_token_lives_no_longer_than_the_server_allows() {
    let max = Duration::from_secs(3600);
    assert_eq!(bootstrap_ttl(max, None), max);
    assert_eq!(bootstrap_ttl(max, Some(0.3)), Duration::from_millis(300));
    assert_eq!(bootstrap_ttl(max, Some(1e9)), max);
    assert_eq!(bootstrap_ttl(max, Some(-1.0)), max);
    assert_eq!(bootstrap_ttl(max, Some(f64::NAN)), max);
}

#[test]
fn each_region_gets_its_own_zones_in_stored_order_when_regions_interleave() {
    let in_region = |region: &str, name: &str| ZoneRecord {
        region: region.into(),
        ..zone(name, false)
    };
    let named = |region: &str, first: &str| RegionRecord {
        name: region.into(),
        zone: first.into(),
        ..record(false)
    };
    let s = snap(
        vec![
            in_region("eu", "paris"),
            in_region("us", "ohio"),
            in_region("eu", "berlin"),
            in_region("us", "texas"),
            in_region("eu", "madrid"),
        ],
        Vec::new(),
        0,
    );
    let names =
        |r: &RegionRecord| -> Vec<String> { s.zones_of(r).into_iter().map(|z| z.zone).collect() };
    // Asked twice: the second answer comes from the index the first one built.
    for _ in 0..2 {
        assert_eq!(names(&named("eu", "paris")), ["paris", "berlin", "madrid"]);
        assert_eq!(names(&named("us", "ohio")), ["ohio", "texas"]);
        // A region the store lists no zone for gets its record's zone.
        assert_eq!(names(&named("asia", "tokyo")), ["tokyo"]);
    }
}
