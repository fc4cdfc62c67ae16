//! Events a run emits, and the channel Interprets use to report progress.

use serde::Serialize;
use std::sync::Arc;

use super::outcome::ScoreStatus;
use super::topology::PreparationOutcome;

/// Something that happened during a run, delivered to every subscriber in order.
#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(tag = "event", rename_all = "snake_case")]
pub enum HarmonyEvent {
    /// `ensure_ready` started.
    TopologyPreparing {
        /// Topology name.
        topology: String,
    },
    /// `ensure_ready` finished.
    TopologyReady {
        /// Topology name.
        topology: String,
        /// What preparation did.
        outcome: PreparationOutcome,
    },
    /// `ensure_ready` failed.
    TopologyFailed {
        /// Topology name.
        topology: String,
        /// Why.
        reason: String,
    },
    /// A Score's Interpret started.
    InterpretStarted {
        /// Score name.
        score: String,
    },
    /// An Interpret reported progress.
    InterpretProgress {
        /// Score name.
        score: String,
        /// What it is doing.
        message: String,
    },
    /// A Score's Interpret finished (or was skipped).
    InterpretFinished {
        /// Score name.
        score: String,
        /// Final status.
        status: ScoreStatus,
        /// One-line result.
        message: String,
    },
}

/// A subscriber callback.
pub type EventSink = Arc<dyn Fn(&HarmonyEvent) + Send + Sync>;

tokio::task_local! {
    static PROGRESS: Arc<dyn Fn(String) + Send + Sync>;
}

/// Reports progress of the Interpret running on this task. Outside a Maestro run it is a no-op.
pub fn report_progress(message: impl Into<String>) {
    let message = message.into();
    let _ = PROGRESS.try_with(|sink| sink(message));
}

/// Runs `fut` with `sink` receiving its `report_progress` calls (outside a Maestro run too:
/// the region agent forwards an apply's progress lines as progress frames).
pub async fn capture_progress<F: std::future::Future>(
    sink: Arc<dyn Fn(String) + Send + Sync>,
    fut: F,
) -> F::Output {
    with_progress(sink, fut).await
}

/// Runs `fut` with `sink` receiving its `report_progress` calls.
pub(crate) async fn with_progress<F: std::future::Future>(
    sink: Arc<dyn Fn(String) + Send + Sync>,
    fut: F,
) -> F::Output {
    PROGRESS.scope(sink, fut).await
}
