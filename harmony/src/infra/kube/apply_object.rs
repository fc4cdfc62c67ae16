//! One object's server-side apply, and the task a phase's applies run in.

use kube::api::{Api, DynamicObject, Patch, PatchParams, ValidationDirective};
use serde_json::Value;

use super::error::map;
use super::normalize::comparable;
use super::unchanged::provably_unchanged;
use crate::domain::capability::{CapabilityError, K8sObject};
use crate::domain::diff::field_changes;
use crate::domain::redact::redact_changes;
use crate::domain::{ChangeAction, ObjectChange};

/// How every object of a phase is applied: the same for all of them.
pub(super) struct PhaseRules {
    pub(super) force: bool,
    pub(super) dry_run: bool,
    pub(super) skip_unchanged: bool,
    pub(super) field_manager: String,
    /// The API server's URL, for reports and errors.
    pub(super) server: String,
}

/// A phase's applies, spawned; aborted if the apply awaiting them is dropped, so a cancelled
/// apply sends no more requests, as when they ran on the caller's task.
pub(super) struct PhaseTask<T>(tokio::task::JoinHandle<T>);

impl<T: Send + 'static> PhaseTask<T> {
    /// Runs `work` on the runtime's workers.
    pub(super) fn spawn(work: impl Future<Output = T> + Send + 'static) -> Self {
        Self(tokio::spawn(work))
    }

    /// The task's output; its panic is resumed here, on the caller's task.
    pub(super) async fn finish(mut self, server: &str) -> Result<T, CapabilityError> {
        match (&mut self.0).await {
            Ok(out) => Ok(out),
            Err(e) if e.is_panic() => std::panic::resume_unwind(e.into_panic()),
            Err(_) => Err(CapabilityError::Unreachable {
                server: server.to_string(),
                reason: "the apply was cancelled: the runtime is shutting down".into(),
            }),
        }
    }
}

impl<T> Drop for PhaseTask<T> {
    fn drop(&mut self) {
        self.0.abort();
    }
}

/// Server-side applies one object (dry-run in plan mode) and classifies the change.
/// `known` is the object's live state from the phase's LIST; `None` reads it with a GET.
pub(super) async fn apply_object(
    rules: &PhaseRules,
    api: &Api<DynamicObject>,
    object: &K8sObject,
    known: Option<Option<DynamicObject>>,
) -> Result<ObjectChange, CapabilityError> {
    let r = object.reference();
    let server = &rules.server;
    let before = match known {
        Some(before) => before,
        None => api.get_opt(&r.name).await.map_err(|e| map(r, server, e))?,
    };
    // Nothing to send when the live object provably is what this apply would make it.
    if rules.skip_unchanged
        && let Some(live) = &before
        && provably_unchanged(
            object.value(),
            &serde_json::to_value(live).unwrap_or(Value::Null),
            &rules.field_manager,
        )
    {
        return Ok(ObjectChange {
            object: r.to_string(),
            action: ChangeAction::Unchanged,
            location: Some(server.clone()),
            diff: Vec::new(),
            status: None,
        });
    }
    let mut params = PatchParams::apply(&rules.field_manager);
    params.force = rules.force;
    params.dry_run = rules.dry_run;
    // As kubectl does by default: a misspelt or unknown field is an error naming it, not
    // something the server silently drops.
    params.field_validation = Some(ValidationDirective::Strict);
    let after = api
        .patch(&r.name, &params, &Patch::Apply(object.value()))
        .await
        .map_err(|e| map(r, server, e))?;
    let (action, diff) = match before {
        None => (ChangeAction::Create, Vec::new()),
        Some(b) => {
            let after = comparable(&serde_json::to_value(after).unwrap_or(Value::Null));
            let before = comparable(&serde_json::to_value(b).unwrap_or(Value::Null));
            let diff = redact_changes(object.is_secret(), field_changes(&before, &after));
            if diff.is_empty() {
                (ChangeAction::Unchanged, diff)
            } else {
                (ChangeAction::Update, diff)
            }
        }
    };
    Ok(ObjectChange {
        object: r.to_string(),
        action,
        location: Some(server.clone()),
        diff,
        status: None,
    })
}
