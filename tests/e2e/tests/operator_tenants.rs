//! The operator carries tenants: `Tenant` resources on a fixture kube-apiserver, reconciled by
//! the operator into a real control-plane process (its tenancy admin API), read back with the
//! admin client.

use serde_json::{Value, json};
use std::time::Duration;

use harmony_e2e::ApiServer;
use harmony_e2e::multi_region::{ControlPlane, ControlPlaneOptions, Pki};
use harmony_operator::OperatorConfig;
use operator_support::{apply_ok, condition, get_json, kubectl_ok, start, wait_for};

mod operator_support;

const WAIT: Duration = Duration::from_secs(90);

async fn client_for(server: &ApiServer) -> kube::Client {
    let kc = kube::config::Kubeconfig::read_from(server.kubeconfig()).unwrap();
    let config = kube::Config::from_custom_kubeconfig(kc, &Default::default())
        .await
        .unwrap();
    kube::Client::try_from(config).unwrap()
}

/// `acme` with caps in two regions and two projects; `web_cpu`/`api_cpu` are the projects'
/// CPU quotas in `eu-west` (the cap there is 4).
fn acme(web_cpu: &str, api_cpu: &str) -> String {
    let resource = json!({
        "apiVersion": "harmony.io/v1alpha1", "kind": "Tenant",
        "metadata": {"name": "acme"},
        "spec": {
            "caps": {
                "eu-west": {"cpu": "4", "memory": "8Gi", "objects": {"pods": 20}},
                "us-east": {"cpu": "2"}
            },
            "projects": [
                {"name": "web",
                 "quotas": {"eu-west": {"cpu": web_cpu, "memory": "2Gi", "objects": {"pods": 5}}}},
                {"name": "api", "namespace": "acme-api-prod",
                 "quotas": {"eu-west": {"cpu": api_cpu, "memory": "4Gi", "objects": {"pods": 10}},
                            "us-east": {"cpu": "2"}}}
            ]
        }
    });
    serde_yaml::to_string(&resource).unwrap()
}

/// The `Tenant` named `name` once its Ready condition, for generation `generation`, has
/// status `ready`.
fn tenant_when(cp: &ApiServer, name: &str, generation: i64, ready: &str) -> Value {
    wait_for(
        &format!("Tenant {name} generation {generation} Ready={ready}"),
        WAIT,
        || {
            let r = get_json(cp, &["tenants.harmony.io", name]).unwrap_or_default();
            let c = condition(&r, "Ready");
            let observed = r["status"]["observedGeneration"].as_i64();
            (
                (c.0 == ready && observed == Some(generation)).then(|| r.clone()),
                format!("generation {observed:?}: {c:?}"),
            )
        },
    )
}

/// `project`'s CPU quota in `region`, as the control plane holds it.
fn cpu(projects: &[harmony_api::Project], project: &str, region: &str) -> Option<String> {
    projects
        .iter()
        .find(|p| p.tenant == "acme" && p.project == project)
        .and_then(|p| p.quotas.get(region))
        .and_then(|q| q.cpu.clone())
}

#[tokio::test(flavor = "multi_thread")]
async fn a_tenant_resource_declares_the_tenant_its_caps_projects_and_quotas() {
    let cp = start(false);
    apply_ok(&cp, &harmony_operator::crds_yaml().unwrap());
    kubectl_ok(
        &cp,
        &[
            "wait",
            "--for=condition=Established",
            "--timeout=60s",
            "crd/tenants.harmony.io",
        ],
    );
    let pki = Pki::new().unwrap();
    let control_plane = ControlPlane::start(
        harmony_e2e::bins!().control_plane(),
        &pki,
        ControlPlaneOptions::default(),
    )
    .unwrap();
    let admin = control_plane.client();
    let controller = tokio::spawn(harmony_operator::run(
        client_for(&cp).await,
        OperatorConfig {
            resync: Duration::from_secs(2),
            backoff_base: Duration::from_millis(500),
            backoff_max: Duration::from_secs(5),
            control_plane: Some(admin.clone()),
            ..OperatorConfig::default()
        },
    ));

    // 1. Applying the resource creates the tenant, its caps, its projects and their quotas.
    apply_ok(&cp, &acme("1", "3"));
    let r = tenant_when(&cp, "acme", 1, "True");
    let (_, reason, message) = condition(&r, "Ready");
    assert_eq!(reason, "Reconciled");
    // Tenant, 2 caps, 2 projects, 3 quotas.
    assert_eq!(message, "8 create", "{message}");
    let tenant = admin
        .tenants()
        .await
        .unwrap()
        .into_iter()
        .find(|t| t.tenant == "acme")
        .expect("tenant acme on the control plane");
    let eu = &tenant.caps["eu-west"];
    assert_eq!(
        (eu.cpu.as_deref(), eu.memory.as_deref(), eu.objects["pods"]),
        (Some("4"), Some("8Gi"), 20)
    );
    assert_eq!(tenant.caps["us-east"].cpu.as_deref(), Some("2"));
    let projects = admin.projects().await.unwrap();
    let namespace = |name: &str| {
        projects
            .iter()
            .find(|p| p.tenant == "acme" && p.project == name)
            .map(|p| p.namespace.clone())
    };
    assert_eq!(namespace("web").as_deref(), Some("acme-web"));
    assert_eq!(namespace("api").as_deref(), Some("acme-api-prod"));
    assert_eq!(cpu(&projects, "web", "eu-west").as_deref(), Some("1"));
    assert_eq!(cpu(&projects, "api", "eu-west").as_deref(), Some("3"));
    assert_eq!(cpu(&projects, "api", "us-east").as_deref(), Some("2"));
    let web = projects.iter().find(|p| p.project == "web").unwrap();
    assert_eq!(web.quotas["eu-west"].memory.as_deref(), Some("2Gi"));
    assert_eq!(web.quotas["eu-west"].objects["pods"], 5);

    // 2. Moving CPU between the projects within the cap: web is raised before api is lowered
    // in the declaration, so web's raise is refused once and succeeds after api's. Only the two
    // quotas change; the rest is reported unchanged.
    apply_ok(&cp, &acme("3", "1"));
    let r = tenant_when(&cp, "acme", 2, "True");
    let (_, _, message) = condition(&r, "Ready");
    assert_eq!(message, "2 update, 6 unchanged", "{message}");
    let projects = admin.projects().await.unwrap();
    assert_eq!(cpu(&projects, "web", "eu-west").as_deref(), Some("3"));
    assert_eq!(cpu(&projects, "api", "eu-west").as_deref(), Some("1"));

    // 3. A quota over the cap: not Ready, the control plane's 422 (naming the cap) in the
    // status, and the quota as it was.
    apply_ok(&cp, &acme("4", "1"));
    let r = tenant_when(&cp, "acme", 3, "False");
    let (_, reason, message) = condition(&r, "Ready");
    assert_eq!(reason, "Rejected", "{message}");
    assert!(
        message.contains("cpu over tenant \"acme\"'s cap in region \"eu-west\"")
            && message.contains("the cap is 4")
            && message.contains("PUT /v1/admin/tenants/acme/caps/eu-west"),
        "{message}"
    );
    assert_eq!(condition(&r, "Degraded").0, "True");
    let projects = admin.projects().await.unwrap();
    assert_eq!(cpu(&projects, "web", "eu-west").as_deref(), Some("3"));

    // 4. An invalid spec is refused naming the field, before anything reaches the control
    // plane.
    let beta = json!({
        "apiVersion": "harmony.io/v1alpha1", "kind": "Tenant",
        "metadata": {"name": "beta"},
        "spec": {"caps": {"eu-west": {"cpu": "lots"}}}
    });
    apply_ok(&cp, &serde_yaml::to_string(&beta).unwrap());
    let r = tenant_when(&cp, "beta", 1, "False");
    let (_, reason, message) = condition(&r, "Ready");
    assert_eq!(reason, "InvalidSpec");
    assert!(
        message.contains("spec.caps.eu-west.cpu") && message.contains("quantity"),
        "{message}"
    );
    assert!(
        !admin
            .tenants()
            .await
            .unwrap()
            .iter()
            .any(|t| t.tenant == "beta"),
        "an invalid Tenant created its tenant"
    );

    // 5. A namespace another tenant's project holds is refused with the control plane's words,
    // not taken for an existing project.
    let gamma = json!({
        "apiVersion": "harmony.io/v1alpha1", "kind": "Tenant",
        "metadata": {"name": "gamma"},
        "spec": {"projects": [{"name": "web", "namespace": "acme-web"}]}
    });
    apply_ok(&cp, &serde_yaml::to_string(&gamma).unwrap());
    let r = tenant_when(&cp, "gamma", 1, "False");
    let (_, reason, message) = condition(&r, "Ready");
    assert_eq!(reason, "Rejected", "{message}");
    assert!(
        message.contains("\"acme-web\" belongs to project acme/web"),
        "{message}"
    );
    assert!(
        !admin
            .projects()
            .await
            .unwrap()
            .iter()
            .any(|p| p.tenant == "gamma"),
        "gamma got a project"
    );
    controller.abort();
}
