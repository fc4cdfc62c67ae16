//! Workers joining an installed cluster, on a real kube-apiserver (tests/kube-fixture) run with
//! its controllers: `OkdNodesScore` runs through `HAClusterTopology` and the fixture's admin
//! kubeconfig and approves CSRs; the real kube-controller-manager signs what it approved (its
//! `kubernetes.io/kube-apiserver-client-kubelet` and `kubernetes.io/kubelet-serving` signers, with
//! the fixture's CA); kwok, the real component that plays kubelet status, makes the registered
//! Nodes Ready. Only the kubelet CSRs of bound worker hosts are approved; the others stay
//! pending, unsigned, and are reported, including a serving CSR the signer would refuse (no
//! alternative name), which the real signer is then shown to refuse when approved by hand.
//!
//! What the test plays, because no kubelet runs here: the kubelets' own requests. Each worker's
//! client CSR is created as the (impersonated) node-bootstrapper, as the bootstrap kubeconfig a
//! real kubelet holds would; once the real signer has issued that client certificate, the test
//! uses it (not impersonation) to make the node's requests: its serving CSR and its Node
//! registration (labels as a kubelet registers them, plus the `kwok.x-k8s.io/node: fake`
//! annotation that hands the Node to kwok). The test never writes a Node's status: kwok does.
//! Two simplifications of a kubelet's order: the serving CSR is created and approved before the
//! Node is registered (a kubelet does both concurrently; kwok makes a Node Ready at once, so the
//! other order would let the phase end before it had seen the serving CSR), and the kubelets'
//! RBAC is a plain ClusterRoleBinding of `system:nodes` to `system:node` (the fixture runs RBAC
//! without the Node authorizer a real cluster has).

use k8s_openapi::api::certificates::v1::CertificateSigningRequest;
use k8s_openapi::api::core::v1::Node;
use kube::api::PostParams;
use kube::config::{KubeConfigOptions, Kubeconfig};
use kube::{Api, Client, Config};
use serde_json::json;
use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;
use x509_cert::der::Decode;

use harmony::domain::capability::cluster_nodes::{
    KUBELET_CLIENT_SIGNER, KUBELET_SERVING_SIGNER, NODE_BOOTSTRAPPER,
};
use harmony::domain::capability::{BootEvent, BootPhase, HostInventory};
use harmony::domain::inventory::{HostRole, RoleAssignment};
use harmony::domain::operator::{OperatorHandle, Unattended};
use harmony::domain::{Inventory, Maestro, RunContext, RunOptions, ScoreReport, ScoreStatus};
use harmony::infra::okd::{APPROVAL_REASON, BareMetalServices, HAClusterTopology};
use harmony::types::{HostName, MacAddress};
use harmony_e2e::eventually::{Seen, eventually};
use harmony_e2e::okd_lab::{WORKER0, WORKER1, layout, machine};
use harmony_e2e::x509::{COMMON_NAME, ORGANIZATION, name_attributes as attributes};
use harmony_e2e::{ApiServer, ApiServerOptions};
use harmony_modules::okd::OkdNodesScore;

/// The requester nobody expects: a build pod's service account.
const STRANGER: &str = "system:serviceaccount:default:builder";

/// How long one real component's outcome (a signature, a Ready Node) may take.
const COMPONENT_TIMEOUT: Duration = Duration::from_secs(120);

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

/// Lets the node-bootstrapper and the stranger create and read CSRs, and the kubelets
/// (`system:nodes`) do what the bootstrap ClusterRole `system:node` allows (register their
/// Node, create and read CSRs): the fixture runs RBAC only, without the Node authorizer.
fn grant_kubelet_requests(server: &ApiServer) {
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
            {"apiGroup": "rbac.authorization.k8s.io", "kind": "User", "name": STRANGER}]},
        {"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "ClusterRoleBinding",
         "metadata": {"name": "e2e-kubelets"},
         "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole", "name": "system:node"},
         "subjects": [
            {"apiGroup": "rbac.authorization.k8s.io", "kind": "Group", "name": "system:nodes"}]}
    ]});
    let out = server.kubectl_stdin(&["apply", "-f", "-"], &doc.to_string());
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
}

/// A PEM PKCS#10 request for `system:node:<node>` in `system:nodes` with the subject
/// alternative names `sans` (IP addresses or DNS names), made with `key` (ECDSA P-256, so the
/// signers expect no `key encipherment` usage), as a kubelet makes one.
fn request_pem(key: &rcgen::KeyPair, node: &str, sans: &[&str]) -> String {
    let sans: Vec<String> = sans.iter().map(|s| s.to_string()).collect();
    let mut params = rcgen::CertificateParams::new(sans).unwrap();
    params
        .distinguished_name
        .push(rcgen::DnType::CommonName, format!("system:node:{node}"));
    params
        .distinguished_name
        .push(rcgen::DnType::OrganizationName, "system:nodes");
    params.serialize_request(key).unwrap().pem().unwrap()
}

/// A kubelet CSR object: its client certificate (no alternative name) or, with `serving`, its
/// serving one with those alternative names, with exactly the usages the signers accept; and
/// the request's private key (PEM).
fn csr_object(prefix: &str, node: &str, serving: Option<&[&str]>) -> (serde_json::Value, String) {
    let key = rcgen::KeyPair::generate().unwrap();
    let (signer, usage, sans) = match serving {
        Some(sans) => (KUBELET_SERVING_SIGNER, "server auth", sans.to_vec()),
        None => (KUBELET_CLIENT_SIGNER, "client auth", Vec::new()),
    };
    let object = json!({
        "apiVersion": "certificates.k8s.io/v1",
        "kind": "CertificateSigningRequest",
        "metadata": {"generateName": format!("{prefix}-")},
        "spec": {
            "request": base64_of(&request_pem(&key, node, &sans)),
            "signerName": signer,
            "usages": ["digital signature", usage],
        },
    });
    (object, key.serialize_pem())
}

/// Creates a client CSR for `node` as `client`'s user; returns its generated name and the
/// private key of the request.
async fn create_client_csr(client: &Client, prefix: &str, node: &str) -> (String, String) {
    let (object, key) = csr_object(prefix, node, None);
    let csr: CertificateSigningRequest = serde_json::from_value(object).unwrap();
    let api: Api<CertificateSigningRequest> = Api::all(client.clone());
    let made = api.create(&PostParams::default(), &csr).await.unwrap();
    (made.metadata.name.unwrap(), key)
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

/// The CSR's `status.certificate` (PEM), if it has one.
async fn certificate(admin: &Client, name: &str) -> Option<Vec<u8>> {
    let api: Api<CertificateSigningRequest> = Api::all(admin.clone());
    let csr = api.get(name).await.unwrap();
    csr.status
        .and_then(|s| s.certificate)
        .map(|c| c.0)
        .filter(|c| !c.is_empty())
}

/// The end of the controller-manager's and kwok's logs, for failure messages.
fn logs(server: &ApiServer) -> String {
    server.component_log_tails(&["controller-manager", "kwok"], 15)
}

async fn wait_approved(admin: &Client, name: &str) {
    eventually(
        Duration::from_secs(60),
        format!("CSR {name} to be approved"),
        || async { (!approvals(admin, name).await.is_empty()).then_some(()) },
    )
    .await
    .unwrap_or_else(|w| panic!("CSR {name} was not approved: {w}"));
}

/// Waits for the real signer to issue `name`'s certificate; checks it names the kubelet of
/// `node` (CN `system:node:<node>`, O `system:nodes`) and was issued by the fixture's CA, the
/// controller-manager's `--cluster-signing-cert-file`. Returns the PEM.
async fn signed_certificate(server: &ApiServer, admin: &Client, name: &str, node: &str) -> Vec<u8> {
    let pem_bytes = eventually(
        COMPONENT_TIMEOUT,
        format!("a certificate for CSR {name}"),
        || async {
            if let Some(pem_bytes) = certificate(admin, name).await {
                return Ok(pem_bytes);
            }
            let api: Api<CertificateSigningRequest> = Api::all(admin.clone());
            let conditions = api
                .get(name)
                .await
                .unwrap()
                .status
                .and_then(|s| s.conditions);
            Err(Seen(format!("conditions {conditions:#?}")))
        },
    )
    .await
    .unwrap_or_else(|w| panic!("{w}\n{}", logs(server)));
    let block = pem::parse(&pem_bytes).expect("status.certificate is PEM");
    assert_eq!(block.tag(), "CERTIFICATE", "{name}");
    let cert = x509_cert::Certificate::from_der(block.contents())
        .unwrap_or_else(|e| panic!("CSR {name}: not an X.509 certificate: {e}"));
    let subject = &cert.tbs_certificate.subject;
    assert_eq!(
        attributes(subject, COMMON_NAME),
        [format!("system:node:{node}")],
        "{name}: subject CN"
    );
    assert_eq!(
        attributes(subject, ORGANIZATION),
        ["system:nodes"],
        "{name}: subject O"
    );
    assert_eq!(
        attributes(&cert.tbs_certificate.issuer, COMMON_NAME),
        ["kube-fixture-ca"],
        "{name}: issuer"
    );
    pem_bytes
}

/// One worker's kubelet, authenticated by the client certificate the real signer issued.
struct Kubelet {
    node: &'static str,
    dir: tempfile::TempDir,
}

impl Kubelet {
    fn new(node: &'static str, cert_pem: &[u8], key_pem: &str) -> Self {
        let dir = tempfile::tempdir().unwrap();
        std::fs::write(dir.path().join("kubelet.crt"), cert_pem).unwrap();
        std::fs::write(dir.path().join("kubelet.key"), key_pem).unwrap();
        std::fs::write(dir.path().join("empty-kubeconfig"), "").unwrap();
        Self { node, dir }
    }

    fn file(&self, name: &str) -> PathBuf {
        self.dir.path().join(name)
    }

    /// kubectl as this kubelet (its certificate, no impersonation); stdout, or the test fails.
    fn kubectl(&self, server: &ApiServer, args: &[&str], stdin: &str) -> String {
        let auth = [
            format!("--kubeconfig={}", self.file("empty-kubeconfig").display()),
            format!("--server={}", server.url()),
            format!(
                "--certificate-authority={}",
                server.data_dir().join("ca.crt").display()
            ),
            format!(
                "--client-certificate={}",
                self.file("kubelet.crt").display()
            ),
            format!("--client-key={}", self.file("kubelet.key").display()),
        ];
        let mut all: Vec<&str> = args.to_vec();
        all.extend(auth.iter().map(String::as_str));
        let out = server.kubectl_stdin(&all, stdin);
        assert!(
            out.status.success(),
            "kubectl {args:?} as the kubelet of {}: {}",
            self.node,
            String::from_utf8_lossy(&out.stderr)
        );
        String::from_utf8_lossy(&out.stdout).into_owned()
    }

    /// A serving CSR of the node naming `sans` (its name and IP address, as a kubelet asks);
    /// returns its name.
    fn create_serving_csr(&self, server: &ApiServer, prefix: &str, sans: &[&str]) -> String {
        let (object, _key) = csr_object(prefix, self.node, Some(sans));
        self.kubectl(
            server,
            &["create", "-f", "-", "-o", "jsonpath={.metadata.name}"],
            &object.to_string(),
        )
    }

    /// Registers the Node as its kubelet would (labels), handing it to kwok: no status.
    fn register_node(&self, server: &ApiServer) {
        let node = json!({
            "apiVersion": "v1", "kind": "Node",
            "metadata": {
                "name": self.node,
                "labels": {
                    "kubernetes.io/hostname": self.node,
                    "kubernetes.io/os": "linux",
                    "kubernetes.io/arch": "amd64",
                    "beta.kubernetes.io/os": "linux",
                    "beta.kubernetes.io/arch": "amd64"
                },
                // Not a kubelet's: the marker that makes kwok play this node's status.
                "annotations": {"kwok.x-k8s.io/node": "fake"}
            }
        });
        self.kubectl(server, &["create", "-f", "-"], &node.to_string());
    }
}

/// Waits until Node `name` is Ready; returns it.
async fn wait_node_ready(server: &ApiServer, admin: &Client, name: &str) -> Node {
    let api: Api<Node> = Api::all(admin.clone());
    eventually(COMPONENT_TIMEOUT, format!("Node {name} Ready"), || async {
        let node = api.get(name).await.unwrap();
        let ready = node
            .status
            .as_ref()
            .and_then(|s| s.conditions.as_ref())
            .is_some_and(|c| c.iter().any(|c| c.type_ == "Ready" && c.status == "True"));
        if ready {
            Ok(node)
        } else {
            Err(Seen(format!("{:#?}", node.status)))
        }
    })
    .await
    .unwrap_or_else(|w| panic!("{w}\n{}", logs(server)))
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
        // The hosts phase asked the operator to reboot them; the Nodes will prove they did.
        topology
            .record_boot_event(MacAddress::parse(mac).unwrap(), BootEvent::RebootRequested)
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
async fn only_bound_workers_csrs_are_approved_and_signed_until_kwok_makes_them_ready_kubelet_requests_played_by_the_test()
 {
    // No kwok node of the fixture's own: the only Nodes are the ones the kubelets register.
    let server = ApiServer::start_with_options(&ApiServerOptions {
        controllers: true,
        nodes: Some(0),
        ..ApiServerOptions::default()
    })
    .unwrap_or_else(|e| panic!("{e}"));
    grant_kubelet_requests(&server);
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
        Box::new(OkdNodesScore::new(HostRole::Worker).with_timeout(Duration::from_secs(180))),
    ]);
    let invalid = maestro.validate(&[0, 1]);
    assert!(invalid.is_empty(), "{invalid:?}");
    let maestro = Arc::new(maestro);

    // CSRs nobody should approve: a client CSR for a machine that is not bound, and one for a
    // bound worker's name from a requester that is not the node-bootstrapper.
    let (intruder, _) = create_client_csr(&bootstrapper, "intruder", "intruder").await;
    let (impostor, _) = create_client_csr(&stranger, "impostor", WORKER1.0).await;

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
    let mut unnamed = None;
    for (worker, ip, _) in [WORKER0, WORKER1] {
        // The bootstrap kubeconfig's request; Harmony approves, the controller-manager signs.
        let (client_csr, key) = create_client_csr(&bootstrapper, worker, worker).await;
        wait_approved(&admin, &client_csr).await;
        let cert = signed_certificate(&server, &admin, &client_csr, worker).await;
        // From here on the kubelet authenticates with the certificate the signer issued.
        let kubelet = Kubelet::new(worker, &cert, &key);
        assert_eq!(
            kubelet.kubectl(
                &server,
                &[
                    "auth",
                    "whoami",
                    "-o",
                    "jsonpath={.status.userInfo.username}"
                ],
                ""
            ),
            format!("system:node:{worker}")
        );
        let serving_csr =
            kubelet.create_serving_csr(&server, &format!("{worker}-serving"), &[worker, ip]);
        wait_approved(&admin, &serving_csr).await;
        signed_certificate(&server, &admin, &serving_csr, worker).await;
        assert!(
            !run.is_finished(),
            "the phase ended before {worker} registered"
        );
        kubelet.register_node(&server);
        // kwok, not the test, writes the Node's status.
        let node = wait_node_ready(&server, &admin, worker).await;
        let kubelet_version = node
            .status
            .and_then(|s| s.node_info)
            .map(|i| i.kubelet_version)
            .unwrap_or_default();
        assert!(
            kubelet_version.starts_with("kwok-"),
            "Node {worker} Ready, but not through kwok: kubeletVersion {kubelet_version:?}"
        );
        if worker == WORKER0.0 {
            // A serving CSR naming neither a DNS name nor an IP address: the serving signer
            // would refuse it, so Harmony leaves it pending rather than approving it.
            unnamed = Some(kubelet.create_serving_csr(&server, "unnamed", &[]));
            assert!(
                !run.is_finished(),
                "the phase ended before worker1 registered"
            );
        }
        approved.push(client_csr);
        approved.push(serving_csr);
    }
    let report = tokio::time::timeout(Duration::from_secs(120), run)
        .await
        .expect("the phase ends once both workers are Ready")
        .unwrap();
    assert_eq!(report.status, ScoreStatus::Success, "{report:#?}");
    // The registered Nodes are the boot evidence a later hosts phase reads.
    let macs = [WORKER0.2, WORKER1.2].map(|m| MacAddress::parse(m).unwrap());
    assert_eq!(
        maestro.topology().awaiting_boot(&macs).await.unwrap(),
        Vec::<MacAddress>::new(),
        "the Nodes did not count as boot evidence"
    );
    // ... and the last two phases of each worker's boot timeline, in the JSON report's data too.
    for t in maestro.topology().timelines(&macs).await.unwrap() {
        let boot = t.latest().expect("a boot");
        let registered = boot.at(BootPhase::NodeRegistered);
        let ready = boot.at(BootPhase::NodeReady);
        assert!(
            registered.is_some() && ready.is_some() && registered <= ready,
            "{t:#?}"
        );
    }
    let listed = report.data.as_ref().expect("timeline data")["timeline"].to_string();
    for mac in macs {
        assert!(listed.contains(&mac.to_string()), "{listed}");
    }
    assert!(listed.contains("node-ready"), "{listed}");
    assert!(
        report
            .message
            .contains("2 of 2 worker node(s) Ready; 4 CSR(s) approved"),
        "{}",
        report.message
    );
    for worker in [WORKER0.0, WORKER1.0] {
        let expected = format!("{worker} Ready (Node {worker}, KubeletReady)");
        assert!(
            report.details.iter().any(|d| d.starts_with(&expected)),
            "{expected} missing from: {:#?}",
            report.details
        );
    }
    let unnamed = unnamed.unwrap();
    let why = format!(
        "left pending: {unnamed} (requester system:node:worker0, CN system:node:worker0): a kubelet serving certificate names its DNS names or IP addresses, this one names none"
    );
    assert!(
        report.details.contains(&why),
        "{why} missing from: {:#?}",
        report.details
    );
    for left in [&intruder, &impostor, &unnamed] {
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
        assert_eq!(certificate(&admin, left).await, None, "{left} was signed");
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

    // The rule Harmony applied is the signer's: approved by hand, the real signer refuses the
    // request without alternative names (a Failed condition, no certificate).
    let out = server.kubectl(&["certificate", "approve", &unnamed]);
    assert!(out.status.success(), "{out:?}");
    let api: Api<CertificateSigningRequest> = Api::all(admin.clone());
    let failed = eventually(
        COMPONENT_TIMEOUT,
        format!("the signer to refuse {unnamed}"),
        || async {
            let csr = api.get(&unnamed).await.unwrap();
            let status = csr.status.unwrap_or_default();
            let failed = status
                .conditions
                .unwrap_or_default()
                .into_iter()
                .find(|c| c.type_ == "Failed" && c.status == "True")?;
            assert!(status.certificate.is_none(), "{unnamed} was signed");
            Some(failed)
        },
    )
    .await
    .unwrap_or_else(|w| {
        panic!(
            "the signer did not refuse {unnamed}: {w}\n{}",
            logs(&server)
        )
    });
    let message = failed.message.unwrap_or_default();
    assert!(
        message.contains("DNS or IP subjectAltName is required"),
        "{message}"
    );

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
