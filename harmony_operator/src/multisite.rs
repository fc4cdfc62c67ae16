//! `MultisitePostgreSQL`: a switchover when the spec moves the primary, the Score's apply, then
//! the replicas' streaming and lag, which decide `Ready`.
//!
//! A switchover is declarative: `spec.topology.primary.site` says where the primary should be.
//! When the live primary (read from the sites' CloudNativePG clusters) is elsewhere, the
//! operator runs `PostgreSQLSwitchoverScore` to move it there before applying anything.

use async_trait::async_trait;

use harmony::domain::{Inventory, Score};
use harmony::infra::multi_site::MultiSiteTopology;
use harmony_modules::postgresql::{MultisitePostgreSQL, MultisitePostgreSQLScore, ResourceStatus};

use crate::OperatorConfig;
use crate::managed::{Failure, Managed, Ran};
use crate::site::SiteTopology;

type T = MultiSiteTopology<SiteTopology>;

#[async_trait]
impl Managed for MultisitePostgreSQL {
    fn last_status(&self) -> Option<&ResourceStatus> {
        self.status.as_ref()
    }

    fn sites(&self) -> Vec<(String, &'static str)> {
        let t = &self.spec.topology;
        std::iter::once((t.primary.site.clone(), "primary"))
            .chain(t.replicas.iter().map(|r| (r.site.clone(), "replica")))
            .collect()
    }

    fn owners(&self) -> Vec<String> {
        MultisitePostgreSQLScore::from_resource(self)
            .owners()
            .to_vec()
    }

    fn has_replicas(&self) -> bool {
        true
    }

    async fn run(&self, topology: &T, config: &OperatorConfig) -> Result<Ran, Failure> {
        let mut score = MultisitePostgreSQLScore::from_resource(self);
        // The operator reads the replicas after every apply and looks again soon while they do
        // not stream, rather than holding a reconcile for the Score's streaming wait.
        score.spec.wait_for_streaming = false;
        score.status_connect_to = config.status_connect_to.clone();
        Score::<T>::validate(&score)
            .and_then(|()| Score::<T>::validate_on(&score, topology))
            .map_err(|e| Failure::Invalid(e.to_string()))?;
        let moved = switchover::if_asked(&score, topology).await?;
        let mut outcome = Score::<T>::create_interpret(&score)
            .execute(&Inventory::empty(), topology)
            .await
            .map_err(Failure::Interpret)?;
        // The Score's own one-off read ends its details (a verdict line, then the table): the
        // operator's read just below replaces it, figures in the conditions.
        if let Some(i) = outcome
            .details
            .iter()
            .position(|d| d.starts_with("replication: "))
        {
            outcome.details.truncate(i);
        }
        if let Some(note) = moved {
            outcome.details.insert(0, note);
        }
        // Err only for a Score its own validation refuses, which it passed above.
        let replication = score
            .replication_status(topology)
            .await
            .map_err(Failure::Interpret)?;
        Ok(Ran {
            outcome,
            replication: Some(replication),
        })
    }
}

mod switchover {
    use harmony::domain::capability::MultiSite;
    use harmony::domain::{InterpretError, Inventory, Score};
    use harmony_modules::postgresql::{
        DistributedPostgreSQL, MemberState, MultisitePostgreSQLScore, PostgreSQLSwitchoverScore,
        ReplicaShape,
    };

    use super::T;
    use crate::managed::Failure;

    /// Where the primary lives now, read from each site's `Cluster`.
    #[derive(Debug, PartialEq, Eq)]
    pub(super) enum Live {
        /// This site's `Cluster` claims the primary (the highest timeline when several do,
        /// since a promotion always starts a new timeline).
        Primary(String),
        /// Distributed, and no `Cluster` claims the primary: a switchover stopped mid-way.
        Switching,
        /// The shape before the distributed topology (`spec.replica.enabled` on the replicas),
        /// with its primary on this site: it cannot be switched over.
        Legacy(String),
        /// Nothing to switch: no `Cluster` yet, or not in the distributed topology.
        Nothing,
    }

    /// Judges the sites' `Cluster`s; `None` for a site without one.
    pub(super) fn judge(states: &[(String, Option<MemberState>)]) -> Live {
        let mut claims: Vec<(Option<u64>, &str)> = states
            .iter()
            .filter_map(|(site, s)| {
                s.as_ref()
                    .filter(|s| s.claims_primary())
                    .map(|s| (s.timeline, site.as_str()))
            })
            .collect();
        claims.sort();
        if let Some((_, site)) = claims.last() {
            return Live::Primary((*site).to_string());
        }
        let distributed = states.iter().any(|(_, s)| {
            s.as_ref()
                .is_some_and(|s| matches!(s.shape, ReplicaShape::Distributed { .. }))
        });
        if distributed {
            return Live::Switching;
        }
        let standalone: Vec<&str> = states
            .iter()
            .filter(|(_, s)| s.as_ref().is_some_and(|s| s.shape == ReplicaShape::None))
            .map(|(site, _)| site.as_str())
            .collect();
        match standalone[..] {
            [site] => Live::Legacy(site.to_string()),
            _ => Live::Nothing,
        }
    }

    /// Reads every site's `Cluster`; an unreachable site fails the reconcile (a switchover
    /// decided without it could promote a second primary).
    async fn live(score: &MultisitePostgreSQLScore, topology: &T) -> Result<Live, Failure> {
        let cluster = score
            .resolved_cluster()
            .map_err(|e| Failure::Invalid(e.to_string()))?;
        let sites = std::iter::once(&score.spec.topology.primary.site)
            .chain(score.spec.topology.replicas.iter().map(|r| &r.site));
        let mut states = Vec::new();
        for site in sites {
            let state = match topology.site(site) {
                Some(s) => s.member_state(&cluster).await.map_err(|e| {
                    Failure::Switchover(InterpretError::Capability {
                        action: format!("reading the Cluster on {site}"),
                        applied: Vec::new(),
                        source: e,
                    })
                })?,
                None => None,
            };
            states.push((site.clone(), state));
        }
        Ok(judge(&states))
    }

    /// Moves the primary to the spec's primary site when it lives elsewhere; says what it did.
    pub(super) async fn if_asked(
        score: &MultisitePostgreSQLScore,
        topology: &T,
    ) -> Result<Option<String>, Failure> {
        let to = &score.spec.topology.primary.site;
        let what = match live(score, topology).await? {
            Live::Primary(site) if &site == to => return Ok(None),
            Live::Primary(site) => format!("switchover from {site} to {to}"),
            // The operator's leader was stopped mid-way: finish it.
            Live::Switching => format!("interrupted switchover to {to}"),
            Live::Legacy(site) if &site == to => return Ok(None),
            // Applying the spec would flip `replica.enabled` on both sites: a promotion
            // without the demotion handshake, losing the writes the target has not replayed.
            Live::Legacy(site) => {
                return Err(Failure::SwitchoverRefused(format!(
                    "switchover from {site} to {to} refused: the clusters use spec.replica.enabled (the shape before CloudNativePG's distributed topology), which cannot be switched over without losing writes; nothing was changed; fix: set topology.primary.site back to {site:?}, and apply the cluster in the distributed topology before moving its primary"
                )));
            }
            Live::Nothing => return Ok(None),
        };
        log::info!(
            "{}/{}: {what} (spec.topology.primary.site)",
            score.namespace,
            score.name
        );
        let mut switchover = PostgreSQLSwitchoverScore::new(score, to.clone());
        switchover.status_connect_to = score.status_connect_to.clone();
        Score::<T>::validate(&switchover)
            .and_then(|()| Score::<T>::validate_on(&switchover, topology))
            .map_err(|e| Failure::Invalid(e.to_string()))?;
        match Score::<T>::create_interpret(&switchover)
            .execute(&Inventory::empty(), topology)
            .await
        {
            Ok(outcome) => Ok(Some(format!("{what}: {}", outcome.message))),
            // Refused before anything changed (the target lags or does not stream).
            Err(InterpretError::Invalid(v)) => {
                Err(Failure::SwitchoverRefused(format!("{what} refused: {v}")))
            }
            Err(e) => Err(Failure::Switchover(e)),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::switchover::{Live, judge};
    use harmony_modules::postgresql::MemberState;
    use serde_json::json;

    /// A `Cluster` in the distributed topology naming `primary`, on the site of member `me`.
    fn member(primary: &str, me: &str, timeline: u64) -> Option<MemberState> {
        Some(harmony::infra::cnpg::distributed::member_state(&json!({
            "metadata": {"name": "finance-db"},
            "spec": {"replica": {"primary": primary, "self": me, "source": "finance-db-site-paris"}},
            "status": {"timelineID": timeline}
        })))
    }

    fn sites(
        paris: Option<MemberState>,
        newyork: Option<MemberState>,
    ) -> Vec<(String, Option<MemberState>)> {
        vec![
            ("site-paris".into(), paris),
            ("site-newyork".into(), newyork),
        ]
    }

    #[test]
    fn the_live_primary_is_the_cluster_that_claims_it_with_the_highest_timeline() {
        let (p, n) = ("finance-db-site-paris", "finance-db-site-newyork");
        assert_eq!(
            judge(&sites(member(p, p, 1), member(p, n, 1))),
            Live::Primary("site-paris".into())
        );
        // After a failover while paris was unreachable, both claim it: the promotion's newer
        // timeline wins.
        assert_eq!(
            judge(&sites(member(p, p, 1), member(n, n, 2))),
            Live::Primary("site-newyork".into())
        );
        // Demoted, not yet promoted: a switchover stopped mid-way.
        assert_eq!(
            judge(&sites(member(n, p, 1), member(p, n, 1))),
            Live::Switching
        );
        // The shape before the distributed topology: the primary is the standalone one.
        let legacy = || {
            Some(harmony::infra::cnpg::distributed::member_state(&json!({
                "spec": {"replica": {"enabled": true, "source": "finance-db-site-paris"}}
            })))
        };
        let standalone = Some(harmony::infra::cnpg::distributed::member_state(
            &json!({"spec": {"instances": 1}}),
        ));
        assert_eq!(
            judge(&sites(standalone, legacy())),
            Live::Legacy("site-paris".into())
        );
        // Nothing applied yet (or only a replica): nothing to switch.
        assert_eq!(judge(&sites(None, legacy())), Live::Nothing);
        assert_eq!(judge(&sites(None, None)), Live::Nothing);
    }
}
