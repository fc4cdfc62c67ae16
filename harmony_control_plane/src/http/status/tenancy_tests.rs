//! The status page's tenants section: quota use in words, and through the real router over a
//! real SQLite store (stand-in agents reporting quota use in their heartbeats): the admin sees
//! every tenant's projects and use; a tenant's page shows its own and nothing of another
//! tenant, and only its regions; what an agent reports is escaped.

use axum::http::Method;
use harmony_agent_protocol::quota_use::QuotaReport;
use harmony_api::{RegionView, ZoneView};

use super::{quota_text, section, use_text, visible_regions};
use crate::http::caller::Caller;
use crate::http::test_world::{ADMIN, app, request, send};
use crate::services::tenancy;
use crate::services::tenancy_views::tests::{connect, namespace, quota, two_tenants};
use crate::services::tenancy_views::{
    ProjectUse, RegionUse, TenancyOverview, TenantUse, Unknown, Usage, ZoneUse,
};

const NOW: i64 = 1_700_000_060_000;

#[test]
fn use_reads_used_over_quota_in_human_units() {
    let q = quota("4", "8Gi", 20);
    assert_eq!(quota_text(&q), "cpu 4, memory 8 GiB, pods 20");
    let used = [
        ("requests.cpu", "1500m"),
        ("requests.memory", "2Gi"),
        ("count/pods", "3"),
    ]
    .iter()
    .map(|(k, v)| (k.to_string(), v.to_string()))
    .collect();
    assert_eq!(
        use_text(&q, &used),
        (
            "cpu 1.5 / 4, memory 2 GiB / 8 GiB, pods 3 / 20".into(),
            false
        )
    );
    let full = [
        ("requests.cpu", "250m"),
        ("requests.memory", "2147483648"),
        ("count/pods", "20"),
    ]
    .iter()
    .map(|(k, v)| (k.to_string(), v.to_string()))
    .collect();
    assert_eq!(
        use_text(&q, &full),
        (
            "cpu 0.25 / 4, memory 2 GiB / 8 GiB, pods 20 / 20 (full)".into(),
            true
        )
    );
    // Not counted yet by the cluster: said so, not shown as zero.
    let (text, _) = use_text(&q, &Default::default());
    assert!(text.starts_with("cpu not counted yet / 4"), "{text}");
    assert_eq!(
        quota_text(&harmony_agent_protocol::tenancy::ProjectQuota::default()),
        "no limits"
    );
}

fn region(name: &str, zones: &[(&str, bool)]) -> RegionView {
    let zone = |(z, gone): &(&str, bool)| -> ZoneView {
        serde_json::from_value(serde_json::json!({
            "zone": z, "health": "healthy", "decommissioned": gone.then_some(true),
        }))
        .unwrap()
    };
    serde_json::from_value(serde_json::json!({
        "region": name, "zone": zones[0].0, "zones": zones.iter().map(zone).collect::<Vec<_>>(),
        "created_at": 1, "bootstrapped": true, "decommissioned": false, "health": "healthy",
        "health_reason": "", "connected": true, "k8s_reachable": true, "pending_requests": 0,
    }))
    .unwrap()
}

fn overview(regions: &[&str]) -> TenancyOverview {
    TenancyOverview {
        tenants: vec![TenantUse {
            tenant: "acme".into(),
            caps: Default::default(),
            projects: vec![ProjectUse {
                project: "web".into(),
                namespace: "acme-web".into(),
                regions: regions
                    .iter()
                    .map(|r| RegionUse {
                        region: r.to_string(),
                        quota: quota("1", "1Gi", 1),
                        zones: vec![ZoneUse {
                            zone: "a".into(),
                            usage: Usage::Unknown(Unknown::ReadFailed {
                                error: "forbidden by <policy>".into(),
                            }),
                        }],
                    })
                    .collect(),
            }],
        }],
    }
}

#[test]
fn a_tenant_sees_only_regions_where_it_has_a_project_and_no_decommissioned_zone() {
    let all = vec![
        region("eu", &[("a", false), ("c", true)]),
        region("us", &[("x", false)]),
        region("ap", &[("old", true)]),
    ];
    let mine = overview(&["eu", "ap"]);
    let tenant = Caller::Tenant {
        tenant: "acme".into(),
    };
    let seen = visible_regions(all.clone(), &mine, &tenant);
    let names: Vec<(&str, Vec<&str>)> = seen
        .iter()
        .map(|r| {
            (
                r.region.as_str(),
                r.zones.iter().map(|z| z.zone.as_str()).collect(),
            )
        })
        .collect();
    // ap has only a decommissioned zone: nothing left to show.
    assert_eq!(names, [("eu", vec!["a"])]);
    assert_eq!(visible_regions(all.clone(), &mine, &Caller::Admin), all);
    // The agent's error is the admin's to read; a tenant learns only that the read failed.
    let admin = section(&mine, &Caller::Admin, NOW);
    assert!(
        admin.tenants[0].rows[0]
            .usage
            .contains("forbidden by <policy>")
    );
    let own = section(&mine, &tenant, NOW);
    assert_eq!(
        own.tenants[0].rows[0].usage,
        "use unknown: the zone's agent could not read its cluster's quotas"
    );
    assert!(own.tenants[0].caps.is_empty());
}

async fn page(app: &axum::Router, token: &str) -> String {
    let (status, _, html) = send(app, request(Method::GET, "/status", Some(token), None)).await;
    assert_eq!(status, 200, "{html}");
    html
}

#[tokio::test]
async fn the_admin_page_shows_every_tenant_with_its_caps_quotas_and_use() {
    let dir = tempfile::tempdir().unwrap();
    let (app, cp) = app(dir.path()).await;
    two_tenants(&cp).await;
    let html = page(&app, ADMIN).await;
    for s in [
        "<h2 id=\"tenancy-title\">Tenants</h2>",
        "Tenant acme",
        "Tenant beta",
        "eu: cpu 8, memory 16 GiB, pods 50",
        "eu: cpu 6, memory 12 GiB, pods 30",
        "acme-web",
        "beta-shop",
        "cpu 1.5 / 4, memory 2 GiB / 8 GiB, pods 3 / 20",
        "cpu 2.75 / 3, memory 5 GiB / 6 GiB, pods 29 / 30",
        "none yet: the project has run nothing in this zone",
        "use unknown: no agent has connected to this zone yet",
        "use unknown: the zone&#39;s agent (version 7.7.7) has not reported quota use",
    ] {
        assert!(
            html.contains(s),
            "{s:?} missing from the admin page:\n{html}"
        );
    }
    // The decommissioned zone c holds no use row.
    assert!(!html.contains("data-zone=\"c\""), "{html}");
}

#[tokio::test]
async fn a_tenants_page_shows_its_own_use_and_nothing_of_another_tenant() {
    let dir = tempfile::tempdir().unwrap();
    let (app, cp) = app(dir.path()).await;
    two_tenants(&cp).await;
    // Another region only beta... has nothing in: acme's page must not list it either.
    crate::services::regions::create(&cp, "ap", "tokyo", None)
        .await
        .unwrap();
    let (_, acme) = tenancy::mint_token(&cp, "acme", None).await.unwrap();
    let html = page(&app, acme.expose()).await;
    for s in [
        "<h2 id=\"tenancy-title\">Your projects</h2>",
        "acme-web",
        "acme-api",
        "cpu 1.5 / 4, memory 2 GiB / 8 GiB, pods 3 / 20",
        "data-key=\"eu/a\"",
        "data-key=\"us/x\"",
    ] {
        assert!(html.contains(s), "{s:?} missing from acme's page:\n{html}");
    }
    // Nothing of beta: its name, project, namespace, figures or caps; no caps at all; no
    // region without an acme project; no decommissioned zone.
    for s in [
        "beta", "shop", "2.75", "29 / 30", "6 GiB", "12 GiB", "Caps", "tokyo", "ap/", "eu/c",
        "7.7.7",
    ] {
        assert!(!html.contains(s), "{s:?} on acme's page:\n{html}");
    }
    let (_, beta) = tenancy::mint_token(&cp, "beta", None).await.unwrap();
    let html = page(&app, beta.expose()).await;
    assert!(
        html.contains("cpu 2.75 / 3, memory 5 GiB / 6 GiB, pods 29 / 30"),
        "{html}"
    );
    for s in [
        "acme",
        "web",
        "1.5 / 4",
        "3 / 20",
        "8 GiB",
        "us/x",
        "data-region=\"us\"",
    ] {
        assert!(!html.contains(s), "{s:?} on beta's page:\n{html}");
    }
}

#[tokio::test]
async fn what_an_agent_reports_is_escaped_on_the_page() {
    let dir = tempfile::tempdir().unwrap();
    let (app, cp) = app(dir.path()).await;
    two_tenants(&cp).await;
    let hostile = QuotaReport {
        error: Some("<script>alert(1)</script> & \"quoted\"".into()),
        ..QuotaReport::default()
    };
    connect(&cp, "eu", "b", Some(hostile)).await;
    // Figures that are not quantities never get through the protocol's bounds.
    let odd = QuotaReport {
        at: NOW,
        namespaces: vec![namespace(
            "acme-web",
            "acme",
            "web",
            &[],
            &[("requests.cpu", "<b>9</b>")],
        )],
        ..QuotaReport::default()
    };
    let odd: QuotaReport = serde_json::from_value(serde_json::to_value(odd).unwrap()).unwrap();
    connect(&cp, "us", "x", Some(odd)).await;
    let html = page(&app, ADMIN).await;
    assert!(!html.contains("<script>alert"), "{html}");
    assert!(
        html.contains("&#60;script&#62;alert(1)&#60;/script&#62; &#38; &#34;quoted&#34;"),
        "{html}"
    );
    assert!(!html.contains("<b>9</b>"), "{html}");
    assert!(html.contains("cpu not counted yet / 2"), "{html}");
}
