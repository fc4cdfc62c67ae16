//! Each program offers the flags its topology reads: `--help` lists those, a flag of another
//! topology exits 2 naming it, a program's own flags (with environment fallbacks) reach its setup.

use std::io::Write;
use std::sync::{Arc, Mutex};

use harmony::domain::{Inventory, RunContext, Score};
use harmony::infra::default_topology::DefaultTopology;
use harmony::infra::okd::HAClusterTopology;
use harmony::infra::render::RenderTopology;
use harmony_cli::{Console, TopologyFlags, run_program_with};

#[derive(Clone, Default)]
struct Buffer(Arc<Mutex<Vec<u8>>>);

impl Write for Buffer {
    fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
        self.0.lock().unwrap().extend_from_slice(buf);
        Ok(buf.len())
    }
    fn flush(&mut self) -> std::io::Result<()> {
        Ok(())
    }
}

impl Buffer {
    fn text(&self) -> String {
        String::from_utf8_lossy(&self.0.lock().unwrap()).into_owned()
    }
}

/// The program's own flags in these tests.
#[derive(Debug, Clone, clap::Args)]
#[command(about = "A test program")]
struct Own {
    /// A flag with an environment fallback.
    #[arg(long, env = "HARMONY_CLI_TEST_SHOP_REPLICAS", default_value_t = 2)]
    replicas: u32,
}

/// What `setup` saw: the program's flags and the run context's flag values.
#[derive(Debug, Default, Clone)]
struct Seen {
    replicas: u32,
    kubeconfig: Option<std::path::PathBuf>,
    apply: bool,
    prune: bool,
    bmcs: Vec<String>,
}

/// Runs a program on topology `T` with `args`; `setup` records what it got and stops the run
/// (exit 2) so no topology is contacted.
async fn run<T>(args: &[&str]) -> (u8, String, String, Option<Seen>)
where
    T: harmony::domain::Topology + TopologyFlags + 'static,
{
    let (out, err) = (Buffer::default(), Buffer::default());
    let console = Console {
        interactive: false,
        out: Arc::new(Mutex::new(out.clone())),
        err: Arc::new(Mutex::new(err.clone())),
    };
    let seen = Arc::new(Mutex::new(None));
    let record = seen.clone();
    let argv = std::iter::once("shop").chain(args.iter().copied());
    let code = run_program_with(
        argv,
        console,
        Inventory::empty(),
        move |own: Own, ctx: &RunContext| {
            *record.lock().unwrap() = Some(Seen {
                replicas: own.replicas,
                kubeconfig: ctx.kubeconfig.clone(),
                apply: ctx.apply,
                prune: ctx.prune,
                bmcs: ctx.bmc.iter().map(|b| b.address.to_string()).collect(),
            });
            Err::<(T, Vec<Box<dyn Score<T>>>), _>("stopped by the test")
        },
    )
    .await;
    let seen = seen.lock().unwrap().clone();
    (code, out.text(), err.text(), seen)
}

#[tokio::test]
async fn help_lists_only_the_flags_of_the_topology_and_the_programs_own() {
    let (code, help, _, _) = run::<DefaultTopology>(&["--help"]).await;
    assert_eq!(code, 0);
    assert!(help.starts_with("A test program"), "{help}");
    for flag in [
        "--kubeconfig",
        "--context",
        "--prune",
        "--replicas",
        "--plan",
    ] {
        assert!(help.contains(flag), "{flag} missing:\n{help}");
    }
    for flag in [
        "--apply",
        "--inventory",
        "--roles",
        "--discovery-timeout",
        "--assign",
    ] {
        assert!(!help.contains(flag), "{flag} listed:\n{help}");
    }
    assert!(help.contains("HARMONY_CLI_TEST_SHOP_REPLICAS"), "{help}");

    let (code, help, _, _) = run::<HAClusterTopology>(&["--help"]).await;
    assert_eq!(code, 0);
    for flag in [
        "--apply",
        "--inventory",
        "--roles",
        "--discovery-timeout",
        "--assign",
    ] {
        assert!(help.contains(flag), "{flag} missing:\n{help}");
    }
    for flag in ["--kubeconfig", "--context", "--prune", "--force-conflicts"] {
        assert!(!help.contains(flag), "{flag} listed:\n{help}");
    }

    let (_, help, _, _) = run::<RenderTopology>(&["--help"]).await;
    for flag in ["--kubeconfig", "--apply", "--prune"] {
        assert!(!help.contains(flag), "{flag} listed:\n{help}");
    }
}

#[tokio::test]
async fn a_flag_the_topology_does_not_read_exits_2_naming_it() {
    let cases: [(&[&str], &str, &str); 4] = [
        (&["--apply"], "--apply", "bare-metal"),
        (&["--roles=r.toml"], "--roles", "bare-metal"),
        (&["--force-conflicts"], "--force-conflicts", "live objects"),
        (&["--context", "prod"], "--context", "Kubernetes"),
    ];
    for (args, flag, group) in cases {
        let (code, out, err, seen) = run::<RenderTopology>(args).await;
        assert_eq!(code, 2, "{args:?}: {err}");
        assert!(
            err.contains(&format!("{flag} does not apply to this program")),
            "{args:?}: {err}"
        );
        assert!(err.contains(group), "{args:?}: {err}");
        assert!(out.is_empty(), "{out}");
        assert!(seen.is_none(), "{args:?} reached setup");
    }
    // A Kubernetes program refuses the bare-metal flags, a bare-metal one the cluster flags.
    let (code, _, err, _) = run::<DefaultTopology>(&["--inventory", "hosts.sqlite"]).await;
    assert_eq!(code, 2);
    assert!(err.contains("--inventory does not apply"), "{err}");
    let (code, _, err, _) = run::<HAClusterTopology>(&["--kubeconfig", "kc"]).await;
    assert_eq!(code, 2);
    assert!(err.contains("--kubeconfig does not apply"), "{err}");
    // Offered, but meaningless without a cluster: refused rather than ignored.
    let (code, _, err, seen) = run::<DefaultTopology>(&["--prune"]).await;
    assert_eq!(code, 2);
    assert!(err.contains("--prune acts on live objects"), "{err}");
    assert!(err.contains("--kubeconfig"), "{err}");
    assert!(seen.is_none());
    let (code, _, err, seen) = run::<DefaultTopology>(&["--no-skip"]).await;
    assert_eq!(code, 2);
    assert!(err.contains("--no-skip acts on live objects"), "{err}");
    assert!(seen.is_none());
    // A flag nobody has is clap's error, still exit 2 and named.
    let (code, _, err, _) = run::<DefaultTopology>(&["--no-such-flag"]).await;
    assert_eq!(code, 2);
    assert!(err.contains("--no-such-flag"), "{err}");
}

#[tokio::test]
async fn offered_flags_and_the_programs_own_reach_setup() {
    let (code, _, err, seen) =
        run::<DefaultTopology>(&["--kubeconfig", "kc.yaml", "--prune", "--replicas", "5"]).await;
    assert_eq!(code, 2);
    assert!(err.contains("stopped by the test"), "{err}");
    let seen = seen.expect("setup ran");
    assert_eq!(seen.replicas, 5);
    assert_eq!(seen.kubeconfig.as_deref(), Some("kc.yaml".as_ref()));
    assert!(seen.prune && !seen.apply);

    let (_, _, _, seen) = run::<HAClusterTopology>(&["--apply"]).await;
    let seen = seen.expect("setup ran");
    assert!(seen.apply && seen.kubeconfig.is_none());

    let (code, _, err, _) = run::<RenderTopology>(&["--replicas", "many"]).await;
    assert_eq!(code, 2);
    assert!(err.contains("--replicas"), "{err}");
}

#[tokio::test]
async fn bmc_entries_reach_setup_and_bad_ones_exit_2_before_it_naming_the_fix() {
    let ok = "52:54:00:00:00:21=redfish://10.0.0.5/redfish/v1/Systems/1,credentials=env:BMC_R14";
    let (code, help, _, _) = run::<HAClusterTopology>(&["--help"]).await;
    assert_eq!(code, 0);
    for flag in ["--bmc ", "--bmc-ca-file", "--bmc-insecure"] {
        assert!(help.contains(flag), "{flag} missing:\n{help}");
    }
    let (code, _, err, seen) = run::<HAClusterTopology>(&["--apply", "--bmc", ok]).await;
    assert_eq!(code, 2);
    assert!(err.contains("stopped by the test"), "{err}");
    assert_eq!(
        seen.expect("setup ran").bmcs,
        ["redfish://10.0.0.5/redfish/v1/Systems/1"]
    );

    for (args, says) in [
        (
            vec![
                "--bmc",
                "52:54:00:00:00:21=redfish://root:calvin@10.0.0.5,credentials=env:A",
            ],
            "credentials never go in the address",
        ),
        (
            vec!["--bmc", "52:54:00:00:00:21=redfish://10.0.0.5"],
            "no credentials=SOURCE",
        ),
        (
            vec![
                "--bmc",
                ok,
                "--bmc",
                "52:54:00:00:00:22=redfish://10.0.0.5/redfish/v1/Systems/1,credentials=env:B",
            ],
            "a BMC system powers one host",
        ),
    ] {
        let (code, _, err, seen) = run::<HAClusterTopology>(&args).await;
        assert_eq!(code, 2, "{args:?}: {err}");
        assert!(err.contains(says), "{args:?}: {err}");
        assert!(!err.contains("calvin"), "{err}");
        assert!(seen.is_none(), "setup ran for {args:?}");
    }
    // Flags of bare metal only.
    let (code, _, err, _) = run::<DefaultTopology>(&["--bmc", ok]).await;
    assert_eq!(code, 2);
    assert!(err.contains("a bare-metal flag"), "{err}");
}
