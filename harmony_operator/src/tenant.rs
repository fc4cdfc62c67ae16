//! The `Tenant` controller: each cluster-scoped `Tenant` resource becomes a [`TenantScore`] run
//! on the control plane's admin client ([`TenantAdminTopology`]); no site is involved. The
//! Ready condition says what changed, or why not (a quota over the tenant's cap carries the
//! control plane's message naming the cap). Deleting the resource leaves the tenant and its
//! projects on the control plane: it has no route to remove them.

use futures::StreamExt;
use kube::ResourceExt;
use kube::api::{Api, Patch, PatchParams};
use kube::runtime::controller::{Action, Controller};
use kube::runtime::{WatchStreamExt, predicates, reflector, watcher};
use std::sync::Arc;
use std::time::Duration;

use harmony::domain::capability::CapabilityError;
use harmony::domain::{InterpretError, Inventory, Outcome, Score, ValidationError};
use harmony::infra::control_plane::ControlPlaneClient;
use harmony::infra::tenant_admin_topology::TenantAdminTopology;
use harmony_modules::tenant::{Tenant, TenantScore};

use crate::conditions::{Verdict, status};
use crate::controller::{Context, ReconcileError, error_policy};

type Topology<'a> = TenantAdminTopology<&'a ControlPlaneClient>;

/// Why a run did not reach the intent.
enum Failed {
    /// The spec is invalid (names, quantities): nothing was sent.
    Spec(ValidationError),
    /// The Score failed on the control plane, or found the spec conflicting with what it holds.
    Run(InterpretError),
}

/// What one run concluded, and when to look again (`None`: an error, retried with back-off;
/// `Some(Duration::MAX)`: only on the next edit).
fn judge(result: Result<Outcome, Failed>, resync: Duration) -> (Verdict, Option<Duration>) {
    let not_ready = |reason, message: String| Verdict {
        ready: false,
        progressing: false,
        reason,
        message,
    };
    match result {
        Ok(outcome) => {
            let message = std::iter::once(outcome.message)
                .chain(outcome.details)
                .collect::<Vec<_>>()
                .join("; ");
            let v = Verdict {
                ready: true,
                progressing: false,
                reason: "Reconciled",
                message,
            };
            (v, Some(resync))
        }
        // Names or quantities: nothing changes until the resource is edited.
        Err(Failed::Spec(e)) => (not_ready("InvalidSpec", e.to_string()), Some(Duration::MAX)),
        // A conflict with what the control plane holds (a project's namespace): it may be
        // resolved there too, so look again on the resync.
        Err(Failed::Run(InterpretError::Invalid(e))) => {
            (not_ready("InvalidSpec", e.to_string()), Some(resync))
        }
        Err(Failed::Run(e @ InterpretError::Capability { .. })) => {
            let reason = match &e {
                InterpretError::Capability {
                    source: CapabilityError::Rejected { .. },
                    ..
                } => "Rejected",
                InterpretError::Capability {
                    source: CapabilityError::Forbidden { .. },
                    ..
                } => "Forbidden",
                InterpretError::Capability {
                    source: CapabilityError::Unreachable { .. } | CapabilityError::Timeout { .. },
                    ..
                } => "ControlPlaneUnreachable",
                _ => "ApplyFailed",
            };
            (not_ready(reason, e.to_string()), None)
        }
    }
}

/// Validates the resource's Score and runs it on the control plane.
async fn run(o: &Tenant, control_plane: &ControlPlaneClient) -> Result<Outcome, Failed> {
    let score = TenantScore::from_resource(o);
    Score::<Topology>::validate(&score).map_err(Failed::Spec)?;
    let topology = TenantAdminTopology::new(control_plane);
    Score::<Topology>::create_interpret(&score)
        .execute(&Inventory::empty(), &topology)
        .await
        .map_err(Failed::Run)
}

async fn reconcile(o: Arc<Tenant>, ctx: Arc<Context>) -> Result<Action, ReconcileError> {
    let key = crate::controller::key(o.as_ref());
    if let Some(gate) = &ctx.gate
        && !gate.valid()
    {
        log::debug!("{key}: skipped, the lease is not confirmed");
        return Ok(Action::requeue(Duration::from_secs(1)));
    }
    let (verdict, next) = match ctx.config.control_plane.as_ref() {
        None => (
            Verdict {
                ready: false,
                progressing: false,
                reason: "NoControlPlane",
                message: "a Tenant needs the operator to run with a control plane (harmony-control-plane --operator-kubeconfig)".into(),
            },
            Some(Duration::MAX),
        ),
        Some(cp) => judge(run(o.as_ref(), cp).await, ctx.config.resync),
    };
    let generation = o.metadata.generation;
    log::info!(
        "reconciled Tenant {} (generation {}): Ready={} {}",
        o.name_any(),
        generation.unwrap_or_default(),
        verdict.ready,
        verdict.reason
    );
    let new_status = status(o.status.as_ref(), generation, &verdict, None, vec![], false);
    Api::<Tenant>::all(ctx.client.clone())
        .patch_status(
            &o.name_any(),
            &PatchParams::default(),
            &Patch::Merge(serde_json::json!({ "status": new_status })),
        )
        .await
        .map_err(|e| {
            ReconcileError(format!(
                "writing the status of Tenant {}: {e}",
                o.name_any()
            ))
        })?;
    match next {
        Some(d) if d == Duration::MAX => Ok(Action::await_change()),
        Some(d) => {
            ctx.failures
                .lock()
                .unwrap_or_else(|e| e.into_inner())
                .remove(&key);
            Ok(Action::requeue(d))
        }
        None => Err(ReconcileError(verdict.message)),
    }
}

/// Runs the `Tenant` controller on `ctx` until the future is dropped. Only spec edits trigger a
/// reconcile (the status it writes must not); periodic work comes from the requeues.
pub(crate) async fn control(ctx: Arc<Context>) {
    let (reader, writer) = reflector::store();
    let changes = watcher(
        Api::<Tenant>::all(ctx.client.clone()),
        watcher::Config::default(),
    )
    .default_backoff()
    .reflect(writer)
    .applied_objects()
    .predicate_filter(predicates::generation, Default::default());
    Controller::for_stream(changes, reader)
        .run(reconcile, error_policy::<Tenant>, ctx)
        .for_each(|result| async move {
            if let Err(e) = result {
                log::debug!("reconcile: {e}");
            }
        })
        .await;
}

#[cfg(test)]
mod tests {
    use super::*;
    use harmony::domain::{ChangeAction, ObjectChange};

    const RESYNC: Duration = Duration::from_secs(300);

    #[test]
    fn a_run_is_ready_with_its_changes_and_a_refusal_keeps_the_control_planes_words() {
        let outcome = Outcome::from_changes(vec![ObjectChange {
            object: "control-plane Tenant acme".into(),
            action: ChangeAction::Create,
            location: None,
            diff: vec![],
            status: None,
        }]);
        let (v, next) = judge(Ok(outcome), RESYNC);
        assert!(v.ready);
        assert_eq!(
            (v.reason, v.message.as_str(), next),
            ("Reconciled", "1 create", Some(RESYNC))
        );

        let over = "quota: cpu over tenant \"acme\"'s cap in region \"eu\": the cap is 4";
        let refused = InterpretError::Capability {
            action: "updating control-plane ProjectQuota acme/web eu for tenant acme".into(),
            applied: vec![],
            source: CapabilityError::Rejected {
                object: "project acme/web's quota in region eu".into(),
                server: "control plane https://cp".into(),
                message: over.into(),
            },
        };
        let (v, next) = judge(Err(Failed::Run(refused)), RESYNC);
        assert!(!v.ready);
        assert_eq!((v.reason, next), ("Rejected", None));
        assert!(v.message.contains(over), "{}", v.message);
    }

    #[test]
    fn an_invalid_spec_waits_for_an_edit_and_a_namespace_conflict_for_the_resync() {
        let invalid = |field: &str| ValidationError::new(field, "bad", "fix it");
        let (v, next) = judge(Err(Failed::Spec(invalid("metadata.name"))), RESYNC);
        assert_eq!((v.reason, next), ("InvalidSpec", Some(Duration::MAX)));
        assert!(v.message.contains("metadata.name"), "{}", v.message);
        let conflict = InterpretError::Invalid(invalid("spec.projects[0].namespace"));
        let (v, next) = judge(Err(Failed::Run(conflict)), RESYNC);
        assert_eq!((v.reason, next), ("InvalidSpec", Some(RESYNC)));
    }
}
