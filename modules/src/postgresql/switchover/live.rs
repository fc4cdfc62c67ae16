//! What switchover and failover share: the Score's sites as members of CloudNativePG's
//! distributed topology, what each site's `Cluster` says now, and the replication status read.

use std::collections::BTreeMap;
use std::net::SocketAddr;
use std::time::Duration;

use harmony::domain::capability::postgresql::{
    ReplicationReport, SiteHealth, SiteObservation, SiteRole, StatusProbe,
};
use harmony::domain::capability::{CapabilityError, MultiSite, PostgreSQL};
use harmony::domain::{InterpretError, ObjectChange, Topology, ValidationError};

use crate::interpret_support::capability_error;
use harmony::domain::capability::{
    DistributedCluster, DistributedPostgreSQL, MemberRole, MemberState, ReplicaShape,
};

/// How long one SQL status read may take.
const PROBE_TIMEOUT: Duration = Duration::from_secs(10);

/// A site's `Cluster` as read now.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum SiteRead {
    /// The topology has no such site (a failover runs without the lost one).
    Absent,
    /// Its API could not be read: why.
    Unreachable(String),
    /// It has no `Cluster`.
    NoCluster,
    /// What its `Cluster` says.
    Found(Box<MemberState>),
}

/// Reads every member's `Cluster`, in member order.
pub(crate) async fn read_sites<T>(
    topology: &T,
    members: &DistributedCluster,
) -> BTreeMap<String, SiteRead>
where
    T: MultiSite,
    T::Site: DistributedPostgreSQL,
{
    let mut out = BTreeMap::new();
    for m in members.members() {
        let read = match topology.site(&m.site) {
            None => SiteRead::Absent,
            Some(site) => match site.member_state(members.cluster()).await {
                Ok(Some(state)) => SiteRead::Found(Box::new(state)),
                Ok(None) => SiteRead::NoCluster,
                Err(e) => SiteRead::Unreachable(e.to_string()),
            },
        };
        out.insert(m.site.clone(), read);
    }
    out
}

/// Fails, naming the fix, unless `site`'s `Cluster` is in the distributed topology.
pub(crate) fn require_distributed<'a>(
    members: &DistributedCluster,
    site: &str,
    read: &'a SiteRead,
) -> Result<&'a MemberState, ValidationError> {
    let c = members.cluster();
    let object = format!("Cluster {}/{} on site {site}", c.namespace, c.name);
    let problem = match read {
        SiteRead::Found(s) => match &s.shape {
            ReplicaShape::Distributed { .. } => return Ok(s),
            ReplicaShape::None | ReplicaShape::Standalone { .. } => format!(
                "{object} is not in CloudNativePG's distributed topology (no spec.replica.primary): the operator can only switch over clusters that all list each other and name the primary"
            ),
        },
        SiteRead::NoCluster => format!("{object} does not exist"),
        SiteRead::Absent => format!("site {site} is not in the topology"),
        SiteRead::Unreachable(why) => format!("{object} cannot be read: {why}"),
    };
    Err(ValidationError::new(
        "topology",
        problem,
        "apply MultisitePostgreSQLScore first (it renders the distributed topology on every site), and run with every site reachable",
    ))
}

/// Reads `site`'s replication status over its own exposure, as `role`.
pub(crate) async fn observe<T>(
    topology: &T,
    members: &DistributedCluster,
    site: &str,
    role: SiteRole,
    connect_to: &BTreeMap<String, SocketAddr>,
) -> SiteObservation
where
    T: MultiSite,
    T::Site: PostgreSQL,
{
    let (Some(s), Some(m)) = (topology.site(site), members.get(site)) else {
        return SiteObservation::nothing(format!("site {site} is not in the topology"));
    };
    let probe = StatusProbe {
        role,
        endpoint: m.exposure.clone(),
        connect_to: m
            .exposure
            .as_ref()
            .and_then(|e| connect_to.get(e.host().as_str()).copied()),
        timeout: PROBE_TIMEOUT,
    };
    s.replication_status(members.cluster(), &probe).await
}

/// `replica` judged against `primary` (both read now, the primary first).
pub(crate) async fn replica_health<T>(
    topology: &T,
    members: &DistributedCluster,
    primary: &str,
    replica: &str,
    connect_to: &BTreeMap<String, SocketAddr>,
) -> SiteHealth
where
    T: MultiSite,
    T::Site: PostgreSQL,
{
    let p = observe(topology, members, primary, SiteRole::Primary, connect_to).await;
    let r = observe(topology, members, replica, SiteRole::Replica, connect_to).await;
    let report = ReplicationReport::assess(0, (primary, &p), &[(replica.to_string(), r)]);
    report
        .sites
        .into_iter()
        .nth(1)
        .expect("assess returns the primary and then each replica")
}

/// Prefixes each change's location with its site.
pub(crate) fn on_site(site: &str, changes: Vec<ObjectChange>) -> Vec<ObjectChange> {
    changes
        .into_iter()
        .map(|mut c| {
            c.location = Some(match c.location.take() {
                Some(l) => format!("{site} @ {l}"),
                None => site.to_string(),
            });
            c
        })
        .collect()
}

/// Applies `site`'s `Cluster` with `role`, owned by `owner` (the multi-site Score's owner of
/// every site's `Cluster`), and records the changes in `changes`.
pub(crate) async fn apply_role<T>(
    topology: &T,
    members: &DistributedCluster,
    site: &str,
    role: &MemberRole,
    existing: Option<&MemberState>,
    owner: &str,
    changes: &mut Vec<ObjectChange>,
) -> Result<(), InterpretError>
where
    T: Topology + MultiSite,
    T::Site: DistributedPostgreSQL,
{
    let s = topology.site(site).ok_or_else(|| {
        ValidationError::new(
            "topology",
            format!("site {site:?} disappeared during the run"),
            "keep the topology's sites fixed while Scores run",
        )
    })?;
    match s.apply_member(members, site, role, existing, owner).await {
        Ok(applied) => {
            changes.extend(on_site(site, applied));
            Ok(())
        }
        Err(f) => {
            let mut done = changes.clone();
            done.extend(on_site(site, f.applied));
            Err(capability_error(
                format!(
                    "applying the Cluster on {site} with primary {}",
                    role.primary
                ),
                &done,
            )(f.error))
        }
    }
}

/// How long a wait may take, and how often it re-reads.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Pace {
    /// The most a wait takes.
    pub timeout: Duration,
    /// The pause between two reads.
    pub poll: Duration,
}

/// Polls `site`'s `Cluster` until `done` returns a value, for at most `pace.timeout`; the error
/// says what was awaited and what was seen last.
pub(crate) async fn wait_member<T, R>(
    topology: &T,
    members: &DistributedCluster,
    site: &str,
    what: &str,
    pace: Pace,
    changes: &[ObjectChange],
    done: impl Fn(&MemberState) -> Option<R>,
) -> Result<R, InterpretError>
where
    T: MultiSite,
    T::Site: DistributedPostgreSQL,
{
    let started = std::time::Instant::now();
    let mut last = "nothing read yet".to_string();
    loop {
        if let Some(s) = topology.site(site) {
            match s.member_state(members.cluster()).await {
                Ok(Some(state)) => {
                    if let Some(r) = done(&state) {
                        return Ok(r);
                    }
                    last = format!("phase {:?}", state.phase_text());
                }
                Ok(None) => last = "the Cluster does not exist".into(),
                Err(e) => last = e.to_string(),
            }
        }
        if started.elapsed() >= pace.timeout {
            return Err(capability_error(format!("waiting on {site}"), changes)(
                CapabilityError::Timeout {
                    waited_for: format!(
                        "{what} (the CloudNativePG operator on site {site} writes it; check that it runs there, then re-run: the run resumes where it stopped)"
                    ),
                    after: pace.timeout,
                    last_seen: last,
                },
            ));
        }
        tokio::time::sleep(pace.poll).await;
    }
}
