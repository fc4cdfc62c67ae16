//! A tenant's project, end to end: tenant token -> control plane -> agent -> a real
//! kube-apiserver fixture. The project's first request in a region makes it present there
//! (namespace labelled with tenant and project, ResourceQuota, LimitRange); a request past the
//! quota is refused by the API server, and the caller's error names the quota and the resource.
//!
//! The fixture runs no kube-controller-manager, so `QuotaControllerStandIn` plays its quota
//! controller (it fills each ResourceQuota's status, as the controller would).

use serde_json::{Value, json};
use std::collections::BTreeMap;

use harmony::domain::RunContext;
use harmony::domain::capability::{ApplyOptions, CapabilityError, K8sClient, K8sObject};
use harmony::infra::control_plane::{AgentTopology, ControlPlaneClient};
use harmony_agent_protocol::tenancy::{
    LIMIT_RANGE_NAME, MANAGED_BY_LABEL, PROJECT_LABEL, ProjectQuota, QUOTA_NAME, TENANT_LABEL,
};
use harmony_e2e::ApiServer;
use harmony_e2e::agent_rbac::QuotaControllerStandIn;
use harmony_e2e::world::{World, WorldOptions, region};

fn config_map(name: &str, labels: Value) -> K8sObject {
    K8sObject::new(json!({
        "apiVersion": "v1", "kind": "ConfigMap",
        "metadata": {"name": name, "labels": labels},
        "data": {"key": name}
    }))
    .unwrap()
}

fn kubectl_json(server: &ApiServer, args: &[&str]) -> Option<Value> {
    let out = server.kubectl(args);
    out.status
        .success()
        .then(|| serde_json::from_slice(&out.stdout).expect("kubectl prints JSON"))
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_projects_first_request_makes_it_present_and_its_quota_is_enforced_for_the_caller() {
    let w = World::start(harmony_e2e::bins!(), WorldOptions::default());
    let (admin, server) = (&w.client, &w.server);
    // Waits (up to a minute) until region eu is healthy.
    let _agent = w.region_with_agent("agent", "eu", "z1").await;

    // The admin: tenant acme, project shop with at most two ConfigMaps in region eu.
    admin.create_tenant("acme").await.unwrap();
    let project = admin.create_project("acme", "shop", None).await.unwrap();
    assert_eq!(project.namespace, "acme-shop");
    let quota = ProjectQuota {
        objects: BTreeMap::from([("configmaps".to_string(), 2)]),
        ..ProjectQuota::default()
    };
    admin
        .set_project_quota("acme", "shop", "eu", &quota)
        .await
        .unwrap();
    let minted = admin.create_tenant_token("acme", None).await.unwrap();
    let ca = std::fs::read(w.pki().ca()).unwrap();
    let tenant = ControlPlaneClient::new(&w.url(), minted.token.clone(), Some(&ca))
        .unwrap()
        .for_project(None, "shop");

    // Nothing of the project exists in the cluster before its first request.
    assert!(kubectl_json(server, &["get", "namespace", "acme-shop", "-o", "json"]).is_none());

    let _quota_controller = QuotaControllerStandIn::start(server).unwrap();
    let topology = AgentTopology::new("eu", region("eu"), tenant, &RunContext::default());
    // Namespace-less ConfigMaps: the agent puts them in the project's namespace.
    let first = topology
        .apply(
            &[config_map("one", json!({})), config_map("two", json!({}))],
            &ApplyOptions::default(),
        )
        .await
        .unwrap_or_else(|e| panic!("{e}\n{}", w.logs()));
    assert_eq!(first.len(), 2, "{first:?}");

    let ns = kubectl_json(server, &["get", "namespace", "acme-shop", "-o", "json"])
        .expect("the project's namespace was created by its first request");
    let labels = &ns["metadata"]["labels"];
    assert_eq!(labels[MANAGED_BY_LABEL], "harmony", "{labels}");
    assert_eq!(labels[TENANT_LABEL], "acme", "{labels}");
    assert_eq!(labels[PROJECT_LABEL], "shop", "{labels}");
    let rq = kubectl_json(
        server,
        &[
            "get",
            "resourcequota",
            QUOTA_NAME,
            "-n",
            "acme-shop",
            "-o",
            "json",
        ],
    )
    .expect("the project's ResourceQuota");
    assert_eq!(rq["spec"]["hard"]["count/configmaps"], "2", "{rq}");
    assert!(
        kubectl_json(
            server,
            &[
                "get",
                "limitrange",
                LIMIT_RANGE_NAME,
                "-n",
                "acme-shop",
                "-o",
                "json"
            ]
        )
        .is_some(),
        "the project's LimitRange"
    );
    for name in ["one", "two"] {
        assert!(
            kubectl_json(
                server,
                &["get", "configmap", name, "-n", "acme-shop", "-o", "json"]
            )
            .is_some(),
            "ConfigMap {name} in the project's namespace"
        );
    }

    // A third ConfigMap is past the quota: the API server refuses it, and the caller reads the
    // quota and the resource, not a generic failure.
    let refused = topology
        .apply(&[config_map("three", json!({}))], &ApplyOptions::default())
        .await
        .expect_err("a third ConfigMap is over the project's quota");
    match &refused.error {
        CapabilityError::QuotaExceeded {
            quota, resource, ..
        } => {
            assert_eq!(quota, "acme-shop/harmony-project-quota");
            assert!(resource.contains("count/configmaps"), "{resource}");
            assert!(resource.contains("limited 2"), "{resource}");
        }
        other => panic!("expected a quota error, got {other}"),
    }
    let message = refused.to_string();
    assert!(
        message.contains("harmony-project-quota") && message.contains("count/configmaps"),
        "{message}"
    );
    assert!(
        kubectl_json(
            server,
            &["get", "configmap", "three", "-n", "acme-shop", "-o", "json"]
        )
        .is_none(),
        "the refused ConfigMap does not exist"
    );
    assert!(
        !w.cp().logs().contains(minted.token.expose()),
        "the tenant token is never logged"
    );
}
