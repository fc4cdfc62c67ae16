//! One reconcile of a resource: reach its sites, run its Score, read its replicas, and judge.

use std::time::Duration;

use harmony::domain::capability::CapabilityError;
use harmony::domain::{InterpretError, RunContext, Topology, WaitPolicy};
use harmony_modules::postgresql::SiteState;

use crate::conditions::{Replication, Verdict};
use crate::controller::Context;
use crate::health;
use crate::managed::{Failure, Managed, Ran};
use crate::site::{self, SiteError};

/// What one reconcile concluded, and when to look again.
pub(crate) struct Judged {
    /// The Ready/Progressing/Degraded verdict.
    pub verdict: Verdict,
    /// The `ReplicasStreaming` condition (resources with replicas only).
    pub replication: Option<Replication>,
    /// Per site: role, state and figures.
    pub sites: Vec<SiteState>,
    /// The replication certificates were copied to the replica sites.
    pub synced: bool,
    /// `None`: an error, retried with back-off; `Some(Duration::MAX)`: only on the next edit.
    pub next: Option<Duration>,
}

fn site_states(
    sites: &[(String, &'static str)],
    state: impl Fn(&str) -> (&'static str, String),
) -> Vec<SiteState> {
    sites
        .iter()
        .map(|(site, role)| {
            let (state, message) = state(site);
            SiteState {
                site: site.clone(),
                role: (*role).into(),
                state: state.into(),
                message,
            }
        })
        .collect()
}

fn not_ready(reason: &'static str, message: String, progressing: bool) -> Verdict {
    Verdict {
        ready: false,
        progressing,
        reason,
        message,
    }
}

/// A failure that names the sites it happened on.
fn failed_on(sites: &[(String, &'static str)], message: &str) -> Vec<SiteState> {
    site_states(sites, |s| {
        if message.contains(&format!("on {s}")) || message.contains(&format!("site {s}:")) {
            ("Failed", message.to_string())
        } else {
            ("Pending", String::new())
        }
    })
}

/// Runs the resource's Score once and says how it went.
pub(crate) async fn run_once<K: Managed>(o: &K, ctx: &Context) -> Judged {
    let sites = o.sites();
    let unmeasured = o.has_replicas().then(Replication::not_measured);
    let judged = |verdict, sites, next| Judged {
        verdict,
        replication: unmeasured.clone(),
        sites,
        synced: false,
        next,
    };
    let pending = |message: &str| site_states(&sites, |_| ("Pending", message.to_string()));
    if sites.is_empty() {
        let message = "invalid spec.site: it is empty; name the Site the cluster runs on";
        return judged(
            not_ready("InvalidSpec", message.into(), false),
            vec![],
            None,
        );
    }
    let names: Vec<String> = sites.iter().map(|(s, _)| s.clone()).collect();
    // A reconcile does not block its worker until objects roll out: the resource's status is
    // the operator's report (replication health, Ready), and the next resync looks again.
    let run_ctx = RunContext {
        wait: WaitPolicy::disabled(),
        ..RunContext::default()
    };
    let control_plane = ctx.config.control_plane.as_ref();
    let topology = match site::topology(&ctx.client, &names, &run_ctx, control_plane).await {
        Ok(t) => t,
        Err(e) => {
            let reason = match e {
                SiteError::Unknown { .. } => "UnknownSite",
                SiteError::Unusable { .. } => "SiteUnusable",
                SiteError::Api(_) => "ControlPlaneUnreachable",
            };
            let v = not_ready(reason, e.to_string(), false);
            // A Site may be declared later: look again on the regular resync.
            return judged(v, pending("not attempted"), Some(ctx.config.resync));
        }
    };
    if let Err(e) = topology.ensure_ready().await {
        let message = e.to_string();
        let states = failed_on(&sites, &message);
        return judged(not_ready("SiteUnreachable", message, false), states, None);
    }
    match o.run(&topology, &ctx.config).await {
        Ok(Ran {
            outcome,
            replication,
        }) => {
            let synced = sites.iter().any(|(_, r)| *r == "replica")
                && !outcome
                    .details
                    .iter()
                    .any(|d| d.starts_with("replication secrets not copied"));
            let message = std::iter::once(outcome.message.clone())
                .chain(outcome.details.iter().cloned())
                .collect::<Vec<_>>()
                .join("; ");
            let figures = |s: &str| {
                replication
                    .as_ref()
                    .and_then(|r| r.sites.iter().find(|h| h.site == s))
                    .map(|h| format!("; {}", health::site_line(h)))
                    .unwrap_or_default()
            };
            let states = site_states(&sites, |s| {
                let n = outcome
                    .changes
                    .iter()
                    .filter(|c| c.location.as_deref().is_some_and(|l| l.starts_with(s)))
                    .count();
                ("Synced", format!("{n} object(s) in sync{}", figures(s)))
            });
            let (verdict, replication) = match &replication {
                Some(report) => {
                    let (v, r) = health::verdict(report, &message);
                    (v, Some(r))
                }
                None => {
                    let v = Verdict {
                        ready: true,
                        progressing: false,
                        reason: "Reconciled",
                        message,
                    };
                    (v, None)
                }
            };
            // A replica that does not stream yet is looked at again soon, not after a resync.
            let next = if verdict.ready {
                ctx.config.resync
            } else {
                ctx.config.resync.min(HEALTH_RECHECK)
            };
            Judged {
                verdict,
                replication,
                sites: states,
                synced,
                next: Some(next),
            }
        }
        Err(Failure::Invalid(message)) => {
            let v = not_ready("InvalidSpec", message, false);
            // Nothing changes until the resource is edited.
            judged(v, pending("not attempted"), Some(Duration::MAX))
        }
        Err(Failure::SwitchoverRefused(message)) => {
            // The target may catch up: look again soon, change nothing meanwhile.
            let v = not_ready("SwitchoverRefused", message, false);
            let next = ctx.config.resync.min(HEALTH_RECHECK);
            judged(v, pending("switchover refused"), Some(next))
        }
        Err(Failure::Switchover(e)) => {
            let message = e.to_string();
            let states = failed_on(&sites, &message);
            judged(not_ready("SwitchoverFailed", message, false), states, None)
        }
        Err(Failure::Interpret(e)) => {
            let waiting = matches!(&e, InterpretError::Capability { source: CapabilityError::Timeout { waited_for, .. }, .. } if waited_for.contains("Secret"));
            let message = e.to_string();
            let states = failed_on(&sites, &message);
            let reason = if waiting {
                "SecretsMissing"
            } else {
                "ApplyFailed"
            };
            judged(not_ready(reason, message, waiting), states, None)
        }
    }
}

/// How soon a resource whose replicas do not stream (or whose switchover was refused) is
/// looked at again, when the resync period is longer.
const HEALTH_RECHECK: Duration = Duration::from_secs(15);
