//! Replication health for `MultisitePostgreSQLScore`: one status read across the sites, and the
//! apply's wait until every replica streams within `maxReplicaLagBytes`.
//!
//! Each site is read through its `PostgreSQL` capability (`replication_status`): the operator's
//! `Cluster` status through the site's Kubernetes API, and SQL over the site's exposed endpoint
//! (the primary's Route or load balancer; a replica's only when `topology.replicaHosts`
//! exposes it). The primary is read before the replicas, so a replica's replay position is
//! compared with a primary position read earlier: the lag is never under-counted by writes that
//! happen during the read.

use std::time::{Duration, Instant};

use harmony::domain::capability::postgresql::{
    ReplicationReport, SiteObservation, SiteRole, StatusProbe,
};
use harmony::domain::capability::{
    CapabilityError, MultiSite, PostgreSQL, PostgresCluster, PrimaryExposure,
};
use harmony::domain::{
    ExecutionMode, InterpretError, ObjectChange, Topology, ValidationError, report_progress,
};
use harmony::types::HostName;

use super::{Exposure, MultisitePostgreSQLScore, Resolved, SitesSpec};

/// How often the wait reads the status again.
const POLL: Duration = Duration::from_secs(2);

impl MultisitePostgreSQLScore {
    /// Reads every site's replication status now, without waiting: per site its role, the
    /// `Cluster`'s phase and ready instances, and for replicas whether they stream and their lag
    /// in bytes and seconds (see `ReplicationReport`). What cannot be measured is data
    /// (`Streaming::Unknown` with the reason), never an error; an invalid Score is.
    ///
    /// ```no_run
    /// # use harmony::infra::{kube::K8sTopology, multi_site::MultiSiteTopology};
    /// # async fn example(sites: &MultiSiteTopology<K8sTopology>) -> Result<(), harmony::domain::InterpretError> {
    /// use harmony_modules::postgresql::MultisitePostgreSQLScore;
    /// let mut score = MultisitePostgreSQLScore::new(
    ///     "finance-db", "tenant-a", "10Gi",
    ///     "site-paris", "finance-db-tenant-a.apps.site-paris.example.com",
    ///     &["site-newyork"],
    /// );
    /// // Expose the replica too, so its streaming and lag can be measured from outside.
    /// score.spec.topology.replica_hosts.insert(
    ///     "site-newyork".into(),
    ///     "finance-db-tenant-a.apps.site-newyork.example.com".into(),
    /// );
    /// let report = score.replication_status(sites).await?;
    /// for line in report.table() {
    ///     println!("{line}");
    /// }
    /// if !report.replicas_ready() {
    ///     eprintln!("{}", report.shortfalls().join("\n"));
    /// }
    /// # Ok(())
    /// # }
    /// ```
    pub async fn replication_status<T>(
        &self,
        topology: &T,
    ) -> Result<ReplicationReport, InterpretError>
    where
        T: Topology + MultiSite,
        T::Site: PostgreSQL,
    {
        let r = self.resolve()?;
        topology.check_site("topology.primary.site", &r.primary_site)?;
        for (i, name) in r.replica_sites.iter().enumerate() {
            topology.check_site(&format!("topology.replicas[{i}].site"), name)?;
        }
        Ok(read(self, &r, topology).await)
    }
}

/// Every key of `topology.replicaHosts` must be a replica site.
pub(super) fn check_replica_hosts(t: &SitesSpec) -> Result<(), ValidationError> {
    for site in t.replica_hosts.keys() {
        if !t.replicas.iter().any(|r| &r.site == site) {
            return Err(ValidationError::new(
                format!("topology.replicaHosts.{site}"),
                format!("{site:?} is not one of topology.replicas"),
                "give a host only for a site listed in topology.replicas",
            ));
        }
    }
    Ok(())
}

impl MultisitePostgreSQLScore {
    /// Every site with its exposure, primary first: the primary's from its host or apps domain,
    /// a replica's from `topology.replicaHosts` (`None` when it has none).
    pub fn site_exposures(
        &self,
    ) -> Result<Vec<(String, Option<PrimaryExposure>)>, ValidationError> {
        let r = self.resolve()?;
        let mut out = vec![(r.primary_site.clone(), Some(r.source.exposure.clone()))];
        out.extend(r.replica_sites.into_iter().zip(r.replica_exposures));
        Ok(out)
    }

    /// The cluster as every site runs it (`wal_keep_size` set, no `serverAltDNSNames`).
    pub fn resolved_cluster(&self) -> Result<PostgresCluster, ValidationError> {
        Ok(self.resolve()?.replica)
    }
}

/// The exposure of replica site `site` when `topology.replicaHosts` names its host: the
/// Score's exposure kind on that host.
pub(super) fn replica_exposure(
    site: &str,
    host: Option<&String>,
    exposure: Exposure,
) -> Result<Option<PrimaryExposure>, ValidationError> {
    let Some(text) = host else {
        return Ok(None);
    };
    let field = format!("topology.replicaHosts.{site}");
    if text.parse::<std::net::IpAddr>().is_ok() {
        return Err(ValidationError::new(
            field,
            format!(
                "{text:?} is an IP address; verify-full checks the server certificate against a name, and a passthrough router routes by name (SNI)"
            ),
            "give the DNS name that resolves to the replica site's router or load balancer",
        ));
    }
    let host = HostName::parse(text).map_err(|e| {
        ValidationError::new(
            field,
            e.to_string(),
            "use a DNS name such as \"finance-db-tenant-a.apps.newyork.example.com\"",
        )
    })?;
    Ok(Some(match exposure {
        Exposure::Route => PrimaryExposure::PassthroughRoute { host },
        Exposure::LoadBalancer => PrimaryExposure::LoadBalancer { host },
    }))
}

/// Replica `i`'s cluster: its own host in the server certificate when it is exposed.
pub(super) fn replica_cluster(r: &Resolved, i: usize) -> PostgresCluster {
    let mut c = r.replica.clone();
    if let Some(e) = &r.replica_exposures[i] {
        c.server_alt_dns_names = vec![e.host().clone()];
    }
    c
}

/// One status read of every site, primary first.
async fn read<T>(score: &MultisitePostgreSQLScore, r: &Resolved, topology: &T) -> ReplicationReport
where
    T: Topology + MultiSite,
    T::Site: PostgreSQL,
{
    let probe = |role, endpoint: Option<&PrimaryExposure>| {
        let mut p = StatusProbe::new(role, endpoint.cloned());
        p.connect_to =
            endpoint.and_then(|e| score.status_connect_to.get(e.host().as_str()).copied());
        p
    };
    let missing =
        |name: &str| SiteObservation::nothing(format!("site {name} is not in the topology"));
    let primary = match topology.site(&r.primary_site) {
        Some(s) => {
            let p = probe(SiteRole::Primary, Some(&r.source.exposure));
            s.replication_status(&r.primary, &p).await
        }
        None => missing(&r.primary_site),
    };
    let mut replicas = Vec::new();
    for (i, name) in r.replica_sites.iter().enumerate() {
        let o = match topology.site(name) {
            Some(s) => {
                let p = probe(SiteRole::Replica, r.replica_exposures[i].as_ref());
                s.replication_status(&replica_cluster(r, i), &p).await
            }
            None => missing(name),
        };
        replicas.push((name.clone(), o));
    }
    let mut report =
        ReplicationReport::assess(r.max_lag_bytes, (&r.primary_site, &primary), &replicas);
    for s in report.sites.iter_mut().skip(1) {
        if !s.exposed {
            s.notes.push(format!(
                "set topology.replicaHosts.{} to expose this replica and measure its streaming and lag",
                s.site
            ));
        }
    }
    report
}

/// After an apply: waits (unless `waitForStreaming` is false) until every replica streams
/// within the threshold, reporting progress, and returns the report's lines. Render and plan
/// measure nothing and say so. A timeout names each replica and what it misses.
pub(super) async fn verify<T>(
    score: &MultisitePostgreSQLScore,
    r: &Resolved,
    topology: &T,
    applied: &[ObjectChange],
) -> Result<(Vec<String>, Option<ReplicationReport>), InterpretError>
where
    T: Topology + MultiSite,
    T::Site: PostgreSQL,
{
    match topology.mode() {
        ExecutionMode::Render => {
            return Ok((
                vec!["replication: rendered; not verified (render mode measures nothing)".into()],
                None,
            ));
        }
        ExecutionMode::Plan => {
            return Ok((
                vec!["replication: planned; not verified (a plan measures nothing)".into()],
                None,
            ));
        }
        ExecutionMode::Apply => {}
    }
    let Some(timeout) = r.streaming_wait else {
        let report = read(score, r, topology).await;
        let mut lines = vec![format!(
            "replication: read once, not waited for (waitForStreaming: false); {}",
            if report.replicas_ready() {
                format!(
                    "every replica streams within {} bytes of the primary",
                    r.max_lag_bytes
                )
            } else {
                format!("not all verified: {}", report.shortfalls().join("; "))
            }
        )];
        lines.extend(report.table());
        return Ok((lines, Some(report)));
    };
    let started = Instant::now();
    loop {
        let report = read(score, r, topology).await;
        if report.settled() {
            return Ok((summary(&report, r), Some(report)));
        }
        let pending = report.unsettled().join("; ");
        let elapsed = started.elapsed();
        if elapsed >= timeout {
            return Err(InterpretError::Capability {
                action: "waiting for the replicas to stream".into(),
                applied: applied.to_vec(),
                source: CapabilityError::Timeout {
                    waited_for: format!(
                        "every replica to stream within {} bytes of the primary (maxReplicaLagBytes)",
                        r.max_lag_bytes
                    ),
                    after: timeout,
                    last_seen: pending,
                },
            });
        }
        report_progress(format!(
            "waiting for the replicas to stream ({}s of {}s): {pending}",
            elapsed.as_secs(),
            timeout.as_secs()
        ));
        tokio::time::sleep(POLL.min(timeout - elapsed)).await;
    }
}

/// The verdict line, then the table.
fn summary(report: &ReplicationReport, r: &Resolved) -> Vec<String> {
    let unverified = report.unverified();
    let mut lines = vec![if unverified.is_empty() {
        format!(
            "replication verified: every replica streams within {} bytes of the primary",
            r.max_lag_bytes
        )
    } else {
        format!(
            "replication NOT verified on {}: not exposed outside its site, so only its Cluster was read (healthy, every instance ready); set topology.replicaHosts to measure its streaming and lag",
            unverified.join(", ")
        )
    }];
    lines.extend(report.table());
    lines
}
