//! The operator as several real processes (`e2e-operator`, the `harmony-operator` program)
//! against a real kube-apiserver fixture: one replica holds the `coordination.k8s.io` Lease and
//! reconciles, the others wait; a leader killed with SIGKILL is replaced once its lease runs
//! out, one stopped with SIGTERM hands over at once. Every reconcile logs one
//! `reconciled <Kind> <namespace>/<name>` line, which shows who reconciled what.

mod operator_support;

use serde_json::Value;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, ExitStatus, Stdio};
use std::time::{Duration, Instant, SystemTime};

use harmony_e2e::ApiServer;
use operator_support::{apply_ok, condition, control_plane, finance_db, get_json, wait_for};

const LEASE: &str = "harmony-operator";
const RECONCILED: &str = "reconciled MultisitePostgreSQL tenant-a/finance-db";

/// A resource naming sites nobody declared (the first unknown one, the primary, is named): every reconcile ends `UnknownSite` and requeues
/// on the resync, so the leader reconciles it again every second.
fn finance_db_yaml(primary_site: &str) -> String {
    format!(
        "apiVersion: harmony.io/v1alpha1\nkind: MultisitePostgreSQL\nmetadata: {{name: finance-db, namespace: tenant-a}}\n\
         spec:\n  version: \"17\"\n  storage: 1Gi\n  topology:\n    primary: {{site: {primary_site}, host: db.example.com}}\n    replicas: [{{site: site-tokyo}}]\n"
    )
}

/// One `harmony-operator run` process; killed on drop.
struct Operator {
    child: Option<Child>,
    log: PathBuf,
    status: Option<ExitStatus>,
}

impl Operator {
    /// Starts a replica named `name` (its `HOSTNAME`, so its lease identity starts with it).
    fn start(cp: &ApiServer, dir: &Path, name: &str, lease_duration_s: u64) -> Self {
        let log = dir.join(format!("{name}.log"));
        let out = std::fs::File::create(&log).unwrap();
        let err = out.try_clone().unwrap();
        let child = Command::new(env!("CARGO_BIN_EXE_e2e-operator"))
            .args(["run", "--kubeconfig"])
            .arg(cp.kubeconfig())
            .args(["--resync-seconds", "1", "--lease-name", LEASE])
            .args(["--lease-namespace", "harmony-system", "--lease-duration-s"])
            .arg(lease_duration_s.to_string())
            .env("HOSTNAME", name)
            .env("RUST_LOG", "info")
            .stdin(Stdio::null())
            .stdout(out)
            .stderr(err)
            .spawn()
            .unwrap();
        Self {
            child: Some(child),
            log,
            status: None,
        }
    }

    fn log(&self) -> String {
        std::fs::read_to_string(&self.log).unwrap_or_default()
    }

    /// How many times this replica reconciled the resource.
    fn reconciles(&self) -> usize {
        self.log().matches(RECONCILED).count()
    }

    /// The identity it announced (`leader: waiting for lease ... as <identity> (`).
    fn identity(&self) -> String {
        wait_for("the replica's identity", Duration::from_secs(60), || {
            let log = self.log();
            let id = log
                .lines()
                .find_map(|l| {
                    l.split_once("leader: waiting for lease ")?
                        .1
                        .split_once(" as ")
                })
                .and_then(|(_, rest)| rest.split_once(" (").map(|(id, _)| id.to_string()));
            (id, log)
        })
    }

    fn wait_log(&self, what: &str, needle: &str) {
        wait_for(what, Duration::from_secs(90), || {
            let log = self.log();
            (log.contains(needle).then_some(()), log)
        });
    }

    fn kill9(&mut self) {
        if let Some(mut c) = self.child.take() {
            let _ = c.kill();
            self.status = c.wait().ok();
        }
    }

    /// Sends SIGTERM and waits for the exit.
    fn terminate(&mut self) -> ExitStatus {
        let c = self.child.as_mut().unwrap();
        // SAFETY: kill(2) on our own child's pid; no memory is involved.
        let sent = unsafe { libc::kill(c.id() as libc::pid_t, libc::SIGTERM) };
        assert_eq!(sent, 0, "SIGTERM not delivered");
        let status = wait_for("the exit after SIGTERM", Duration::from_secs(60), || {
            (c.try_wait().unwrap(), "still running".into())
        });
        self.child = None;
        status
    }
}

impl Drop for Operator {
    fn drop(&mut self) {
        self.kill9();
    }
}

fn lease(cp: &ApiServer) -> Value {
    get_json(cp, &["lease", LEASE, "-n", "harmony-system"]).unwrap_or_default()
}

fn holder(cp: &ApiServer) -> String {
    lease(cp)["spec"]["holderIdentity"]
        .as_str()
        .unwrap_or_default()
        .to_string()
}

fn micro_time(v: &Value) -> SystemTime {
    let text = v.as_str().unwrap_or_else(|| panic!("no time in {v}"));
    let t: k8s_openapi::jiff::Timestamp = text.parse().unwrap();
    SystemTime::from(t)
}

#[test]
fn only_the_leader_reconciles_and_a_leader_killed_with_sigkill_is_replaced_by_the_follower() {
    let cp = control_plane();
    apply_ok(&cp, &finance_db_yaml("site-paris"));
    let dir = tempfile::tempdir().unwrap();
    let lease_duration_s = 4;

    let mut a = Operator::start(&cp, dir.path(), "operator-a", lease_duration_s);
    a.wait_log("operator-a leading", "leader: acquired lease");
    let b = Operator::start(&cp, dir.path(), "operator-b", lease_duration_s);
    let (id_a, id_b) = (a.identity(), b.identity());
    assert_ne!(id_a, id_b);
    assert_eq!(holder(&cp), id_a);

    // The leader reconciles over and over (UnknownSite requeues on the 1 s resync) while the
    // follower runs next to it: the follower reconciles nothing.
    let before = a.reconciles();
    wait_for(
        "three reconciles by the leader while the follower runs",
        Duration::from_secs(60),
        || ((a.reconciles() >= before + 3).then_some(()), a.log()),
    );
    let (_, reason, _) = condition(&finance_db(&cp), "Ready");
    assert_eq!(reason, "UnknownSite");
    assert_eq!(b.reconciles(), 0, "the follower reconciled:\n{}", b.log());
    assert!(!b.log().contains("leader: acquired"), "{}", b.log());

    // SIGKILL: no release. The follower takes over once the lease runs out, never before.
    let last = lease(&cp);
    let last_renewal = micro_time(&last["spec"]["renewTime"]);
    let killed = Instant::now();
    a.kill9();
    b.wait_log("operator-b taking over", "leader: acquired lease");
    println!(
        "handover after SIGKILL: {:?} (lease duration {lease_duration_s} s)",
        killed.elapsed()
    );
    let taken = lease(&cp);
    assert_eq!(taken["spec"]["holderIdentity"], id_b.as_str());
    let acquired = micro_time(&taken["spec"]["acquireTime"]);
    assert!(
        acquired >= last_renewal + Duration::from_secs(lease_duration_s),
        "the follower took the lease before it ran out: renewed {last_renewal:?}, acquired {acquired:?}"
    );

    // The new leader reconciles: an edit is seen and answered by it.
    apply_ok(&cp, &finance_db_yaml("site-osaka"));
    let message = wait_for(
        "the new leader's status for generation 2",
        Duration::from_secs(60),
        || {
            let r = finance_db(&cp);
            let c = condition(&r, "Ready");
            let done = r["status"]["observedGeneration"] == 2 && c.2.contains("site-osaka");
            (done.then(|| c.2.clone()), format!("{c:?}\n{}", b.log()))
        },
    );
    assert!(message.contains("site-osaka"), "{message}");
    assert!(
        b.log().contains(&format!("{RECONCILED} (generation 2)")),
        "{}",
        b.log()
    );
    assert!(
        !a.log().contains(&format!("{RECONCILED} (generation 2)")),
        "the killed leader cannot have reconciled the edit"
    );
}

#[test]
fn a_leader_stopped_with_sigterm_releases_the_lease_and_the_follower_takes_over_before_it_expires()
{
    let cp = control_plane();
    apply_ok(&cp, &finance_db_yaml("site-paris"));
    let dir = tempfile::tempdir().unwrap();
    // Long enough that a takeover before expiry can only come from the release.
    let lease_duration_s = 60;
    let mut a = Operator::start(&cp, dir.path(), "operator-a", lease_duration_s);
    a.wait_log("operator-a leading", "leader: acquired lease");
    let b = Operator::start(&cp, dir.path(), "operator-b", lease_duration_s);
    let id_b = b.identity();
    wait_for("a reconcile by the leader", Duration::from_secs(60), || {
        ((a.reconciles() > 0).then_some(()), a.log())
    });
    let last_renewal = micro_time(&lease(&cp)["spec"]["renewTime"]);

    let status = a.terminate();
    assert!(status.success(), "{status:?}\n{}", a.log());
    assert!(a.log().contains("leader: released lease"), "{}", a.log());
    b.wait_log("operator-b taking over", "leader: acquired lease");
    let taken = lease(&cp);
    assert_eq!(taken["spec"]["holderIdentity"], id_b.as_str());
    let acquired = micro_time(&taken["spec"]["acquireTime"]);
    assert!(
        acquired < last_renewal + Duration::from_secs(lease_duration_s),
        "the follower waited for expiry: the lease was not released"
    );
    wait_for(
        "a reconcile by the new leader",
        Duration::from_secs(60),
        || ((b.reconciles() > 0).then_some(()), b.log()),
    );
}

#[test]
fn bad_lease_settings_are_refused_naming_the_flag() {
    let run = |args: &[&str]| {
        let out = Command::new(env!("CARGO_BIN_EXE_e2e-operator"))
            .args(args)
            .env("RUST_LOG", "off")
            .output()
            .unwrap();
        (
            out.status.code(),
            String::from_utf8_lossy(&out.stderr).into_owned(),
        )
    };
    // Refused before the (absent) kubeconfig is even read.
    let (code, err) = run(&[
        "run",
        "--kubeconfig",
        "/nonexistent/kubeconfig",
        "--lease-duration-s",
        "1",
    ]);
    assert_eq!(code, Some(2), "{err}");
    assert!(
        err.contains("--lease-duration-s") && err.contains("at least 2"),
        "{err}"
    );

    // A namespace that does not exist is named, with what the operator needs there.
    let cp = ApiServer::start().unwrap_or_else(|e| panic!("{e}"));
    let kubeconfig = cp.kubeconfig().display().to_string();
    let (code, err) = run(&[
        "run",
        "--kubeconfig",
        &kubeconfig,
        "--lease-namespace",
        "nowhere",
    ]);
    assert_eq!(code, Some(2), "{err}");
    assert!(
        err.contains("lease nowhere/harmony-operator") && err.contains("namespace must exist"),
        "{err}"
    );
}
