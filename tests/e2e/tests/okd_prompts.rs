//! The operator's prompts in a real pseudo-terminal (tmux), answered as a person would: the
//! choice of hosts for the worker role (space, arrows, enter) and the reboot confirmation.
//! The program runs for real inside a lab namespace (dnsmasq, haproxy, HTTP boot server).

use std::path::Path;
use std::process::{Command, Stdio};
use std::time::Duration;

use harmony::domain::capability::HostInventory;
use harmony::infra::inventory_sqlite::SqliteInventory;
use harmony_e2e::netns::{Lab, available, wait_for};
use harmony_e2e::okd_lab::{LOAD_BALANCER, SERVICES, machine};

struct Tmux(String);

impl Tmux {
    fn start(name: String, command: &str) -> Self {
        let ok = Command::new("tmux")
            .args([
                "new-session",
                "-d",
                "-s",
                &name,
                "-x",
                "200",
                "-y",
                "60",
                command,
            ])
            .stdin(Stdio::null())
            .status()
            .expect("tmux runs (apt-get install tmux)");
        assert!(ok.success(), "tmux new-session failed");
        Self(name)
    }

    fn screen(&self) -> String {
        let out = Command::new("tmux")
            .args(["capture-pane", "-p", "-J", "-S", "-200", "-t", &self.0])
            .output()
            .expect("tmux capture-pane");
        String::from_utf8_lossy(&out.stdout).into_owned()
    }

    fn keys(&self, keys: &[&str]) {
        for k in keys {
            let ok = Command::new("tmux")
                .args(["send-keys", "-t", &self.0, k])
                .status()
                .expect("tmux send-keys");
            assert!(ok.success());
            std::thread::sleep(Duration::from_millis(150));
        }
    }

    fn wait_for_text(&self, text: &str, timeout: Duration) -> String {
        wait_for(timeout, || {
            let s = self.screen();
            s.contains(text).then_some(s)
        })
        .unwrap_or_else(|| panic!("{text:?} never appeared on screen:\n{}", self.screen()))
    }
}

impl Drop for Tmux {
    fn drop(&mut self) {
        let _ = Command::new("tmux")
            .args(["kill-session", "-t", &self.0])
            .status();
    }
}

fn seed_inventory(path: &Path) {
    let inv = SqliteInventory::open(path).unwrap();
    let rt = tokio::runtime::Builder::new_current_thread()
        .build()
        .unwrap();
    rt.block_on(async {
        for (id, mac) in [
            ("machine-a", "52:54:00:77:00:31"),
            ("machine-b", "52:54:00:77:00:32"),
            ("machine-c", "52:54:00:77:00:33"),
        ] {
            inv.record_host(&machine(id, mac).unwrap()).await.unwrap();
        }
    });
}

#[test]
fn operator_chooses_worker_hosts_and_confirms_the_reboot_in_a_terminal() {
    if let Err(e) = available() {
        panic!("{e}");
    }
    let lab = Lab::new(
        "prompt",
        &[&format!("{SERVICES}/24"), &format!("{LOAD_BALANCER}/24")],
    )
    .unwrap();
    let dir = tempfile::tempdir().unwrap();
    let inventory = dir.path().join("inventory.sqlite");
    seed_inventory(&inventory);
    let exit = dir.path().join("exit-status");
    let command = format!(
        "HARMONY_OKD_SERVICES_DIR={dir} ip netns exec {ns} {bin} --apply --inventory {inv}; echo $? > {exit}; sleep 600",
        dir = dir.path().display(),
        ns = lab.services.name(),
        bin = env!("CARGO_BIN_EXE_okd-operator"),
        inv = inventory.display(),
        exit = exit.display(),
    );
    let tmux = Tmux::start(format!("{}-tmux", lab.services.name()), &command);

    // Harmony first asks which Scores to run (all preselected) and to confirm applying.
    tmux.wait_for_text("Scores to run", Duration::from_secs(60));
    tmux.keys(&["Enter"]);
    tmux.wait_for_text("This changes live infrastructure", Duration::from_secs(30));
    tmux.keys(&["y", "Enter"]);
    tmux.wait_for_text(
        "Choose 2 host(s) for the worker role",
        Duration::from_secs(60),
    );
    let screen = tmux.screen();
    for id in ["machine-a", "machine-b", "machine-c"] {
        assert!(screen.contains(id), "{id} not offered:\n{screen}");
    }
    // Pick machine-a and machine-c: space, down, down, space, enter.
    tmux.keys(&["Space", "Down", "Down", "Space", "Enter"]);

    let screen = tmux.wait_for_text("Reboot these worker host(s) now", Duration::from_secs(60));
    assert!(
        screen.contains("worker0 (52:54:00:77:00:31, host machine-a)"),
        "{screen}"
    );
    assert!(
        screen.contains("worker1 (52:54:00:77:00:33, host machine-c)"),
        "{screen}"
    );
    tmux.keys(&["y", "Enter"]);

    let status = wait_for(Duration::from_secs(60), || {
        std::fs::read_to_string(&exit)
            .ok()
            .filter(|s| !s.trim().is_empty())
    })
    .unwrap_or_else(|| panic!("the program did not finish:\n{}", tmux.screen()));
    let screen = tmux.screen();
    assert_eq!(status.trim(), "0", "{screen}");
    assert!(screen.contains("success   OKD workers"), "{screen}");
    assert!(
        screen.contains("reboot confirmed by the operator"),
        "{screen}"
    );

    let hosts = std::fs::read_to_string(dir.path().join("services/dnsmasq/dhcp-hosts")).unwrap();
    assert_eq!(
        hosts,
        "52:54:00:77:00:31,10.77.0.21,worker0\n52:54:00:77:00:33,10.77.0.22,worker1\n"
    );
    let inv = SqliteInventory::open(&inventory).unwrap();
    let rt = tokio::runtime::Builder::new_current_thread()
        .build()
        .unwrap();
    let bindings = rt.block_on(inv.host_bindings()).unwrap();
    let pairs: Vec<(&str, &str)> = bindings
        .iter()
        .map(|b| (b.host.as_str(), b.logical.as_str()))
        .collect();
    assert_eq!(pairs, [("machine-a", "worker0"), ("machine-c", "worker1")]);
    drop(tmux);
    drop(lab);
}

#[test]
fn without_a_terminal_or_yes_the_reboot_step_exits_2_naming_yes() {
    let dir = tempfile::tempdir().unwrap();
    let mut child = Command::new(env!("CARGO_BIN_EXE_okd-operator"))
        .args(["--apply"])
        .env("HARMONY_OKD_SERVICES_DIR", dir.path())
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let done = wait_for(Duration::from_secs(60), || child.try_wait().ok().flatten());
    if done.is_none() {
        let _ = child.kill();
        panic!("the program hung without a terminal");
    }
    let out = child.wait_with_output().unwrap();
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(2), "{err}");
    assert!(
        err.contains("invalid --yes") && err.contains("reboot"),
        "{err}"
    );
    assert!(!dir.path().join("services").exists(), "files were written");
}
