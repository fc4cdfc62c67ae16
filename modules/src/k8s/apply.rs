use harmony::domain::capability::{ApplyOptions, K8sClient, K8sObject};
use harmony::domain::{InterpretError, Outcome, report_progress};

/// Applies `objects` through the topology's `K8sClient` and turns the result into an Outcome.
///
/// A failure part-way keeps the changes already made in the error, so the report shows them.
pub async fn apply_objects<T: K8sClient + ?Sized>(
    topology: &T,
    subject: &str,
    objects: &[K8sObject],
) -> Result<Outcome, InterpretError> {
    report_progress(topology.apply_progress(&format!("{} object(s)", objects.len())));
    let changes = topology
        .apply(
            objects,
            &ApplyOptions {
                owner: Some(subject.to_string()),
                ..ApplyOptions::default()
            },
        )
        .await
        .map_err(|f| InterpretError::Capability {
            action: topology.apply_progress(subject),
            applied: f.applied,
            source: f.error,
        })?;
    Ok(Outcome::from_changes(changes))
}
