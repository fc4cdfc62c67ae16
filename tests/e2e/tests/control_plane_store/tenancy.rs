//! Tenants, tenant tokens, caps, projects and quotas; the scope of requests and the owner of
//! service instances.

use super::Db;
use harmony_agent_protocol::InstanceState;
use harmony_agent_protocol::tenancy::ProjectQuota;
use harmony_control_plane::store::{
    CapSet, NewRequest, Owner, PageSession, ProjectCreated, ProjectRecord, QuotaSet, RequestScope,
    ServiceRecord, Submitted, TenantTokenRecord,
};

fn quota(cpu: &str, memory: &str, pods: u64) -> ProjectQuota {
    ProjectQuota {
        cpu: Some(cpu.into()),
        memory: Some(memory.into()),
        storage: None,
        objects: [("pods".to_string(), pods)].into(),
    }
}

fn project(tenant: &str, name: &str, namespace: &str) -> ProjectRecord {
    ProjectRecord {
        tenant: tenant.into(),
        project: name.into(),
        namespace: namespace.into(),
        created_at: 5,
        quotas: Default::default(),
    }
}

fn token(id: &str, tenant: &str, expires_at: Option<i64>) -> TenantTokenRecord {
    TenantTokenRecord {
        id: id.into(),
        tenant: tenant.into(),
        hash: super::hash(id),
        created_at: 1,
        expires_at,
        revoked_at: None,
    }
}

pub(super) async fn tenants_and_their_tokens_are_stored_hashed_and_revoked(db: Db) {
    let s = db.open().await;
    assert!(s.create_tenant("acme", 10).await.unwrap());
    assert!(!s.create_tenant("acme", 11).await.unwrap(), "created twice");
    assert!(s.create_tenant("beta", 12).await.unwrap());
    let names: Vec<_> = s
        .tenants()
        .await
        .unwrap()
        .into_iter()
        .map(|t| t.name)
        .collect();
    assert_eq!(names, ["acme", "beta"]);
    assert_eq!(s.tenant("acme").await.unwrap().unwrap().created_at, 10);
    assert!(s.tenant("nobody").await.unwrap().is_none());

    assert!(
        s.add_tenant_token(&token("t1", "acme", Some(99)))
            .await
            .unwrap()
    );
    assert!(
        !s.add_tenant_token(&token("t1", "beta", None))
            .await
            .unwrap(),
        "id taken"
    );
    assert!(
        !s.add_tenant_token(&token("t2", "nobody", None))
            .await
            .unwrap(),
        "no tenant"
    );
    let stored = s.tenant_token("t1").await.unwrap().unwrap();
    assert_eq!(stored, token("t1", "acme", Some(99)));
    assert!(s.tenant_token("t2").await.unwrap().is_none());
    // Only its own tenant revokes it, once.
    assert!(!s.revoke_tenant_token("beta", "t1", 50).await.unwrap());
    assert!(s.revoke_tenant_token("acme", "t1", 50).await.unwrap());
    assert!(!s.revoke_tenant_token("acme", "t1", 51).await.unwrap());
    assert_eq!(
        s.tenant_token("t1").await.unwrap().unwrap().revoked_at,
        Some(50)
    );

    // Caps per region, replaced in place; none for an unknown tenant. They survive a restart.
    for (region, q) in [
        ("eu", quota("4", "8Gi", 10)),
        ("eu", quota("8", "8Gi", 10)),
        ("ap", quota("1", "1Gi", 1)),
    ] {
        assert_eq!(
            s.set_tenant_cap("acme", region, &q).await.unwrap(),
            CapSet::Set
        );
    }
    assert_eq!(
        s.set_tenant_cap("nobody", "eu", &quota("1", "1Gi", 1))
            .await
            .unwrap(),
        CapSet::NoTenant
    );
    drop(s);
    let s = db.open().await;
    let acme = s.tenant("acme").await.unwrap().unwrap();
    assert_eq!(acme.caps.keys().collect::<Vec<_>>(), ["ap", "eu"]);
    assert_eq!(acme.caps["eu"].cpu.as_deref(), Some("8"));
    assert!(s.tenant("beta").await.unwrap().unwrap().caps.is_empty());
}

pub(super) async fn projects_are_unique_and_their_quotas_stay_under_the_tenant_cap(db: Db) {
    let s = db.open().await;
    s.create_tenant("acme", 1).await.unwrap();
    s.create_tenant("beta", 1).await.unwrap();
    assert_eq!(
        s.create_project(&project("acme", "web", "acme-web"))
            .await
            .unwrap(),
        ProjectCreated::Created
    );
    assert_eq!(
        s.create_project(&project("acme", "web", "other"))
            .await
            .unwrap(),
        ProjectCreated::Exists
    );
    assert_eq!(
        s.create_project(&project("beta", "web", "acme-web"))
            .await
            .unwrap(),
        ProjectCreated::NamespaceTaken("acme/web".into())
    );
    assert_eq!(
        s.create_project(&project("nobody", "web", "n-web"))
            .await
            .unwrap(),
        ProjectCreated::NoTenant
    );
    s.create_project(&project("acme", "api", "acme-api"))
        .await
        .unwrap();
    s.create_project(&project("beta", "web", "beta-web"))
        .await
        .unwrap();

    // No cap: any quota. Then a cap of 4 cpus, 8Gi, 10 pods in eu.
    assert_eq!(
        s.set_project_quota("acme", "web", "eu", &quota("3", "4Gi", 5))
            .await
            .unwrap(),
        QuotaSet::Set
    );
    s.set_tenant_cap("acme", "eu", &quota("4", "8Gi", 10))
        .await
        .unwrap();
    match s
        .set_project_quota("acme", "api", "eu", &quota("1500m", "1Gi", 1))
        .await
        .unwrap()
    {
        QuotaSet::OverCap(over) => {
            assert_eq!(
                (
                    over.resource.as_str(),
                    over.cap.as_str(),
                    over.others.as_str()
                ),
                ("cpu", "4", "3")
            );
            assert_eq!(over.asked, "1500m");
        }
        other => panic!("3 + 1.5 cpus under a cap of 4: {other:?}"),
    }
    // Exactly at the cap fits; the project's own earlier quota does not count twice.
    assert_eq!(
        s.set_project_quota("acme", "api", "eu", &quota("1", "4096Mi", 5))
            .await
            .unwrap(),
        QuotaSet::Set
    );
    assert_eq!(
        s.set_project_quota("acme", "web", "eu", &quota("3", "4Gi", 5))
            .await
            .unwrap(),
        QuotaSet::Set
    );
    // Another tenant's quotas and another region's do not count.
    assert_eq!(
        s.set_project_quota("beta", "web", "eu", &quota("64", "1Ti", 900))
            .await
            .unwrap(),
        QuotaSet::Set
    );
    assert_eq!(
        s.set_project_quota("acme", "web", "ap", &quota("64", "1Ti", 900))
            .await
            .unwrap(),
        QuotaSet::Set
    );
    assert_eq!(
        s.set_project_quota("acme", "nope", "eu", &quota("1", "1Gi", 1))
            .await
            .unwrap(),
        QuotaSet::NoProject
    );
    assert!(matches!(
        s.set_project_quota("acme", "web", "eu", &quota("lots", "1Gi", 1)).await.unwrap(),
        QuotaSet::Invalid(e) if e.contains("cpu")
    ));
    drop(s);
    let s = db.open().await;
    let web = s.project("acme", "web").await.unwrap().unwrap();
    assert_eq!(web.namespace, "acme-web");
    assert_eq!(web.quotas.keys().collect::<Vec<_>>(), ["ap", "eu"]);
    assert_eq!(web.quotas["eu"], quota("3", "4Gi", 5));
    let mine: Vec<_> = s
        .projects(Some("acme"))
        .await
        .unwrap()
        .into_iter()
        .map(|p| p.project)
        .collect();
    assert_eq!(mine, ["api", "web"]);
    assert_eq!(s.projects(None).await.unwrap().len(), 3);
    assert!(s.project("beta", "api").await.unwrap().is_none());
}

pub(super) async fn requests_and_instances_keep_their_tenant_and_project(db: Db) {
    let s = db.open().await;
    let scope = RequestScope {
        tenant: "acme".into(),
        project: "web".into(),
        project_json:
            r#"{"tenant":"acme","project":"web","namespace":"acme-web","quota":{"cpu":"2"}}"#.into(),
    };
    let params = r#"{"manifests":[]}"#;
    assert!(s.create_region("eu", "z").await.unwrap());
    let scoped = NewRequest::new("r1", "eu", "apply_manifests", params, 1).scoped(scope.clone());
    assert_eq!(s.submit_request(&scoped).await.unwrap(), Submitted::Created);
    // The same body for another tenant (or for none) does not join it.
    let other = RequestScope {
        tenant: "beta".into(),
        ..scope.clone()
    };
    let theirs = NewRequest::new("r1", "eu", "apply_manifests", params, 2).scoped(other);
    assert!(matches!(
        s.submit_request(&theirs).await.unwrap(),
        Submitted::Mismatch(r) if r.scope.as_ref() == Some(&scope)
    ));
    let unscoped = NewRequest::new("r1", "eu", "apply_manifests", params, 2);
    assert!(matches!(
        s.submit_request(&unscoped).await.unwrap(),
        Submitted::Mismatch(_)
    ));
    assert!(matches!(
        s.submit_request(&scoped).await.unwrap(),
        Submitted::Existing(_)
    ));
    s.submit_request(&NewRequest::new("r2", "eu", "get_inventory", "{}", 3))
        .await
        .unwrap();

    let owned = ServiceRecord {
        id: "svc-a".into(),
        service_type: "queue".into(),
        region: "eu".into(),
        state: InstanceState::Queued,
        detail: String::new(),
        provider: None,
        outputs: Default::default(),
        spec: serde_json::json!({}),
        created_at: 1,
        updated_at: 1,
        attempts: 0,
        zone: "z".into(),
        parent: None,
        owner: Some(Owner {
            tenant: "acme".into(),
            project: "web".into(),
        }),
    };
    assert!(s.insert_service(&owned).await.unwrap());
    assert!(
        s.insert_service(&ServiceRecord {
            id: "svc-b".into(),
            owner: None,
            ..owned.clone()
        })
        .await
        .unwrap()
    );
    drop(s);
    // Delivery reads the snapshot back byte for byte, after a restart too.
    let s = db.open().await;
    let unanswered = s.unanswered("eu", "z").await.unwrap();
    assert_eq!(unanswered.len(), 2);
    assert_eq!(unanswered[0].scope.as_ref(), Some(&scope));
    assert_eq!(unanswered[1].scope, None);
    assert_eq!(s.request("r1").await.unwrap().unwrap().scope, Some(scope));
    assert_eq!(s.service("svc-a").await.unwrap().unwrap(), owned);
    assert_eq!(s.service("svc-b").await.unwrap().unwrap().owner, None);
    let claimed = s.claim_queued("svc-a", "sent").await.unwrap().unwrap();
    assert_eq!(claimed.owner, owned.owner, "a state change keeps the owner");
}

// --- PostgreSQL only ------------------------------------------------------------------------

/// Two replicas setting quotas of one tenant at once: the tenant's row lock makes them take
/// turns, so they cannot both fit under the cap.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn postgres_concurrent_quotas_on_two_replicas_never_exceed_the_cap() {
    let db = Db::postgres();
    let (a, b) = tokio::join!(db.open(), db.open());
    a.create_tenant("acme", 1).await.unwrap();
    a.set_tenant_cap("acme", "eu", &quota("4", "8Gi", 10))
        .await
        .unwrap();
    for (p, ns) in [("web", "acme-web"), ("api", "acme-api")] {
        a.create_project(&project("acme", p, ns)).await.unwrap();
    }
    for _ in 0..5 {
        let asked = quota("3", "1Gi", 1);
        let (x, y) = tokio::join!(
            a.set_project_quota("acme", "web", "eu", &asked),
            b.set_project_quota("acme", "api", "eu", &asked)
        );
        let set = [x.unwrap(), y.unwrap()]
            .iter()
            .filter(|o| **o == QuotaSet::Set)
            .count();
        assert_eq!(set, 1, "3 + 3 cpus fit under a cap of 4");
        // Free the cap for the next round: both back to nothing asked.
        for p in ["web", "api"] {
            a.set_project_quota("acme", p, "eu", &quota("0", "0", 0))
                .await
                .unwrap();
        }
    }
}

/// A database written by schema version 1 (no tenancy tables or columns) is upgraded in place
/// when a replica of this release opens it; its requests read back with no scope.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn postgres_a_version_1_database_gains_the_tenancy_tables_and_columns_in_place() {
    let db = Db::postgres();
    drop(db.open().await);
    let (client, _driver) = db.connect().await;
    client
        .batch_execute(
            "DROP TABLE project_quotas, projects, tenant_caps, tenant_tokens, tenants;
             ALTER TABLE requests DROP COLUMN tenant, DROP COLUMN project,
                 DROP COLUMN project_json;
             ALTER TABLE service_instances DROP COLUMN tenant, DROP COLUMN project;
             UPDATE schema_version SET version = 1;
             INSERT INTO regions (name, zone, created_at) VALUES ('eu', 'z', 1);
             INSERT INTO requests (id, region, op, params, body_hash, state, created_at)
                 VALUES ('old', 'eu', 'get_inventory', '{}', decode(repeat('00', 32), 'hex'),
                     'queued', 1);",
        )
        .await
        .unwrap();
    let s = db.open().await;
    let version: i64 = client
        .query_one("SELECT version FROM schema_version", &[])
        .await
        .unwrap()
        .get(0);
    assert_eq!(version, 2);
    assert!(s.create_tenant("acme", 1).await.unwrap());
    let scope = RequestScope {
        tenant: "acme".into(),
        project: "web".into(),
        project_json: "{}".into(),
    };
    let new = NewRequest::new("new", "eu", "get_objects", "{}", 2).scoped(scope.clone());
    assert_eq!(s.submit_request(&new).await.unwrap(), Submitted::Created);
    assert_eq!(s.request("new").await.unwrap().unwrap().scope, Some(scope));
    let unanswered = s.unanswered("eu", "z").await.unwrap();
    assert_eq!(unanswered.len(), 2);
}

pub(super) async fn a_cap_is_never_lowered_below_the_quotas_granted(db: Db) {
    let s = db.open().await;
    s.create_tenant("acme", 1).await.unwrap();
    for (p, ns) in [("web", "acme-web"), ("api", "acme-api")] {
        s.create_project(&project("acme", p, ns)).await.unwrap();
    }
    for (p, cpu) in [("web", "4"), ("api", "5")] {
        assert_eq!(
            s.set_project_quota("acme", p, "eu", &quota(cpu, "1Gi", 1))
                .await
                .unwrap(),
            QuotaSet::Set
        );
    }
    // 9 CPUs granted: a cap of 1 is refused naming each grant, and not stored.
    match s
        .set_tenant_cap("acme", "eu", &quota("1", "8Gi", 10))
        .await
        .unwrap()
    {
        CapSet::BelowGrants(why) => assert_eq!(
            why,
            "cpu: the cap 1 is below what the projects hold (api 5, web 4; 9 in all)"
        ),
        other => panic!("{other:?}"),
    }
    assert!(s.tenant("acme").await.unwrap().unwrap().caps.is_empty());
    // A cap on what the projects leave unlimited (storage) is refused too.
    let mut storage = quota("9", "8Gi", 10);
    storage.storage = Some("1Ti".into());
    assert!(matches!(
        s.set_tenant_cap("acme", "eu", &storage).await.unwrap(),
        CapSet::BelowGrants(why) if why.contains("api unlimited")
    ));
    // At what is granted: stored.
    assert_eq!(
        s.set_tenant_cap("acme", "eu", &quota("9", "2Gi", 2))
            .await
            .unwrap(),
        CapSet::Set
    );
}

pub(super) async fn page_sessions_are_kept_hashed_and_ended(db: Db) {
    let s = db.open().await;
    let session = |tag: &str, tenant: Option<&str>, expires_at: i64| PageSession {
        hash: super::hash(tag),
        tenant: tenant.map(str::to_string),
        token_id: tenant.map(|_| "t1".to_string()),
        credential: super::hash("credential"),
        created_at: 1,
        expires_at,
    };
    s.open_page_session(&session("a", None, 1_000))
        .await
        .unwrap();
    s.open_page_session(&session("b", Some("acme"), 10_000))
        .await
        .unwrap();
    assert_eq!(
        s.page_session(&super::hash("b")).await.unwrap(),
        Some(session("b", Some("acme"), 10_000))
    );
    drop(s);
    // Every replica (here: a reopened store) sees them; ending one ends it for all, and ends
    // the expired ones with it.
    let s = db.open().await;
    assert!(s.end_page_session(&super::hash("b"), 5_000).await.unwrap());
    assert!(!s.end_page_session(&super::hash("b"), 5_000).await.unwrap());
    assert_eq!(s.page_session(&super::hash("b")).await.unwrap(), None);
    assert_eq!(
        s.page_session(&super::hash("a")).await.unwrap(),
        None,
        "expired, swept"
    );
}
