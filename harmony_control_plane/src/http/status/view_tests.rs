//! The page made readable: rows by severity, ops collapsed, decommissioned zones apart, region
//! health explained, table semantics and a skip link.

use askama::Template;
use harmony_api::{Capacity, Health, RegionView, ZoneView};

use super::{StatusPage, build};
use crate::http::caller::Caller;
use crate::http::status::ops::OpsCell;

const NOW: i64 = 1_700_000_000_000;

/// One zone as the API shows it to an admin: an agent with a heartbeat and two ops, or none.
pub(crate) fn zone(name: &str, health: Health, heartbeat: Option<i64>) -> ZoneView {
    ZoneView {
        zone: name.into(),
        health,
        health_reason: Some(format!("reason-of-{name}")),
        connected: Some(heartbeat.is_some()),
        last_heartbeat: heartbeat,
        agent_version: heartbeat.map(|_| "9.8.7-agentver".into()),
        ops: heartbeat.map(|_| vec!["apply_manifests".into(), "get_inventory".into()]),
        node_count: None,
        capacity: None,
        pending_requests: Some(if heartbeat.is_some() { 0 } else { 4 }),
        replica: heartbeat.map(|_| "replica-xyz".into()),
        decommissioned: None,
        decommissioned_at: None,
        health_since: None,
        agent_error: None,
        bootstrapped: None,
    }
}

/// A region of `zones` (the first is its first zone); its health from its live zones'.
pub(crate) fn region_of(name: &str, zones: Vec<ZoneView>) -> RegionView {
    let first = zones[0].clone();
    let live = zones.iter().filter(|z| z.decommissioned != Some(true));
    let health = harmony_api::region_health(live.map(|z| z.health));
    let heartbeat = first.last_heartbeat;
    RegionView {
        region: name.into(),
        zone: first.zone.clone(),
        zones,
        created_at: 1,
        bootstrapped: heartbeat.is_some(),
        decommissioned: false,
        health,
        health_reason: format!("reason-of-{name}"),
        connected: heartbeat.is_some(),
        connected_at: heartbeat,
        last_heartbeat: heartbeat,
        agent_version: first.agent_version.clone(),
        ops: first.ops.clone().unwrap_or_default(),
        k8s_reachable: heartbeat.is_some(),
        pending_requests: first.pending_requests.unwrap_or(0),
        services: vec![],
        advertised_services: vec![],
        max_frame_bytes: None,
        replica: first.replica.clone(),
    }
}

fn tenant() -> Caller {
    Caller::Tenant {
        tenant: "acme".into(),
    }
}

fn keys(page: &StatusPage) -> Vec<&str> {
    page.rows.iter().map(|r| r.key.as_str()).collect()
}

#[test]
fn rows_are_sorted_by_severity_then_region_and_zone() {
    let beat = Some(NOW - 1_000);
    let regions = [
        region_of("b-region", vec![zone("z1", Health::Unhealthy, beat)]),
        region_of(
            "a-region",
            vec![
                zone("z1", Health::Healthy, beat),
                zone("z2", Health::Unavailable, None),
            ],
        ),
        region_of("c-region", vec![zone("z0", Health::Unavailable, None)]),
    ];
    for caller in [Caller::Admin, tenant()] {
        let page = build(&regions, &caller, None, NOW);
        let want = ["a-region/z2", "c-region/z0", "b-region/z1", "a-region/z1"];
        assert_eq!(keys(&page), want, "{caller:?}");
        let html = page.render().unwrap();
        let at = |k: &str| html.find(&format!("data-key=\"{k}\"")).unwrap();
        assert!(want.windows(2).all(|w| at(w[0]) < at(w[1])), "{html}");
    }
}

#[test]
fn ops_are_shown_once_and_per_zone_only_where_they_differ() {
    let seven: Vec<String> = (1..=7).map(|i| format!("op-{i}")).collect();
    let mut zones: Vec<_> = (1..=4)
        .map(|i| {
            let mut z = zone(&format!("z{i}"), Health::Healthy, Some(NOW));
            z.ops = Some(seven.clone());
            z
        })
        .collect();
    let mut odd = zone("z5", Health::Healthy, Some(NOW));
    odd.ops = Some(
        seven[..6]
            .iter()
            .cloned()
            .chain(["op-extra".to_string()])
            .collect(),
    );
    zones.push(odd);
    zones.push(zone("z6", Health::Unavailable, None));
    let page = build(&[region_of("eu", zones)], &Caller::Admin, None, NOW);
    let summary = page.ops.clone().unwrap();
    assert_eq!((summary.sharing, summary.agents), (4, 5));
    assert_eq!(summary.common, seven);
    let cell = |k: &str| {
        page.rows
            .iter()
            .find(|r| r.key == k)
            .unwrap()
            .admin
            .as_ref()
            .unwrap()
            .ops
            .clone()
    };
    assert_eq!(cell("eu/z1"), OpsCell::Common);
    assert_eq!(cell("eu/z6"), OpsCell::Unknown, "an agent that never said");
    assert_eq!(
        cell("eu/z5"),
        OpsCell::Differs {
            adds: vec!["op-extra".into()],
            lacks: vec!["op-7".into()],
        }
    );
    let html = page.render().unwrap();
    assert!(
        html.contains("Ops: 4 of 5 agents offer the same 7 ops;"),
        "{html}"
    );
    // Each common op is written once (the summary), not once per row.
    assert_eq!(html.matches(">op-3<").count(), 1, "{html}");
    assert_eq!(
        html.matches("<span class=\"none\">common set</span>")
            .count(),
        4
    );
    assert!(
        html.contains("<span>adds: op-extra</span><span>lacks: op-7</span>"),
        "{html}"
    );

    let tenant_html = build(
        &[region_of(
            "eu",
            vec![zone("z1", Health::Healthy, Some(NOW))],
        )],
        &tenant(),
        None,
        NOW,
    )
    .render()
    .unwrap();
    assert!(!tenant_html.contains("ops-summary") && !tenant_html.contains("get_inventory"));
}

#[test]
fn decommissioned_zones_are_apart_with_their_date_and_counted_nowhere() {
    let mut gone = zone("paris-2", Health::Unavailable, Some(NOW - 86_400_000));
    gone.decommissioned = Some(true);
    gone.decommissioned_at = Some(1_699_000_000_000);
    gone.health_reason = Some("decommissioned".into());
    gone.capacity = Some(Capacity {
        cpu_millis: 64_000,
        memory_bytes: 1 << 38,
        pods: 900,
    });
    let mut old_region = region_of(
        "ap-south",
        vec![zone("mumbai-1", Health::Unavailable, None)],
    );
    old_region.decommissioned = true;
    old_region.zones[0].decommissioned = Some(true);
    old_region.zones[0].decommissioned_at = Some(1_698_000_000_000);
    let regions = [
        region_of(
            "eu-west",
            vec![zone("paris-1", Health::Healthy, Some(NOW)), gone],
        ),
        old_region,
    ];
    let page = build(&regions, &Caller::Admin, None, NOW);
    assert_eq!(keys(&page), ["eu-west/paris-1"]);
    let retired: Vec<_> = page
        .retired
        .iter()
        .map(|r| {
            (
                r.region.as_str(),
                r.zone.as_str(),
                r.at.as_ref().unwrap().utc.as_str(),
            )
        })
        .collect();
    assert_eq!(
        retired,
        [
            ("ap-south", "mumbai-1", "2023-10-22 18:40:00 UTC"),
            ("eu-west", "paris-2", "2023-11-03 08:26:40 UTC"),
        ]
    );
    let counts: Vec<_> = page
        .filters
        .iter()
        .map(|f| (f.label.as_str(), f.count))
        .collect();
    assert_eq!(
        counts,
        [
            ("all", 1),
            ("healthy", 1),
            ("unhealthy", 0),
            ("unavailable", 0)
        ],
        "not an outage"
    );
    assert_eq!(
        page.rows[0].region_note, None,
        "the region is as healthy as its live zone"
    );
    let html = page.render().unwrap();
    assert!(
        html.contains("<h2 id=\"retired-title\">Decommissioned zones</h2>"),
        "{html}"
    );
    assert!(html.contains("datetime=\"2023-11-03T08:26:40Z\""), "{html}");
    assert!(!html.contains("64 CPU"), "no old capacity: {html}");
    let unavailable = build(&regions, &Caller::Admin, Some(Health::Unavailable), NOW);
    assert!(unavailable.rows.is_empty());

    let theirs = build(&regions, &tenant(), None, NOW);
    assert!(theirs.retired.is_empty());
    let html = theirs.render().unwrap();
    assert!(
        !html.contains("paris-2") && !html.contains("mumbai-1") && !html.contains("Decommissioned")
    );
}

#[test]
fn a_region_badge_is_explained_where_it_differs_from_its_zone() {
    let beat = Some(NOW);
    let regions = [
        region_of(
            "eu",
            vec![
                zone("a", Health::Healthy, beat),
                zone("b", Health::Unavailable, None),
            ],
        ),
        region_of(
            "us",
            vec![
                zone("a", Health::Unhealthy, beat),
                zone("b", Health::Unavailable, None),
                zone("c", Health::Unhealthy, beat),
            ],
        ),
    ];
    for caller in [Caller::Admin, tenant()] {
        let page = build(&regions, &caller, None, NOW);
        let note = |k: &str| {
            page.rows
                .iter()
                .find(|r| r.key == k)
                .unwrap()
                .region_note
                .clone()
        };
        assert_eq!(note("eu/a"), None);
        assert_eq!(
            note("eu/b").unwrap(),
            "region healthy: 1 of 2 zones healthy"
        );
        assert_eq!(note("us/a"), None);
        assert_eq!(
            note("us/b").unwrap(),
            "region unhealthy: no zone healthy, 2 of 3 unhealthy"
        );
        let html = page.render().unwrap();
        assert!(
            html.contains("data-field=\"region_note\">region healthy: 1 of 2 zones healthy<"),
            "{html}"
        );
    }
}

#[test]
fn the_table_has_a_caption_header_scopes_and_the_page_a_skip_link() {
    let regions = [region_of("eu", vec![zone("a", Health::Healthy, Some(NOW))])];
    for caller in [Caller::Admin, tenant()] {
        let page = build(&regions, &caller, Some(Health::Healthy), NOW);
        let html = page.render().unwrap();
        assert!(
            html.contains("<caption>Zones that are healthy, most severe first"),
            "{html}"
        );
        assert_eq!(html.matches("<th scope=\"col\"").count(), page.columns);
        assert!(html.contains("<th scope=\"row\""), "{html}");
        assert!(html.contains("<a class=\"skip\" href=\"#main\">"), "{html}");
        assert!(
            html.contains("<main id=\"main\" tabindex=\"-1\">"),
            "{html}"
        );
        assert!(
            html.contains("id=\"live\" aria-pressed=\"true\""),
            "the live toggle: {html}"
        );
        assert!(html.contains("data-events=\"/status/events?health=healthy\""));
    }
}

#[test]
fn an_empty_table_says_why_to_each_viewer() {
    let admin = build(&[], &Caller::Admin, None, NOW).render().unwrap();
    assert!(
        admin.contains("No region yet: an admin creates one"),
        "{admin}"
    );
    let theirs = build(&[], &tenant(), None, NOW).render().unwrap();
    assert!(
        theirs.contains(
            "No zone yet: you see the zones of the regions where one of your projects has a quota"
        ),
        "{theirs}"
    );
}
