//! The Maestro prepares a topology once, runs Scores in order and returns one report per Score.

use serde::Serialize;
use std::sync::Arc;
use std::time::Instant;
use tokio::sync::OnceCell;

use super::events::{EventSink, HarmonyEvent, with_progress};
use super::inventory::Inventory;
use super::outcome::{ObjectChange, ScoreStatus};
use super::score::Score;
use super::topology::{PreparationError, PreparationOutcome, Topology};
use super::validation::ValidationError;

/// The result of one Score in a run.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct ScoreReport {
    /// Score name.
    pub name: String,
    /// Interpret kind and version that ran it.
    pub interpret: String,
    /// Final status.
    pub status: ScoreStatus,
    /// One line for humans (the error, when failed).
    pub message: String,
    /// Extra lines.
    pub details: Vec<String>,
    /// Per-object changes, including those applied before a failure.
    pub changes: Vec<ObjectChange>,
    /// The Score's parameters, secrets redacted.
    pub parameters: serde_json::Value,
    /// Figures the Score reported for machines (its outcome's `data`), when it has any.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub data: Option<serde_json::Value>,
    /// Wall time in milliseconds.
    pub duration_ms: u64,
}

/// How to run.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct RunOptions {
    /// Go on with the next Score after a failure instead of skipping the rest.
    pub keep_going: bool,
}

/// Drives a run: validation, topology preparation (once), Scores in registration order, events.
pub struct Maestro<T: Topology> {
    inventory: Inventory,
    topology: T,
    scores: Vec<Box<dyn Score<T>>>,
    subscribers: Vec<EventSink>,
    prepared: OnceCell<PreparationOutcome>,
}

impl<T: Topology> Maestro<T> {
    /// A Maestro for `topology` with no Scores yet.
    pub fn new(inventory: Inventory, topology: T) -> Self {
        Self {
            inventory,
            topology,
            scores: Vec::new(),
            subscribers: Vec::new(),
            prepared: OnceCell::new(),
        }
    }

    /// Adds Scores; they run in the order registered.
    pub fn register(&mut self, scores: Vec<Box<dyn Score<T>>>) {
        self.scores.extend(scores);
    }

    /// Adds an event subscriber.
    pub fn subscribe(&mut self, sink: impl Fn(&HarmonyEvent) + Send + Sync + 'static) {
        self.subscribers.push(Arc::new(sink));
    }

    /// The registered Scores, in order.
    pub fn scores(&self) -> &[Box<dyn Score<T>>] {
        &self.scores
    }

    /// The topology.
    pub fn topology(&self) -> &T {
        &self.topology
    }

    fn emit(&self, event: HarmonyEvent) {
        for s in &self.subscribers {
            s(&event);
        }
    }

    /// Validates the selected Scores (indices into [`Self::scores`]); returns every problem found.
    pub fn validate(&self, selection: &[usize]) -> Vec<(String, ValidationError)> {
        selection
            .iter()
            .filter_map(|&i| self.scores.get(i))
            .filter_map(|s| {
                s.validate()
                    .and_then(|()| s.validate_on(&self.topology))
                    .err()
                    .map(|e| (s.name(), e))
            })
            .collect()
    }

    /// Checks the declared inventory against the topology (e.g. duplicate MACs), before
    /// anything is touched.
    pub fn validate_inventory(&self) -> Result<(), ValidationError> {
        self.topology.validate_inventory(&self.inventory)
    }

    /// Prepares the topology; later calls return the first result without preparing again.
    pub async fn prepare(&self) -> Result<&PreparationOutcome, PreparationError> {
        let name = self.topology.name().to_string();
        self.prepared
            .get_or_try_init(|| async {
                self.emit(HarmonyEvent::TopologyPreparing {
                    topology: name.clone(),
                });
                match self.topology.ensure_ready().await {
                    Ok(outcome) => {
                        self.emit(HarmonyEvent::TopologyReady {
                            topology: name.clone(),
                            outcome: outcome.clone(),
                        });
                        Ok(outcome)
                    }
                    Err(e) => {
                        self.emit(HarmonyEvent::TopologyFailed {
                            topology: name.clone(),
                            reason: e.reason.clone(),
                        });
                        Err(e)
                    }
                }
            })
            .await
    }

    /// Runs every registered Score.
    pub async fn run_all(&self, options: RunOptions) -> Result<Vec<ScoreReport>, PreparationError> {
        let all: Vec<usize> = (0..self.scores.len()).collect();
        self.run(&all, options).await
    }

    /// Runs the selected Scores (indices into [`Self::scores`]) in order, one report each.
    ///
    /// After a failure the remaining Scores are reported `Skipped` unless `keep_going` is set.
    pub async fn run(
        &self,
        selection: &[usize],
        options: RunOptions,
    ) -> Result<Vec<ScoreReport>, PreparationError> {
        self.prepare().await?;
        let mut reports = Vec::with_capacity(selection.len());
        let mut failed = false;
        for score in selection.iter().filter_map(|&i| self.scores.get(i)) {
            let report = if failed && !options.keep_going {
                self.skipped(score.as_ref())
            } else {
                self.execute(score.as_ref()).await
            };
            failed |= report.status == ScoreStatus::Failed;
            self.emit(HarmonyEvent::InterpretFinished {
                score: report.name.clone(),
                status: report.status,
                message: report.message.clone(),
            });
            reports.push(report);
        }
        Ok(reports)
    }

    fn skipped(&self, score: &dyn Score<T>) -> ScoreReport {
        let interpret = score.create_interpret();
        ScoreReport {
            name: score.name(),
            interpret: format!("{} {}", interpret.name(), interpret.version()),
            status: ScoreStatus::Skipped,
            message: "skipped: an earlier Score failed (use --keep-going to run it anyway)".into(),
            details: Vec::new(),
            changes: Vec::new(),
            parameters: score.parameters(),
            data: None,
            duration_ms: 0,
        }
    }

    async fn execute(&self, score: &dyn Score<T>) -> ScoreReport {
        let name = score.name();
        let interpret = score.create_interpret();
        self.emit(HarmonyEvent::InterpretStarted {
            score: name.clone(),
        });
        let subscribers = self.subscribers.clone();
        let progress_name = name.clone();
        let sink = Arc::new(move |message: String| {
            let event = HarmonyEvent::InterpretProgress {
                score: progress_name.clone(),
                message,
            };
            subscribers.iter().for_each(|s| s(&event));
        });
        let started = Instant::now();
        let result = with_progress(sink, interpret.execute(&self.inventory, &self.topology)).await;
        let duration_ms = u64::try_from(started.elapsed().as_millis()).unwrap_or(u64::MAX);
        let (status, message, details, changes, data) = match result {
            Ok(o) => (o.status.into(), o.message, o.details, o.changes, o.data),
            Err(e) => (
                ScoreStatus::Failed,
                e.to_string(),
                Vec::new(),
                e.applied().to_vec(),
                None,
            ),
        };
        ScoreReport {
            name,
            interpret: format!("{} {}", interpret.name(), interpret.version()),
            status,
            message,
            details,
            changes,
            parameters: score.parameters(),
            data,
            duration_ms,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::domain::events::report_progress;
    use crate::domain::interpret::{Interpret, InterpretName};
    use crate::domain::mode::ExecutionMode;
    use crate::domain::outcome::{InterpretError, Outcome};
    use async_trait::async_trait;
    use harmony_types::Version;
    use std::sync::Mutex;
    use std::sync::atomic::{AtomicUsize, Ordering};

    #[derive(Default)]
    struct CountingTopology {
        prepared: AtomicUsize,
        fail: bool,
    }

    #[async_trait]
    impl Topology for CountingTopology {
        fn name(&self) -> &str {
            "counting"
        }
        fn mode(&self) -> ExecutionMode {
            ExecutionMode::Render
        }
        async fn ensure_ready(&self) -> Result<PreparationOutcome, PreparationError> {
            self.prepared.fetch_add(1, Ordering::SeqCst);
            if self.fail {
                return Err(PreparationError {
                    topology: "counting".into(),
                    reason: "down".into(),
                });
            }
            Ok(PreparationOutcome::Noop)
        }
    }

    #[derive(Debug, Clone)]
    struct StepScore {
        name: &'static str,
        fail: bool,
    }

    #[async_trait]
    impl Interpret<CountingTopology> for StepScore {
        fn name(&self) -> InterpretName {
            InterpretName("Step")
        }
        fn version(&self) -> Version {
            Version::parse("1.0.0").unwrap()
        }
        async fn execute(
            &self,
            _: &Inventory,
            _: &CountingTopology,
        ) -> Result<Outcome, InterpretError> {
            report_progress(format!("{} working", self.name));
            if self.fail {
                return Err(ValidationError::new("step", "told to fail", "don't").into());
            }
            Ok(Outcome::success(format!("{} done", self.name))
                .with_data(serde_json::json!({"step": self.name})))
        }
    }

    impl Score<CountingTopology> for StepScore {
        fn name(&self) -> String {
            self.name.into()
        }
        fn create_interpret(&self) -> Box<dyn Interpret<CountingTopology>> {
            Box::new(self.clone())
        }
        fn parameters(&self) -> serde_json::Value {
            serde_json::json!({"fail": self.fail})
        }
    }

    fn maestro(fail_second: bool) -> (Maestro<CountingTopology>, Arc<Mutex<Vec<HarmonyEvent>>>) {
        let mut m = Maestro::new(Inventory::empty(), CountingTopology::default());
        m.register(vec![
            Box::new(StepScore {
                name: "one",
                fail: false,
            }),
            Box::new(StepScore {
                name: "two",
                fail: fail_second,
            }),
            Box::new(StepScore {
                name: "three",
                fail: false,
            }),
        ]);
        let events = Arc::new(Mutex::new(Vec::new()));
        let sink = events.clone();
        m.subscribe(move |e| sink.lock().unwrap().push(e.clone()));
        (m, events)
    }

    #[tokio::test]
    async fn runs_in_order_prepares_once_and_emits_events() {
        let (m, events) = maestro(false);
        let first = m.run_all(RunOptions::default()).await.unwrap();
        let second = m.run(&[2], RunOptions::default()).await.unwrap();
        assert_eq!(m.topology().prepared.load(Ordering::SeqCst), 1);
        let statuses: Vec<_> = first.iter().map(|r| (r.name.as_str(), r.status)).collect();
        assert_eq!(
            statuses,
            [
                ("one", ScoreStatus::Success),
                ("two", ScoreStatus::Success),
                ("three", ScoreStatus::Success)
            ]
        );
        assert_eq!(second.len(), 1);
        assert_eq!(second[0].name, "three");
        // The outcome's figures reach the report, and its JSON form, as `data`.
        assert_eq!(second[0].data, Some(serde_json::json!({"step": "three"})));
        let json = serde_json::to_value(&second[0]).unwrap();
        assert_eq!(json["data"]["step"], "three");
        let events = events.lock().unwrap();
        assert!(matches!(events[0], HarmonyEvent::TopologyPreparing { .. }));
        assert!(matches!(events[1], HarmonyEvent::TopologyReady { .. }));
        assert_eq!(
            events[2],
            HarmonyEvent::InterpretStarted {
                score: "one".into()
            }
        );
        assert_eq!(
            events[3],
            HarmonyEvent::InterpretProgress {
                score: "one".into(),
                message: "one working".into()
            }
        );
        assert!(
            matches!(&events[4], HarmonyEvent::InterpretFinished { score, status: ScoreStatus::Success, .. } if score == "one")
        );
    }

    #[tokio::test]
    async fn stops_at_first_failure_unless_keep_going() {
        let (m, _) = maestro(true);
        let reports = m.run_all(RunOptions::default()).await.unwrap();
        let statuses: Vec<_> = reports.iter().map(|r| r.status).collect();
        assert_eq!(
            statuses,
            [
                ScoreStatus::Success,
                ScoreStatus::Failed,
                ScoreStatus::Skipped
            ]
        );
        assert!(
            reports[1].message.contains("invalid step"),
            "{}",
            reports[1].message
        );
        // A failed or skipped Score has no figures, and its JSON has no `data` key.
        for r in &reports[1..] {
            assert_eq!(r.data, None);
            assert!(serde_json::to_value(r).unwrap().get("data").is_none());
        }
        let reports = m.run_all(RunOptions { keep_going: true }).await.unwrap();
        let statuses: Vec<_> = reports.iter().map(|r| r.status).collect();
        assert_eq!(
            statuses,
            [
                ScoreStatus::Success,
                ScoreStatus::Failed,
                ScoreStatus::Success
            ]
        );
    }

    #[tokio::test]
    async fn preparation_failure_runs_nothing() {
        let mut m = Maestro::new(
            Inventory::empty(),
            CountingTopology {
                fail: true,
                ..Default::default()
            },
        );
        m.register(vec![Box::new(StepScore {
            name: "one",
            fail: false,
        })]);
        let err = m.run_all(RunOptions::default()).await.unwrap_err();
        assert!(
            err.to_string().contains("\"counting\" is not ready: down"),
            "{err}"
        );
    }
}
