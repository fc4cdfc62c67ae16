//! The region agent running as its rolled-out ServiceAccount on a real kube-apiserver
//! (`--authorization-mode=RBAC`, admission plugins on, ValidatingAdmissionPolicy included).
//!
//! The admin applies the rollout's RBAC (`harmony_modules::region::rbac_objects`, exactly what
//! `RegionAgentRolloutScore` applies); the agent's real executor then talks to the API server
//! through a kubeconfig impersonating `system:serviceaccount:harmony-agent:harmony-agent`, so
//! every call is authorised as the agent's ServiceAccount would be in a cluster.
//!
//! The fixture runs no kube-controller-manager: `QuotaControllerStandIn` plays its
//! resourcequota controller (filling a new quota's status, as the controller does), and says so
//! by its name.

use harmony_agent::exec::presence::Presence;
use harmony_agent_protocol::ops::{ApplyManifestsParams, GetObjectsParams};
use harmony_agent_protocol::tenancy::{
    LIMIT_RANGE_NAME, MANAGED_BY_LABEL, PROJECT_LABEL, ProjectQuota, ProjectScope, QUOTA_NAME,
    TENANT_LABEL,
};
use harmony_agent_protocol::{Req, Res, WireObjectRef, code};
use harmony_e2e::ApiServer;
use harmony_e2e::agent_rbac::{
    AgentExec, QuotaControllerStandIn, apply_as_admin, impersonating_kubeconfig,
};
use harmony_e2e::eventually::eventually;
use harmony_modules::region::{
    AGENT_NAME, MANAGED_CLUSTER_ROLE, agent_user, default_rules, rbac_objects,
};
use k8s_openapi::api::authentication::v1::SelfSubjectReview;
use k8s_openapi::api::core::v1::{ConfigMap, LimitRange, Namespace, ResourceQuota};
use k8s_openapi::api::rbac::v1::{ClusterRole, RoleBinding};
use kube::api::{Api, ListParams, PostParams};
use serde_json::{Value, json};
use std::path::Path;
use std::time::Duration;

/// The agent's namespace (and its ServiceAccount's).
const NS: &str = "harmony-agent";

async fn client(kubeconfig: &Path) -> kube::Client {
    let kc = kube::config::Kubeconfig::read_from(kubeconfig).unwrap();
    let config = kube::Config::from_custom_kubeconfig(kc, &Default::default())
        .await
        .unwrap();
    kube::Client::try_from(config).unwrap()
}

/// A fixture with the agent's rollout RBAC applied by the admin, and the agent's executor
/// acting as its ServiceAccount.
struct Setup {
    server: ApiServer,
    _dir: tempfile::TempDir,
    admin: kube::Client,
    sa: kube::Client,
    agent: AgentExec,
    /// The kubeconfig impersonating the agent's ServiceAccount.
    kubeconfig: std::path::PathBuf,
}

async fn setup() -> Setup {
    let server = ApiServer::start().unwrap_or_else(|e| panic!("{e}"));
    let dir = tempfile::tempdir().unwrap();
    let mut objects = vec![
        json!({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": NS}}),
        json!({"apiVersion": "v1", "kind": "ServiceAccount", "metadata": {"name": AGENT_NAME, "namespace": NS}}),
    ];
    objects.extend(rbac_objects(NS, &default_rules(), &[]));
    apply_as_admin(&server, dir.path(), &objects).unwrap_or_else(|e| panic!("{e}"));
    let kubeconfig = impersonating_kubeconfig(&server, dir.path(), NS, AGENT_NAME).unwrap();
    let admin = client(&server.kubeconfig()).await;
    let sa = client(&kubeconfig).await;
    // kube-rs honours the kubeconfig's `as`/`as-groups`: the API server sees the ServiceAccount.
    let me = Api::<SelfSubjectReview>::all(sa.clone())
        .create(&PostParams::default(), &SelfSubjectReview::default())
        .await
        .unwrap();
    let user = me.status.and_then(|s| s.user_info).unwrap();
    assert_eq!(user.username.as_deref(), Some(agent_user(NS).as_str()));
    assert!(
        user.groups
            .unwrap_or_default()
            .contains(&format!("system:serviceaccounts:{NS}"))
    );
    let agent = AgentExec::new(
        &kubeconfig,
        NS,
        Some((NS.to_string(), AGENT_NAME.to_string())),
    )
    .unwrap();
    Setup {
        server,
        _dir: dir,
        admin,
        sa,
        agent,
        kubeconfig,
    }
}

fn scope(namespace: &str, quota: ProjectQuota) -> ProjectScope {
    ProjectScope {
        tenant: "acme".into(),
        project: "web".into(),
        namespace: namespace.into(),
        quota,
    }
}

fn apply(id: &str, manifests: Vec<Value>, project: Option<&ProjectScope>) -> Req {
    let params = ApplyManifestsParams {
        manifests,
        ..Default::default()
    };
    let mut req = Req::new(id, "apply_manifests", &params).unwrap();
    req.project = project.cloned();
    req
}

fn get(id: &str, objects: Vec<WireObjectRef>, project: Option<&ProjectScope>) -> Req {
    let mut req = Req::new(id, "get_objects", &GetObjectsParams { objects }).unwrap();
    req.project = project.cloned();
    req
}

fn config_map(name: &str, namespace: Option<&str>) -> Value {
    let mut m = json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": name}, "data": {"k": "v"}});
    if let Some(ns) = namespace {
        m["metadata"]["namespace"] = json!(ns);
    }
    m
}

fn refused(res: &Res, code: &str, contains: &[&str]) {
    assert!(!res.ok, "expected {code}, got {res:?}");
    let e = res.error.as_ref().unwrap();
    assert_eq!(e.code, code, "{}", e.message);
    for c in contains {
        assert!(e.message.contains(c), "{c:?} not in: {}", e.message);
    }
}

fn ok(res: &Res) {
    assert!(res.ok, "{:?}", res.error);
}

/// Waits until the ValidatingAdmissionPolicy is in force (the API server loads policies
/// asynchronously): the agent's Namespace without the managed-by label is refused.
async fn wait_for_the_guard(s: &Setup) -> String {
    let api: Api<Namespace> = Api::all(s.sa.clone());
    let mut i = 0;
    eventually(
        Duration::from_secs(60),
        "the ValidatingAdmissionPolicy to refuse an unlabelled Namespace",
        || {
            let mut n = Namespace::default();
            n.metadata.name = Some(format!("unlabelled-{i}"));
            i += 1;
            let api = &api;
            async move {
                match api.create(&PostParams::default(), &n).await {
                    Err(kube::Error::Api(e)) if e.code == 403 => Ok(e.message),
                    Err(e) => panic!("creating a namespace as the agent: {e}"),
                    // Not loaded yet (the namespace stays: nothing in the fixture deletes
                    // namespaces).
                    Ok(_) => Err("created"),
                }
            }
        },
    )
    .await
    .unwrap_or_else(|w| {
        panic!(
            "the ValidatingAdmissionPolicy never took effect: {w}\n{}",
            s.server.log_tail()
        )
    })
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn the_agent_as_its_service_account_works_only_inside_the_namespaces_it_manages() {
    let mut s = setup().await;
    let guard = wait_for_the_guard(&s).await;
    assert!(
        guard.contains("may create only namespaces labelled"),
        "{guard}"
    );

    // A project's first request: namespace, quota, limits and the agent's RoleBinding appear.
    let project = scope(
        "acme-web",
        ProjectQuota {
            cpu: Some("2".into()),
            memory: Some("4Gi".into()),
            ..Default::default()
        },
    );
    let _quota_controller = QuotaControllerStandIn::start(&s.server).unwrap();
    let res = s
        .agent
        .run(apply(
            "p1",
            vec![config_map("settings", None)],
            Some(&project),
        ))
        .await;
    ok(&res);
    let ns = Api::<Namespace>::all(s.admin.clone())
        .get("acme-web")
        .await
        .unwrap();
    let labels = ns.metadata.labels.unwrap();
    assert_eq!(labels[MANAGED_BY_LABEL], "harmony");
    assert_eq!(labels[TENANT_LABEL], "acme");
    assert_eq!(labels[PROJECT_LABEL], "web");
    let quota = Api::<ResourceQuota>::namespaced(s.admin.clone(), "acme-web")
        .get(QUOTA_NAME)
        .await
        .unwrap();
    let hard = quota.spec.unwrap().hard.unwrap();
    assert_eq!(hard["requests.cpu"].0, "2");
    assert_eq!(hard["requests.memory"].0, "4Gi");
    let limits = Api::<LimitRange>::namespaced(s.admin.clone(), "acme-web")
        .get(LIMIT_RANGE_NAME)
        .await
        .unwrap();
    let first = &limits.spec.unwrap().limits[0];
    assert_eq!(first.default_request.as_ref().unwrap()["cpu"].0, "100m");
    let binding = Api::<RoleBinding>::namespaced(s.admin.clone(), "acme-web")
        .get("harmony-agent")
        .await
        .unwrap();
    assert_eq!(binding.role_ref.name, MANAGED_CLUSTER_ROLE);
    assert_eq!(binding.subjects.unwrap()[0].name, AGENT_NAME);
    // The manifest named no namespace: it went to the project's.
    assert!(
        Api::<ConfigMap>::namespaced(s.admin.clone(), "acme-web")
            .get_opt("settings")
            .await
            .unwrap()
            .is_some()
    );
    // Reads inside the project's namespace work.
    let cm = WireObjectRef {
        api_version: "v1".into(),
        kind: "ConfigMap".into(),
        namespace: None,
        name: "settings".into(),
    };
    let res = s.agent.run(get("p2", vec![cm], Some(&project))).await;
    ok(&res);
    let got: Value = res.result_as().unwrap();
    assert_eq!(got["objects"][0]["data"]["k"], "v", "{got}");

    // A project's request stays in its namespace: refused before anything is sent.
    let res = s
        .agent
        .run(apply(
            "p3",
            vec![config_map("x", Some("kube-system"))],
            Some(&project),
        ))
        .await;
    refused(
        &res,
        code::FORBIDDEN,
        &["v1 ConfigMap kube-system/x", "is in namespace kube-system"],
    );
    let role = json!({"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "ClusterRole",
        "metadata": {"name": "escalate-me"}, "rules": [{"apiGroups": ["*"], "resources": ["*"], "verbs": ["*"]}]});
    let res = s
        .agent
        .run(apply("p4", vec![role.clone()], Some(&project)))
        .await;
    refused(
        &res,
        code::FORBIDDEN,
        &["ClusterRole escalate-me", "cluster-scoped"],
    );
    // A namespace the agent did not create is never taken over.
    let res = s
        .agent
        .run(apply(
            "p5",
            vec![config_map("y", None)],
            Some(&scope("default", ProjectQuota::default())),
        ))
        .await;
    refused(
        &res,
        code::FORBIDDEN,
        &["namespace default already exists and is not project acme/web's"],
    );

    // The agent's own rights, without a project: the API server refuses what it was not granted.
    let secret = json!({"apiVersion": "v1", "kind": "Secret", "metadata": {"name": "admin-only", "namespace": "kube-system"}, "stringData": {"k": "v"}});
    apply_as_admin(&s.server, s._dir.path(), &[secret]).unwrap();
    let secret_ref = WireObjectRef {
        api_version: "v1".into(),
        kind: "Secret".into(),
        namespace: Some("kube-system".into()),
        name: "admin-only".into(),
    };
    let res = s.agent.run(get("a1", vec![secret_ref], None)).await;
    refused(
        &res,
        code::FORBIDDEN,
        &["secrets \"admin-only\" is forbidden", &agent_user(NS)],
    );
    let res = s.agent.run(apply("a2", vec![role], None)).await;
    refused(&res, code::FORBIDDEN, &["clusterroles", "forbidden"]);
    let res = s
        .agent
        .run(apply("a3", vec![config_map("z", Some("default"))], None))
        .await;
    refused(&res, code::FORBIDDEN, &["configmaps", "forbidden"]);
    // RBAC lets the agent create RoleBindings of its managed role (it must, for presence); the
    // admission policy keeps them to managed namespaces.
    let binding = json!({"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "RoleBinding",
        "metadata": {"name": "harmony-agent", "namespace": "kube-system"},
        "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole", "name": MANAGED_CLUSTER_ROLE},
        "subjects": [{"kind": "ServiceAccount", "name": AGENT_NAME, "namespace": NS}]});
    let res = s.agent.run(apply("a4", vec![binding], None)).await;
    refused(
        &res,
        code::FORBIDDEN,
        &["only in namespaces labelled app.kubernetes.io/managed-by=harmony"],
    );
    // In a managed namespace, binding anything else to anyone else is refused too.
    let other = json!({"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "RoleBinding",
        "metadata": {"name": "friend", "namespace": "acme-web"},
        "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole", "name": MANAGED_CLUSTER_ROLE},
        "subjects": [{"kind": "ServiceAccount", "name": "default", "namespace": "acme-web"}]});
    let res = s.agent.run(apply("a5", vec![other], None)).await;
    refused(
        &res,
        code::FORBIDDEN,
        &["may bind only ClusterRole harmony-agent-managed"],
    );

    // Nothing refused exists.
    let admin = s.admin.clone();
    assert!(
        Api::<ClusterRole>::all(admin.clone())
            .get_opt("escalate-me")
            .await
            .unwrap()
            .is_none()
    );
    for (ns, name) in [("kube-system", "harmony-agent"), ("acme-web", "friend")] {
        let b = Api::<RoleBinding>::namespaced(admin.clone(), ns)
            .get_opt(name)
            .await
            .unwrap();
        assert!(b.is_none(), "RoleBinding {ns}/{name} exists");
    }
    for (ns, name) in [("kube-system", "x"), ("default", "y"), ("default", "z")] {
        let c = Api::<ConfigMap>::namespaced(admin.clone(), ns)
            .get_opt(name)
            .await
            .unwrap();
        assert!(c.is_none(), "ConfigMap {ns}/{name} exists");
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_request_past_the_project_quota_is_refused_by_the_api_server_naming_the_quota() {
    let mut s = setup().await;
    let project = scope(
        "acme-shop",
        ProjectQuota {
            objects: [("configmaps".to_string(), 2)].into(),
            ..Default::default()
        },
    );
    // Until kube-controller-manager's quota controller fills the quota's status, the API server
    // does not enforce it: the agent runs nothing and says what it waited for.
    let impatient = Presence::new(Some((NS.to_string(), AGENT_NAME.to_string())))
        .with_quota_wait(Duration::from_secs(1));
    let mut impatient = AgentExec::with_presence(&s.kubeconfig, NS, impatient).unwrap();
    let res = impatient
        .run(apply("q0", vec![config_map("zero", None)], Some(&project)))
        .await;
    refused(
        &res,
        code::TIMEOUT,
        &[
            "ResourceQuota acme-shop/harmony-project-quota is not enforced",
            "count/configmaps",
            "is kube-controller-manager's resourcequota controller running?",
        ],
    );
    assert!(
        Api::<ConfigMap>::namespaced(s.admin.clone(), "acme-shop")
            .get_opt("zero")
            .await
            .unwrap()
            .is_none()
    );
    let _quota_controller = QuotaControllerStandIn::start(&s.server).unwrap();
    ok(&s
        .agent
        .run(apply("q1", vec![config_map("one", None)], Some(&project)))
        .await);
    let quota = Api::<ResourceQuota>::namespaced(s.admin.clone(), "acme-shop")
        .get(QUOTA_NAME)
        .await
        .unwrap();
    assert_eq!(quota.spec.unwrap().hard.unwrap()["count/configmaps"].0, "2");
    ok(&s
        .agent
        .run(apply("q2", vec![config_map("two", None)], Some(&project)))
        .await);
    let res = s
        .agent
        .run(apply("q3", vec![config_map("three", None)], Some(&project)))
        .await;
    refused(
        &res,
        code::QUOTA_EXCEEDED,
        &[
            "v1 ConfigMap acme-shop/three",
            "exceeded ResourceQuota acme-shop/harmony-project-quota",
            "count/configmaps requested 1, used 2, limited 2",
        ],
    );
    let left = Api::<ConfigMap>::namespaced(s.admin.clone(), "acme-shop")
        .list(&ListParams::default())
        .await
        .unwrap();
    let mut names: Vec<String> = left
        .items
        .into_iter()
        .filter_map(|c| c.metadata.name)
        .collect();
    names.sort();
    assert_eq!(names, ["one", "two"]);
}
