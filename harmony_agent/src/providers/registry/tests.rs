//! Registry tests: one provider per type, offers, refusals and persistence.

use super::*;
use harmony::infra::kube::KubeTarget;

pub(super) fn policy() -> HealthPolicy {
    HealthPolicy {
        interval: Duration::from_millis(100),
        unhealthy_after: Duration::from_millis(300),
        unavailable_after: Duration::from_millis(600),
    }
}

pub(super) fn registry(
    builtins: Vec<Builtin>,
    file: Option<PathBuf>,
) -> (Arc<Registry>, mpsc::UnboundedReceiver<Frame>) {
    let (tx, rx) = mpsc::unbounded_channel();
    let cluster = Arc::new(Cluster::new(
        "test".into(),
        KubeTarget::Kubeconfig {
            path: Some("/nonexistent/kubeconfig".into()),
            context: None,
        },
    ));
    let r = Registry::new(
        RegistryConfig {
            policy: policy(),
            builtins,
            file,
            discovery_interval: Duration::from_secs(30),
            instance_poll: Duration::from_secs(5),
        },
        cluster,
        crate::providers::external::http_client().unwrap(),
        tx,
    )
    .unwrap();
    (r, rx)
}

fn reg(name: &str, types: &[&str]) -> Registration {
    Registration {
        name: name.into(),
        service_types: types.iter().map(|t| t.to_string()).collect(),
        endpoint: "http://127.0.0.1:9".into(),
        health_url: "http://127.0.0.1:9/healthz".into(),
    }
}

pub(super) fn set_health(r: &Registry, name: &str, last_ok: Option<Instant>, since: Instant) {
    let mut s = r.lock();
    let e = s.providers.get_mut(name).unwrap();
    e.last_ok = last_ok;
    e.since = since;
}

#[tokio::test]
async fn one_provider_per_type_builtins_included() {
    let (r, _rx) = registry(vec![Builtin::Container], None);
    assert_eq!(
        r.register(reg("q1", &["queue"])).unwrap().0,
        Registered::Created
    );
    assert_eq!(
        r.register(reg("q1", &["queue"])).unwrap().0,
        Registered::Unchanged
    );
    match r.register(reg("q2", &["cache", "queue"])).unwrap_err() {
        RegistryError::Conflict {
            holder,
            service_type,
            message,
        } => {
            assert_eq!((holder.as_str(), service_type.as_str()), ("q1", "queue"));
            assert_eq!(
                message,
                "service type \"queue\" is already served by provider \"q1\"; deregister it first (DELETE /v1/providers/q1) or register another type"
            );
        }
        e => panic!("{e}"),
    }
    match r.register(reg("c1", &["container"])).unwrap_err() {
        RegistryError::Conflict {
            holder, message, ..
        } => {
            assert_eq!(holder, "kubernetes-workloads");
            assert!(
                message.contains("built-in") && message.contains("--builtin-providers"),
                "{message}"
            );
        }
        e => panic!("{e}"),
    }
    assert!(matches!(
        r.register(reg("kubernetes-workloads", &["x"])),
        Err(RegistryError::Builtin { .. })
    ));
    assert!(matches!(
        r.deregister("kubernetes-workloads"),
        Err(RegistryError::Builtin { .. })
    ));
    assert!(matches!(
        r.deregister("nope"),
        Err(RegistryError::NotFound { .. })
    ));
    // Replacing q1 with other types frees queue.
    assert_eq!(
        r.register(reg("q1", &["cache"])).unwrap().0,
        Registered::Replaced
    );
    assert_eq!(
        r.register(reg("q2", &["queue"])).unwrap().0,
        Registered::Created
    );
    r.deregister("q2").unwrap();
    assert!(r.view("q2").is_none());
    // With the built-in turned off, an external provider may take its type.
    let (r, _rx) = registry(vec![], None);
    assert_eq!(
        r.register(reg("c1", &["container"])).unwrap().0,
        Registered::Created
    );
}

#[tokio::test]
async fn offers_leave_out_unavailable_providers_and_advertise_only_healthy() {
    let (r, mut rx) = registry(vec![Builtin::Container], None);
    let now = Instant::now();
    let long_ago = now - Duration::from_secs(10);
    r.register(reg("ok", &["a"])).unwrap();
    r.register(reg("late", &["b"])).unwrap();
    r.register(reg("gone", &["c"])).unwrap();
    r.register(reg("never", &["d"])).unwrap();
    set_health(&r, "ok", Some(now), long_ago);
    set_health(&r, "late", Some(now - Duration::from_millis(400)), long_ago);
    set_health(&r, "gone", Some(long_ago), long_ago);
    set_health(&r, "never", None, long_ago);
    let s = r.services();
    let types: Vec<(&str, ProviderHealth)> = s
        .offers
        .iter()
        .map(|o| (o.service_type.as_str(), o.health))
        .collect();
    // The built-in is not enabled before discovery finds its API: not held at all.
    assert_eq!(
        types,
        vec![
            ("a", ProviderHealth::Healthy),
            ("b", ProviderHealth::Unhealthy)
        ]
    );
    assert_eq!(s.advertised(), vec!["a"]);
    assert!(
        s.offers
            .iter()
            .all(|o| o.health != ProviderHealth::Unavailable)
    );
    // Enabling the built-in with a fresh check advertises container.
    {
        let mut st = r.lock();
        let e = st.providers.get_mut("kubernetes-workloads").unwrap();
        e.enabled = true;
        e.last_ok = Some(Instant::now());
    }
    assert_eq!(r.services().advertised(), vec!["a", "container"]);
    // Publishing pushes a services frame only when (type, provider, health) changed.
    while rx.try_recv().is_ok() {}
    r.publish();
    assert!(
        matches!(rx.try_recv(), Ok(Frame::Services(s)) if s.advertised() == vec!["a", "container"])
    );
    r.publish();
    assert!(rx.try_recv().is_err());
    let view = r.view("gone").unwrap();
    assert_eq!(view.health, ProviderHealth::Unavailable);
    assert!(view.last_healthy_at.is_none());
}

#[tokio::test]
async fn create_refuses_unknown_and_unhealthy_types() {
    let (r, _rx) = registry(vec![], None);
    r.register(reg("q1", &["queue"])).unwrap();
    let e = r.create("i1", "db", &Value::Null).await.unwrap_err();
    assert_eq!(e.code(), "no_provider");
    assert_eq!(
        e.to_string(),
        "no provider of this agent serves service type \"db\"; it serves: queue"
    );
    let e = r.create("i1", "queue", &Value::Null).await.unwrap_err();
    assert_eq!(e.code(), "provider_unavailable");
    let e = r.create("I_1", "queue", &Value::Null).await.unwrap_err();
    assert_eq!(e.code(), "invalid_params");
    assert!(e.to_string().starts_with("instance_id: "), "{e}");
    let e = r.status("i1", "Queue").await.unwrap_err();
    assert!(e.to_string().starts_with("service_type: "), "{e}");
}

#[tokio::test]
async fn registrations_and_instances_survive_a_restart() {
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("state/providers.json");
    {
        let (r, _rx) = registry(vec![], Some(file.clone()));
        r.register(reg("q1", &["queue", "cache"])).unwrap();
        r.register(reg("q2", &["blob"])).unwrap();
        r.deregister("q2").unwrap();
        let mut st = r.lock();
        st.instances.insert(
            "i1".into(),
            Remembered {
                instance_id: "i1".into(),
                service_type: "queue".into(),
                provider: "q1".into(),
                spec: serde_json::json!({"size": 3}),
                last: None,
            },
        );
        r.persist(&st).unwrap();
    }
    #[cfg(unix)]
    {
        use std::os::unix::fs::PermissionsExt;
        let mode = std::fs::metadata(&file).unwrap().permissions().mode();
        assert_eq!(mode & 0o777, 0o600);
    }
    let (r, _rx) = registry(vec![], Some(file.clone()));
    let views = r.views();
    assert_eq!(views.len(), 1);
    assert_eq!(views[0].name, "q1");
    assert_eq!(views[0].service_types, vec!["queue", "cache"]);
    assert_eq!(views[0].endpoint.as_deref(), Some("http://127.0.0.1:9"));
    let st = r.lock();
    assert_eq!(st.instances["i1"].spec["size"], 3);
    assert_eq!(st.instances["i1"].provider, "q1");
    drop(st);
    std::fs::write(&file, "{not json").unwrap();
    let (tx, _rx2) = mpsc::unbounded_channel();
    let err = Registry::new(
        RegistryConfig {
            policy: policy(),
            builtins: vec![],
            file: Some(file.clone()),
            discovery_interval: Duration::from_secs(30),
            instance_poll: Duration::from_secs(5),
        },
        Arc::new(Cluster::new("t".into(), KubeTarget::InCluster)),
        crate::providers::external::http_client().unwrap(),
        tx,
    )
    .err()
    .unwrap();
    assert!(err.contains("not a providers file"), "{err}");
}
