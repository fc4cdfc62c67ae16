//! haproxy as Harmony configures it: `haproxy -c` accepts the generated configuration, and a
//! TCP connection to the API frontend (6443) on the load-balancer address reaches a listener
//! in its backend pool (a TLS server on the bootstrap host's address answering the /readyz
//! health check). Reloads keep one process per configuration. Runs as root.

use std::os::unix::ffi::OsStrExt;
use std::path::Path;
use std::process::Stdio;
use std::time::Duration;

use harmony::domain::ScoreStatus;
use harmony::domain::capability::LoadBalancer;
use harmony_e2e::eventually::eventually_blocking;
use harmony_e2e::netns::available;
use harmony_e2e::okd_lab::{LOAD_BALANCER, OkdLab, worker_inventory};
use harmony_modules::okd::{OkdPrepareScore, load_balancer_services};

const BOOTSTRAP: &str = "10.77.0.10";

struct Killed(std::process::Child);

impl Drop for Killed {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

/// Whether `pid` is a live process (a zombie has exited).
fn running(pid: i32) -> bool {
    std::fs::read_to_string(format!("/proc/{pid}/stat")).is_ok_and(|stat| {
        stat.rsplit(')')
            .next()
            .and_then(|rest| rest.split_whitespace().next())
            .is_some_and(|state| state != "Z")
    })
}

/// The live haproxy processes whose command line names `cfg` (`-f <cfg>`), from `/proc`, sorted.
fn haproxy_processes(cfg: &Path) -> Vec<i32> {
    let cfg = cfg.as_os_str().as_bytes();
    let mut pids: Vec<i32> = std::fs::read_dir("/proc")
        .unwrap()
        .flatten()
        .filter_map(|e| e.file_name().to_str()?.parse().ok())
        .filter(|pid| {
            let Ok(cmdline) = std::fs::read(format!("/proc/{pid}/cmdline")) else {
                return false;
            };
            let args: Vec<&[u8]> = cmdline.split(|b| *b == 0).collect();
            args.first().is_some_and(|a| a.ends_with(b"haproxy"))
                && args.windows(2).any(|w| w[0] == b"-f" && w[1] == cfg)
        })
        .filter(|pid| running(*pid))
        .collect();
    pids.sort();
    pids
}

#[tokio::test(flavor = "multi_thread")]
async fn api_frontend_reaches_a_listener_in_its_backend_pool() {
    if let Err(e) = available() {
        panic!("{e}");
    }
    let mut lab = OkdLab::new("lb", &[BOOTSTRAP], worker_inventory().unwrap()).unwrap();
    let dir = lab.dir.path().to_path_buf();
    let (key, cert) = (dir.join("backend.key"), dir.join("backend.crt"));
    let made = std::process::Command::new("openssl")
        .args([
            "req", "-x509", "-newkey", "rsa:2048", "-nodes", "-days", "1", "-subj",
        ])
        .arg("/CN=bootstrap-api-e2e")
        .arg("-keyout")
        .arg(&key)
        .arg("-out")
        .arg(&cert)
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .status()
        .expect("openssl runs (apt-get install openssl)");
    assert!(made.success());
    // The bootstrap host's API: TLS on 6443 answering any GET (so /readyz) with 200.
    let backend = Killed(
        lab.lab
            .services
            .spawn(
                &[
                    "openssl",
                    "s_server",
                    "-quiet",
                    "-www",
                    "-accept",
                    &format!("{BOOTSTRAP}:6443"),
                    "-key",
                    &key.display().to_string(),
                    "-cert",
                    &cert.display().to_string(),
                ],
                Stdio::null(),
                Stdio::null(),
            )
            .unwrap(),
    );

    let install = lab.installation().unwrap();
    let reports = lab
        .run(vec![Box::new(OkdPrepareScore::new(install))])
        .await
        .unwrap();
    assert_eq!(reports[0].status, ScoreStatus::Success, "{:#?}", reports[0]);
    let cfg = lab.topology().haproxy().config_path();
    let check = std::process::Command::new("haproxy")
        .args(["-c", "-f"])
        .arg(&cfg)
        .output()
        .unwrap();
    assert!(
        check.status.success(),
        "haproxy -c: {}",
        String::from_utf8_lossy(&check.stderr)
    );
    let text = std::fs::read_to_string(&cfg).unwrap();
    assert!(
        text.contains(&format!("bind {LOAD_BALANCER}:6443")),
        "{text}"
    );
    assert!(
        text.contains(&format!("server bootstrap {BOOTSTRAP}:6443")),
        "{text}"
    );

    let services = &lab.lab.services;
    let reached = tokio::task::block_in_place(|| {
        eventually_blocking(
            Duration::from_secs(30),
            format!("a TLS session through {LOAD_BALANCER}:6443 to the bootstrap listener"),
            || {
                let out = services
                    .command("openssl")
                    .args(["s_client", "-connect", &format!("{LOAD_BALANCER}:6443")])
                    .stdin(Stdio::null())
                    .stderr(Stdio::null())
                    .output()
                    .ok()?;
                let text = String::from_utf8_lossy(&out.stdout).into_owned();
                text.contains("CN = bootstrap-api-e2e").then_some(text)
            },
        )
    });
    assert!(
        reached.is_ok(),
        "no TLS session through {LOAD_BALANCER}:6443 reached the bootstrap listener within 30 s"
    );

    // Unchanged configuration: no reload. Changed: a new process replaces the old one, and the
    // old one exits: one process per configuration.
    let daemon = lab.topology().haproxy().daemon();
    let pid = daemon.running_pid().expect("haproxy runs");
    assert_eq!(
        haproxy_processes(&cfg),
        [pid],
        "one haproxy process runs the configuration"
    );
    let layout = harmony_e2e::okd_lab::layout().unwrap();
    let same = lab
        .topology()
        .ensure_services(&load_balancer_services(&layout))
        .await
        .unwrap();
    assert!(
        same.iter()
            .all(|c| c.action == harmony::domain::ChangeAction::Unchanged)
    );
    assert_eq!(daemon.running_pid(), Some(pid));
    let mut fewer = load_balancer_services(&layout);
    fewer.retain(|s| s.port == 6443);
    lab.topology().ensure_services(&fewer).await.unwrap();
    let new_pid = daemon.running_pid().expect("haproxy runs after reload");
    assert_ne!(new_pid, pid, "a changed configuration is reloaded");
    let old_gone = tokio::task::block_in_place(|| {
        eventually_blocking(
            Duration::from_secs(15),
            format!("the old haproxy {pid} to exit"),
            || (!running(pid)).then_some(()),
        )
    });
    assert!(
        old_gone.is_ok(),
        "the old haproxy (pid {pid}) still runs 15 s after the reload to pid {new_pid}; \
         haproxy processes of {}: {:?}",
        cfg.display(),
        haproxy_processes(&cfg)
    );
    assert_eq!(
        haproxy_processes(&cfg),
        [new_pid],
        "after the reload, one haproxy process runs the configuration: the new one"
    );
    drop(backend);
}

#[tokio::test(flavor = "multi_thread")]
async fn a_configuration_haproxy_rejects_says_why() {
    // A services folder deep enough that the admin socket's path passes haproxy's limit of 97
    // characters: `haproxy -c` refuses it, and the error carries haproxy's own reason.
    use harmony::infra::bare_metal::ServiceMode;
    use harmony::infra::haproxy::{Haproxy, HaproxySettings};
    let dir = tempfile::tempdir().unwrap();
    let deep = dir.path().join("x".repeat(110));
    let haproxy = Haproxy::new(
        HaproxySettings {
            dir: deep.clone(),
            host_dir: deep.clone(),
            binary: "haproxy".into(),
            prefix: Vec::new(),
        },
        ServiceMode::Apply,
    );
    let layout = harmony_e2e::okd_lab::layout().unwrap();
    let e = haproxy
        .ensure_services(&load_balancer_services(&layout))
        .await
        .unwrap_err()
        .to_string();
    assert!(
        e.contains("haproxy -c") && e.contains("too long (max 97)"),
        "the error says why haproxy refused the configuration: {e}"
    );
    assert!(
        haproxy.daemon().running_pid().is_none(),
        "nothing was started"
    );
}
