//! The switchover's reads: the lag check before anything changes, and the wait until the
//! former primary streams from the new one.

use std::time::Duration;

use harmony::domain::capability::postgresql::Streaming;
use harmony::domain::capability::{CapabilityError, MultiSite, PostgreSQL};
use harmony::domain::{InterpretError, ObjectChange, ValidationError, report_progress};

use super::PostgreSQLSwitchoverScore;
use super::live::replica_health;
use crate::interpret_support::capability_error;
use harmony::domain::capability::DistributedCluster;

impl PostgreSQLSwitchoverScore {
    /// The refusal (nothing changed yet) unless `to` streams from `from` within `maxReplicaLagBytes`.
    pub(super) async fn check_lag<T>(
        &self,
        topology: &T,
        members: &DistributedCluster,
        from: &str,
    ) -> Result<String, ValidationError>
    where
        T: MultiSite,
        T::Site: PostgreSQL,
    {
        let to = self.to.as_str();
        report_progress(format!("measuring how far {to} is behind {from}"));
        let health = replica_health(topology, members, from, to, &self.status_connect_to).await;
        let max = self.spec.max_replica_lag_bytes;
        let refuse = |field: &str, problem: String, fix: &str| {
            Err(ValidationError::new(
                field,
                format!("{problem}; nothing was changed"),
                fix,
            ))
        };
        match (&health.streaming, health.lag_bytes) {
            (Some(Streaming::Streaming), Some(lag)) if lag <= max => Ok(format!(
                "{to} streamed from {from} {lag} bytes behind (at most {max} allowed) before the switchover"
            )),
            (Some(Streaming::Streaming), Some(lag)) => refuse(
                "maxReplicaLagBytes",
                format!(
                    "{to} is {lag} bytes ({}) behind {from}, more than the {max} bytes ({}) allowed",
                    human(lag),
                    human(max)
                ),
                "wait until it has caught up (the multi-site Score's status read shows the lag), or raise maxReplicaLagBytes",
            ),
            (Some(Streaming::NotStreaming(why)), _) => refuse(
                "to",
                format!("{to} does not stream from {from}: {why}"),
                "repair the replication first (docs/modules/multisite_postgresql.md, Troubleshooting)",
            ),
            (streaming, _) => {
                let why = match streaming {
                    Some(Streaming::Unknown(why)) => why.clone(),
                    _ => health.notes.join("; "),
                };
                refuse(
                    "maxReplicaLagBytes",
                    format!("the lag of {to} behind {from} cannot be measured: {why}"),
                    "a switchover needs the figure: make both sites' hosts reachable from here (or, in a program, set status_connect_to), then re-run",
                )
            }
        }
    }

    /// Waits until `from` (now a replica) streams from the new primary.
    pub(super) async fn wait_streaming<T>(
        &self,
        topology: &T,
        members: &DistributedCluster,
        from: &str,
        changes: &[ObjectChange],
    ) -> Result<String, InterpretError>
    where
        T: MultiSite,
        T::Site: PostgreSQL,
    {
        let to = self.to.as_str();
        report_progress(format!("waiting until {from} streams from {to}"));
        let started = std::time::Instant::now();
        loop {
            let h = replica_health(topology, members, to, from, &self.status_connect_to).await;
            let last = match &h.streaming {
                Some(Streaming::Streaming) => {
                    return Ok(format!(
                        "{from} streams from {to}{}",
                        h.lag_bytes
                            .map(|l| format!(", {l} bytes behind"))
                            .unwrap_or_default()
                    ));
                }
                Some(Streaming::NotStreaming(why) | Streaming::Unknown(why)) => why.clone(),
                None => h.notes.join("; "),
            };
            if started.elapsed().as_secs() >= self.step_timeout_seconds {
                return Err(capability_error(
                    format!(
                        "waiting until {from} streams from {to} (the switchover itself is done: {to} is the primary)"
                    ),
                    changes,
                )(CapabilityError::Timeout {
                    waited_for: format!("{from} streaming from {to}"),
                    after: Duration::from_secs(self.step_timeout_seconds),
                    last_seen: last,
                }));
            }
            tokio::time::sleep(self.poll_interval).await;
        }
    }
}

pub(crate) use crate::interpret_support::human;
