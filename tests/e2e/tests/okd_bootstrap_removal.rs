//! Bootstrap removal with the real haproxy in a network-namespace lab: TLS listeners on the
//! bootstrap host's and cp0's addresses answer on 6443 and 22623 with their own name (their
//! certificate's CN; they also answer the health checks). Before removal the live frontends
//! reach the bootstrap backend; `OkdBootstrapRemovalScore` waits while a control-plane node
//! is NotReady (Nodes on the kube-apiserver fixture, written by the test playing the kubelets),
//! and once all three are Ready takes the bootstrap host out: `haproxy -c` passes and the
//! frontends reach only cp0. A re-run changes nothing. Runs as root.

use k8s_openapi::api::core::v1::Node;
use kube::api::{Patch, PatchParams, PostParams};
use kube::config::{KubeConfigOptions, Kubeconfig};
use kube::{Api, Client, Config};
use serde_json::json;
use std::collections::BTreeSet;
use std::path::Path;
use std::process::Stdio;
use std::time::Duration;

use harmony::domain::capability::{HostBinding, HostInventory};
use harmony::domain::inventory::{HostRole, PhysicalHost, RoleAssignment};
use harmony::domain::operator::{OperatorHandle, Unattended};
use harmony::domain::{
    Inventory, Maestro, RunContext, RunOptions, Score, ScoreReport, ScoreStatus,
};
use harmony::infra::okd::{BareMetalServices, HAClusterTopology};
use harmony::types::{HostName, Id, MacAddress};
use harmony_e2e::ApiServer;
use harmony_e2e::eventually::eventually_blocking;
use harmony_e2e::netns::{Lab, Netns, available};
use harmony_e2e::okd_lab::{HTTP_PORT, LOAD_BALANCER, SERVICES, fake_installation, layout};
use harmony_modules::okd::{OkdBootstrapRemovalScore, OkdPrepareScore};

const BOOTSTRAP: &str = "10.77.0.10";
const CP0: &str = "10.77.0.11";

struct Killed(std::process::Child);

impl Drop for Killed {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

/// A TLS listener on `ip:port` in the services namespace whose certificate names `name` and
/// that answers any GET (so the health checks) with 200.
fn backend(ns: &Netns, dir: &Path, name: &str, ip: &str, port: u16) -> Killed {
    let (key, cert) = (
        dir.join(format!("{name}.key")),
        dir.join(format!("{name}.crt")),
    );
    if !cert.exists() {
        let made = std::process::Command::new("openssl")
            .args([
                "req", "-x509", "-newkey", "rsa:2048", "-nodes", "-days", "1", "-subj",
            ])
            .arg(format!("/CN={name}"))
            .arg("-keyout")
            .arg(&key)
            .arg("-out")
            .arg(&cert)
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .status()
            .expect("openssl runs (apt-get install openssl)");
        assert!(made.success());
    }
    Killed(
        ns.spawn(
            &[
                "openssl",
                "s_server",
                "-quiet",
                "-www",
                "-accept",
                &format!("{ip}:{port}"),
                "-key",
                &key.display().to_string(),
                "-cert",
                &cert.display().to_string(),
            ],
            Stdio::null(),
            Stdio::null(),
        )
        .unwrap(),
    )
}

/// The backend one TLS connection to the load balancer's `port` reaches (its certificate CN).
fn reached(ns: &Netns, port: u16) -> Option<String> {
    let out = ns
        .command("openssl")
        .args(["s_client", "-connect", &format!("{LOAD_BALANCER}:{port}")])
        .stdin(Stdio::null())
        .stderr(Stdio::null())
        .output()
        .ok()?;
    let text = String::from_utf8_lossy(&out.stdout).into_owned();
    ["bootstrap", "cp0"]
        .into_iter()
        .find(|n| text.contains(&format!("subject=CN = {n}\n")))
        .map(str::to_string)
}

async fn admin(server: &ApiServer) -> Client {
    let kc = Kubeconfig::read_from(server.kubeconfig()).unwrap();
    let config = Config::from_custom_kubeconfig(kc, &KubeConfigOptions::default())
        .await
        .unwrap();
    Client::try_from(config).unwrap()
}

/// Registers Node `name` with its Ready condition, as its kubelet would.
async fn kubelet_reports(nodes: &Api<Node>, name: &str, ready: bool) {
    if nodes.get_opt(name).await.unwrap().is_none() {
        let node: Node = serde_json::from_value(
            json!({"apiVersion": "v1", "kind": "Node", "metadata": {"name": name}}),
        )
        .unwrap();
        nodes.create(&PostParams::default(), &node).await.unwrap();
    }
    let (status, reason) = if ready {
        ("True", "KubeletReady")
    } else {
        ("False", "KubeletNotReady")
    };
    let patch =
        json!({"status": {"conditions": [{"type": "Ready", "status": status, "reason": reason}]}});
    nodes
        .patch_status(name, &PatchParams::default(), &Patch::Strategic(&patch))
        .await
        .unwrap();
}

async fn run(
    maestro: &mut Maestro<HAClusterTopology>,
    score: Box<dyn Score<HAClusterTopology>>,
) -> ScoreReport {
    let index = maestro.scores().len();
    maestro.register(vec![score]);
    let invalid = maestro.validate(&[index]);
    assert!(invalid.is_empty(), "{invalid:?}");
    maestro
        .run(&[index], RunOptions::default())
        .await
        .unwrap_or_else(|e| panic!("{e}"))
        .remove(0)
}

fn haproxy_check(cfg: &Path) {
    let check = std::process::Command::new("haproxy")
        .args(["-c", "-f"])
        .arg(cfg)
        .output()
        .unwrap();
    assert!(
        check.status.success(),
        "haproxy -c: {}",
        String::from_utf8_lossy(&check.stderr)
    );
}

/// The Maestro, stopping the daemons its topology started when the test ends (or fails).
struct Site(Maestro<HAClusterTopology>);

impl Drop for Site {
    fn drop(&mut self) {
        let _ = self.0.topology().stop_services();
    }
}

#[tokio::test(flavor = "multi_thread")]
async fn once_the_control_plane_is_ready_the_live_frontends_no_longer_reach_the_bootstrap_host() {
    if let Err(e) = available() {
        panic!("{e}");
    }
    let server = ApiServer::start().unwrap_or_else(|e| panic!("{e}"));
    let nodes: Api<Node> = Api::all(admin(&server).await);
    let addresses: Vec<String> = [SERVICES, LOAD_BALANCER, BOOTSTRAP, CP0]
        .iter()
        .map(|a| format!("{a}/24"))
        .collect();
    let refs: Vec<&str> = addresses.iter().map(String::as_str).collect();
    let lab = Lab::new("bsr", &refs).unwrap();
    let dir = tempfile::tempdir().unwrap();
    let services = BareMetalServices {
        dir: dir.path().join("services"),
        interface: Some("br0".into()),
        http_port: HTTP_PORT,
        prefix: lab.services.prefix(),
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
    let mut site = Site(Maestro::new(Inventory::default(), topology));
    let maestro = &mut site.0;
    let mut listeners = Vec::new();
    for (name, ip) in [("bootstrap", BOOTSTRAP), ("cp0", CP0)] {
        for port in [6443, 22623] {
            listeners.push(backend(&lab.services, dir.path(), name, ip, port));
        }
    }

    let install = fake_installation(dir.path()).unwrap();
    // The bootstrap machine as the bootstrap phase leaves it: known, with the role, bound.
    let bootstrap_mac = MacAddress::parse("52:54:00:00:0b:01").unwrap();
    let bootstrap_host = Id::parse("bootstrap-machine").unwrap();
    let t = maestro.topology();
    t.record_host(&PhysicalHost {
        id: bootstrap_host.clone(),
        hostname: None,
        serial: None,
        macs: vec![bootstrap_mac],
        cpu_count: 4,
        memory_bytes: 16 << 30,
        disks: Vec::new(),
    })
    .await
    .unwrap();
    t.assign_role(&RoleAssignment {
        host: bootstrap_host.clone(),
        role: HostRole::Bootstrap,
    })
    .await
    .unwrap();
    t.bind_host(&HostBinding {
        host: bootstrap_host,
        role: HostRole::Bootstrap,
        logical: HostName::parse("bootstrap").unwrap(),
        mac: bootstrap_mac,
    })
    .await
    .unwrap();
    let prepared = run(maestro, Box::new(OkdPrepareScore::new(install.clone()))).await;
    assert_eq!(prepared.status, ScoreStatus::Success, "{prepared:#?}");
    let cfg = maestro.topology().haproxy().config_path();
    let ns = &lab.services;
    // Before: each frontend reaches the bootstrap host and cp0 in turn.
    for port in [6443, 22623] {
        let seen = tokio::task::block_in_place(|| {
            let mut seen = BTreeSet::new();
            eventually_blocking(
                Duration::from_secs(40),
                format!("{LOAD_BALANCER}:{port} to reach both backends"),
                || {
                    seen.extend(reached(ns, port));
                    (seen.len() == 2).then(|| seen.clone())
                },
            )
        });
        assert!(
            seen.is_ok(),
            "{LOAD_BALANCER}:{port} did not reach both the bootstrap host and cp0 within 40 s"
        );
    }

    // cp2 is not Ready: the bootstrap host stays.
    for cp in ["cp0", "cp1"] {
        kubelet_reports(&nodes, cp, true).await;
    }
    kubelet_reports(&nodes, "cp2", false).await;
    let waited = run(
        maestro,
        Box::new(OkdBootstrapRemovalScore::new().with_timeout(Duration::from_secs(3))),
    )
    .await;
    assert_eq!(waited.status, ScoreStatus::Failed, "{waited:#?}");
    assert!(
        waited.message.contains("cp2 NotReady")
            && waited.message.contains("the bootstrap host stays"),
        "{}",
        waited.message
    );
    let text = std::fs::read_to_string(&cfg).unwrap();
    assert!(
        text.contains(&format!("server bootstrap {BOOTSTRAP}:6443")),
        "{text}"
    );

    // All three Ready: the bootstrap host leaves both backends, haproxy is reloaded.
    kubelet_reports(&nodes, "cp2", true).await;
    let daemon = maestro.topology().haproxy().daemon();
    let old_pid = daemon.running_pid().expect("haproxy runs");
    let removed = run(
        maestro,
        Box::new(OkdBootstrapRemovalScore::new().with_timeout(Duration::from_secs(60))),
    )
    .await;
    assert_eq!(removed.status, ScoreStatus::Success, "{removed:#?}");
    assert!(
        removed.message.contains(&format!(
            "took the bootstrap host bootstrap ({BOOTSTRAP}) out of the api (6443) and machine-config (22623) backends"
        )),
        "{}",
        removed.message
    );
    haproxy_check(&cfg);
    let text = std::fs::read_to_string(&cfg).unwrap();
    assert!(!text.contains("server bootstrap"), "{text}");
    assert!(text.contains(&format!("server cp0 {CP0}:6443")), "{text}");
    assert!(text.contains(&format!("server cp0 {CP0}:22623")), "{text}");
    let new_pid = daemon.running_pid().expect("haproxy runs after the reload");
    assert_ne!(new_pid, old_pid, "haproxy was not reloaded");
    let old_gone = tokio::task::block_in_place(|| {
        eventually_blocking(
            Duration::from_secs(15),
            format!("the old haproxy {old_pid} to exit"),
            || {
                (!Path::new(&format!("/proc/{old_pid}")).exists()
                    || std::fs::read_to_string(format!("/proc/{old_pid}/stat"))
                        .is_ok_and(|s| s.contains(") Z ")))
                .then_some(())
            },
        )
    });
    assert!(old_gone.is_ok(), "the old haproxy {old_pid} still runs");

    // After: every connection on both frontends reaches cp0, never the bootstrap host.
    for port in [6443, 22623] {
        let seen: Vec<String> = tokio::task::block_in_place(|| {
            (0..8)
                .filter_map(|_| {
                    eventually_blocking(
                        Duration::from_secs(20),
                        format!("a connection through {LOAD_BALANCER}:{port}"),
                        || reached(ns, port),
                    )
                    .ok()
                })
                .collect()
        });
        assert_eq!(
            seen.len(),
            8,
            "{LOAD_BALANCER}:{port} stopped answering: {seen:?}"
        );
        assert!(
            seen.iter().all(|n| n == "cp0"),
            "{LOAD_BALANCER}:{port} still reaches the bootstrap host: {seen:?}"
        );
    }

    // A re-run changes nothing and keeps haproxy running as it is.
    let again = run(maestro, Box::new(OkdBootstrapRemovalScore::new())).await;
    assert_eq!(again.status, ScoreStatus::Noop, "{again:#?}");
    assert!(
        again.message.contains("was already out of"),
        "{}",
        again.message
    );
    assert_eq!(daemon.running_pid(), Some(new_pid));

    // A re-run of the prepare phase keeps the bootstrap host out instead of putting it back
    // for the removal phase to take out again: haproxy is neither rewritten nor reloaded.
    let prepared = run(maestro, Box::new(OkdPrepareScore::new(install))).await;
    assert!(
        matches!(prepared.status, ScoreStatus::Success | ScoreStatus::Noop),
        "{prepared:#?}"
    );
    assert!(
        prepared
            .details
            .iter()
            .any(|d| d.contains("stays out of the 6443 and 22623 backends")),
        "{prepared:#?}"
    );
    let text = std::fs::read_to_string(&cfg).unwrap();
    assert!(!text.contains("server bootstrap"), "{text}");
    assert_eq!(daemon.running_pid(), Some(new_pid), "haproxy was reloaded");
    drop(listeners);
}
