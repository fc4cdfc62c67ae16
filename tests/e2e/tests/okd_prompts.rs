//! The operator's prompts in a real pseudo-terminal (tmux), answered as a person would: the
//! choice of hosts for the worker role (space, arrows, enter) and the reboot confirmation.
//! The program runs for real inside a lab namespace (dnsmasq, haproxy, HTTP boot server).

use std::path::Path;
use std::process::{Command, Stdio};
use std::time::Duration;

use harmony::domain::capability::HostInventory;
use harmony::infra::inventory_sqlite::SqliteInventory;
use harmony_e2e::eventually::eventually_blocking;
use harmony_e2e::netns::{Lab, available};
use harmony_e2e::okd_lab::{LOAD_BALANCER, SERVICES, machine};

struct Tmux(String);

impl Tmux {
    /// tmux on this session's own server socket: tests running at once would otherwise race
    /// to start (and stop) the one default server.
    fn command(name: &str) -> Command {
        let mut cmd = Command::new("tmux");
        cmd.args(["-L", name]);
        cmd
    }

    fn start(name: String, command: &str) -> Self {
        let ok = Self::command(&name)
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
        let out = Self::command(&self.0)
            .args(["capture-pane", "-p", "-J", "-S", "-200", "-t", &self.0])
            .output()
            .expect("tmux capture-pane");
        String::from_utf8_lossy(&out.stdout).into_owned()
    }

    fn keys(&self, keys: &[&str]) {
        for k in keys {
            let ok = Self::command(&self.0)
                .args(["send-keys", "-t", &self.0, k])
                .status()
                .expect("tmux send-keys");
            assert!(ok.success());
            std::thread::sleep(Duration::from_millis(150));
        }
    }

    fn wait_for_text(&self, text: &str, timeout: Duration) -> String {
        self.wait_for_all(&[text], timeout)
    }

    /// Waits until every one of `texts` is on screen at once: a prompt draws its question
    /// before its options, so a screen taken when the question appears may lack them.
    fn wait_for_all(&self, texts: &[&str], timeout: Duration) -> String {
        self.wait_until(&format!("{texts:?} on screen"), timeout, |s| {
            texts.iter().all(|t| s.contains(t))
        })
    }

    /// Waits until the screen satisfies `done`; the screen.
    fn wait_until(&self, what: &str, timeout: Duration, done: impl Fn(&str) -> bool) -> String {
        eventually_blocking(timeout, what, || {
            let s = self.screen();
            done(&s).then_some(s)
        })
        .unwrap_or_else(|w| panic!("{w}; never on screen:\n{}", self.screen()))
    }
}

impl Drop for Tmux {
    fn drop(&mut self) {
        let _ = Self::command(&self.0).arg("kill-server").status();
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
    let screen = tmux.wait_for_all(
        &[
            "Choose 2 host(s) for the worker role",
            "machine-a",
            "machine-b",
            "machine-c",
        ],
        Duration::from_secs(60),
    );
    for id in ["machine-a", "machine-b", "machine-c"] {
        assert!(screen.contains(id), "{id} not offered:\n{screen}");
    }
    // Pick machine-a and machine-c: space, down, down, space, enter.
    tmux.keys(&["Space", "Down", "Down", "Space", "Enter"]);

    let screen = tmux.wait_for_all(
        &[
            "Reboot these worker host(s) now",
            "worker0 (52:54:00:77:00:31, host machine-a)",
            "worker1 (52:54:00:77:00:33, host machine-c)",
        ],
        Duration::from_secs(60),
    );
    assert!(
        screen.contains("worker0 (52:54:00:77:00:31, host machine-a)"),
        "{screen}"
    );
    assert!(
        screen.contains("worker1 (52:54:00:77:00:33, host machine-c)"),
        "{screen}"
    );
    tmux.keys(&["y", "Enter"]);

    let status = eventually_blocking(Duration::from_secs(60), "the program's exit status", || {
        std::fs::read_to_string(&exit)
            .ok()
            .filter(|s| !s.trim().is_empty())
    })
    .unwrap_or_else(|w| panic!("the program did not finish: {w}\n{}", tmux.screen()));
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
    let done = eventually_blocking(Duration::from_secs(60), "the program to exit", || {
        child.try_wait().ok().flatten()
    });
    if let Err(w) = done {
        let _ = child.kill();
        panic!("the program hung without a terminal: {w}");
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

/// One run of the program in its own tmux session, its exit status written to `exit-N`.
fn start_run(lab: &Lab, dir: &Path, inventory: &Path, n: usize) -> (Tmux, std::path::PathBuf) {
    let exit = dir.join(format!("exit-{n}"));
    let command = format!(
        "HARMONY_OKD_SERVICES_DIR={dir} ip netns exec {ns} {bin} --apply --inventory {inv}; echo $? > {exit}; sleep 600",
        dir = dir.display(),
        ns = lab.services.name(),
        bin = env!("CARGO_BIN_EXE_okd-operator"),
        inv = inventory.display(),
        exit = exit.display(),
    );
    let tmux = Tmux::start(format!("{}-run{n}", lab.services.name()), &command);
    // Harmony first asks which Scores to run (all preselected) and to confirm applying.
    tmux.wait_for_text("Scores to run", Duration::from_secs(60));
    tmux.keys(&["Enter"]);
    tmux.wait_for_text("This changes live infrastructure", Duration::from_secs(30));
    tmux.keys(&["y", "Enter"]);
    (tmux, exit)
}

/// Waits for the run to end; its exit status and the final screen.
fn finish(tmux: &Tmux, exit: &Path) -> (String, String) {
    let status = eventually_blocking(Duration::from_secs(90), "the program's exit status", || {
        std::fs::read_to_string(exit)
            .ok()
            .filter(|s| !s.trim().is_empty())
    })
    .unwrap_or_else(|w| panic!("the program did not finish: {w}\n{}", tmux.screen()));
    (status.trim().to_string(), tmux.screen())
}

/// The host with `mac` PXE-boots: it fetches its per-MAC script from the HTTP boot server.
fn host_fetches_its_script(lab: &Lab, mac: &str) {
    let url = format!(
        "http://{SERVICES}:{}/ipxe/{}.ipxe",
        harmony_e2e::okd_lab::HTTP_PORT,
        mac.replace(':', "-")
    );
    let out = lab
        .services
        .run(&["curl", "-sf", &url])
        .unwrap_or_else(|e| panic!("fetching {url}: {e}"));
    let script = String::from_utf8_lossy(&out.stdout);
    assert!(script.contains("#!ipxe"), "{url} served:\n{script}");
}

/// Waits until the question starting with `text` is on screen to its end ("rebooting:"); the
/// screen.
fn wait_for_question(tmux: &Tmux, text: &str) -> String {
    tmux.wait_until("the reboot question, whole", Duration::from_secs(60), |s| {
        s.find(text)
            .is_some_and(|at| s[at..].contains("rebooting:"))
    })
}

/// The question on screen from `text` to its end (`confirm once`), with the prompt's own line
/// wrapping undone.
fn question_from(screen: &str, text: &str) -> String {
    let start = screen
        .find(text)
        .unwrap_or_else(|| panic!("{text:?} not on screen:\n{screen}"));
    let rest = &screen[start..];
    let end = rest.find("confirm once").unwrap_or(rest.len());
    rest[..end].replace('\n', "")
}

#[test]
fn a_declined_reboot_fails_and_reruns_ask_again_until_the_hosts_have_booted() {
    if let Err(e) = available() {
        panic!("{e}");
    }
    let lab = Lab::new(
        "reboot",
        &[&format!("{SERVICES}/24"), &format!("{LOAD_BALANCER}/24")],
    )
    .unwrap();
    let dir = tempfile::tempdir().unwrap();
    let inventory = dir.path().join("inventory.sqlite");
    seed_inventory(&inventory);
    let not_booted = "have still not booted";

    // Run 1: choose machine-a and machine-c, then decline the reboot: the run fails and says
    // what to do.
    let (tmux, exit) = start_run(&lab, dir.path(), &inventory, 1);
    let hardware = ["MAC 52:54:00:77:00:31", "4 CPU", "16.0 GiB memory"];
    let screen = tmux.wait_for_all(
        &[
            "Choose 2 host(s) for the worker role",
            "machine-c", // the last option drawn
            hardware[0],
            hardware[1],
            hardware[2],
        ],
        Duration::from_secs(60),
    );
    for hardware in hardware {
        assert!(screen.contains(hardware), "{hardware} not shown:\n{screen}");
    }
    tmux.keys(&["Space", "Down", "Down", "Space", "Enter"]);
    tmux.wait_for_text("Reboot these worker host(s) now", Duration::from_secs(60));
    tmux.keys(&["n", "Enter"]);
    let (status, screen) = finish(&tmux, &exit);
    assert_eq!(
        status, "1",
        "a declined reboot must fail the run:\n{screen}"
    );
    assert!(screen.contains("FAILED    OKD workers"), "{screen}");
    for way_out in ["reboot declined", "reboot them", "re-run", "--yes"] {
        assert!(screen.contains(way_out), "{way_out:?} missing:\n{screen}");
    }
    drop(tmux);

    // Run 2: nothing changed, but neither host has booted: asked again, naming both.
    let (tmux, exit) = start_run(&lab, dir.path(), &inventory, 2);
    let screen = wait_for_question(&tmux, not_booted);
    let asked = question_from(&screen, not_booted);
    assert!(
        asked.contains("worker0 (52:54:00:77:00:31, host machine-a)")
            && asked.contains("worker1 (52:54:00:77:00:33, host machine-c)"),
        "{asked}"
    );
    assert!(
        !screen.contains("Choose 2 host(s)"),
        "roles are kept:\n{screen}"
    );
    // machine-a reboots and fetches its script while the question is on screen.
    host_fetches_its_script(&lab, "52:54:00:77:00:31");
    tmux.keys(&["y", "Enter"]);
    let (status, screen) = finish(&tmux, &exit);
    assert_eq!(status, "0", "{screen}");
    assert!(
        screen.contains("reboot confirmed by the operator"),
        "{screen}"
    );
    drop(tmux);

    // Run 3: machine-a booted since it was asked; machine-c has not: asked about it alone.
    let (tmux, exit) = start_run(&lab, dir.path(), &inventory, 3);
    let screen = wait_for_question(&tmux, not_booted);
    let asked = question_from(&screen, not_booted);
    assert!(
        asked.contains("worker1 (52:54:00:77:00:33, host machine-c)"),
        "{asked}"
    );
    assert!(!asked.contains("machine-a"), "machine-a booted: {asked}");
    host_fetches_its_script(&lab, "52:54:00:77:00:33");
    tmux.keys(&["y", "Enter"]);
    let (status, screen) = finish(&tmux, &exit);
    assert_eq!(status, "0", "{screen}");
    drop(tmux);

    // Run 4: both hosts have booted since they were last asked: no reboot question.
    let (tmux, exit) = start_run(&lab, dir.path(), &inventory, 4);
    let (status, screen) = finish(&tmux, &exit);
    assert_eq!(status, "0", "{screen}");
    assert!(!screen.contains("Reboot these"), "{screen}");
    assert!(!screen.contains(not_booted), "{screen}");
    assert!(
        screen.contains("every worker host has booted since its reboot was asked for"),
        "{screen}"
    );
    drop(tmux);
    drop(lab);
}
