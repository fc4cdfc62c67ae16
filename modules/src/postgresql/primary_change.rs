//! The steps [`PostgreSQLSwitchoverScore`](super::PostgreSQLSwitchoverScore) and
//! [`PostgreSQLFailoverScore`](super::PostgreSQLFailoverScore) share around a change of primary:
//! the defaults of their settings, the multi-site Score they act on, the refusal to run in
//! render mode, pointing the other sites at the new primary, and the outcome they report.
//! Reading each site's `Cluster`, applying a role and waiting on a site are in
//! `switchover::live`.

use std::time::Duration;

use harmony::domain::capability::{DistributedCluster, DistributedPostgreSQL, MemberRole};
use harmony::domain::capability::{MemberState, MultiSite};
use harmony::domain::{
    ExecutionMode, InterpretError, ObjectChange, Outcome, Topology, ValidationError,
    report_progress,
};

use super::switchover::{Pace, apply_role};
use super::{MultisitePostgreSQL, MultisitePostgreSQLScore, MultisitePostgreSQLSpec};

/// How long each step (a demotion, a promotion, streaming) may take by default, in seconds.
pub(super) fn default_step_timeout() -> u64 {
    300
}

/// How often a wait re-reads a `Cluster` by default.
pub(super) fn default_poll() -> Duration {
    Duration::from_secs(2)
}

/// The multi-site Score of cluster `name` in `namespace` with `spec`, as applied: built through
/// the resource, so the Score's fields outside its spec keep their defaults.
pub(super) fn multisite_score(
    name: &str,
    namespace: &str,
    spec: &MultisitePostgreSQLSpec,
) -> MultisitePostgreSQLScore {
    let mut resource = MultisitePostgreSQL::new(name, spec.clone());
    resource.metadata.namespace = Some(namespace.to_string());
    MultisitePostgreSQLScore::from_resource(&resource)
}

/// Each wait of a step takes at most `step_timeout_seconds`, re-reading every `poll`.
pub(super) fn step_pace(step_timeout_seconds: u64, poll: Duration) -> Pace {
    Pace {
        timeout: Duration::from_secs(step_timeout_seconds),
        poll,
    }
}

/// Refuses render mode, which has no running cluster to act on: the error names `field` and
/// says that a `change` ("switchover", "failover") needs a cluster, and how to run (`fix`).
pub(super) fn refuse_render<T: Topology>(
    topology: &T,
    field: &str,
    change: &str,
    fix: &str,
) -> Result<(), ValidationError> {
    if topology.mode() == ExecutionMode::Render {
        return Err(ValidationError::new(
            field,
            format!("a {change} acts on running clusters, and render mode has none"),
            fix,
        ));
    }
    Ok(())
}

/// Points each of `sites` (with what its `Cluster` said) at `primary`, in order, saying so as
/// progress, and records the changes in `changes`. Returns the sites pointed.
pub(super) async fn point_at<'a, T>(
    topology: &T,
    members: &DistributedCluster,
    primary: &str,
    sites: Vec<(&'a String, &'a MemberState)>,
    owner: &str,
    changes: &mut Vec<ObjectChange>,
) -> Result<Vec<&'a String>, InterpretError>
where
    T: Topology + MultiSite,
    T::Site: DistributedPostgreSQL,
{
    let role = MemberRole::primary_is(primary);
    let mut pointed = Vec::new();
    for (site, state) in sites {
        report_progress(format!("pointing {site} at {primary}"));
        apply_role(topology, members, site, &role, Some(state), owner, changes).await?;
        pointed.push(site);
    }
    Ok(pointed)
}

/// The outcome of `changes`, with `details`.
pub(super) fn reported(changes: Vec<ObjectChange>, details: Vec<String>) -> Outcome {
    let mut outcome = Outcome::from_changes(changes);
    outcome.details = details;
    outcome
}
