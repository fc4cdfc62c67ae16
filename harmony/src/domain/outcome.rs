//! Outcome: how an Interpret ended and what it changed, object by object and field by field.

use serde::Serialize;
use std::fmt;

use super::capability::{CapabilityError, ObjectStatus};
use super::validation::ValidationError;

/// How an Interpret ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum OutcomeStatus {
    /// Something was (or, in plan mode, would be) changed.
    Success,
    /// Everything already matched; nothing changed.
    Noop,
    /// The Interpret ran to its end but could not reach the intent.
    Failed,
}

/// The result of one Interpret: status, a one-line message, details and per-object changes.
#[derive(Debug, Clone, PartialEq, Serialize, derive_new::new)]
#[new(visibility = "")]
pub struct Outcome {
    /// Overall status.
    pub status: OutcomeStatus,
    /// One line for humans.
    #[new(into)]
    pub message: String,
    /// Extra lines for humans (never secret values).
    #[new(default)]
    pub details: Vec<String>,
    /// Objects created, updated, deleted or found unchanged.
    #[new(default)]
    pub changes: Vec<ObjectChange>,
    /// Figures specific to the Score for machines (e.g. replication lag per site); the JSON
    /// report carries them as `data`. Never secret values.
    #[serde(skip_serializing_if = "Option::is_none")]
    #[new(default)]
    pub data: Option<serde_json::Value>,
}

impl Outcome {
    /// The same outcome carrying `data` (figures for the JSON report).
    pub fn with_data(mut self, data: serde_json::Value) -> Self {
        self.data = Some(data);
        self
    }

    /// A successful outcome.
    pub fn success(message: impl Into<String>) -> Self {
        Self::new(OutcomeStatus::Success, message)
    }

    /// An outcome where nothing needed changing.
    pub fn noop(message: impl Into<String>) -> Self {
        Self::new(OutcomeStatus::Noop, message)
    }

    /// A failed outcome.
    pub fn failed(message: impl Into<String>) -> Self {
        Self::new(OutcomeStatus::Failed, message)
    }

    /// Success if any change is not `Unchanged`, otherwise Noop; the message counts each action.
    pub fn from_changes(changes: Vec<ObjectChange>) -> Self {
        let count = |a: ChangeAction| changes.iter().filter(|c| c.action == a).count();
        let summary = [
            ChangeAction::Create,
            ChangeAction::Update,
            ChangeAction::Delete,
            ChangeAction::Unchanged,
        ]
        .into_iter()
        .filter_map(|a| match count(a) {
            0 => None,
            n => Some(format!("{n} {a}")),
        })
        .collect::<Vec<_>>()
        .join(", ");
        let status = if changes.iter().all(|c| c.action == ChangeAction::Unchanged) {
            OutcomeStatus::Noop
        } else {
            OutcomeStatus::Success
        };
        let message = if summary.is_empty() {
            "nothing to do".to_string()
        } else {
            summary
        };
        Self {
            status,
            message,
            details: Vec::new(),
            changes,
            data: None,
        }
    }

    /// Adds a detail line.
    pub fn with_detail(mut self, line: impl Into<String>) -> Self {
        self.details.push(line.into());
        self
    }
}

/// What happened (or would happen) to one object.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum ChangeAction {
    /// The object did not exist and was (or would be) created.
    Create,
    /// The object existed and differs.
    Update,
    /// The object matched already.
    Unchanged,
    /// The object was (or would be) removed.
    Delete,
}

impl fmt::Display for ChangeAction {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            ChangeAction::Create => "create",
            ChangeAction::Update => "update",
            ChangeAction::Unchanged => "unchanged",
            ChangeAction::Delete => "delete",
        })
    }
}

/// A change to one object, with where it went and a field-level diff for updates.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct ObjectChange {
    /// The object, e.g. `apps/v1 Deployment shop/web`.
    pub object: String,
    /// What happened to it.
    pub action: ChangeAction,
    /// Where it went: a file, a site, an API server.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub location: Option<String>,
    /// Field-level differences, secrets already redacted.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub diff: Vec<FieldChange>,
    /// Where the object stood when the apply's wait ended (absent when nothing waited:
    /// render and plan modes, `--no-wait`, deletions).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub status: Option<WaitedStatus>,
}

/// An object's final status after an apply waited for it: state, the controller's reason and
/// message, and how long it took to become current.
#[derive(Debug, Clone, PartialEq, Serialize, serde::Deserialize)]
pub struct WaitedStatus {
    /// `current`, `in_progress`, `failed` or `not_found`, with reason and message.
    #[serde(flatten)]
    pub status: ObjectStatus,
    /// Seconds from the start of the wait until the object was first seen current; absent
    /// when it never was.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub time_to_current_s: Option<f64>,
}

/// One changed field: its path and old and new values (JSON text, or `<redacted>`).
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct FieldChange {
    /// Dotted path such as `spec.replicas` or `data.key`.
    pub path: String,
    /// Previous value, absent when the field is new.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub old: Option<String>,
    /// New value, absent when the field is removed.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub new: Option<String>,
}

/// Why an Interpret could not run to its end.
#[derive(Debug, thiserror::Error)]
pub enum InterpretError {
    /// A parameter is wrong; nothing was touched.
    #[error(transparent)]
    Invalid(#[from] ValidationError),
    /// A capability failed; `applied` lists what had already changed before it did.
    #[error("{action}: {source}{}", applied_suffix(applied))]
    Capability {
        /// What the Interpret was doing.
        action: String,
        /// Changes made before the failure (re-running converges from there).
        applied: Vec<ObjectChange>,
        /// The capability's error.
        #[source]
        source: CapabilityError,
    },
}

fn applied_suffix(applied: &[ObjectChange]) -> String {
    let done: Vec<&str> = applied
        .iter()
        .filter(|c| c.action != ChangeAction::Unchanged)
        .map(|c| c.object.as_str())
        .collect();
    if done.is_empty() {
        String::new()
    } else {
        format!(" (already applied: {})", done.join(", "))
    }
}

impl InterpretError {
    /// Changes that were made before the error.
    pub fn applied(&self) -> &[ObjectChange] {
        match self {
            InterpretError::Capability { applied, .. } => applied,
            InterpretError::Invalid(_) => &[],
        }
    }
}

/// How a Score ended in a run.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum ScoreStatus {
    /// Changes were made (or planned).
    Success,
    /// Nothing needed changing.
    Noop,
    /// The Score failed.
    Failed,
    /// Not run because an earlier Score failed.
    Skipped,
}

impl From<OutcomeStatus> for ScoreStatus {
    fn from(s: OutcomeStatus) -> Self {
        match s {
            OutcomeStatus::Success => ScoreStatus::Success,
            OutcomeStatus::Noop => ScoreStatus::Noop,
            OutcomeStatus::Failed => ScoreStatus::Failed,
        }
    }
}
