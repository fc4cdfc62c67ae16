//! Which site runs the primary now, read from every site's `Cluster`: what the operator
//! compares with the declared primary before it applies, and what decides a switchover.

use std::collections::BTreeMap;

use harmony::domain::capability::{MultiSite, PostgresCluster};
use harmony::domain::{InterpretError, Topology, ValidationError};

use super::progress::newest_claimant;
use crate::interpret_support::capability_error;
use crate::postgresql::MultisitePostgreSQLScore;
use harmony::domain::capability::{DistributedPostgreSQL, MemberState, ReplicaShape, member_name};

/// Where the primary of a multi-site cluster is, as its sites' `Cluster`s say.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum LivePrimary {
    /// This site's `Cluster` is the primary (of two that claim it, the one on the newer
    /// timeline: the other was left behind by a failover).
    Primary(String),
    /// A switchover is under way: `from` was demoted (or is being), `to` is being promoted;
    /// `PostgreSQLSwitchoverScore` to `to` resumes it.
    Switching {
        /// The former primary, when the `Cluster`s tell.
        from: Option<String>,
        /// The site being promoted, when the `Cluster`s tell.
        to: Option<String>,
    },
    /// A site's `Cluster` is not in CloudNativePG's distributed topology (`spec.replica.enabled`,
    /// or no `spec.replica`): it cannot be switched over.
    NotDistributed,
    /// No site has the `Cluster` yet.
    Absent,
}

/// Reads every site of `score` (all must be reachable) and says where the primary is.
pub async fn live_primary<T>(
    score: &MultisitePostgreSQLScore,
    topology: &T,
) -> Result<LivePrimary, InterpretError>
where
    T: Topology + MultiSite,
    T::Site: DistributedPostgreSQL,
{
    let cluster = score.resolved_cluster()?;
    let sites = std::iter::once(&score.spec.topology.primary.site)
        .chain(score.spec.topology.replicas.iter().map(|r| &r.site));
    let mut states = BTreeMap::new();
    for site in sites {
        topology.check_site("topology", site)?;
        let Some(s) = topology.site(site) else {
            continue;
        };
        let state = s.member_state(&cluster).await.map_err(capability_error(
            format!("reading the Cluster on {site}"),
            &[],
        ))?;
        if let Some(state) = state {
            states.insert(site.clone(), state);
        }
    }
    Ok(classify(&cluster, &states)?)
}

/// [`live_primary`] on what was read.
pub(crate) fn classify(
    cluster: &PostgresCluster,
    states: &BTreeMap<String, MemberState>,
) -> Result<LivePrimary, ValidationError> {
    if states.is_empty() {
        return Ok(LivePrimary::Absent);
    }
    if states
        .values()
        .any(|s| !matches!(s.shape, ReplicaShape::Distributed { .. }))
    {
        return Ok(LivePrimary::NotDistributed);
    }
    let name = |site: &str| member_name(cluster.name.as_str(), site);
    let names = |s: &MemberState, site: &str| s.says_primary() == Some(name(site).as_str());
    if let Some(primary) = newest_claimant(states)? {
        let state = &states[&primary];
        if let ReplicaShape::Distributed {
            promotion_token: Some(token),
            ..
        } = &state.shape
            && !state.promoted_with(token)
        {
            let from = states
                .iter()
                .find(|(site, s)| {
                    **site != primary && s.demotion_token.as_deref() == Some(token.as_str())
                })
                .map(|(site, _)| site.clone());
            return Ok(LivePrimary::Switching {
                from,
                to: Some(primary),
            });
        }
        return Ok(LivePrimary::Primary(primary));
    }
    // Nobody claims it: the former primary is named by the others, names the new one and, once
    // its operator has started, shows the demotion in its status. With two sites both name each
    // other until then, and only the switchover's target tells them apart.
    let named_by_all: Vec<&String> = states
        .keys()
        .filter(|site| {
            states
                .iter()
                .filter(|(other, _)| other != site)
                .all(|(_, s)| names(s, site))
        })
        .collect();
    let demoted = |site: &&&String| {
        let s = &states[site.as_str()];
        s.switch_in_progress || s.demotion_token.is_some()
    };
    let from = match named_by_all.as_slice() {
        [one] => Some(*one),
        several => {
            let shown: Vec<&&String> = several.iter().filter(demoted).collect();
            match shown.as_slice() {
                [one] => Some(**one),
                _ => None,
            }
        }
    };
    let to = from.and_then(|f| {
        states
            .keys()
            .find(|site| *site != f && names(&states[f], site))
    });
    Ok(LivePrimary::Switching {
        from: from.cloned(),
        to: to.cloned(),
    })
}
