//! Replication health in the status: a `MultisitePostgreSQL` is `Ready` only when every replica
//! streams within the lag threshold (`spec.maxReplicaLagBytes`); each site's figures go to
//! `status.sites[]` and to the `ReplicasStreaming` condition.

use harmony::domain::capability::postgresql::{ReplicationReport, SiteHealth, SiteRole, Streaming};

use crate::conditions::{Replication, Verdict};

/// One site's figures, for a person: `streaming, lag 0 B (0.0 s)`.
pub(crate) fn site_line(s: &SiteHealth) -> String {
    let lag = || match (s.lag_bytes, s.lag_seconds) {
        (Some(b), Some(sec)) => format!("lag {} ({sec:.1} s)", bytes(b)),
        (Some(b), None) => format!("lag {}", bytes(b)),
        _ => "lag unknown".into(),
    };
    let instances = match (s.ready_instances, s.instances) {
        (Some(r), Some(n)) => format!(", {r}/{n} instances ready"),
        _ => String::new(),
    };
    match (&s.role, &s.streaming) {
        (SiteRole::Primary, _) => format!(
            "primary{}{instances}",
            s.lsn.map(|l| format!(" at WAL {l}")).unwrap_or_default()
        ),
        (SiteRole::Replica, Some(Streaming::Streaming)) => {
            format!("streaming, {}{instances}", lag())
        }
        (SiteRole::Replica, Some(Streaming::NotStreaming(why))) => {
            format!("not streaming: {why}{instances}")
        }
        (SiteRole::Replica, Some(Streaming::Unknown(why))) => {
            format!("streaming unknown: {why}{instances}")
        }
        (SiteRole::Replica, None) => format!("streaming not measured{instances}"),
    }
}

/// `1536` → `1.5 KiB`: lag in binary units, exact bytes below 1 KiB.
fn bytes(b: u64) -> String {
    const UNITS: [&str; 4] = ["KiB", "MiB", "GiB", "TiB"];
    if b < 1024 {
        return format!("{b} B");
    }
    let mut v = b as f64 / 1024.0;
    let mut unit = 0;
    while v >= 1024.0 && unit + 1 < UNITS.len() {
        v /= 1024.0;
        unit += 1;
    }
    format!("{v:.1} {}", UNITS[unit])
}

/// Why the replicas keep the resource from Ready, most serious first:
/// - `PrimaryNotWritable`: the primary's endpoint is in recovery, or its `Cluster` runs as a
///   replica;
/// - `ReplicaNotStreaming`: a replica was measured not streaming, or its endpoint could not be
///   measured;
/// - `ReplicaUnmeasured`: a replica has no endpoint outside its site (`topology.replicaHosts`),
///   so nobody can tell whether it streams;
/// - `ReplicaLagging`: every replica streams, one lags beyond `maxReplicaLagBytes` (or its lag
///   is unknown).
fn reason(report: &ReplicationReport) -> &'static str {
    let replicas = || report.sites.iter().filter(|s| s.role == SiteRole::Replica);
    if report
        .shortfalls()
        .iter()
        .any(|l| l.contains(" (primary): "))
    {
        "PrimaryNotWritable"
    } else if replicas().any(|s| s.exposed && !matches!(s.streaming, Some(Streaming::Streaming))) {
        "ReplicaNotStreaming"
    } else if replicas().any(|s| !s.exposed) {
        "ReplicaUnmeasured"
    } else {
        "ReplicaLagging"
    }
}

/// The verdict once the Score applied: `applied` says what the apply did; the replicas decide
/// whether the resource is Ready (strictly: every replica measured streaming within the
/// threshold). Only `ReplicaLagging` is Progressing (catching up); the others are Degraded.
pub(crate) fn verdict(report: &ReplicationReport, applied: &str) -> (Verdict, Replication) {
    let replicas: Vec<String> = report
        .sites
        .iter()
        .filter(|s| s.role == SiteRole::Replica)
        .map(|s| format!("{}: {}", s.site, site_line(s)))
        .collect();
    let figures = format!(
        "{} (threshold {} bytes, maxReplicaLagBytes)",
        replicas.join("; "),
        report.max_lag_bytes
    );
    if report.replicas_ready() {
        let verdict = Verdict {
            ready: true,
            progressing: false,
            reason: "Reconciled",
            message: format!("{applied}; replicas: {figures}"),
        };
        let replication = Replication {
            streaming: Some(true),
            reason: "Streaming",
            message: figures,
        };
        return (verdict, replication);
    }
    let reason = reason(report);
    let mut why = report.shortfalls();
    // The fix for a replica nobody can measure from outside its site.
    why.extend(
        report
            .sites
            .iter()
            .filter(|s| s.role == SiteRole::Replica && !s.exposed)
            .map(|s| {
                format!(
                    "set topology.replicaHosts.{} to expose that replica, so that its streaming and lag can be measured",
                    s.site
                )
            }),
    );
    let verdict = Verdict {
        ready: false,
        progressing: reason == "ReplicaLagging",
        reason,
        message: format!("{}; the objects are applied ({applied})", why.join("; ")),
    };
    let replication = Replication {
        streaming: Some(false),
        reason,
        message: figures,
    };
    (verdict, replication)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn site(
        name: &str,
        role: SiteRole,
        streaming: Option<Streaming>,
        lag: Option<u64>,
    ) -> SiteHealth {
        SiteHealth {
            site: name.into(),
            role,
            phase: Some("Cluster in healthy state".into()),
            ready_instances: Some(1),
            instances: Some(1),
            streaming,
            lag_bytes: lag,
            lag_seconds: lag.map(|_| 0.5),
            lsn: None,
            notes: vec![],
            exposed: true,
        }
    }

    fn report(replica: SiteHealth) -> ReplicationReport {
        ReplicationReport {
            max_lag_bytes: 16 << 20,
            sites: vec![site("site-paris", SiteRole::Primary, None, None), replica],
        }
    }

    #[test]
    fn ready_only_when_every_replica_streams_within_the_threshold() {
        let ok = report(site(
            "site-newyork",
            SiteRole::Replica,
            Some(Streaming::Streaming),
            Some(1536),
        ));
        let (v, r) = verdict(&ok, "3 unchanged");
        assert!(v.ready && r.streaming == Some(true), "{v:?}");
        assert!(
            r.message
                .contains("site-newyork: streaming, lag 1.5 KiB (0.5 s)"),
            "{}",
            r.message
        );

        let lagging = report(site(
            "site-newyork",
            SiteRole::Replica,
            Some(Streaming::Streaming),
            Some(64 << 20),
        ));
        let (v, r) = verdict(&lagging, "3 unchanged");
        assert_eq!(
            (v.ready, v.progressing, v.reason),
            (false, true, "ReplicaLagging")
        );
        assert!(r.message.contains("lag 64.0 MiB"), "{}", r.message);
        assert!(v.message.contains("site-newyork"), "{}", v.message);

        let down = report(site(
            "site-newyork",
            SiteRole::Replica,
            Some(Streaming::NotStreaming("no WAL receiver runs".into())),
            None,
        ));
        let (v, r) = verdict(&down, "3 unchanged");
        assert_eq!(
            (v.ready, v.progressing, v.reason),
            (false, false, "ReplicaNotStreaming")
        );
        assert!(
            v.message
                .contains("site-newyork: not streaming: no WAL receiver runs"),
            "{}",
            v.message
        );
        assert_eq!(r.streaming, Some(false));

        let mut hidden = site(
            "site-newyork",
            SiteRole::Replica,
            Some(Streaming::Unknown("not exposed".into())),
            None,
        );
        hidden.exposed = false;
        let (v, _) = verdict(&report(hidden), "3 unchanged");
        assert_eq!((v.ready, v.reason), (false, "ReplicaUnmeasured"));
        assert!(
            v.message.contains("set topology.replicaHosts.site-newyork"),
            "{}",
            v.message
        );
    }
}
