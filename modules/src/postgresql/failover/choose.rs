//! The failover's decisions: which site is the primary now, which one was lost, which replica
//! to promote, and the report lines about fencing and the declaration.

use std::collections::{BTreeMap, BTreeSet};

use harmony::domain::capability::postgresql::{
    Lsn, Reading, SiteObservation, SiteRole, SqlReading,
};
use harmony::domain::capability::{MultiSite, PostgreSQL};
use harmony::domain::operator::OperatorError;
use harmony::domain::{InterpretError, ObjectChange, Outcome, Topology, ValidationError};

use super::PostgreSQLFailoverScore;
use crate::postgresql::primary_change::point_at;
use crate::postgresql::switchover::{
    DistributedCluster, DistributedPostgreSQL, MemberState, member_name, observe,
};

/// A replica that can be promoted: where it is and how far it replayed.
pub(super) struct Candidate {
    pub(super) site: String,
    pub(super) replay: Lsn,
    pub(super) state: MemberState,
    /// The other replicas: why each was not chosen.
    pub(super) passed_over: Vec<String>,
}

pub(super) fn fence_line(
    lost: &str,
    to: &str,
    lsn: &str,
    reachable: bool,
    why: Option<&String>,
) -> String {
    if reachable {
        format!(
            "{lost} is fenced: its Cluster now names {to} primary, so CloudNativePG stops it and restarts it as a replica and it cannot come back as a second primary; if it has writes after {lsn} it cannot follow {to}: rebuild it (delete its Cluster and apply MultisitePostgreSQLScore)"
        )
    } else {
        format!(
            "{lost} is NOT fenced: it cannot be reached ({}); keep clients away from it and re-run this failover as soon as it can be reached (it then only makes it a replica of {to})",
            why.map_or("unreachable", String::as_str)
        )
    }
}

pub(super) fn declare_line(declared: &str, to: &str) -> String {
    if declared == to {
        format!("{to} is also the primary MultisitePostgreSQLScore declares")
    } else {
        format!(
            "declare it: in MultisitePostgreSQLScore set topology.primary.site to {to:?} and list {declared:?} among topology.replicas"
        )
    }
}

impl PostgreSQLFailoverScore {
    pub(super) async fn observe<T>(
        &self,
        topology: &T,
        members: &DistributedCluster,
        site: &str,
        role: SiteRole,
    ) -> SiteObservation
    where
        T: MultiSite,
        T::Site: PostgreSQL,
    {
        observe(topology, members, site, role, &self.status_connect_to).await
    }

    /// The primary is reachable and answers: nothing to promote; stray sites follow it.
    pub(super) async fn follow_up<T>(
        &self,
        topology: &T,
        members: &DistributedCluster,
        primary: &str,
        found: &BTreeMap<String, MemberState>,
        unreachable: &BTreeMap<String, String>,
        owner: &str,
    ) -> Result<Outcome, InterpretError>
    where
        T: Topology + MultiSite,
        T::Site: DistributedPostgreSQL,
    {
        let target = member_name(&self.name, primary);
        let mut changes: Vec<ObjectChange> = Vec::new();
        let strays = found
            .iter()
            .filter(|(site, state)| {
                *site != primary && state.says_primary() != Some(target.as_str())
            })
            .collect();
        let pointed = point_at(topology, members, primary, strays, owner, &mut changes).await?;
        let mut details: Vec<String> = pointed
            .into_iter()
            .map(|site| {
                format!("{site} named another primary: it now follows {primary} (fenced if it was a primary)")
            })
            .collect();
        for (site, why) in unreachable {
            details.push(format!(
                "{site} cannot be reached ({why}): if it ran the primary before, it is not fenced; re-run once it can be reached"
            ));
        }
        let mut o = if changes.is_empty() {
            Outcome::noop(format!(
                "{primary} is the primary and answers; nothing to fail over (PostgreSQLSwitchoverScore moves a primary without losing data)"
            ))
        } else {
            Outcome::from_changes(changes)
        };
        details.push(declare_line(&self.spec.topology.primary.site, primary));
        o.details = details;
        Ok(o)
    }

    /// The primary that is lost: the one the reachable replicas name (they must agree).
    pub(super) fn lost_primary(
        &self,
        members: &DistributedCluster,
        found: &BTreeMap<String, MemberState>,
        unreachable: &BTreeMap<String, String>,
    ) -> Result<String, ValidationError> {
        let named: BTreeSet<&str> = found
            .iter()
            .filter(|(site, _)| !unreachable.contains_key(*site))
            .filter_map(|(_, s)| s.says_primary())
            .collect();
        let sites: Vec<&str> = named.iter().filter_map(|m| members.site_of(m)).collect();
        match sites.as_slice() {
            [one] if !found.contains_key(*one) || unreachable.contains_key(*one) => {
                Ok(one.to_string())
            }
            [one] => Err(ValidationError::new(
                "topology",
                format!(
                    "the replicas name {one} primary, which is reachable but does not name itself primary: a switchover to another site is under way"
                ),
                "finish it with PostgreSQLSwitchoverScore (it resumes where it stopped)",
            )),
            _ => Err(ValidationError::new(
                "topology",
                format!(
                    "the reachable sites do not agree on which site was the primary ({})",
                    if sites.is_empty() {
                        "none names one".into()
                    } else {
                        sites.join(", ")
                    }
                ),
                "check spec.replica.primary of the Cluster on each site",
            )),
        }
    }

    /// Of the reachable replicas, the one that replayed the most WAL (ties: the first by name).
    pub(super) async fn most_advanced<T>(
        &self,
        topology: &T,
        members: &DistributedCluster,
        found: &BTreeMap<String, MemberState>,
        lost: &str,
    ) -> Result<Candidate, ValidationError>
    where
        T: MultiSite,
        T::Site: PostgreSQL,
    {
        let mut readings = Vec::new();
        for (site, state) in found {
            if site == lost || state.claims_primary() {
                continue;
            }
            let o = self
                .observe(topology, members, site, SiteRole::Replica)
                .await;
            readings.push((site.clone(), state.clone(), o.sql));
        }
        pick_most_advanced(readings)
    }

    /// Asks this Score's operator, else the topology's (the run's: a terminal or `--yes`).
    pub(super) fn confirm<T: MultiSite>(
        &self,
        topology: &T,
        question: &str,
    ) -> Result<bool, OperatorError> {
        let op = match &self.operator {
            Some(handle) => handle.get(),
            None => topology.operator(),
        };
        if op.can_prompt() && !op.assumes_yes() {
            // The prompt blocks this thread; let the runtime's other tasks move elsewhere.
            tokio::task::block_in_place(|| op.confirm(question))
        } else {
            op.confirm(question)
        }
    }
}

/// The replica that replayed the most WAL (ties: the first given, i.e. the first by name);
/// the error lists why each of the others could not be used.
pub(super) fn pick_most_advanced(
    readings: Vec<(String, MemberState, Reading<SqlReading>)>,
) -> Result<Candidate, ValidationError> {
    let mut best: Option<Candidate> = None;
    let mut unread = Vec::new();
    for (site, state, sql) in readings {
        match sql {
            Reading::Read(r) if !r.in_recovery => unread.push(format!(
                "{site}: not in recovery (it takes writes of its own)"
            )),
            Reading::Read(r) => match r.replay_lsn {
                Some(replay) if best.as_ref().is_none_or(|b| replay > b.replay) => {
                    if let Some(b) = best.take() {
                        unread.push(format!("{}: replayed only up to {}", b.site, b.replay));
                    }
                    best = Some(Candidate {
                        site,
                        replay,
                        state,
                        passed_over: Vec::new(),
                    });
                }
                Some(replay) => unread.push(format!("{site}: replayed only up to {replay}")),
                None => unread.push(format!("{site}: it has replayed nothing yet")),
            },
            Reading::NotRead(why) => unread.push(format!("{site}: {why}")),
        }
    }
    match best {
        Some(mut b) => {
            b.passed_over = unread;
            Ok(b)
        }
        None => Err(ValidationError::new(
            "topology",
            format!(
                "no replica's replay position could be read, so none can be chosen; nothing was changed ({})",
                unread.join("; ")
            ),
            "make the replica sites' hosts reachable from here (or, in a program, set status_connect_to), then re-run",
        )),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use harmony::infra::cnpg::distributed::member_state;
    use serde_json::json;

    fn state(primary: &str, me: &str, timeline: u64) -> MemberState {
        member_state(&json!({
            "spec": {"replica": {"primary": primary, "self": me, "source": "x"}},
            "status": {"timelineID": timeline},
        }))
    }

    fn replica(replay: Option<&str>, in_recovery: bool) -> Reading<SqlReading> {
        Reading::Read(SqlReading {
            in_recovery,
            replay_lsn: replay.map(|l| Lsn::parse(l).unwrap()),
            ..SqlReading::default()
        })
    }

    #[test]
    fn the_replica_that_replayed_most_is_promoted() {
        let s = || state("p", "r", 1);
        let picked = pick_most_advanced(vec![
            ("site-a".into(), s(), replica(Some("0/3000000"), true)),
            ("site-b".into(), s(), replica(Some("1/10"), true)),
            ("site-c".into(), s(), Reading::NotRead("no route".into())),
            ("site-d".into(), s(), replica(Some("1/10"), true)),
        ])
        .unwrap_or_else(|e| panic!("{e}"));
        assert_eq!(
            (picked.site.as_str(), picked.replay.to_string()),
            ("site-b", "1/10".into())
        );
        let err = pick_most_advanced(vec![
            ("site-a".into(), s(), replica(None, true)),
            ("site-b".into(), s(), replica(Some("1/10"), false)),
            ("site-c".into(), s(), Reading::NotRead("no route".into())),
        ])
        .err()
        .unwrap();
        for why in [
            "site-a: it has replayed nothing yet",
            "site-b: not in recovery",
            "site-c: no route",
            "nothing was changed",
        ] {
            assert!(err.problem.contains(why), "{why}: {err}");
        }
    }
}
