//! The multi-site cluster as CloudNativePG's distributed topology: every site's `Cluster` lists
//! the sites it may stream from and names the primary, so that a switchover (or a failover) can
//! move the primary by telling every site another one. This file holds what the apply does with
//! that: the live-primary check before anything changes, and the copies of every exposed site's
//! replication secrets to every other site.

use std::collections::BTreeMap;

use harmony::domain::capability::{
    CredentialsLookup, DistributedCluster, DistributedPostgreSQL, MemberState, MultiSite,
    PostgreSQL, ReplicationCredentials, ReplicationSource,
};
use harmony::domain::{
    ExecutionMode, InterpretError, ObjectChange, Topology, ValidationError, report_progress,
};

use super::{MultisitePostgreSQLScore, Resolved, on_site, site};
use crate::interpret_support::capability_error;
use crate::postgresql::switchover::{LivePrimary, classify};

impl MultisitePostgreSQLScore {
    /// The cluster across its sites: the declared primary with its exposure, each replica with
    /// its own when `topology.replicaHosts` names its host. A Route host that comes from the
    /// primary site's ingress domain is resolved against `topology` (a read).
    pub async fn distributed_on<T>(
        &self,
        topology: &T,
    ) -> Result<DistributedCluster, InterpretError>
    where
        T: Topology + MultiSite,
        T::Site: PostgreSQL,
    {
        Ok(distributed(&self.resolve_on(topology).await?)?)
    }

    /// [`Self::distributed_on`] without reading any site: a Route host that would come from the
    /// primary site's ingress domain stands in as `<name>-<namespace>.ingress-domain.invalid`.
    pub fn distributed(&self) -> Result<DistributedCluster, ValidationError> {
        let stand_in = self.needs_site_domain().then_some("ingress-domain.invalid");
        distributed(&self.resolve_with(stand_in)?)
    }
}

/// The sites of `r` as members of the distributed topology.
pub(super) fn distributed(r: &Resolved) -> Result<DistributedCluster, ValidationError> {
    let mut sites = vec![(r.primary_site.clone(), Some(r.source.exposure.clone()))];
    sites.extend(
        r.replica_sites
            .iter()
            .cloned()
            .zip(r.replica_exposures.iter().cloned()),
    );
    DistributedCluster::new(r.replica.clone(), sites)
}

/// Every site's live `Cluster` (absent ones left out), after checking that the live primary is
/// the declared one. Re-applying the declaration with another primary than the live one would
/// promote the declared site without a token: a failover, which the former primary only
/// survives rebuilt. Clusters not yet in the distributed topology (first apply, or the standalone
/// replica clusters Harmony rendered before) take the declared primary as it is.
pub(super) async fn live_states<T>(
    score: &MultisitePostgreSQLScore,
    cluster: &DistributedCluster,
    topology: &T,
) -> Result<BTreeMap<String, MemberState>, InterpretError>
where
    T: Topology + MultiSite,
    T::Site: DistributedPostgreSQL,
{
    let mut states = BTreeMap::new();
    if topology.mode() == ExecutionMode::Render {
        return Ok(states);
    }
    for m in cluster.members() {
        let state = site(topology, &m.site)?
            .member_state(cluster.cluster())
            .await
            .map_err(capability_error(
                format!("reading the Cluster on {} (where is the primary?)", m.site),
                &[],
            ))?;
        if let Some(state) = state {
            states.insert(m.site.clone(), state);
        }
    }
    let declared = &score.spec.topology.primary.site;
    let field = "topology.primary.site";
    match classify(cluster.cluster(), &states)? {
        LivePrimary::Absent | LivePrimary::NotDistributed => Ok(states),
        LivePrimary::Primary(live) if live == *declared => Ok(states),
        LivePrimary::Primary(live) => Err(ValidationError::new(
            field,
            format!(
                "the live primary is {live} (its Cluster names itself primary), not {declared}; applying this Score would promote {declared} without a demotion token, and {live} would have to be rebuilt"
            ),
            format!(
                "set topology.primary.site to {live:?} (and list {declared:?} among the replicas), or move the primary to {declared} with PostgreSQLSwitchoverScore first"
            ),
        )
        .into()),
        LivePrimary::Switching { from, to } => Err(ValidationError::new(
            field,
            format!(
                "a switchover is under way (from {} to {}): no site's Cluster is the primary yet",
                from.as_deref().unwrap_or("?"),
                to.as_deref().unwrap_or("?")
            ),
            "finish it with PostgreSQLSwitchoverScore (it resumes where it stopped), then declare the new primary",
        )
        .into()),
    }
}

/// Reads the replication secrets of every exposed site (waiting up to the Score's timeout in
/// apply mode) and copies them to every other site, one apply per site. Returns why copies were
/// left out, if any were.
pub(super) async fn copy_credentials<T>(
    r: &Resolved,
    cluster: &DistributedCluster,
    topology: &T,
    primary: Option<ReplicationCredentials>,
    owner: &str,
    changes: &mut Vec<ObjectChange>,
) -> Result<Vec<String>, InterpretError>
where
    T: Topology + MultiSite,
    T::Site: PostgreSQL + DistributedPostgreSQL,
{
    let mut found: Vec<(String, ReplicationSource, ReplicationCredentials)> = Vec::new();
    let mut missing = Vec::new();
    if let (Some(c), Some(source)) = (primary, cluster.source(&r.primary_site)) {
        found.push((r.primary_site.clone(), source, c));
    }
    for (name, exposure) in r.replica_sites.iter().zip(&r.replica_exposures) {
        let (Some(_), Some(source)) = (exposure, cluster.source(name)) else {
            continue;
        };
        report_progress(format!("replication secrets of {name}"));
        let lookup = site(topology, name)?
            .replication_credentials(cluster.cluster(), r.timeout)
            .await
            .map_err(capability_error(
                format!("waiting on {name} for the operator's replication secrets"),
                changes,
            ))?;
        match lookup {
            CredentialsLookup::Found(c) => found.push((name.clone(), source, c)),
            CredentialsLookup::NotObservable(why) => missing.push(why),
        }
    }
    for m in cluster.members() {
        let sources: Vec<(ReplicationSource, ReplicationCredentials)> = found
            .iter()
            .filter(|(from, ..)| *from != m.site)
            .map(|(_, s, c)| (s.clone(), c.clone()))
            .collect();
        if sources.is_empty() {
            continue;
        }
        let applied = site(topology, &m.site)?
            .store_credentials(cluster.cluster(), &sources, owner)
            .await
            .map_err(|f| {
                let mut done = changes.clone();
                done.extend(on_site(&m.site, f.applied));
                capability_error(format!("copying replication secrets to {}", m.site), &done)(
                    f.error,
                )
            })?;
        changes.extend(on_site(&m.site, applied));
    }
    Ok(missing)
}
