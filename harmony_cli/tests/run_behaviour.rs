//! CLI behaviour with a topology that changes live infrastructure (apply mode).
//!
//! The topology here is an in-memory stand-in: these tests cover the CLI's own logic
//! (confirmation, exit codes, validation), not any backend.

use async_trait::async_trait;
use std::io::Write;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};

use harmony::domain::interpret::{Interpret, InterpretName};
use harmony::domain::{
    ExecutionMode, InterpretError, Inventory, Outcome, PreparationError, PreparationOutcome,
    RunContext, Score, Topology, ValidationError,
};
use harmony::types::Version;
use harmony_cli::{Console, run_with};

#[derive(Default)]
struct LiveTopology {
    executed: Arc<AtomicUsize>,
}

impl harmony_cli::TopologyFlags for LiveTopology {
    const FLAGS: harmony_cli::FlagGroups = harmony_cli::FlagGroups::KUBERNETES;
}

#[async_trait]
impl Topology for LiveTopology {
    fn name(&self) -> &str {
        "live-cluster"
    }
    fn mode(&self) -> ExecutionMode {
        ExecutionMode::Apply
    }
    async fn ensure_ready(&self) -> Result<PreparationOutcome, PreparationError> {
        Ok(PreparationOutcome::Noop)
    }
}

#[derive(Debug, Clone)]
struct Step {
    name: &'static str,
    fail: bool,
    invalid: bool,
}

#[async_trait]
impl Interpret<LiveTopology> for Step {
    fn name(&self) -> InterpretName {
        InterpretName("Step")
    }
    fn version(&self) -> Version {
        Version::new(1, 0, 0)
    }
    async fn execute(&self, _: &Inventory, t: &LiveTopology) -> Result<Outcome, InterpretError> {
        t.executed.fetch_add(1, Ordering::SeqCst);
        if self.fail {
            Ok(Outcome::failed("backend said no"))
        } else {
            Ok(Outcome::success("done"))
        }
    }
}

impl Score<LiveTopology> for Step {
    fn name(&self) -> String {
        self.name.into()
    }
    fn create_interpret(&self) -> Box<dyn Interpret<LiveTopology>> {
        Box::new(self.clone())
    }
    fn parameters(&self) -> serde_json::Value {
        serde_json::json!({})
    }
    fn validate(&self) -> Result<(), ValidationError> {
        if self.invalid {
            return Err(ValidationError::new(
                "spec.mac",
                "\"zz\" is not a MAC address",
                "use 52:54:00:12:34:56",
            ));
        }
        Ok(())
    }
}

#[derive(Clone, Default)]
struct Buffer(Arc<Mutex<Vec<u8>>>);

impl Write for Buffer {
    fn write(&mut self, b: &[u8]) -> std::io::Result<usize> {
        self.0.lock().unwrap().extend_from_slice(b);
        Ok(b.len())
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

async fn run(args: &[&str], steps: Vec<Step>) -> (u8, String, String, usize) {
    let (out, err) = (Buffer::default(), Buffer::default());
    let console = Console {
        interactive: false,
        out: Arc::new(Mutex::new(out.clone())),
        err: Arc::new(Mutex::new(err.clone())),
    };
    let executed = Arc::new(AtomicUsize::new(0));
    let counter = executed.clone();
    let make = move |_: &RunContext| Ok::<_, String>(LiveTopology { executed: counter });
    let scores: Vec<Box<dyn Score<LiveTopology>>> = steps
        .into_iter()
        .map(|s| Box::new(s) as Box<dyn Score<LiveTopology>>)
        .collect();
    let argv = std::iter::once("harmony").chain(args.iter().copied());
    let code = run_with(argv, console, Inventory::empty(), make, scores).await;
    (
        code,
        out.text(),
        err.text(),
        executed.load(Ordering::SeqCst),
    )
}

fn ok(name: &'static str) -> Step {
    Step {
        name,
        fail: false,
        invalid: false,
    }
}

#[tokio::test]
async fn without_a_terminal_apply_needs_yes_and_exits_2() {
    let (code, out, err, executed) = run(&[], vec![ok("a"), ok("b")]).await;
    assert_eq!(code, 2);
    assert!(err.contains("--yes"), "{err}");
    assert!(err.contains("no terminal"), "{err}");
    assert_eq!(executed, 0, "nothing may run before confirmation");
    assert!(out.is_empty());
}

#[tokio::test]
async fn yes_confirms_and_runs_everything() {
    let (code, out, _, executed) =
        run(&["--yes", "--output", "json"], vec![ok("a"), ok("b")]).await;
    assert_eq!(code, 0);
    assert_eq!(executed, 2);
    let report: serde_json::Value = serde_json::from_str(&out).unwrap();
    assert_eq!(report["mode"], "apply");
    assert_eq!(report["scores"][1]["name"], "b");
}

#[tokio::test]
async fn a_failed_score_exits_1_and_skips_the_rest() {
    let steps = vec![
        ok("a"),
        Step {
            name: "b",
            fail: true,
            invalid: false,
        },
        ok("c"),
    ];
    let (code, out, _, executed) = run(&["--yes"], steps.clone()).await;
    assert_eq!((code, executed), (1, 2));
    assert!(
        out.contains("FAILED    b: backend said no") && out.contains("skipped   c:"),
        "{out}"
    );
    let (code, _, _, executed) = run(&["--yes", "--keep-going"], steps).await;
    assert_eq!((code, executed), (1, 3));
}

#[tokio::test]
async fn validation_errors_exit_2_before_anything_runs() {
    let steps = vec![
        ok("a"),
        Step {
            name: "b",
            fail: false,
            invalid: true,
        },
    ];
    let (code, _, err, executed) = run(&["--yes"], steps).await;
    assert_eq!((code, executed), (2, 0));
    assert!(
        err.contains("Score \"b\": invalid spec.mac") && err.contains("fix: use 52:54:00:12:34:56"),
        "{err}"
    );
}
