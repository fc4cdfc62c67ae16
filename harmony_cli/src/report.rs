//! The run report: text for people, JSON for machines (documented in docs/report-format.md).

use serde::Serialize;
use std::fmt::Write as _;

use harmony::domain::{ChangeAction, ExecutionMode, PreparationOutcome, ScoreReport, ScoreStatus};

/// Version of the JSON report layout; bumped on incompatible changes.
pub const REPORT_FORMAT_VERSION: u32 = 1;

/// Everything a run produced.
#[derive(Debug, Serialize)]
pub(crate) struct RunReport {
    pub format_version: u32,
    pub topology: String,
    pub mode: ExecutionMode,
    pub preparation: Preparation,
    pub scores: Vec<ScoreReport>,
    pub summary: Summary,
    pub exit_code: u8,
}

/// How topology preparation went.
#[derive(Debug, Serialize)]
#[serde(tag = "status", rename_all = "lowercase")]
pub(crate) enum Preparation {
    Success { message: String },
    Noop,
    Failed { message: String },
}

impl From<&PreparationOutcome> for Preparation {
    fn from(p: &PreparationOutcome) -> Self {
        match p {
            PreparationOutcome::Success(m) => Preparation::Success { message: m.clone() },
            PreparationOutcome::Noop => Preparation::Noop,
        }
    }
}

/// Counts per status.
#[derive(Debug, Default, Serialize)]
pub(crate) struct Summary {
    pub success: usize,
    pub noop: usize,
    pub failed: usize,
    pub skipped: usize,
}

impl Summary {
    pub(crate) fn of(scores: &[ScoreReport]) -> Self {
        let count = |s: ScoreStatus| scores.iter().filter(|r| r.status == s).count();
        Self {
            success: count(ScoreStatus::Success),
            noop: count(ScoreStatus::Noop),
            failed: count(ScoreStatus::Failed),
            skipped: count(ScoreStatus::Skipped),
        }
    }
}

impl RunReport {
    pub(crate) fn to_json(&self) -> String {
        serde_json::to_string_pretty(self)
            .unwrap_or_else(|e| format!("{{\"error\": \"report serialisation failed: {e}\"}}"))
    }

    pub(crate) fn to_text(&self) -> String {
        let mut s = String::new();
        let _ = writeln!(
            s,
            "Harmony report: topology {} ({} mode)",
            self.topology, self.mode
        );
        if let Preparation::Failed { message } = &self.preparation {
            let _ = writeln!(s, "  topology preparation FAILED: {message}");
        }
        for r in &self.scores {
            let status = match r.status {
                ScoreStatus::Success => "success",
                ScoreStatus::Noop => "unchanged",
                ScoreStatus::Failed => "FAILED",
                ScoreStatus::Skipped => "skipped",
            };
            let _ = writeln!(s, "  {status:<9} {}: {}", r.name, r.message);
            for c in &r.changes {
                let verb = if self.mode == ExecutionMode::Plan {
                    planned(c.action)
                } else {
                    done(c.action)
                };
                match &c.location {
                    Some(loc) => {
                        let _ = writeln!(s, "      {verb:<10} {} -> {loc}", c.object);
                    }
                    None => {
                        let _ = writeln!(s, "      {verb:<10} {}", c.object);
                    }
                }
                // Objects that are current once they exist (a ConfigMap) need no line.
                if let Some(st) = c.status.as_ref().filter(|st| st.status.reason != "Exists") {
                    let _ = writeln!(s, "          {}", status_line(st));
                }
                for d in &c.diff {
                    let _ = writeln!(
                        s,
                        "          ~ {}: {} -> {}",
                        d.path,
                        d.old.as_deref().unwrap_or("(absent)"),
                        d.new.as_deref().unwrap_or("(absent)")
                    );
                }
            }
            for d in &r.details {
                let _ = writeln!(s, "      {d}");
            }
        }
        let sm = &self.summary;
        let _ = writeln!(
            s,
            "Summary: {} succeeded, {} unchanged, {} failed, {} skipped",
            sm.success, sm.noop, sm.failed, sm.skipped
        );
        if self.mode == ExecutionMode::Render {
            let written = self
                .scores
                .iter()
                .flat_map(|r| &r.changes)
                .filter(|c| matches!(c.action, ChangeAction::Create | ChangeAction::Update))
                .count();
            let _ = writeln!(
                s,
                "Render mode: {written} file(s) written; nothing was applied to any infrastructure."
            );
        }
        s
    }
}

fn done(a: ChangeAction) -> &'static str {
    match a {
        ChangeAction::Create => "created",
        ChangeAction::Update => "updated",
        ChangeAction::Unchanged => "unchanged",
        ChangeAction::Delete => "deleted",
    }
}

fn planned(a: ChangeAction) -> &'static str {
    match a {
        ChangeAction::Create => "+ create",
        ChangeAction::Update => "~ update",
        ChangeAction::Unchanged => "= same",
        ChangeAction::Delete => "- delete",
    }
}

/// `current after 3.2 s (Available): Deployment is available. Replicas: 2`, or what the object
/// was when the wait ended.
fn status_line(st: &harmony::domain::WaitedStatus) -> String {
    let s = &st.status;
    match (s.state, st.time_to_current_s) {
        (harmony::domain::capability::Readiness::Current, Some(t)) => {
            format!("current after {t:.2} s ({}): {}", s.reason, s.message)
        }
        _ => format!("{} ({}): {}", s.state, s.reason, s.message),
    }
}
