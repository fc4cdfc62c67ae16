//! The tenancy half of `ControlPlaneClient`, against a real control plane.

use harmony_e2e::multi_region::{ControlPlane, Pki};
use serde_json::json;

/// `ControlPlaneClient`'s tenancy calls against the same server: the admin sets tenants up, a
/// client built with a tenant token sees its own projects only and submits for its project,
/// and refusals come back as `Status` errors carrying the server's words.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_client_sets_tenants_up_and_acts_with_a_tenant_token() {
    use harmony::infra::control_plane::{ControlPlaneClient, ControlPlaneError, SecretString};
    use harmony_api::ProjectQuota;
    use std::time::Duration;

    let pki = Pki::new().unwrap();
    let cp = ControlPlane::start(
        harmony_e2e::bins!().control_plane(),
        &pki,
        Default::default(),
    )
    .unwrap();
    let admin = cp.client();
    admin
        .create_region(&"eu".parse().unwrap(), &"z1".parse().unwrap())
        .await
        .unwrap();
    admin.create_tenant("acme").await.unwrap();
    admin.create_tenant("beta").await.unwrap();
    let cap = ProjectQuota {
        cpu: Some("4".into()),
        ..Default::default()
    };
    let caps = admin.set_tenant_cap("acme", "eu", &cap).await.unwrap();
    assert_eq!(caps["eu"], cap);
    let web = admin
        .create_project("acme", "web", Some("acme-www"))
        .await
        .unwrap();
    assert_eq!(web.namespace, "acme-www");
    admin.create_project("beta", "shop", None).await.unwrap();
    let quota = ProjectQuota {
        cpu: Some("3".into()),
        ..Default::default()
    };
    let web = admin
        .set_project_quota("acme", "web", "eu", &quota)
        .await
        .unwrap();
    assert_eq!(web.quotas["eu"], quota);
    admin.create_project("acme", "api", None).await.unwrap();
    match admin.set_project_quota("acme", "api", "eu", &cap).await {
        Err(ControlPlaneError::Status {
            status: 422, error, ..
        }) => {
            assert!(error.error.contains("cap is 4"), "{}", error.error)
        }
        other => panic!("a quota over the cap: {other:?}"),
    }
    let tenants: Vec<_> = admin
        .tenants()
        .await
        .unwrap()
        .into_iter()
        .map(|t| t.tenant)
        .collect();
    assert_eq!(tenants, ["acme", "beta"]);

    let issued = admin.create_tenant_token("acme", None).await.unwrap();
    assert!(!format!("{issued:?}").contains(issued.token.expose()));
    let tenant = ControlPlaneClient::new(
        &cp.url(),
        SecretString::new(issued.token.expose()),
        Some(pki.ca_pem.as_bytes()),
    )
    .unwrap();
    let mine: Vec<_> = tenant
        .projects()
        .await
        .unwrap()
        .into_iter()
        .map(|p| p.project)
        .collect();
    assert_eq!(mine, ["api", "web"]);
    match tenant.create_tenant("gamma").await {
        Err(ControlPlaneError::Status { status: 403, .. }) => {}
        other => panic!("a tenant token on an admin route: {other:?}"),
    }
    // For its project the request is accepted and waits for the (absent) agent; without a
    // project it is refused, naming the field.
    let params = json!({"objects": []});
    let web = tenant.clone().for_project(None, "web");
    match web
        .request(
            "eu",
            "t-1",
            "get_objects",
            &params,
            Duration::from_millis(50),
        )
        .await
    {
        Err(ControlPlaneError::Status { status: 504, .. }) => {}
        other => panic!("{other:?}"),
    }
    assert_eq!(
        tenant.request_status("t-1").await.unwrap().unwrap().op,
        "get_objects"
    );
    match tenant
        .request(
            "eu",
            "t-2",
            "get_objects",
            &params,
            Duration::from_millis(50),
        )
        .await
    {
        Err(ControlPlaneError::Status {
            status: 400, error, ..
        }) => {
            assert!(error.error.starts_with("project:"), "{}", error.error)
        }
        other => panic!("{other:?}"),
    }
    admin.revoke_tenant_token("acme", &issued.id).await.unwrap();
    match tenant.projects().await {
        Err(ControlPlaneError::Status { status: 401, .. }) => {}
        other => panic!("a revoked token: {other:?}"),
    }
}
