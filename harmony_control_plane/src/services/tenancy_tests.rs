//! Tenancy through the services, over a real SQLite store: the project scope snapshotted at
//! submit travels on every delivery of the request, and a tenant sees only its own requests
//! and service instances.

use harmony_agent_protocol::tenancy::{ProjectQuota, ProjectScope};
use harmony_agent_protocol::{Frame, ProviderHealth, RawJson, Req, Res};
use std::time::Duration;

use super::dispatch::Delivery;
use super::instance_ids;
use super::instances::{self, InstanceError};
use super::requests::{self, RequestError, Submission};
use super::scope::{self, Asked, ScopeError};
use super::tenancy::{self, TenancyError};
use super::tests::{agent, control_plane, new_queue, offers, provider, region};
use crate::store::Owner;

fn echo_project(req: &Req) -> Res {
    Res::ok_raw(
        &req.id,
        RawJson::from_string(serde_json::to_string(&req.project).unwrap()).unwrap(),
    )
}

fn quota(cpu: &str) -> ProjectQuota {
    ProjectQuota {
        cpu: Some(cpu.into()),
        ..Default::default()
    }
}

fn get_objects() -> RawJson {
    RawJson::from_string(r#"{"objects":[]}"#.into()).unwrap()
}

#[tokio::test]
async fn a_project_request_carries_its_scope_on_every_delivery_and_only_its_tenant_reads_it() {
    let dir = tempfile::tempdir().unwrap();
    let cp = control_plane(dir.path()).await;
    region(&cp, "eu").await;
    tenancy::create_tenant(&cp, "acme").await.unwrap();
    tenancy::create_tenant(&cp, "beta").await.unwrap();
    tenancy::create_project(&cp, "acme", "web", None)
        .await
        .unwrap();
    let asked = Asked {
        caller: Some("acme"),
        tenant: None,
        project: Some("web"),
    };
    // No quota in eu yet: refused, naming the route that sets it.
    match scope::request_scope(&cp, asked, "eu", "get_objects", &get_objects()).await {
        Err(e @ ScopeError::NoQuota { .. }) => assert!(
            e.to_string()
                .contains("PUT /v1/admin/tenants/acme/projects/web/quotas/eu"),
            "{e}"
        ),
        other => panic!("{other:?}"),
    }
    tenancy::set_quota(&cp, "acme", "web", "eu", &quota("2"))
        .await
        .unwrap();
    let scope = scope::request_scope(&cp, asked, "eu", "get_objects", &get_objects())
        .await
        .unwrap();
    let sub = Submission {
        id: Some("p1".into()),
        op: "get_objects".into(),
        params: get_objects(),
        scope,
        zone: None,
        by_admin: false,
    };
    requests::submit(&cp, "eu", sub.clone()).await.unwrap();
    // The admin acting for the project knows it by its tenant-qualified id.
    let for_acme = Submission {
        id: Some("p2".into()),
        by_admin: true,
        ..sub.clone()
    };
    // The quota changes after submit: the request keeps the snapshot it was accepted with.
    tenancy::set_quota(&cp, "acme", "web", "eu", &quota("3"))
        .await
        .unwrap();
    // Two connections (a redelivery after a reconnect): the same scope on both frames.
    let expected = ProjectScope {
        tenant: "acme".into(),
        project: "web".into(),
        namespace: "acme-web".into(),
        quota: quota("2"),
    };
    for _ in 0..2 {
        let frames = Delivery::new("eu", "z", 1 << 20).next(&cp).await.unwrap();
        match frames.as_slice() {
            [Frame::Req(req)] => assert_eq!(req.project.as_ref(), Some(&expected)),
            other => panic!("{other:?}"),
        }
    }
    let _closed = agent(&cp, "eu", 1 << 20, Default::default(), Some(echo_project)).await;
    let res = requests::call(&cp, "eu", sub, Duration::from_secs(10))
        .await
        .unwrap();
    let seen: ProjectScope = res.result.unwrap().parse().unwrap();
    assert_eq!(seen, expected);
    // Its tenant reads it as p1, the admin as acme@p1; another tenant is told it does not
    // exist, by either id.
    assert_eq!(
        requests::status(&cp, "p1", Some("acme")).await.unwrap().id,
        "p1"
    );
    assert_eq!(
        requests::status(&cp, "acme@p1", None).await.unwrap().id,
        "acme@p1"
    );
    assert!(matches!(
        requests::status(&cp, "p1", None).await,
        Err(RequestError::NotFound(_))
    ));
    for id in ["p1", "acme@p1"] {
        assert!(matches!(
            requests::status(&cp, id, Some("beta")).await,
            Err(RequestError::NotFound(_))
        ));
    }
    let res = requests::call(&cp, "eu", for_acme, Duration::from_secs(10))
        .await
        .unwrap();
    assert_eq!(res.id, "acme@p2");
    assert_eq!(
        requests::status(&cp, "acme@p2", None).await.unwrap().id,
        "acme@p2"
    );
    assert_eq!(
        requests::status(&cp, "p2", Some("acme")).await.unwrap().id,
        "p2"
    );
    // An admin request for no project carries none.
    let plain = Submission {
        id: Some("plain".into()),
        op: "get_objects".into(),
        params: get_objects(),
        scope: None,
        zone: None,
        by_admin: false,
    };
    let res = requests::call(&cp, "eu", plain, Duration::from_secs(10))
        .await
        .unwrap();
    assert!(res.result.is_none_or(|r| r.get() == "null"), "no scope");
    assert!(matches!(
        requests::status(&cp, "plain", Some("acme")).await,
        Err(RequestError::NotFound(_))
    ));
}

#[tokio::test]
async fn a_tenant_sees_only_its_own_service_instances() {
    let dir = tempfile::tempdir().unwrap();
    let cp = control_plane(dir.path()).await;
    region(&cp, "eu").await;
    let _closed = agent(
        &cp,
        "eu",
        1 << 20,
        offers(ProviderHealth::Healthy),
        Some(provider),
    )
    .await;
    let mut mine = new_queue("acme-1");
    mine.owner = Some(Owner {
        tenant: "acme".into(),
        project: "web".into(),
    });
    instances::create(&cp, mine).await.unwrap();
    instances::create(&cp, new_queue("admin-1")).await.unwrap();
    let ids = |v: Vec<crate::store::ServiceRecord>| v.into_iter().map(|r| r.id).collect::<Vec<_>>();
    // Stored under a tenant-scoped id, found by the id the tenant gave.
    let stored = instance_ids::stored_id(Some("acme"), "acme-1");
    assert_eq!(
        ids(instances::list(&cp, Some("acme")).await.unwrap()),
        std::slice::from_ref(&stored)
    );
    assert!(instances::list(&cp, Some("beta")).await.unwrap().is_empty());
    assert_eq!(instances::list(&cp, None).await.unwrap().len(), 2);
    let rec = instances::one(&cp, "acme-1", Some("acme")).await.unwrap();
    assert_eq!(rec.owner.unwrap().project, "web");
    for id in ["acme-1", stored.as_str()] {
        assert!(matches!(
            instances::one(&cp, id, Some("beta")).await,
            Err(InstanceError::NotFound(_))
        ));
    }
    // Beta's acme-1 is its own: no conflict, and each tenant finds its own.
    let mut theirs = new_queue("acme-1");
    theirs.owner = Some(Owner {
        tenant: "beta".into(),
        project: "shop".into(),
    });
    instances::create(&cp, theirs).await.unwrap();
    let b = instances::one(&cp, "acme-1", Some("beta")).await.unwrap();
    assert_eq!(b.owner.unwrap().tenant, "beta");
    assert_ne!(b.id, stored);
    // A parent is named in the child's tenant: acme's acme-1 is not beta's to link to.
    let mut child = new_queue("child");
    child.owner = Some(Owner {
        tenant: "beta".into(),
        project: "shop".into(),
    });
    child.parent = Some(stored.clone());
    let e = instances::create(&cp, child).await.unwrap_err();
    assert!(
        matches!(
            e,
            InstanceError::Invalid {
                field: "parent",
                ..
            }
        ),
        "{e}"
    );
}

#[tokio::test]
async fn tenant_tokens_authenticate_until_revoked_and_projects_validate_their_names() {
    let dir = tempfile::tempdir().unwrap();
    let cp = control_plane(dir.path()).await;
    tenancy::create_tenant(&cp, "acme").await.unwrap();
    assert!(matches!(
        tenancy::create_tenant(&cp, "acme").await,
        Err(TenancyError::Exists(_))
    ));
    assert!(matches!(
        tenancy::create_tenant(&cp, "Not_A_Label").await,
        Err(TenancyError::Invalid {
            field: "tenant",
            ..
        })
    ));
    let (record, token) = tenancy::mint_token(&cp, "acme", None).await.unwrap();
    let t = token.expose();
    assert!(
        t.starts_with(&format!("htt_{}_", record.id)),
        "{}",
        record.id
    );
    assert_eq!(
        tenancy::authenticate(&cp, t).await.unwrap().as_deref(),
        Some("acme")
    );
    // The right id with another secret, a malformed token, an admin-looking one: nobody.
    let forged = format!("htt_{}_{}", record.id, "x".repeat(43));
    for bad in [forged.as_str(), "htt_", "htt_zz_secret", "hid_abc", ""] {
        assert_eq!(
            tenancy::authenticate(&cp, bad).await.unwrap(),
            None,
            "{bad}"
        );
    }
    tenancy::revoke_token(&cp, "acme", &record.id)
        .await
        .unwrap();
    assert_eq!(tenancy::authenticate(&cp, t).await.unwrap(), None);
    assert!(matches!(
        tenancy::mint_token(&cp, "nobody", None).await,
        Err(TenancyError::UnknownTenant(_))
    ));
    // Namespaces: `<tenant>-<project>` by default, a DNS-1123 label of at most 63 characters.
    let p = tenancy::create_project(&cp, "acme", "web", None)
        .await
        .unwrap();
    assert_eq!(p.namespace, "acme-web");
    let long = "p".repeat(60);
    match tenancy::create_project(&cp, "acme", &long, None).await {
        Err(TenancyError::Invalid {
            field: "namespace",
            reason,
        }) => {
            assert!(reason.contains("63"), "{reason}")
        }
        other => panic!("{other:?}"),
    }
    assert!(matches!(
        tenancy::create_project(&cp, "acme", "api", Some("acme-web")).await,
        Err(TenancyError::Exists(m)) if m.contains("acme/web")
    ));
}

/// Answers a `service_create` as `provisioning` only when it carries project `acme/web`'s scope,
/// with the project's namespace and its quota in the region.
fn provider_in_project(req: &Req) -> Res {
    let expected = ProjectScope {
        tenant: "acme".into(),
        project: "web".into(),
        namespace: "acme-web".into(),
        quota: quota("2"),
    };
    if req.project.as_ref() == Some(&expected) {
        super::tests::provider(req)
    } else {
        Res::err(
            &req.id,
            harmony_agent_protocol::ErrorBody::new(
                "invalid_params",
                format!("unexpected project scope {:?}", req.project),
            ),
        )
    }
}

async fn settled(cp: &super::ControlPlane, id: &str) -> crate::store::ServiceRecord {
    use harmony_agent_protocol::InstanceState;
    let deadline = std::time::Instant::now() + Duration::from_secs(20);
    loop {
        let rec = instances::one(cp, id, None).await.unwrap();
        if !matches!(rec.state, InstanceState::Queued | InstanceState::Pending) {
            return rec;
        }
        assert!(std::time::Instant::now() < deadline, "{rec:?}");
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

#[tokio::test]
async fn a_projects_service_instance_runs_in_its_project_and_needs_a_quota_in_its_region() {
    use harmony_agent_protocol::InstanceState;
    let dir = tempfile::tempdir().unwrap();
    let cp = control_plane(dir.path()).await;
    region(&cp, "eu").await;
    let _closed = agent(
        &cp,
        "eu",
        1 << 20,
        offers(ProviderHealth::Healthy),
        Some(provider_in_project),
    )
    .await;
    tenancy::create_tenant(&cp, "acme").await.unwrap();
    tenancy::create_project(&cp, "acme", "web", None)
        .await
        .unwrap();
    let owned = |id: &str| {
        let mut new = new_queue(id);
        new.owner = Some(Owner {
            tenant: "acme".into(),
            project: "web".into(),
        });
        new
    };
    // No quota in eu: the instance fails at once, naming the route that sets one.
    instances::create(&cp, owned("no-quota")).await.unwrap();
    let failed = settled(&cp, &instance_ids::stored_id(Some("acme"), "no-quota")).await;
    assert_eq!(failed.state, InstanceState::Failed, "{failed:?}");
    assert!(
        failed
            .detail
            .contains("PUT /v1/admin/tenants/acme/projects/web/quotas/eu"),
        "{}",
        failed.detail
    );
    // With one, its create carries the project's scope (the provider refuses it otherwise).
    tenancy::set_quota(&cp, "acme", "web", "eu", &quota("2"))
        .await
        .unwrap();
    instances::create(&cp, owned("with-quota")).await.unwrap();
    let running = settled(&cp, &instance_ids::stored_id(Some("acme"), "with-quota")).await;
    assert_eq!(running.state, InstanceState::Provisioning, "{running:?}");
}
