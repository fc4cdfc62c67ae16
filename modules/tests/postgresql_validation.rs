//! Validation of the PostgreSQL Scores: every mistake is refused before anything runs, naming
//! the field and the fix.

use harmony::domain::{InterpretError, Inventory, RunContext, Score, ValidationError};
use harmony::infra::multi_site::MultiSiteTopology;
use harmony::infra::render::RenderTopology;
use harmony_modules::postgresql::{
    Exposure, MultisitePostgreSQL, MultisitePostgreSQLScore, PostgreSQLResource, ReplicaSite,
};
use kube::CustomResourceExt;

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
    s.spec.cluster.version = "16".into();
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
    s.spec.exposure = Exposure::LoadBalancer;
    check(&s).unwrap();
}

#[test]
fn an_exact_version_is_accepted_and_an_unknown_minor_lists_the_known_ones() {
    let mut s = score();
    s.spec.cluster.version = "17.4".into();
    check(&s).unwrap();
    s.spec.cluster.version = "17.99".into();
    let e = check(&s).unwrap_err();
    assert_eq!(e.field, "version");
    assert!(
        e.problem
            .contains("no CloudNativePG image of PostgreSQL 17.99"),
        "{e}"
    );
    // Every known 17 minor is listed, and the bare major is offered as the pinned newest.
    for needle in [
        "17.0, 17.1, 17.2",
        "17.10, 17.11",
        "\"17\" for the newest (17.11",
    ] {
        assert!(e.fix.contains(needle), "{needle}: {e}");
    }
}

#[test]
fn unknown_sites_list_the_known_ones() {
    let mut s = score();
    s.spec.topology.replicas.push(ReplicaSite {
        site: "site-berlin".into(),
    });
    let e = check(&s).unwrap_err();
    assert_eq!(e.field, "topology.replicas[1].site");
    assert!(
        e.fix.contains("site-newyork, site-paris, site-tokyo"),
        "{e}"
    );
    let mut s = score();
    s.spec.topology.primary.site = "site-rome".into();
    assert_eq!(check(&s).unwrap_err().field, "topology.primary.site");
}

#[test]
fn replicas_must_be_other_distinct_sites() {
    let mut s = score();
    s.spec.topology.replicas[0].site = "site-paris".into();
    let e = check(&s).unwrap_err();
    assert_eq!(e.field, "topology.replicas[0].site");
    assert!(e.problem.contains("also the primary"), "{e}");
    let mut s = score();
    s.spec.topology.replicas.push(ReplicaSite {
        site: "site-newyork".into(),
    });
    assert!(check(&s).unwrap_err().problem.contains("twice"));
    let mut s = score();
    s.spec.topology.replicas.clear();
    assert_eq!(check(&s).unwrap_err().field, "topology.replicas");
}

#[tokio::test(flavor = "multi_thread")]
async fn without_host_or_apps_domain_a_site_with_no_ingress_domain_names_the_field() {
    let mut s = score();
    s.spec.topology.primary.host = None;
    // The host may still come from the site's ingress domain, read when the Score runs.
    check(&s).unwrap();
    // A render has no OpenShift ingress config to read it from: nothing is written.
    let out = tempfile::tempdir().unwrap();
    let ctx = RunContext {
        out_dir: out.path().to_path_buf(),
        ..RunContext::default()
    };
    let t: Sites = MultiSiteTopology::new(
        "t",
        ["site-paris", "site-newyork"].map(|s| {
            (
                s.parse().unwrap(),
                RenderTopology::from_context(&ctx).with_site(s),
            )
        }),
    );
    let e = Score::<Sites>::create_interpret(&s)
        .execute(&Inventory::empty(), &t)
        .await
        .unwrap_err();
    let InterpretError::Invalid(e) = e else {
        panic!("expected a validation error, got {e}");
    };
    assert_eq!(e.field, "topology.primary.host");
    assert!(
        e.problem.contains("ingresses.config.openshift.io/cluster"),
        "{e}"
    );
    assert!(e.fix.contains("topology.primary.appsDomain"), "{e}");
    assert_eq!(std::fs::read_dir(out.path()).unwrap().count(), 0);
}

#[test]
fn hosts_are_given_or_derived_and_never_ips_or_garbage() {
    let mut s = score();
    s.spec.topology.primary.host = None;
    s.spec.topology.primary.apps_domain = Some("apps.paris.example.com".into());
    check(&s).unwrap();
    s.spec.topology.primary.apps_domain = Some("apps..bad".into());
    assert_eq!(check(&s).unwrap_err().field, "topology.primary.appsDomain");
    let mut s = score();
    s.spec.topology.primary.host = Some("not a host".into());
    assert_eq!(check(&s).unwrap_err().field, "topology.primary.host");
    let mut s = score();
    s.spec.topology.primary.host = Some("10.1.2.3".into());
    let e = check(&s).unwrap_err();
    assert!(e.problem.contains("IP address"), "{e}");
    let mut s = score();
    s.spec.exposure = Exposure::LoadBalancer;
    s.spec.topology.primary.host = None;
    s.spec.topology.primary.apps_domain = Some("apps.paris.example.com".into());
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
    assert_eq!(
        field(|s| s.spec.cluster.storage = "10 gigs".into()),
        "storage"
    );
    assert_eq!(
        field(|s| s.spec.cluster.resources.requests.memory = Some("1GB".into())),
        "resources.requests.memory"
    );
    assert_eq!(field(|s| s.name = "Finance_DB".into()), "name");
    assert_eq!(field(|s| s.namespace = "tenant a".into()), "namespace");
    assert_eq!(
        field(|s| s.spec.wal_keep_size = "2 gigabytes".into()),
        "walKeepSize"
    );
    assert_eq!(field(|s| s.spec.wal_keep_size = "0".into()), "walKeepSize");
    assert_eq!(
        field(|s| s.spec.server_tls_secret = Some("my-cert".into())),
        "serverTlsSecret"
    );
    assert_eq!(field(|s| s.spec.cluster.version = "19".into()), "version");
}

#[test]
fn the_score_and_the_custom_resource_are_one_definition() {
    let yaml = r#"
apiVersion: harmony.io/v1alpha1
kind: MultisitePostgreSQL
metadata: {name: finance-db, namespace: tenant-a}
spec:
  version: "17"
  storage: 10Gi
  resources: {requests: {cpu: 500m, memory: 1Gi}}
  topology:
    primary: {site: site-paris, appsDomain: apps.site-paris.example.com}
    replicas: [{site: site-newyork}]
"#;
    let resource: MultisitePostgreSQL = serde_yaml::from_str(yaml).unwrap();
    let s = MultisitePostgreSQLScore::from_resource(&resource);
    check(&s).unwrap();
    assert_eq!(
        (s.name.as_str(), s.namespace.as_str()),
        ("finance-db", "tenant-a")
    );
    assert_eq!(s.spec.wal_keep_size, "2GB");
    let typo = yaml.replace("appsDomain", "appDomain");
    assert!(serde_yaml::from_str::<MultisitePostgreSQL>(&typo).is_err());

    // The CRD comes from the same type, with the Score's own rules as CEL.
    let crd = serde_json::to_value(MultisitePostgreSQL::crd()).unwrap();
    assert_eq!(crd["spec"]["names"]["kind"], "MultisitePostgreSQL");
    let schema = &crd["spec"]["versions"][0]["schema"]["openAPIV3Schema"]["properties"]["spec"];
    let text = schema.to_string();
    for field in [
        "\"version\"",
        "\"storage\"",
        "\"topology\"",
        "\"walKeepSize\"",
        "\"imageCatalog\"",
    ] {
        assert!(
            text.contains(field),
            "{field} missing from the CRD schema: {text}"
        );
    }
    assert!(
        text.contains("x-kubernetes-validations") && text.contains("loadBalancer"),
        "{text}"
    );
    assert!(text.contains("r.site != self.primary.site"), "{text}");
    let single = serde_json::to_value(PostgreSQLResource::crd()).unwrap();
    assert_eq!(single["spec"]["names"]["kind"], "PostgreSQL");
}

#[tokio::test(flavor = "multi_thread")]
async fn a_render_that_fails_says_rendering_not_applying() {
    // A folder where the primary's Cluster manifest should be: the render cannot write it.
    let out = tempfile::tempdir().unwrap();
    let blocked = out.path().join(
        "site-paris/kubernetes/namespaces/tenant-a/cluster.postgresql.cnpg.io_finance-db.yaml",
    );
    std::fs::create_dir_all(&blocked).unwrap();
    let ctx = RunContext {
        out_dir: out.path().to_path_buf(),
        ..RunContext::default()
    };
    let t: Sites = MultiSiteTopology::new(
        "t",
        ["site-paris", "site-newyork"].map(|s| {
            (
                s.parse().unwrap(),
                RenderTopology::from_context(&ctx).with_site(s),
            )
        }),
    );
    let e = Score::<Sites>::create_interpret(&score())
        .execute(&Inventory::empty(), &t)
        .await
        .unwrap_err();
    let text = e.to_string();
    assert!(
        matches!(e, InterpretError::Capability { .. }),
        "expected a capability error, got {text}"
    );
    assert!(
        text.contains("rendering the primary for site-paris"),
        "{text}"
    );
    assert!(
        !text.contains("applying"),
        "render mode applies nothing: {text}"
    );
    assert!(
        text.contains("cluster.postgresql.cnpg.io_finance-db.yaml"),
        "the path that failed: {text}"
    );
}
