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

fn now() -> String {
    jiff::Timestamp::now().to_string()
}

/// A condition keeping its previous transition time when its status did not change.
fn condition(
    previous: &[StatusCondition],
    type_: &str,
    status: bool,
    reason: &str,
    message: &str,
    generation: Option<i64>,
) -> StatusCondition {
    let status = if status { "True" } else { "False" }.to_string();
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

/// The status for `verdict`, from the `previous` one.
pub fn status(
    previous: Option<&ResourceStatus>,
    generation: Option<i64>,
    verdict: &Verdict,
    sites: Vec<SiteState>,
    certificates_synced: bool,
) -> ResourceStatus {
    let empty = ResourceStatus::default();
    let previous = previous.unwrap_or(&empty);
    let prev = &previous.conditions;
    let degraded = !verdict.ready && !verdict.progressing;
    ResourceStatus {
        observed_generation: generation,
        conditions: vec![
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
        ],
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
        let first = status(None, Some(1), &failing, vec![], false);
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
        let again = status(Some(&first), Some(1), &failing, vec![], false);
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
        let fixed = status(Some(&again), Some(2), &ok, vec![], true);
        assert_eq!(fixed.conditions[0].status, "True");
        assert_eq!(fixed.conditions[2].status, "False");
        assert_eq!(fixed.observed_generation, Some(2));
        assert!(fixed.last_certificate_sync.is_some());
    }
}
