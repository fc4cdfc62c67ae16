//! The tenancy overview over a real SQLite store, with stand-in agents whose heartbeats carry
//! quota reports: each project's use per zone comes from its own namespace's report only, every
//! unknown use says why, and a tenant's overview holds nothing of another tenant.

use harmony_agent_protocol::AgentStatus;
use harmony_agent_protocol::quota_use::{NamespaceQuota, QuotaReport};
use harmony_agent_protocol::tenancy::ProjectQuota;
use std::collections::BTreeMap;

use super::{Unknown, Usage, read};
use crate::services::tests::control_plane;
use crate::services::{ControlPlane, identities, regions, sessions, tenancy};

/// A quota of `cpu`, `memory` and `pods`.
pub(crate) fn quota(cpu: &str, memory: &str, pods: u64) -> ProjectQuota {
    ProjectQuota {
        cpu: Some(cpu.into()),
        memory: Some(memory.into()),
        objects: [("pods".to_string(), pods)].into(),
        ..Default::default()
    }
}

/// A namespace's ResourceQuota status: `hard` and `used` as `(resource, figure)` pairs.
pub(crate) fn namespace(
    ns: &str,
    tenant: &str,
    project: &str,
    hard: &[(&str, &str)],
    used: &[(&str, &str)],
) -> NamespaceQuota {
    let map = |pairs: &[(&str, &str)]| -> BTreeMap<String, String> {
        pairs
            .iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect()
    };
    NamespaceQuota {
        namespace: ns.into(),
        tenant: tenant.into(),
        project: project.into(),
        hard: map(hard),
        used: map(used),
    }
}

/// Connects a stand-in agent of `region`/`zone` whose heartbeat carries `quotas`; its
/// connection id.
pub(crate) async fn connect(
    cp: &ControlPlane,
    region: &str,
    zone: &str,
    quotas: Option<QuotaReport>,
) -> String {
    let hello = crate::services::tests::zone_hello(region, zone, "7.7.7");
    let status = AgentStatus {
        k8s_reachable: true,
        quotas,
        ..AgentStatus::default()
    };
    crate::services::tests::stand_in(cp, &hello, Some(status))
        .await
        .conn
}

/// Two tenants: acme (project web: eu and us; project api: eu) and beta (project shop: eu).
/// Region eu has zones a (reporting), b (never connected), c (decommissioned); us has zone x
/// (connected, an agent that reports no quotas).
pub(crate) async fn two_tenants(cp: &ControlPlane) {
    regions::create(cp, "eu", "a", None).await.unwrap();
    regions::add_zone(cp, "eu", "b", None).await.unwrap();
    regions::add_zone(cp, "eu", "c", None).await.unwrap();
    assert!(identities::revoke_zone(cp, "eu", "c").await.unwrap());
    regions::create(cp, "us", "x", None).await.unwrap();
    for t in ["acme", "beta"] {
        tenancy::create_tenant(cp, t).await.unwrap();
    }
    tenancy::set_cap(cp, "acme", "eu", &quota("8", "16Gi", 50))
        .await
        .unwrap();
    tenancy::set_cap(cp, "acme", "us", &quota("8", "16Gi", 50))
        .await
        .unwrap();
    tenancy::set_cap(cp, "beta", "eu", &quota("6", "12Gi", 30))
        .await
        .unwrap();
    for (t, p) in [("acme", "web"), ("acme", "api"), ("beta", "shop")] {
        tenancy::create_project(cp, t, p, None).await.unwrap();
    }
    tenancy::set_quota(cp, "acme", "web", "eu", &quota("4", "8Gi", 20))
        .await
        .unwrap();
    tenancy::set_quota(cp, "acme", "web", "us", &quota("2", "4Gi", 10))
        .await
        .unwrap();
    tenancy::set_quota(cp, "acme", "api", "eu", &quota("1", "1Gi", 5))
        .await
        .unwrap();
    tenancy::set_quota(cp, "beta", "shop", "eu", &quota("3", "6Gi", 30))
        .await
        .unwrap();
    let report = QuotaReport {
        at: 1_700_000_000_000,
        namespaces: vec![
            namespace(
                "acme-web",
                "acme",
                "web",
                &[
                    ("requests.cpu", "4"),
                    ("requests.memory", "8Gi"),
                    ("count/pods", "20"),
                ],
                &[
                    ("requests.cpu", "1500m"),
                    ("requests.memory", "2Gi"),
                    ("count/pods", "3"),
                ],
            ),
            namespace(
                "beta-shop",
                "beta",
                "shop",
                &[
                    ("requests.cpu", "3"),
                    ("requests.memory", "6Gi"),
                    ("count/pods", "30"),
                ],
                &[
                    ("requests.cpu", "2750m"),
                    ("requests.memory", "5Gi"),
                    ("count/pods", "29"),
                ],
            ),
        ],
        truncated: false,
        error: None,
    };
    connect(cp, "eu", "a", Some(report)).await;
    connect(cp, "us", "x", None).await;
}

#[tokio::test]
async fn the_admin_sees_every_tenant_with_each_projects_use_per_zone_and_why_one_is_unknown() {
    let dir = tempfile::tempdir().unwrap();
    let cp = control_plane(dir.path()).await;
    two_tenants(&cp).await;
    let all = read(&cp, None).await.unwrap();
    let names: Vec<&str> = all.tenants.iter().map(|t| t.tenant.as_str()).collect();
    assert_eq!(names, ["acme", "beta"]);
    assert_eq!(all.regions().into_iter().collect::<Vec<_>>(), ["eu", "us"]);
    let acme = &all.tenants[0];
    assert_eq!(acme.caps["eu"].cpu.as_deref(), Some("8"));
    let projects: Vec<&str> = acme.projects.iter().map(|p| p.project.as_str()).collect();
    assert_eq!(projects, ["api", "web"]);
    let web = &acme.projects[1];
    assert_eq!(web.namespace, "acme-web");
    let eu = web.regions.iter().find(|r| r.region == "eu").unwrap();
    assert_eq!(eu.quota.cpu.as_deref(), Some("4"));
    // The decommissioned zone c is not listed; a reports, b never connected.
    let zones: Vec<&str> = eu.zones.iter().map(|z| z.zone.as_str()).collect();
    assert_eq!(zones, ["a", "b"]);
    match &eu.zones[0].usage {
        Usage::Reported {
            used, hard, stale, ..
        } => {
            assert_eq!(used["requests.cpu"], "1500m");
            assert_eq!(hard["count/pods"], "20");
            assert_eq!(*stale, None);
        }
        other => panic!("{other:?}"),
    }
    assert_eq!(eu.zones[1].usage, Usage::Unknown(Unknown::NeverConnected));
    // An agent that reports no quotas: unknown, naming its version.
    let us = web.regions.iter().find(|r| r.region == "us").unwrap();
    assert_eq!(
        us.zones[0].usage,
        Usage::Unknown(Unknown::NotReported {
            agent_version: Some("7.7.7".into())
        })
    );
    // A project that has run nothing in zone a: its namespace is not there.
    let api_eu = &acme.projects[0].regions[0];
    assert!(
        matches!(api_eu.zones[0].usage, Usage::NotPresent { .. }),
        "{api_eu:?}"
    );
    let shop = &all.tenants[1].projects[0].regions[0].zones[0].usage;
    assert!(
        matches!(shop, Usage::Reported { used, .. } if used["count/pods"] == "29"),
        "{shop:?}"
    );
}

#[tokio::test]
async fn a_tenants_overview_holds_nothing_of_another_tenant() {
    let dir = tempfile::tempdir().unwrap();
    let cp = control_plane(dir.path()).await;
    two_tenants(&cp).await;
    let acme = read(&cp, Some("acme")).await.unwrap();
    let text = format!("{acme:?}");
    for other in ["beta", "shop", "2750m", "5Gi", "\"29\"", "12Gi"] {
        assert!(!text.contains(other), "{other} in acme's overview: {text}");
    }
    assert_eq!(acme.tenants.len(), 1);
    let beta = read(&cp, Some("beta")).await.unwrap();
    assert_eq!(beta.regions().into_iter().collect::<Vec<_>>(), ["eu"]);
    let text = format!("{beta:?}");
    for other in ["acme", "web", "1500m", "\"api\""] {
        assert!(!text.contains(other), "{other} in beta's overview: {text}");
    }
    // A tenant that does not exist (a revoked one's session) sees nothing.
    assert!(read(&cp, Some("gone")).await.unwrap().tenants.is_empty());
}

#[tokio::test]
async fn a_disconnected_agent_a_failed_read_and_a_mislabelled_namespace_each_say_why() {
    let dir = tempfile::tempdir().unwrap();
    let cp = control_plane(dir.path()).await;
    two_tenants(&cp).await;
    // Zone b's agent could never read the quotas; zone a's later read failed.
    let failed = QuotaReport {
        error: Some("listing the project namespaces: forbidden".into()),
        ..QuotaReport::default()
    };
    connect(&cp, "eu", "b", Some(failed)).await;
    let stale = QuotaReport {
        at: 5,
        namespaces: vec![namespace("acme-web", "beta", "shop", &[], &[])],
        truncated: true,
        error: Some("the Kubernetes API server is unreachable".into()),
    };
    let conn = connect(&cp, "eu", "a", Some(stale)).await;
    let acme = read(&cp, Some("acme")).await.unwrap();
    let eu = |p: usize| acme.tenants[0].projects[p].regions[0].clone();
    let (api, web) = (eu(0), eu(1));
    assert_eq!(web.zones[0].usage, Usage::Unknown(Unknown::OtherLabels));
    // Not in a truncated report: it may be past the report's end.
    assert_eq!(api.zones[0].usage, Usage::Unknown(Unknown::PastLimit));
    assert!(
        matches!(&web.zones[1].usage, Usage::Unknown(Unknown::ReadFailed { error }) if error.contains("forbidden")),
        "{web:?}"
    );
    // The agent disconnects: its last report is not shown as current.
    sessions::close(&cp, "eu", "a", &conn).await.unwrap();
    let acme = read(&cp, Some("acme")).await.unwrap();
    assert!(matches!(
        acme.tenants[0].projects[1].regions[0].zones[0].usage,
        Usage::Unknown(Unknown::Disconnected { .. })
    ));
}
