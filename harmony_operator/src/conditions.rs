//! Building the status the controller writes: conditions that say why a resource is not Ready.

use harmony_modules::postgresql::{ResourceStatus, SiteState, StatusCondition};

/// What one reconcile concluded.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Verdict {
    /// Whether the resource is Ready.
    pub ready: bool,
    /// Whether work is still going on (waiting for the operator's secrets, say).
    pub progressing: bool,
    /// CamelCase reason: `Reconciled`, `InvalidSpec`, `UnknownSite`, `SiteUnreachable`, ...
    pub reason: &'static str,
    /// For a person; never secret values.
    pub message: String,
}

/// The `ReplicasStreaming` condition of a resource with replicas.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Replication {
    /// Every replica streams within the lag threshold (`None`: not measured this time).
    pub streaming: Option<bool>,
    /// `Streaming`, `ReplicaNotStreaming`, `ReplicaLagging`, `NotMeasured`.
    pub reason: &'static str,
    /// Per replica site: streaming state and lag in bytes and seconds.
    pub message: String,
}

impl Replication {
    /// Not measured: the reconcile stopped before the status read (the Ready condition says why).
    pub fn not_measured() -> Self {
        Self {
            streaming: None,
            reason: "NotMeasured",
            message: "the replicas were not measured: the reconcile stopped before (see Ready)"
                .into(),
        }
    }
}

fn now() -> String {
    jiff::Timestamp::now().to_string()
}

/// A condition keeping its previous transition time when its status did not change.
fn condition(
    previous: &[StatusCondition],
    type_: &str,
    status: impl Into<Option<bool>>,
    reason: &str,
    message: &str,
    generation: Option<i64>,
) -> StatusCondition {
    let status = match status.into() {
        Some(true) => "True",
        Some(false) => "False",
        None => "Unknown",
    }
    .to_string();
    let last_transition_time = previous
        .iter()
        .find(|c| c.type_ == type_ && c.status == status)
        .map_or_else(now, |c| c.last_transition_time.clone());
    StatusCondition {
        type_: type_.into(),
        status,
        reason: reason.into(),
        message: message.into(),
        last_transition_time,
        observed_generation: generation,
    }
}

/// The status for `verdict`, from the `previous` one; `replication` adds the
/// `ReplicasStreaming` condition (resources with replicas).
pub fn status(
    previous: Option<&ResourceStatus>,
    generation: Option<i64>,
    verdict: &Verdict,
    replication: Option<&Replication>,
    sites: Vec<SiteState>,
    certificates_synced: bool,
) -> ResourceStatus {
    let empty = ResourceStatus::default();
    let previous = previous.unwrap_or(&empty);
    let prev = &previous.conditions;
    let degraded = !verdict.ready && !verdict.progressing;
    let mut conditions = vec![
        condition(
            prev,
            "Ready",
            verdict.ready,
            verdict.reason,
            &verdict.message,
            generation,
        ),
        condition(
            prev,
            "Progressing",
            verdict.progressing,
            if verdict.progressing {
                verdict.reason
            } else {
                "Idle"
            },
            if verdict.progressing {
                &verdict.message
            } else {
                ""
            },
            generation,
        ),
        condition(
            prev,
            "Degraded",
            degraded,
            if degraded {
                verdict.reason
            } else {
                "AsExpected"
            },
            if degraded { &verdict.message } else { "" },
            generation,
        ),
    ];
    if let Some(r) = replication {
        conditions.push(condition(
            prev,
            "ReplicasStreaming",
            r.streaming,
            r.reason,
            &r.message,
            generation,
        ));
    }
    ResourceStatus {
        observed_generation: generation,
        conditions,
        sites,
        last_certificate_sync: if certificates_synced {
            Some(now())
        } else {
            previous.last_certificate_sync.clone()
        },
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn conditions_say_why_and_keep_their_transition_time() {
        let failing = Verdict {
            ready: false,
            progressing: false,
            reason: "UnknownSite",
            message: "site \"x\" is not declared".into(),
        };
        let first = status(None, Some(1), &failing, None, vec![], false);
        let ready = &first.conditions[0];
        assert_eq!(
            (
                ready.type_.as_str(),
                ready.status.as_str(),
                ready.reason.as_str()
            ),
            ("Ready", "False", "UnknownSite")
        );
        assert_eq!(first.conditions[2].status, "True", "degraded");
        let again = status(Some(&first), Some(1), &failing, None, vec![], false);
        assert_eq!(
            again.conditions[0].last_transition_time,
            ready.last_transition_time
        );
        let ok = Verdict {
            ready: true,
            progressing: false,
            reason: "Reconciled",
            message: "3 create".into(),
        };
        let replication = Replication {
            streaming: Some(true),
            reason: "Streaming",
            message: "site-newyork: streaming, lag 0 B (0.0 s)".into(),
        };
        let fixed = status(Some(&again), Some(2), &ok, Some(&replication), vec![], true);
        assert_eq!(fixed.conditions.len(), 4);
        assert_eq!(
            (
                fixed.conditions[3].type_.as_str(),
                fixed.conditions[3].status.as_str()
            ),
            ("ReplicasStreaming", "True")
        );
        assert_eq!(
            status(
                None,
                None,
                &ok,
                Some(&Replication::not_measured()),
                vec![],
                false
            )
            .conditions[3]
                .status,
            "Unknown"
        );
        assert_eq!(fixed.conditions[0].status, "True");
        assert_eq!(fixed.conditions[2].status, "False");
        assert_eq!(fixed.observed_generation, Some(2));
        assert!(fixed.last_certificate_sync.is_some());
    }
}
