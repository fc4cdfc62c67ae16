//! Workers joining an installed cluster, on a real kube-apiserver (tests/kube-fixture): the
//! test plays the kubelets' part (CSRs created as the impersonated node-bootstrapper, then as
//! `system:node:<name>`; Node objects and their Ready condition written by the test) while
//! `OkdNodesScore` runs through `HAClusterTopology` and the fixture's admin kubeconfig. Only the
//! kubelet CSRs of bound worker hosts are approved; the others stay pending and are reported.

use k8s_openapi::api::certificates::v1::CertificateSigningRequest;
use k8s_openapi::api::core::v1::Node;
use kube::api::{Patch, PatchParams, PostParams};
use kube::config::{KubeConfigOptions, Kubeconfig};
use kube::{Api, Client, Config};
use serde_json::json;
use std::sync::Arc;
use std::time::{Duration, Instant};

use harmony::domain::capability::HostInventory;
use harmony::domain::capability::cluster_nodes::{
    KUBELET_CLIENT_SIGNER, KUBELET_SERVING_SIGNER, NODE_BOOTSTRAPPER,
};
use harmony::domain::inventory::{HostRole, RoleAssignment};
use harmony::domain::operator::{OperatorHandle, Unattended};
use harmony::domain::{Inventory, Maestro, RunContext, RunOptions, ScoreReport, ScoreStatus};
use harmony::infra::okd::{APPROVAL_REASON, BareMetalServices, HAClusterTopology};
use harmony::types::{HostName, MacAddress};
use harmony_e2e::ApiServer;
use harmony_e2e::okd_lab::{WORKER0, WORKER1, layout, machine};
use harmony_modules::okd::OkdNodesScore;

/// The requester nobody expects: a build pod's service account.
const STRANGER: &str = "system:serviceaccount:default:builder";

async fn client_as(server: &ApiServer, user: Option<(&str, &[&str])>) -> Client {
    let kc = Kubeconfig::read_from(server.kubeconfig()).unwrap();
    let mut config = Config::from_custom_kubeconfig(kc, &KubeConfigOptions::default())
        .await
        .unwrap();
    if let Some((name, groups)) = user {
        config.auth_info.impersonate = Some(name.to_string());
        let mut groups: Vec<String> = groups.iter().map(|g| g.to_string()).collect();
        groups.push("system:authenticated".into());
        config.auth_info.impersonate_groups = Some(groups);
    }
    Client::try_from(config).unwrap()
}

/// Lets the node-bootstrapper, nodes and the stranger create and read CSRs (the fixture runs
/// RBAC only, without the Node authorizer a real cluster has).
fn grant_csr_requests(server: &ApiServer) {
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("rbac.json");
    let doc = json!({"apiVersion": "v1", "kind": "List", "items": [
        {"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "ClusterRole",
         "metadata": {"name": "e2e-csr-requester"},
         "rules": [{"apiGroups": ["certificates.k8s.io"], "resources": ["certificatesigningrequests"],
                    "verbs": ["create", "get", "list", "watch"]}]},
        {"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "ClusterRoleBinding",
         "metadata": {"name": "e2e-csr-requester"},
         "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole", "name": "e2e-csr-requester"},
         "subjects": [
            {"apiGroup": "rbac.authorization.k8s.io", "kind": "User", "name": NODE_BOOTSTRAPPER},
            {"apiGroup": "rbac.authorization.k8s.io", "kind": "Group", "name": "system:nodes"},
            {"apiGroup": "rbac.authorization.k8s.io", "kind": "User", "name": STRANGER}]}
    ]});
    std::fs::write(&file, doc.to_string()).unwrap();
    let out = server.kubectl(&["apply", "-f", file.to_str().unwrap()]);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
}

/// A PEM PKCS#10 request for `common_name` in organisation `org`, as a kubelet makes one.
fn request_pem(common_name: &str, org: &str) -> String {
    let key = rcgen::KeyPair::generate().unwrap();
    let mut params = rcgen::CertificateParams::new(Vec::<String>::new()).unwrap();
    params
        .distinguished_name
        .push(rcgen::DnType::CommonName, common_name);
    params
        .distinguished_name
        .push(rcgen::DnType::OrganizationName, org);
    params.serialize_request(&key).unwrap().pem().unwrap()
}

/// Creates a CSR as `client`'s user; returns its generated name.
async fn create_csr(client: &Client, prefix: &str, node: &str, serving: bool) -> String {
    let (signer, usage) = if serving {
        (KUBELET_SERVING_SIGNER, "server auth")
    } else {
        (KUBELET_CLIENT_SIGNER, "client auth")
    };
    let csr: CertificateSigningRequest = serde_json::from_value(json!({
        "apiVersion": "certificates.k8s.io/v1",
        "kind": "CertificateSigningRequest",
        "metadata": {"generateName": format!("{prefix}-")},
        "spec": {
            "request": base64_of(&request_pem(&format!("system:node:{node}"), "system:nodes")),
            "signerName": signer,
            "usages": ["digital signature", usage],
        }
    }))
    .unwrap();
    let api: Api<CertificateSigningRequest> = Api::all(client.clone());
    let made = api.create(&PostParams::default(), &csr).await.unwrap();
    made.metadata.name.unwrap()
}

fn base64_of(text: &str) -> String {
    use base64::Engine as _;
    base64::engine::general_purpose::STANDARD.encode(text)
}

/// The CSR's `Approved` conditions as (reason) list.
async fn approvals(admin: &Client, name: &str) -> Vec<String> {
    let api: Api<CertificateSigningRequest> = Api::all(admin.clone());
    let csr = api.get(name).await.unwrap();
    csr.status
        .and_then(|s| s.conditions)
        .unwrap_or_default()
        .into_iter()
        .filter(|c| c.type_ == "Approved" && c.status == "True")
        .map(|c| c.reason.unwrap_or_default())
        .collect()
}

async fn wait_approved(admin: &Client, name: &str) {
    let start = Instant::now();
    while approvals(admin, name).await.is_empty() {
        assert!(
            start.elapsed() < Duration::from_secs(60),
            "CSR {name} was not approved within 60 s"
        );
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
}

/// Registers Node `name` with its Ready condition, as its kubelet would.
async fn register_node(admin: &Client, name: &str) {
    let api: Api<Node> = Api::all(admin.clone());
    let node: Node = serde_json::from_value(json!({
        "apiVersion": "v1", "kind": "Node", "metadata": {"name": name}
    }))
    .unwrap();
    api.create(&PostParams::default(), &node).await.unwrap();
}

async fn set_ready(admin: &Client, name: &str, ready: bool) {
    let api: Api<Node> = Api::all(admin.clone());
    let (status, reason) = if ready {
        ("True", "KubeletReady")
    } else {
        ("False", "KubeletNotReady")
    };
    let patch = json!({"status": {"conditions": [{
        "type": "Ready", "status": status, "reason": reason,
        "message": "written by the e2e test playing the kubelet"
    }]}});
    api.patch_status(name, &PatchParams::default(), &Patch::Strategic(&patch))
        .await
        .unwrap();
}

/// The workers' topology in apply mode on the fixture, worker0 and worker1 bound to machines.
async fn workers_topology(server: &ApiServer, dir: &std::path::Path) -> HAClusterTopology {
    let services = BareMetalServices {
        dir: dir.join("services"),
        serve_http: false,
        ..BareMetalServices::default()
    };
    let ctx = RunContext {
        apply: true,
        operator: OperatorHandle::new(Unattended { assume_yes: true }),
        ..RunContext::default()
    };
    let topology = HAClusterTopology::from_context(layout().unwrap(), services, &ctx)
        .unwrap()
        .with_cluster_kubeconfig(server.kubeconfig());
    for (id, (logical, _, mac)) in [("machine-a", WORKER0), ("machine-b", WORKER1)] {
        let host = machine(id, mac).unwrap();
        topology.record_host(&host).await.unwrap();
        topology
            .assign_role(&RoleAssignment {
                host: host.id.clone(),
                role: HostRole::Worker,
            })
            .await
            .unwrap();
        topology
            .bind_host(&harmony::domain::capability::HostBinding {
                host: host.id,
                role: HostRole::Worker,
                logical: HostName::parse(logical).unwrap(),
                mac: MacAddress::parse(mac).unwrap(),
            })
            .await
            .unwrap();
    }
    topology
}

async fn run_join(maestro: &Arc<Maestro<HAClusterTopology>>, index: usize) -> ScoreReport {
    let mut reports = maestro
        .run(&[index], RunOptions::default())
        .await
        .unwrap_or_else(|e| panic!("{e}"));
    reports.remove(0)
}

#[tokio::test(flavor = "multi_thread")]
async fn test_plays_the_kubelets_and_only_bound_workers_csrs_are_approved_until_both_are_ready() {
    let server = ApiServer::start().unwrap_or_else(|e| panic!("{e}"));
    grant_csr_requests(&server);
    let admin = client_as(&server, None).await;
    let bootstrapper_groups: &[&str] = &[
        "system:serviceaccounts",
        "system:serviceaccounts:openshift-machine-config-operator",
    ];
    let bootstrapper = client_as(&server, Some((NODE_BOOTSTRAPPER, bootstrapper_groups))).await;
    let stranger = client_as(&server, Some((STRANGER, &["system:serviceaccounts"]))).await;
    let dir = tempfile::tempdir().unwrap();
    let topology = workers_topology(&server, dir.path()).await;
    let mut maestro = Maestro::new(Inventory::default(), topology);
    maestro.register(vec![
        Box::new(OkdNodesScore::new(HostRole::Worker).with_timeout(Duration::from_secs(3))),
        Box::new(OkdNodesScore::new(HostRole::Worker).with_timeout(Duration::from_secs(120))),
    ]);
    let invalid = maestro.validate(&[0, 1]);
    assert!(invalid.is_empty(), "{invalid:?}");
    let maestro = Arc::new(maestro);

    // CSRs nobody should approve: a client CSR for a machine that is not bound, and one for a
    // bound worker's name from a requester that is not the node-bootstrapper.
    let intruder = create_csr(&bootstrapper, "intruder", "intruder", false).await;
    let impostor = create_csr(&stranger, "impostor", WORKER1.0, false).await;

    // No kubelet yet: the phase times out naming the hosts and the CSRs it left pending.
    let report = run_join(&maestro, 0).await;
    assert_eq!(report.status, ScoreStatus::Failed, "{report:#?}");
    for expected in [
        "not registered: worker0, worker1",
        "CSRs left pending",
        &format!(
            "{intruder} (requester {NODE_BOOTSTRAPPER}, CN system:node:intruder): intruder is not a bound worker host"
        ),
        &format!(
            "{impostor} (requester {STRANGER}, CN system:node:worker1): requester {STRANGER} is neither the node-bootstrapper nor system:node:worker1"
        ),
    ] {
        assert!(
            report.message.contains(expected),
            "{expected} missing from: {}",
            report.message
        );
    }

    // The kubelets join while the phase waits.
    let run = {
        let maestro = maestro.clone();
        tokio::spawn(async move { run_join(&maestro, 1).await })
    };
    let mut approved = Vec::new();
    for worker in [WORKER0.0, WORKER1.0] {
        let client_csr = create_csr(&bootstrapper, worker, worker, false).await;
        wait_approved(&admin, &client_csr).await;
        register_node(&admin, worker).await;
        set_ready(&admin, worker, false).await;
        let node = client_as(
            &server,
            Some((&format!("system:node:{worker}"), &["system:nodes"])),
        )
        .await;
        let serving_csr = create_csr(&node, &format!("{worker}-serving"), worker, true).await;
        wait_approved(&admin, &serving_csr).await;
        assert!(
            !run.is_finished(),
            "the phase ended before {worker} was Ready"
        );
        set_ready(&admin, worker, true).await;
        approved.push(client_csr);
        approved.push(serving_csr);
    }
    let report = tokio::time::timeout(Duration::from_secs(60), run)
        .await
        .expect("the phase ends once both workers are Ready")
        .unwrap();
    assert_eq!(report.status, ScoreStatus::Success, "{report:#?}");
    assert!(
        report
            .message
            .contains("2 of 2 worker node(s) Ready; 4 CSR(s) approved"),
        "{}",
        report.message
    );
    assert!(
        report
            .details
            .iter()
            .any(|d| d.starts_with("worker0 Ready (Node worker0, KubeletReady)")),
        "{:#?}",
        report.details
    );
    assert!(
        report
            .details
            .iter()
            .any(|d| d.starts_with("worker1 Ready (Node worker1, KubeletReady)")),
        "{:#?}",
        report.details
    );
    for left in [&intruder, &impostor] {
        assert!(
            report
                .details
                .iter()
                .any(|d| d.starts_with(&format!("left pending: {left} "))),
            "{left} not reported as left pending: {:#?}",
            report.details
        );
        assert!(
            approvals(&admin, left).await.is_empty(),
            "{left} was approved"
        );
    }
    for name in &approved {
        assert_eq!(approvals(&admin, name).await, [APPROVAL_REASON], "{name}");
        assert!(
            report
                .changes
                .iter()
                .any(|c| c.object.ends_with(&format!(" {name}"))),
            "{name} missing from the changes: {:#?}",
            report.changes
        );
    }

    // Re-running converges: both Ready, nothing approved again.
    let again = run_join(&maestro, 1).await;
    assert_eq!(again.status, ScoreStatus::Noop, "{again:#?}");
    assert!(
        again.message.contains("0 CSR(s) approved"),
        "{}",
        again.message
    );
    for name in &approved {
        assert_eq!(
            approvals(&admin, name).await,
            [APPROVAL_REASON],
            "{name} re-approved"
        );
    }

    // The API server gone: the phase keeps trying until its timeout, then names the cluster
    // it could not reach.
    let kubeconfig = server.kubeconfig();
    drop(server);
    let report = run_join(&maestro, 0).await;
    assert_eq!(report.status, ScoreStatus::Failed, "{report:#?}");
    let expected = format!("cannot reach the cluster of {}", kubeconfig.display());
    assert!(
        report.message.contains(&expected),
        "{expected} missing from: {}",
        report.message
    );
}
