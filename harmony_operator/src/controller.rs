//! The reconcile loops: run the resource's Score against its sites, write status, clean up on
//! deletion (finalizer), requeue to keep certificates and drifted fields in sync, and back off
//! per object on errors.

use async_trait::async_trait;
use futures::StreamExt;
use kube::api::{Api, Patch, PatchParams};
use kube::runtime::controller::{Action, Controller};
use kube::runtime::finalizer::{Event, finalizer};
use kube::runtime::watcher;
use kube::{Client, Resource, ResourceExt};
use serde::Serialize;
use serde::de::DeserializeOwned;
use std::collections::HashMap;
use std::fmt::Debug;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use harmony::domain::capability::{ApplyOptions, CapabilityError, K8sClient, MultiSite};
use harmony::domain::{
    ChangeAction, InterpretError, Inventory, Outcome, RunContext, Score, Topology,
};
use harmony::infra::agent::ControlPlaneClient;
use harmony::infra::kube::ownership_record;
use harmony::infra::multi_site::MultiSiteTopology;
use harmony_modules::postgresql::{
    MultisitePostgreSQL, MultisitePostgreSQLScore, PostgreSQLResource, PostgreSQLScore,
    ResourceStatus, SiteState,
};
use harmony_modules::region::{RegionAgent, RegionAgentRolloutScore};

use crate::FINALIZER;
use crate::conditions::{Verdict, status};
use crate::site::{self, SiteError, SiteTopology};

/// How the controller paces itself.
#[derive(Debug, Clone)]
pub struct OperatorConfig {
    /// Every Ready resource is reconciled again after this long (certificate re-sync, drift).
    pub resync: Duration,
    /// The first retry delay after an error; it doubles per consecutive failure of that object.
    pub backoff_base: Duration,
    /// The longest retry delay.
    pub backoff_max: Duration,
    /// The control plane that reaches region agents, for sites declared with `spec.region`.
    pub control_plane: Option<ControlPlaneClient>,
}

impl Default for OperatorConfig {
    fn default() -> Self {
        Self {
            resync: Duration::from_secs(300),
            backoff_base: Duration::from_secs(5),
            backoff_max: Duration::from_secs(300),
            control_plane: None,
        }
    }
}

/// A reconcile that failed; the message is what the status already says.
#[derive(Debug, thiserror::Error)]
#[error("{0}")]
pub struct ReconcileError(String);

struct Context {
    client: Client,
    config: OperatorConfig,
    /// Consecutive failures per object, for its back-off only.
    failures: Mutex<HashMap<String, u32>>,
}

/// What each managed kind does; both PostgreSQL kinds implement it.
#[async_trait]
trait Managed:
    Resource<DynamicType = (), Scope = k8s_openapi::NamespaceResourceScope>
    + Clone
    + Debug
    + Serialize
    + DeserializeOwned
    + Send
    + Sync
    + 'static
{
    /// The status written last.
    fn last_status(&self) -> Option<&ResourceStatus>;
    /// Each site the resource uses, with its role.
    fn sites(&self) -> Vec<(String, &'static str)>;
    /// The ApplySet owners of what the Score applies.
    fn owners(&self) -> Vec<String>;
    /// Validates the Score, then runs it on `topology`.
    async fn run(
        &self,
        topology: &MultiSiteTopology<SiteTopology>,
        control_plane: Option<&ControlPlaneClient>,
    ) -> Result<Outcome, Failure>;
}

/// Why a run did not reach the intent.
enum Failure {
    Invalid(String),
    Interpret(InterpretError),
}

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

    async fn run(
        &self,
        topology: &MultiSiteTopology<SiteTopology>,
        _control_plane: Option<&ControlPlaneClient>,
    ) -> Result<Outcome, Failure> {
        type T = MultiSiteTopology<SiteTopology>;
        let score = MultisitePostgreSQLScore::from_resource(self);
        Score::<T>::validate(&score)
            .and_then(|()| Score::<T>::validate_on(&score, topology))
            .map_err(|e| Failure::Invalid(e.to_string()))?;
        Score::<T>::create_interpret(&score)
            .execute(&Inventory::empty(), topology)
            .await
            .map_err(Failure::Interpret)
    }
}

#[async_trait]
impl Managed for PostgreSQLResource {
    fn last_status(&self) -> Option<&ResourceStatus> {
        self.status.as_ref()
    }

    fn sites(&self) -> Vec<(String, &'static str)> {
        self.spec
            .site
            .iter()
            .map(|s| (s.clone(), "single"))
            .collect()
    }

    fn owners(&self) -> Vec<String> {
        vec![PostgreSQLScore::from_resource(self).owner()]
    }

    async fn run(
        &self,
        topology: &MultiSiteTopology<SiteTopology>,
        _control_plane: Option<&ControlPlaneClient>,
    ) -> Result<Outcome, Failure> {
        let score = PostgreSQLScore::from_resource(self);
        Score::<SiteTopology>::validate(&score).map_err(|e| Failure::Invalid(e.to_string()))?;
        let name = self.spec.site.clone().unwrap_or_default();
        let site = topology.site(&name).ok_or_else(|| {
            Failure::Invalid(format!("invalid site: {name:?} is not in the topology"))
        })?;
        Score::<SiteTopology>::create_interpret(&score)
            .execute(&Inventory::empty(), site)
            .await
            .map_err(Failure::Interpret)
    }
}

#[async_trait]
impl Managed for RegionAgent {
    fn last_status(&self) -> Option<&ResourceStatus> {
        self.status.as_ref()
    }

    fn sites(&self) -> Vec<(String, &'static str)> {
        vec![(self.spec.site.clone(), "agent")]
    }

    fn owners(&self) -> Vec<String> {
        vec![RegionAgentRolloutScore::owner_for(&self.spec.region)]
    }

    async fn run(
        &self,
        topology: &MultiSiteTopology<SiteTopology>,
        control_plane: Option<&ControlPlaneClient>,
    ) -> Result<Outcome, Failure> {
        let control_plane = control_plane.ok_or_else(|| {
            Failure::Invalid("a RegionAgent needs the operator to run with a control plane (harmony-control-plane --operator-kubeconfig)".into())
        })?;
        let score = RegionAgentRolloutScore::from_spec(&self.spec, control_plane.clone())
            .map_err(|e| Failure::Invalid(e.to_string()))?;
        Score::<SiteTopology>::validate(&score).map_err(|e| Failure::Invalid(e.to_string()))?;
        let site = topology.site(&self.spec.site).ok_or_else(|| {
            Failure::Invalid(format!(
                "invalid spec.site: {:?} is not in the topology",
                self.spec.site
            ))
        })?;
        Score::<SiteTopology>::create_interpret(&score)
            .execute(&Inventory::empty(), site)
            .await
            .map_err(Failure::Interpret)
    }
}

fn key<K: Resource>(o: &K) -> String {
    format!("{}/{}", o.namespace().unwrap_or_default(), o.name_any())
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

/// Runs the resource's Score once and says how it went.
async fn run_once<K: Managed>(
    o: &K,
    ctx: &Context,
) -> (Verdict, Vec<SiteState>, bool, Option<Duration>) {
    let sites = o.sites();
    let pending = |message: &str| site_states(&sites, |_| ("Pending", message.to_string()));
    if sites.is_empty() {
        let v = Verdict {
            ready: false,
            progressing: false,
            reason: "InvalidSpec",
            message: "invalid spec.site: it is empty; name the Site the cluster runs on".into(),
        };
        return (v, vec![], false, None);
    }
    let names: Vec<String> = sites.iter().map(|(s, _)| s.clone()).collect();
    let run_ctx = RunContext::default();
    let topology = match site::topology(
        &ctx.client,
        &names,
        &run_ctx,
        ctx.config.control_plane.as_ref(),
    )
    .await
    {
        Ok(t) => t,
        Err(e) => {
            let reason = match e {
                SiteError::Unknown { .. } => "UnknownSite",
                SiteError::Unusable { .. } => "SiteUnusable",
                SiteError::Api(_) => "ControlPlaneUnreachable",
            };
            let v = Verdict {
                ready: false,
                progressing: false,
                reason,
                message: e.to_string(),
            };
            let states = pending("not attempted");
            // A Site may be declared later: look again on the regular resync.
            return (v, states, false, Some(ctx.config.resync));
        }
    };
    if let Err(e) = topology.ensure_ready().await {
        let message = e.to_string();
        let states = site_states(&sites, |s| {
            if message.contains(&format!("site {s}:")) {
                ("Failed", message.clone())
            } else {
                ("Pending", String::new())
            }
        });
        let v = Verdict {
            ready: false,
            progressing: false,
            reason: "SiteUnreachable",
            message,
        };
        return (v, states, false, None);
    }
    match o.run(&topology, ctx.config.control_plane.as_ref()).await {
        Ok(outcome) => {
            let synced = o.sites().iter().any(|(_, r)| *r == "replica")
                && !outcome
                    .details
                    .iter()
                    .any(|d| d.starts_with("replication secrets not copied"));
            let message = std::iter::once(outcome.message.clone())
                .chain(outcome.details.iter().cloned())
                .collect::<Vec<_>>()
                .join("; ");
            let v = Verdict {
                ready: true,
                progressing: false,
                reason: "Reconciled",
                message,
            };
            let states = site_states(&sites, |s| {
                let n = outcome
                    .changes
                    .iter()
                    .filter(|c| c.location.as_deref().is_some_and(|l| l.starts_with(s)))
                    .count();
                ("Synced", format!("{n} object(s) in sync"))
            });
            (v, states, synced, Some(ctx.config.resync))
        }
        Err(Failure::Invalid(message)) => {
            let v = Verdict {
                ready: false,
                progressing: false,
                reason: "InvalidSpec",
                message,
            };
            // Nothing changes until the resource is edited.
            (v, pending("not attempted"), false, Some(Duration::MAX))
        }
        Err(Failure::Interpret(e)) => {
            let waiting = matches!(&e, InterpretError::Capability { source: CapabilityError::Timeout { waited_for, .. }, .. } if waited_for.contains("Secret"));
            let message = e.to_string();
            let states = site_states(&sites, |s| {
                if message.contains(&format!("on {s}")) {
                    ("Failed", message.clone())
                } else {
                    ("Pending", String::new())
                }
            });
            let reason = if waiting {
                "SecretsMissing"
            } else {
                "ApplyFailed"
            };
            let v = Verdict {
                ready: false,
                progressing: waiting,
                reason,
                message,
            };
            (v, states, false, None)
        }
    }
}

async fn apply<K: Managed>(
    o: Arc<K>,
    api: &Api<K>,
    ctx: &Context,
) -> Result<Action, ReconcileError> {
    let (verdict, sites, synced, next) = run_once(o.as_ref(), ctx).await;
    let generation = o.meta().generation;
    let new_status = status(o.last_status(), generation, &verdict, sites, synced);
    api.patch_status(
        &o.name_any(),
        &PatchParams::default(),
        &Patch::Merge(serde_json::json!({ "status": new_status })),
    )
    .await
    .map_err(|e| ReconcileError(format!("writing the status of {}: {e}", key(o.as_ref()))))?;
    match next {
        Some(d) if d == Duration::MAX => Ok(Action::await_change()),
        Some(d) => {
            ctx.failures
                .lock()
                .unwrap_or_else(|e| e.into_inner())
                .remove(&key(o.as_ref()));
            Ok(Action::requeue(d))
        }
        None => Err(ReconcileError(verdict.message)),
    }
}

/// Deletes what the resource's Score created on each of its sites, and nothing else: each
/// owner's members are pruned (only objects carrying its label), then its ownership record.
async fn cleanup<K: Managed>(o: Arc<K>, ctx: &Context) -> Result<Action, ReconcileError> {
    let names: Vec<String> = o.sites().into_iter().map(|(s, _)| s).collect();
    let pruning = RunContext {
        prune: true,
        ..RunContext::default()
    };
    let topology = match site::topology(
        &ctx.client,
        &names,
        &pruning,
        ctx.config.control_plane.as_ref(),
    )
    .await
    {
        Ok(t) => t,
        // Sites that were never usable hold nothing of ours.
        Err(SiteError::Unknown { .. } | SiteError::Unusable { .. }) => {
            return Ok(Action::await_change());
        }
        Err(e) => return Err(ReconcileError(e.to_string())),
    };
    topology
        .ensure_ready()
        .await
        .map_err(|e| ReconcileError(e.to_string()))?;
    for name in &names {
        let Some(site) = topology.site(name) else {
            continue;
        };
        for owner in o.owners() {
            let fail = |e: String| ReconcileError(format!("cleaning up {owner} on {name}: {e}"));
            let options = ApplyOptions {
                owner: Some(owner.clone()),
                ..ApplyOptions::default()
            };
            let pruned = site
                .apply(&[], &options)
                .await
                .map_err(|f| fail(f.error.to_string()))?;
            site.delete(&ownership_record(&owner))
                .await
                .map_err(|e| fail(e.to_string()))?;
            let deleted = pruned
                .iter()
                .filter(|c| c.action == ChangeAction::Delete)
                .count();
            log::info!(
                "{}: deleted {deleted} object(s) of {owner} on {name}",
                key(o.as_ref())
            );
        }
    }
    Ok(Action::await_change())
}

async fn reconcile<K: Managed>(o: Arc<K>, ctx: Arc<Context>) -> Result<Action, ReconcileError> {
    let api: Api<K> = Api::namespaced(ctx.client.clone(), &o.namespace().unwrap_or_default());
    finalizer(&api, FINALIZER, o, |event| async {
        match event {
            Event::Apply(o) => apply(o, &api, &ctx).await,
            Event::Cleanup(o) => cleanup(o, &ctx).await,
        }
    })
    .await
    .map_err(|e| ReconcileError(e.to_string()))
}

fn error_policy<K: Managed>(o: Arc<K>, error: &ReconcileError, ctx: Arc<Context>) -> Action {
    let mut failures = ctx.failures.lock().unwrap_or_else(|e| e.into_inner());
    let n = failures.entry(key(o.as_ref())).or_insert(0);
    *n = n.saturating_add(1);
    let delay = ctx
        .config
        .backoff_base
        .saturating_mul(2u32.saturating_pow(n.saturating_sub(1).min(16)))
        .min(ctx.config.backoff_max);
    log::warn!("{}: {error}; retrying in {delay:?}", key(o.as_ref()));
    Action::requeue(delay)
}

async fn control<K: Managed>(ctx: Arc<Context>) {
    Controller::new(
        Api::<K>::all(ctx.client.clone()),
        watcher::Config::default(),
    )
    .run(reconcile::<K>, error_policy::<K>, ctx)
    .for_each(|result| async move {
        if let Err(e) = result {
            log::debug!("reconcile: {e}");
        }
    })
    .await;
}

/// Runs both controllers until the process stops. The CRDs must be installed
/// (`harmony-operator crds | kubectl apply -f -`).
pub async fn run(client: Client, config: OperatorConfig) {
    let ctx = Arc::new(Context {
        client,
        config,
        failures: Mutex::new(HashMap::new()),
    });
    futures::join!(
        control::<MultisitePostgreSQL>(ctx.clone()),
        control::<PostgreSQLResource>(ctx.clone()),
        control::<RegionAgent>(ctx)
    );
}
