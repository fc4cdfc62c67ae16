//! Validation of the PostgreSQL Scores: every mistake is refused before anything runs, naming
//! the field and the fix.

use harmony::domain::{RunContext, Score, ValidationError};
use harmony::infra::multi_site::MultiSiteTopology;
use harmony::infra::render::RenderTopology;
use harmony_modules::postgresql::{Exposure, MultisitePostgreSQLScore, ReplicaSite};

type Sites = MultiSiteTopology<RenderTopology>;

fn sites() -> Sites {
    let ctx = RunContext::default();
    MultiSiteTopology::new(
        "t",
        ["site-paris", "site-newyork", "site-tokyo"].map(|s| {
            (
                s.parse().unwrap(),
                RenderTopology::from_context(&ctx).with_site(s),
            )
        }),
    )
}

fn score() -> MultisitePostgreSQLScore {
    MultisitePostgreSQLScore::new(
        "finance-db",
        "tenant-a",
        "10Gi",
        "site-paris",
        "finance-db.apps.paris.example.com",
        &["site-newyork"],
    )
}

fn check(s: &MultisitePostgreSQLScore) -> Result<(), ValidationError> {
    let t = sites();
    Score::<Sites>::validate(s)?;
    Score::<Sites>::validate_on(s, &t)
}

#[test]
fn the_classic_scenario_is_valid() {
    check(&score()).unwrap();
}

#[test]
fn an_old_version_over_a_passthrough_route_explains_sni_and_both_ways_out() {
    let mut s = score();
    s.cluster.version = "16".into();
    let e = check(&s).unwrap_err();
    assert_eq!(e.field, "version");
    for needle in [
        "SNI",
        "SSLRequest",
        "17",
        "sslnegotiation=direct",
        "loadBalancer",
    ] {
        assert!(e.to_string().contains(needle), "{needle}: {e}");
    }
    s.exposure = Exposure::LoadBalancer;
    check(&s).unwrap();
}

#[test]
fn unknown_sites_list_the_known_ones() {
    let mut s = score();
    s.topology.replicas.push(ReplicaSite {
        site: "site-berlin".into(),
    });
    let e = check(&s).unwrap_err();
    assert_eq!(e.field, "topology.replicas[1].site");
    assert!(
        e.fix.contains("site-newyork, site-paris, site-tokyo"),
        "{e}"
    );
    let mut s = score();
    s.topology.primary.site = "site-rome".into();
    assert_eq!(check(&s).unwrap_err().field, "topology.primary.site");
}

#[test]
fn replicas_must_be_other_distinct_sites() {
    let mut s = score();
    s.topology.replicas[0].site = "site-paris".into();
    let e = check(&s).unwrap_err();
    assert_eq!(e.field, "topology.replicas[0].site");
    assert!(e.problem.contains("also the primary"), "{e}");
    let mut s = score();
    s.topology.replicas.push(ReplicaSite {
        site: "site-newyork".into(),
    });
    assert!(check(&s).unwrap_err().problem.contains("twice"));
    let mut s = score();
    s.topology.replicas.clear();
    assert_eq!(check(&s).unwrap_err().field, "topology.replicas");
}

#[test]
fn hosts_are_given_or_derived_and_never_ips_or_garbage() {
    let mut s = score();
    s.topology.primary.host = None;
    assert_eq!(check(&s).unwrap_err().field, "topology.primary.host");
    s.topology.primary.apps_domain = Some("apps.paris.example.com".into());
    check(&s).unwrap();
    s.topology.primary.apps_domain = Some("apps..bad".into());
    assert_eq!(check(&s).unwrap_err().field, "topology.primary.appsDomain");
    let mut s = score();
    s.topology.primary.host = Some("not a host".into());
    assert_eq!(check(&s).unwrap_err().field, "topology.primary.host");
    let mut s = score();
    s.topology.primary.host = Some("10.1.2.3".into());
    let e = check(&s).unwrap_err();
    assert!(e.problem.contains("IP address"), "{e}");
    let mut s = score();
    s.exposure = Exposure::LoadBalancer;
    s.topology.primary.host = None;
    s.topology.primary.apps_domain = Some("apps.paris.example.com".into());
    let e = check(&s).unwrap_err();
    assert!(e.fix.contains("load balancer"), "{e}");
}

#[test]
fn quantities_names_wal_and_operator_rules_are_checked() {
    let field = |f: fn(&mut MultisitePostgreSQLScore)| {
        let mut s = score();
        f(&mut s);
        check(&s).unwrap_err().field
    };
    assert_eq!(field(|s| s.cluster.storage = "10 gigs".into()), "storage");
    assert_eq!(
        field(|s| s.cluster.resources.requests.memory = Some("1GB".into())),
        "resources.requests.memory"
    );
    assert_eq!(field(|s| s.name = "Finance_DB".into()), "name");
    assert_eq!(field(|s| s.namespace = "tenant a".into()), "namespace");
    assert_eq!(
        field(|s| s.wal_keep_size = "2 gigabytes".into()),
        "walKeepSize"
    );
    assert_eq!(field(|s| s.wal_keep_size = "0".into()), "walKeepSize");
    assert_eq!(
        field(|s| s.server_tls_secret = Some("my-cert".into())),
        "serverTlsSecret"
    );
    assert_eq!(field(|s| s.cluster.version = "19".into()), "version");
}

#[test]
fn the_score_reads_from_a_custom_resource_spec() {
    let yaml = r#"
name: finance-db
namespace: tenant-a
version: "17"
storage: 10Gi
resources: {requests: {cpu: 500m, memory: 1Gi}}
topology:
  primary: {site: site-paris, appsDomain: apps.site-paris.example.com}
  replicas: [{site: site-newyork}]
"#;
    let s: MultisitePostgreSQLScore = serde_yaml::from_str(yaml).unwrap();
    check(&s).unwrap();
    assert_eq!(s.wal_keep_size, "2GB");
    let typo = yaml.replace("appsDomain", "appDomain");
    assert!(serde_yaml::from_str::<MultisitePostgreSQLScore>(&typo).is_err());
}
