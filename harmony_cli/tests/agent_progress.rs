//! Progress an Interpret reports while it runs (an `AgentTopology` forwards its agent's
//! progress events through `report_progress`) reaches the CLI: one line each on standard error
//! without a terminal (a spinner message on one), nothing with `-q`.

use async_trait::async_trait;
use std::io::Write;
use std::sync::{Arc, Mutex};

use harmony::domain::interpret::{Interpret, InterpretName};
use harmony::domain::{
    ExecutionMode, InterpretError, Inventory, Outcome, PreparationError, PreparationOutcome,
    RunContext, Score, Topology, report_progress,
};
use harmony::types::Version;
use harmony_cli::{Console, run_with};

struct Remote;

impl harmony_cli::TopologyFlags for Remote {
    const FLAGS: harmony_cli::FlagGroups = harmony_cli::FlagGroups::RENDER;
}

#[async_trait]
impl Topology for Remote {
    fn name(&self) -> &str {
        "remote"
    }
    fn mode(&self) -> ExecutionMode {
        ExecutionMode::Apply
    }
    async fn ensure_ready(&self) -> Result<PreparationOutcome, PreparationError> {
        Ok(PreparationOutcome::Noop)
    }
}

/// Reports what an AgentTopology reports while its agent applies.
#[derive(Debug, Clone)]
struct Rollout;

#[async_trait]
impl Interpret<Remote> for Rollout {
    fn name(&self) -> InterpretName {
        InterpretName("Rollout")
    }
    fn version(&self) -> Version {
        Version::new(1, 0, 0)
    }
    async fn execute(&self, _: &Inventory, _: &Remote) -> Result<Outcome, InterpretError> {
        report_progress("sending 2 object(s) to region east");
        report_progress("region east: applying: 1/2 objects");
        report_progress("region east: applying: 2/2 objects");
        Ok(Outcome::success("applied"))
    }
}

impl Score<Remote> for Rollout {
    fn name(&self) -> String {
        "web".into()
    }
    fn create_interpret(&self) -> Box<dyn Interpret<Remote>> {
        Box::new(self.clone())
    }
    fn parameters(&self) -> serde_json::Value {
        serde_json::json!({})
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

async fn stderr_of(args: &[&str]) -> String {
    let err = Buffer::default();
    let console = Console {
        interactive: false,
        out: Arc::new(Mutex::new(Buffer::default())),
        err: Arc::new(Mutex::new(err.clone())),
    };
    let make = |_: &RunContext| Ok::<_, String>(Remote);
    let scores: Vec<Box<dyn Score<Remote>>> = vec![Box::new(Rollout)];
    let argv = std::iter::once("harmony").chain(args.iter().copied());
    assert_eq!(
        run_with(argv, console, Inventory::empty(), make, scores).await,
        0
    );
    String::from_utf8_lossy(&err.0.lock().unwrap()).into_owned()
}

#[tokio::test]
async fn without_a_terminal_each_progress_event_is_a_line() {
    let err = stderr_of(&["--yes"]).await;
    let lines: Vec<&str> = err.lines().filter(|l| l.contains("region east")).collect();
    assert_eq!(
        lines,
        [
            "harmony: web: sending 2 object(s) to region east",
            "harmony: web: region east: applying: 1/2 objects",
            "harmony: web: region east: applying: 2/2 objects",
        ],
        "{err}"
    );
}

#[tokio::test]
async fn quiet_runs_show_no_progress() {
    let err = stderr_of(&["--yes", "-q"]).await;
    assert!(!err.contains("region east"), "{err}");
}
