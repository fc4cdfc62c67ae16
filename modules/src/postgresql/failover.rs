//! `PostgreSQLFailoverScore`: when the primary's site is lost, promotes the most advanced
//! replica and fences the former primary, saying how much may be lost.
//!
//! A failover is what remains when a switchover cannot run: the primary cannot hand over, so
//! the promoted replica has only what it had replayed. Writes the former primary accepted after
//! that position may be lost, and the report names the position. Run it on a topology of the
//! sites that can be reached (the lost site may be left out). What it does:
//! 1. reads every reachable site's `Cluster`; if a reachable primary still answers SQL as a
//!    primary there is nothing to fail over (it only points stray sites at it);
//! 2. picks the replica that replayed the most WAL (`pg_last_wal_replay_lsn()`, read over each
//!    replica's own host) and asks the operator to confirm, naming that position (a terminal
//!    prompt; `--yes` without one; never a hang without a terminal);
//! 3. promotes it (`spec.replica.primary` names itself, without a token: CloudNativePG promotes
//!    at once) and waits until the operator reports the new timeline;
//! 4. points the other replicas at it, and fences the former primary when its site answers:
//!    its `Cluster` names the new primary, so the operator fences its instances, shuts it down
//!    and restarts it as a replica; it can never come back as a second primary.

mod choose;

use async_trait::async_trait;
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;
use std::net::SocketAddr;
use std::time::Duration;

use harmony::domain::capability::postgresql::{Reading, SiteRole};
use harmony::domain::capability::{CapabilityError, MultiSite, PostgreSQL};
use harmony::domain::interpret::{Interpret, InterpretName};
use harmony::domain::operator::OperatorHandle;
use harmony::domain::{
    ExecutionMode, InterpretError, Inventory, Outcome, Score, Topology, ValidationError,
    report_progress,
};
use harmony::types::Version;

use super::primary_change::{
    default_poll, default_step_timeout, multisite_score, point_at, refuse_render, reported,
    step_pace,
};
use super::switchover::{
    DistributedPostgreSQL, MemberRole, SiteRead, apply_role, newest_claimant, read_sites,
    require_distributed, wait_member,
};
use super::{MultisitePostgreSQLScore, MultisitePostgreSQLSpec};
use crate::interpret_support::capability_error;
use choose::{declare_line, fence_line};

/// Promotes the most advanced replica of the cluster a [`MultisitePostgreSQLScore`] describes
/// when its primary's site is lost, and fences the former primary. Writes the former primary
/// accepted after the promoted replica's last replayed position may be lost: the report names
/// that position. An apply asks the operator to confirm (`--yes` without a terminal).
///
/// ```
/// use harmony::domain::{RunContext, Score};
/// use harmony::infra::default_topology::DefaultTopology;
/// use harmony::infra::multi_site::MultiSiteTopology;
/// use harmony_modules::postgresql::{MultisitePostgreSQLScore, PostgreSQLFailoverScore};
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
/// let failover = PostgreSQLFailoverScore::new(&multisite);
/// // site-paris is lost: a topology of the sites that can still be reached. Built from the
/// // run's context, it asks the run's operator (a terminal prompt, or --yes).
/// let ctx = RunContext::default();
/// let reachable = MultiSiteTopology::from_context("finance", &["site-newyork"], &ctx).unwrap();
/// let scores: Vec<Box<dyn Score<MultiSiteTopology<DefaultTopology>>>> = vec![Box::new(failover)];
/// # assert_eq!(scores[0].name(), "PostgreSQLFailover tenant-a/finance-db");
/// # assert!(scores[0].validate_on(&reachable).is_ok());
/// ```
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct PostgreSQLFailoverScore {
    /// The cluster's name on every site.
    pub name: String,
    /// Its namespace on every site.
    pub namespace: String,
    /// The multi-site cluster, as `MultisitePostgreSQLScore` applies it (every site with a host).
    pub spec: MultisitePostgreSQLSpec,
    /// How long the promotion may take.
    #[serde(default = "default_step_timeout")]
    pub step_timeout_seconds: u64,
    /// Where status reads connect for a host instead of resolving it; the TLS server name and
    /// the certificate check still use the host (as `MultisitePostgreSQLScore`'s field).
    #[serde(skip)]
    pub status_connect_to: BTreeMap<String, SocketAddr>,
    /// How often a wait re-reads a `Cluster`.
    #[serde(skip, default = "default_poll")]
    pub poll_interval: Duration,
    /// Who confirms the promotion (a terminal prompt, or `--yes`); `None` asks the topology's
    /// operator (`MultiSiteTopology::from_context` takes the run's), else nobody, and then an
    /// apply is refused before any change.
    #[serde(skip)]
    pub operator: Option<OperatorHandle>,
}

impl PostgreSQLFailoverScore {
    /// Fails over `multisite`'s cluster; set [`Self::operator`] to the run's operator.
    pub fn new(multisite: &MultisitePostgreSQLScore) -> Self {
        Self {
            name: multisite.name.clone(),
            namespace: multisite.namespace.clone(),
            spec: multisite.spec.clone(),
            step_timeout_seconds: default_step_timeout(),
            status_connect_to: BTreeMap::new(),
            poll_interval: default_poll(),
            operator: None,
        }
    }

    /// The same Score, confirmed by `operator` (the run's: `RunContext::operator`).
    pub fn with_operator(mut self, operator: OperatorHandle) -> Self {
        self.operator = Some(operator);
        self
    }

    fn multisite(&self) -> MultisitePostgreSQLScore {
        multisite_score(&self.name, &self.namespace, &self.spec)
    }
}

impl<T> Score<T> for PostgreSQLFailoverScore
where
    T: Topology + MultiSite + 'static,
    T::Site: PostgreSQL + DistributedPostgreSQL,
{
    fn name(&self) -> String {
        format!("PostgreSQLFailover {}/{}", self.namespace, self.name)
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
        multisite.distributed().map(|_| ())
    }

    /// The lost site may be missing from the topology; at least one other site must be there.
    fn validate_on(&self, topology: &T) -> Result<(), ValidationError> {
        let sites = std::iter::once(&self.spec.topology.primary.site)
            .chain(self.spec.topology.replicas.iter().map(|r| &r.site));
        if sites.clone().filter(|s| topology.site(s).is_some()).count() == 0 {
            let listed: Vec<&str> = sites.map(String::as_str).collect();
            return Err(ValidationError::new(
                "topology",
                format!(
                    "the topology has none of the cluster's sites ({})",
                    listed.join(", ")
                ),
                "build the topology from the sites that can still be reached",
            ));
        }
        Ok(())
    }
}

#[async_trait]
impl<T> Interpret<T> for PostgreSQLFailoverScore
where
    T: Topology + MultiSite + 'static,
    T::Site: PostgreSQL + DistributedPostgreSQL,
{
    fn name(&self) -> InterpretName {
        InterpretName("PostgreSQLFailover")
    }

    fn version(&self) -> Version {
        crate::interpret_support::version()
    }

    async fn execute(&self, _: &Inventory, topology: &T) -> Result<Outcome, InterpretError> {
        let multisite = self.multisite();
        let declared = &self.spec.topology.primary.site;
        let members = if topology.site(declared).is_some() {
            multisite.distributed_on(topology).await?
        } else if multisite.needs_site_domain() {
            return Err(ValidationError::new(
                "topology.primary.host",
                format!("the Route host of {declared} comes from its ingress domain, which cannot be read while {declared} is not in the topology"),
                "set topology.primary.host (or appsDomain) to the host it had, then re-run",
            )
            .into());
        } else {
            multisite.distributed()?
        };
        let owner = multisite.owners()[0].clone();
        refuse_render(
            topology,
            "topology",
            "failover",
            "run with --kubeconfig FILE (add --plan to see what it would promote)",
        )?;
        let reads = read_sites(topology, &members).await;
        let mut found = BTreeMap::new();
        let mut unreachable = BTreeMap::new();
        for (site, read) in &reads {
            match read {
                SiteRead::Found(_) => {
                    found.insert(
                        site.clone(),
                        require_distributed(&members, site, read)?.clone(),
                    );
                }
                SiteRead::Absent => {
                    unreachable.insert(site.clone(), "not in the topology".to_string());
                }
                SiteRead::Unreachable(why) => {
                    unreachable.insert(site.clone(), why.clone());
                }
                SiteRead::NoCluster => {
                    unreachable.insert(site.clone(), "it has no Cluster".to_string());
                }
            }
        }
        let mut changes = Vec::new();
        let mut details = Vec::new();
        if let Some(primary) = newest_claimant(&found)? {
            let probe = self
                .observe(topology, &members, &primary, SiteRole::Primary)
                .await;
            match probe.sql.value() {
                Some(r) if !r.in_recovery => {
                    return self
                        .follow_up(topology, &members, &primary, &found, &unreachable, &owner)
                        .await;
                }
                Some(_) => details.push(format!(
                    "{primary} names itself primary but its PostgreSQL is in recovery"
                )),
                None => {
                    if let Reading::NotRead(why) = &probe.sql {
                        details.push(format!(
                            "{primary} names itself primary but does not answer: {why}"
                        ));
                    }
                }
            }
            unreachable.insert(
                primary.clone(),
                "its PostgreSQL does not answer as a primary".into(),
            );
        }
        let lost = self.lost_primary(&members, &found, &unreachable)?;
        let candidate = self
            .most_advanced(topology, &members, &found, &lost)
            .await?;
        let (to, lsn) = (candidate.site.as_str(), candidate.replay);
        if !candidate.passed_over.is_empty() {
            details.push(format!(
                "{to} replayed the most (up to {lsn}); not chosen: {}",
                candidate.passed_over.join("; ")
            ));
        }
        let loss = format!(
            "writes that {lost} accepted after {lsn} (the last position {to} had replayed) may be lost"
        );
        if topology.mode() == ExecutionMode::Apply {
            let question = format!(
                "The primary {lost} cannot be used ({}). Promote {to}, which replayed up to {lsn}? {}{}, and {lost} must be rebuilt from {to}.",
                unreachable.get(&lost).map_or("unreachable", String::as_str),
                loss[..1].to_uppercase(),
                &loss[1..]
            );
            let confirmed = self.confirm(topology, &question).map_err(|e| {
                capability_error(
                    "asking the operator to confirm the failover; nothing was changed",
                    &[],
                )(CapabilityError::Unsupported {
                    what: "a failover without confirmation".into(),
                    backend: "the operator".into(),
                    reason: e.to_string(),
                })
            })?;
            if !confirmed {
                let mut o = Outcome::failed(format!(
                    "failover to {to} not confirmed; nothing was changed"
                ));
                o.details = vec![loss];
                return Ok(o);
            }
        }
        report_progress(format!("promoting {to} (replayed up to {lsn})"));
        let role = MemberRole::primary_is(to);
        apply_role(
            topology,
            &members,
            to,
            &role,
            Some(&candidate.state),
            &owner,
            &mut changes,
        )
        .await?;
        if topology.mode() == ExecutionMode::Plan {
            details.push(format!("plan: {to} would be promoted; {loss}"));
            return Ok(reported(changes, details));
        }
        let before = candidate.state.timeline;
        let what = format!(
            "a new timeline (status.timelineID above {}) on the Cluster on {to}",
            before.map_or("none".into(), |t| t.to_string())
        );
        let pace = step_pace(self.step_timeout_seconds, self.poll_interval);
        wait_member(topology, &members, to, &what, pace, &changes, |s| {
            (s.claims_primary() && s.timeline > before && s.timeline.is_some()).then_some(())
        })
        .await?;
        details.push(format!("{to} is the primary now (a failover: promoted without the former primary's demotion token)"));
        details.push(format!("DATA LOSS WARNING: {loss}"));
        let others = found.iter().filter(|(site, _)| *site != to).collect();
        point_at(topology, &members, to, others, &owner, &mut changes).await?;
        details.push(fence_line(
            &lost,
            to,
            &lsn.to_string(),
            found.contains_key(&lost),
            unreachable.get(&lost),
        ));
        details.push(declare_line(&self.spec.topology.primary.site, to));
        Ok(reported(changes, details))
    }
}
