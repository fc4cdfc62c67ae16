//! `PostgreSQLSwitchoverScore`: moves the primary of a multi-site cluster to another site with
//! CloudNativePG's protocol, so that no write is lost.
//!
//! The steps, each re-checked on a re-run so that an interrupted switchover resumes:
//! 1. refuse, before changing anything, unless the target streams from the primary and lags
//!    at most `maxReplicaLagBytes` behind it (the figure is in the refusal);
//! 2. demote the primary: its `Cluster` names the target as `spec.replica.primary`; the operator
//!    shuts it down cleanly and publishes `status.demotionToken`;
//! 3. promote the target: `spec.replica.primary` names itself and `spec.replica.promotionToken`
//!    is that token; the operator promotes it once it has replayed up to the demoted primary's
//!    shutdown checkpoint, and records the token in `status.lastPromotionToken`;
//! 4. point every other site at the target, and wait until the former primary streams from it.

mod live;
mod live_primary;
mod progress;
mod steps;
#[cfg(test)]
mod tests;

use async_trait::async_trait;
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;
use std::net::SocketAddr;
use std::time::Duration;

use harmony::domain::capability::{MultiSite, PostgreSQL};
use harmony::domain::interpret::{Interpret, InterpretName};
use harmony::domain::{
    ExecutionMode, InterpretError, Inventory, ObjectChange, Outcome, OutcomeStatus, Score,
    Topology, ValidationError, report_progress,
};
use harmony::types::Version;

pub use harmony::domain::capability::{
    DistributedCluster, DistributedPostgreSQL, Member, MemberRole, MemberState, ReplicaShape,
    member_name,
};
pub(crate) use live::{
    Pace, SiteRead, apply_role, observe, read_sites, require_distributed, wait_member,
};
pub(crate) use live_primary::classify;
pub use live_primary::{LivePrimary, live_primary};

pub(crate) use progress::newest_claimant;
use progress::{Progress, locate};

use super::primary_change::{
    default_poll, default_step_timeout, multisite_score, point_at, refuse_render, reported,
    step_pace,
};
use super::{MultisitePostgreSQLScore, MultisitePostgreSQLSpec};

/// Moves the primary of the cluster a [`MultisitePostgreSQLScore`] describes to the site `to`,
/// with CloudNativePG's demotion/promotion-token handshake (no write is lost). Every site of the
/// cluster must be reachable and exposed (`topology.replicaHosts`), and its `Cluster` in
/// CloudNativePG's distributed topology. Refused, before anything changes, when `to` does not
/// stream or lags more than `spec.maxReplicaLagBytes` behind the primary.
///
/// ```
/// use harmony::domain::Score;
/// use harmony::infra::default_topology::DefaultTopology;
/// use harmony::infra::multi_site::MultiSiteTopology;
/// use harmony_modules::postgresql::{MultisitePostgreSQLScore, PostgreSQLSwitchoverScore};
///
/// let mut multisite = MultisitePostgreSQLScore::new(
///     "finance-db", "tenant-a", "10Gi",
///     "site-paris", "finance-db-tenant-a.apps.site-paris.example.com",
///     &["site-newyork"],
/// );
/// multisite.spec.topology.replica_hosts.insert(
///     "site-newyork".into(),
///     "finance-db-tenant-a.apps.site-newyork.example.com".into(),
/// );
/// let mut switchover = PostgreSQLSwitchoverScore::new(&multisite, "site-newyork");
/// switchover.spec.max_replica_lag_bytes = 1024 * 1024; // refuse beyond 1 MiB behind
/// let scores: Vec<Box<dyn Score<MultiSiteTopology<DefaultTopology>>>> = vec![Box::new(switchover)];
/// # assert_eq!(scores[0].name(), "PostgreSQLSwitchover tenant-a/finance-db to site-newyork");
/// ```
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct PostgreSQLSwitchoverScore {
    /// The cluster's name on every site.
    pub name: String,
    /// Its namespace on every site.
    pub namespace: String,
    /// The multi-site cluster, as `MultisitePostgreSQLScore` applies it (every site with a host).
    pub spec: MultisitePostgreSQLSpec,
    /// The site that becomes the primary.
    pub to: String,
    /// How long each step (demotion, promotion, streaming) may take.
    #[serde(default = "default_step_timeout")]
    pub step_timeout_seconds: u64,
    /// Where status reads connect for a host instead of resolving it; the TLS server name and
    /// the certificate check still use the host (as `MultisitePostgreSQLScore`'s field).
    #[serde(skip)]
    pub status_connect_to: BTreeMap<String, SocketAddr>,
    /// How often a wait re-reads a `Cluster`.
    #[serde(skip, default = "default_poll")]
    pub poll_interval: Duration,
}

impl PostgreSQLSwitchoverScore {
    /// Moves the primary of `multisite`'s cluster to `to`.
    pub fn new(multisite: &MultisitePostgreSQLScore, to: impl Into<String>) -> Self {
        Self {
            name: multisite.name.clone(),
            namespace: multisite.namespace.clone(),
            spec: multisite.spec.clone(),
            to: to.into(),
            step_timeout_seconds: default_step_timeout(),
            status_connect_to: BTreeMap::new(),
            poll_interval: default_poll(),
        }
    }

    fn multisite(&self) -> MultisitePostgreSQLScore {
        multisite_score(&self.name, &self.namespace, &self.spec)
    }

    /// Fails unless `to` is an exposed site of `cluster` (the others must stream from it).
    fn check_target(&self, cluster: &DistributedCluster) -> Result<(), ValidationError> {
        let to = &self.to;
        match cluster.get(to) {
            None => {
                let sites: Vec<&str> = cluster.members().iter().map(|m| m.site.as_str()).collect();
                return Err(ValidationError::new(
                    "to",
                    format!("{to:?} is not a site of the cluster"),
                    format!("use one of its sites: {}", sites.join(", ")),
                ));
            }
            Some(m) if m.exposure.is_none() => {
                return Err(ValidationError::new(
                    format!("topology.replicaHosts.{to}"),
                    format!(
                        "site {to} has no host: once it is the primary, the other sites could not stream from it"
                    ),
                    format!(
                        "give {to} its host in topology.replicaHosts and apply MultisitePostgreSQLScore, so that it is exposed"
                    ),
                ));
            }
            Some(_) => {}
        }
        if self.step_timeout_seconds == 0 {
            return Err(ValidationError::new(
                "stepTimeoutSeconds",
                "is 0",
                "give each step at least a few seconds (default 300)",
            ));
        }
        Ok(())
    }
}

impl<T> Score<T> for PostgreSQLSwitchoverScore
where
    T: Topology + MultiSite + 'static,
    T::Site: PostgreSQL + DistributedPostgreSQL,
{
    fn name(&self) -> String {
        format!(
            "PostgreSQLSwitchover {}/{} to {}",
            self.namespace, self.name, self.to
        )
    }

    fn create_interpret(&self) -> Box<dyn Interpret<T>> {
        Box::new(self.clone())
    }

    fn parameters(&self) -> serde_json::Value {
        serde_json::to_value(self).unwrap_or_default()
    }

    fn validate(&self) -> Result<(), ValidationError> {
        let multisite = self.multisite();
        <MultisitePostgreSQLScore as Score<T>>::validate(&multisite)?;
        self.check_target(&multisite.distributed()?)
    }

    fn validate_on(&self, topology: &T) -> Result<(), ValidationError> {
        <MultisitePostgreSQLScore as Score<T>>::validate_on(&self.multisite(), topology)?;
        topology.check_site("to", &self.to)
    }
}

#[async_trait]
impl<T> Interpret<T> for PostgreSQLSwitchoverScore
where
    T: Topology + MultiSite + 'static,
    T::Site: PostgreSQL + DistributedPostgreSQL,
{
    fn name(&self) -> InterpretName {
        InterpretName("PostgreSQLSwitchover")
    }

    fn version(&self) -> Version {
        crate::interpret_support::version()
    }

    async fn execute(&self, _: &Inventory, topology: &T) -> Result<Outcome, InterpretError> {
        let multisite = self.multisite();
        let members = multisite.distributed_on(topology).await?;
        self.check_target(&members)?;
        let owner = multisite.owners()[0].clone();
        refuse_render(
            topology,
            "to",
            "switchover",
            "run with --kubeconfig FILE (add --plan to see the first step without changing anything)",
        )?;
        let reads = read_sites(topology, &members).await;
        let mut states = BTreeMap::new();
        for (site, read) in &reads {
            states.insert(
                site.clone(),
                require_distributed(&members, site, read)?.clone(),
            );
        }
        let to = self.to.as_str();
        let pace = step_pace(self.step_timeout_seconds, self.poll_interval);
        let mut changes: Vec<ObjectChange> = Vec::new();
        let mut details = Vec::new();
        let progress = locate(&members, &states, to)?;
        let from = match &progress {
            Progress::Start { from } => {
                details.push(self.check_lag(topology, &members, from).await?);
                Some(from.clone())
            }
            Progress::Demoting { from } | Progress::Promoting { from, .. } => {
                details.push(format!("resuming the switchover from {from} to {to}"));
                Some(from.clone())
            }
            Progress::Promoted { from } => from.clone(),
        };
        let handover = MemberRole::primary_is(to);

        if let (Some(from), Progress::Start { .. } | Progress::Demoting { .. }) = (&from, &progress)
        {
            report_progress(format!("demoting {from}: it hands over to {to}"));
            apply_role(
                topology,
                &members,
                from,
                &handover,
                states.get(from),
                &owner,
                &mut changes,
            )
            .await?;
            if topology.mode() == ExecutionMode::Plan {
                details.push(format!(
                    "plan: once {from} is demoted, {to} is promoted with {from}'s status.demotionToken, then every other site streams from {to}"
                ));
                return Ok(reported(changes, details));
            }
        }
        let token = match (&from, &progress) {
            (_, Progress::Promoting { token, .. }) => Some(token.clone()),
            (Some(from), Progress::Start { .. } | Progress::Demoting { .. }) => {
                report_progress(format!("waiting for {from}'s demotion token"));
                let what = format!("status.demotionToken on the Cluster on {from}");
                let token = wait_member(topology, &members, from, &what, pace, &changes, |s| {
                    s.demotion_done().map(String::from)
                })
                .await?;
                Some(token)
            }
            _ => None,
        };
        if let (Some(token), Some(from)) = (&token, &from) {
            report_progress(format!("promoting {to} with {from}'s demotion token"));
            let promote = MemberRole {
                primary: to.to_string(),
                promotion_token: Some(token.clone()),
            };
            apply_role(
                topology,
                &members,
                to,
                &promote,
                states.get(to),
                &owner,
                &mut changes,
            )
            .await?;
            let what = format!(
                "status.lastPromotionToken equal to spec.replica.promotionToken on the Cluster on {to}"
            );
            wait_member(topology, &members, to, &what, pace, &changes, |s| {
                s.promoted_with(token).then_some(())
            })
            .await?;
            details.push(format!(
                "{to} is the primary: {from} was shut down cleanly and {to} promoted only after replaying everything up to {from}'s shutdown checkpoint (CloudNativePG's promotion token), so no write was lost"
            ));
        }
        let target = member_name(&self.name, to);
        let others = states
            .iter()
            .filter(|(site, state)| {
                *site != to && Some(*site) != from.as_ref() && state.says_primary() != Some(&target)
            })
            .collect();
        point_at(topology, &members, to, others, &owner, &mut changes).await?;
        if let Some(from) = &from {
            details.push(
                self.wait_streaming(topology, &members, from, &changes)
                    .await?,
            );
        }
        if self.spec.topology.primary.site != to {
            details.push(format!(
                "declare it: in MultisitePostgreSQLScore set topology.primary.site to {to:?} and list {:?} among topology.replicas before applying it again: applied with the former primary, it would promote that one without a token, a failover",
                self.spec.topology.primary.site
            ));
        }
        let mut outcome = reported(changes, details);
        if outcome.status == OutcomeStatus::Noop {
            outcome.message = format!("{to} is already the primary");
        }
        Ok(outcome)
    }
}
