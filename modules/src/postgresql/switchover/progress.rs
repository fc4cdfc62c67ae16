//! Where a switchover stands, read from what each site's `Cluster` says, so a re-run resumes.

use std::collections::BTreeMap;

use harmony::domain::ValidationError;

use harmony::domain::capability::{DistributedCluster, MemberState, ReplicaShape, member_name};

/// Where a switchover to the target stands, from what the sites' `Cluster`s say.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(super) enum Progress {
    /// `from` is the primary; nothing changed yet.
    Start { from: String },
    /// `from` was told to hand over to the target.
    Demoting { from: String },
    /// The target was told to promote with `from`'s token.
    Promoting { from: String, token: String },
    /// The target is the primary; promoted from `from` when that is known.
    Promoted { from: Option<String> },
}

pub(super) fn locate(
    members: &DistributedCluster,
    states: &BTreeMap<String, MemberState>,
    to: &str,
) -> Result<Progress, ValidationError> {
    let target = member_name(members.cluster().name.as_str(), to);
    let claimants: Vec<&String> = states
        .iter()
        .filter(|(_, s)| s.claims_primary())
        .map(|(site, _)| site)
        .collect();
    let refuse = |problem: String, fix: &str| Err(ValidationError::new("to", problem, fix));
    if claimants.len() > 1 {
        return refuse(
            format!(
                "the Clusters on {} each name themselves primary (a failover happened while a site was unreachable)",
                claimants
                    .iter()
                    .map(|s| s.as_str())
                    .collect::<Vec<_>>()
                    .join(" and ")
            ),
            "run PostgreSQLFailoverScore: it keeps the newer primary and makes the other a replica",
        );
    }
    let state = &states[to];
    if state.claims_primary() {
        let token = match &state.shape {
            ReplicaShape::Distributed {
                promotion_token: Some(t),
                ..
            } => t.clone(),
            _ => return Ok(Progress::Promoted { from: None }),
        };
        let from = states
            .iter()
            .find(|(site, s)| *site != to && s.demotion_token.as_deref() == Some(token.as_str()))
            .map(|(site, _)| site.clone());
        return Ok(match (state.promoted_with(&token), from) {
            (true, from) => Progress::Promoted { from },
            (false, Some(from)) => Progress::Promoting { from, token },
            (false, None) => Progress::Promoted { from: None },
        });
    }
    let demoting: Vec<&String> = states
        .iter()
        .filter(|(site, s)| *site != to && s.says_primary() == Some(target.as_str()))
        .map(|(site, _)| site)
        .collect();
    match (claimants.as_slice(), demoting.as_slice()) {
        ([from], []) => Ok(Progress::Start {
            from: (*from).clone(),
        }),
        ([], [from]) => Ok(Progress::Demoting {
            from: (*from).clone(),
        }),
        _ => refuse(
            format!(
                "no site's Cluster is the primary of a switchover to {to}: {}",
                states
                    .iter()
                    .map(|(site, s)| format!(
                        "{site} names {}",
                        s.says_primary()
                            .and_then(|m| members.site_of(m))
                            .unwrap_or("no primary")
                    ))
                    .collect::<Vec<_>>()
                    .join(", ")
            ),
            "check the Clusters on every site (kubectl get clusters.postgresql.cnpg.io -o yaml); if the primary's site is lost, use PostgreSQLFailoverScore",
        ),
    }
}

/// The site whose `Cluster` names itself primary; of several, the one on the newest timeline
/// (every promotion starts a new one), which a failover made while the other was unreachable.
pub(crate) fn newest_claimant(
    found: &BTreeMap<String, MemberState>,
) -> Result<Option<String>, ValidationError> {
    let claimants: Vec<(&String, &MemberState)> =
        found.iter().filter(|(_, s)| s.claims_primary()).collect();
    if claimants.len() <= 1 {
        return Ok(claimants.first().map(|(site, _)| (*site).clone()));
    }
    let newest = claimants
        .iter()
        .max_by_key(|(_, s)| s.timeline)
        .expect("several claimants");
    let ties = claimants
        .iter()
        .filter(|(_, s)| s.timeline == newest.1.timeline)
        .count();
    if newest.1.timeline.is_none() || ties > 1 {
        let listed: Vec<String> = claimants
            .iter()
            .map(|(site, s)| {
                format!(
                    "{site} (timeline {})",
                    s.timeline.map_or("unknown".into(), |t| t.to_string())
                )
            })
            .collect();
        return Err(ValidationError::new(
            "topology",
            format!(
                "several sites name themselves primary and their timelines do not tell which is newer: {}",
                listed.join(", ")
            ),
            "decide which one keeps the data, and re-apply the other's Cluster naming it primary (kubectl edit spec.replica.primary)",
        ));
    }
    Ok(Some(newest.0.clone()))
}
