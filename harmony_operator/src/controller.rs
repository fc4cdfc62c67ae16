//! The reconcile loops: run the resource's Score against its sites, write status, clean up on
//! deletion (finalizer), requeue to keep certificates and drifted fields in sync, and back off
//! per object on errors.

use futures::StreamExt;
use kube::api::{Api, Patch, PatchParams};
use kube::runtime::controller::{Action, Controller};
use kube::runtime::finalizer::{Event, finalizer};
use kube::runtime::{Predicate, WatchStreamExt, predicates, reflector, watcher};
use kube::{Client, Resource, ResourceExt};
use std::collections::{BTreeMap, HashMap};
use std::net::SocketAddr;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use harmony::domain::capability::{ApplyOptions, K8sClient, MultiSite};
use harmony::domain::{ChangeAction, RunContext, Topology, WaitPolicy};
use harmony::infra::control_plane::ControlPlaneClient;
use harmony::infra::kube::ownership_record;
use harmony_modules::postgresql::{MultisitePostgreSQL, PostgreSQLResource};
use harmony_modules::region::RegionAgent;

use crate::FINALIZER;
use crate::conditions::status;
use crate::leader::Gate;
use crate::managed::Managed;
use crate::once::{Judged, run_once};
use crate::site::{self, SiteError};

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
    /// Where replication status reads connect for a Route or load-balancer host instead of
    /// resolving it (the TLS server name and certificate check still use the host), for an
    /// operator that runs where the sites' hosts do not resolve. Empty: resolve every host.
    pub status_connect_to: BTreeMap<String, SocketAddr>,
}

impl Default for OperatorConfig {
    fn default() -> Self {
        Self {
            resync: Duration::from_secs(300),
            backoff_base: Duration::from_secs(5),
            backoff_max: Duration::from_secs(300),
            control_plane: None,
            status_connect_to: BTreeMap::new(),
        }
    }
}

/// A reconcile that failed; the message is what the status already says.
#[derive(Debug, thiserror::Error)]
#[error("{0}")]
pub struct ReconcileError(pub(crate) String);

/// What every reconcile shares.
pub(crate) struct Context {
    /// The control plane's API server, where the resources live.
    pub(crate) client: Client,
    /// Pacing, and the control plane for region sites.
    pub(crate) config: OperatorConfig,
    /// Consecutive failures per object, for its back-off only.
    pub(crate) failures: Mutex<HashMap<String, u32>>,
    /// With leader election: reconcile only while the lease is confirmed ours.
    pub(crate) gate: Option<Arc<Gate>>,
}

/// The shared context of the controllers.
pub(crate) fn context(
    client: Client,
    config: OperatorConfig,
    gate: Option<Arc<Gate>>,
) -> Arc<Context> {
    Arc::new(Context {
        client,
        config,
        failures: Mutex::new(HashMap::new()),
        gate,
    })
}

/// `namespace/name` of a resource (`/name` when cluster-scoped), for logs and back-off.
pub(crate) fn key<K: Resource>(o: &K) -> String {
    format!("{}/{}", o.namespace().unwrap_or_default(), o.name_any())
}

async fn apply<K: Managed>(
    o: Arc<K>,
    api: &Api<K>,
    ctx: &Context,
) -> Result<Action, ReconcileError> {
    let Judged {
        verdict,
        replication,
        sites,
        synced,
        next,
    } = run_once(o.as_ref(), ctx).await;
    let generation = o.meta().generation;
    // One line per reconcile: which replica reconciled what, and the verdict.
    log::info!(
        "reconciled {} {} (generation {}): Ready={} {}",
        K::kind(&()),
        key(o.as_ref()),
        generation.unwrap_or_default(),
        verdict.ready,
        verdict.reason
    );
    let new_status = status(
        o.last_status(),
        generation,
        &verdict,
        replication.as_ref(),
        sites,
        synced,
    );
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
        wait: WaitPolicy::disabled(),
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
    if let Some(gate) = &ctx.gate
        && !gate.valid()
    {
        // The lease is not confirmed ours: another replica may be reconciling.
        log::debug!("{}: skipped, the lease is not confirmed", key(o.as_ref()));
        return Ok(Action::requeue(Duration::from_secs(1)));
    }
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

/// The back-off after a failed reconcile: doubling per consecutive failure of that object.
pub(crate) fn error_policy<K: Resource>(
    o: Arc<K>,
    error: &ReconcileError,
    ctx: Arc<Context>,
) -> Action {
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
    let (reader, writer) = reflector::store();
    // Only spec edits (generation, which deletion also bumps) and finalizer changes trigger a
    // reconcile: the status the controller writes itself (lag figures, sync times) must not,
    // or every reconcile would trigger the next. Periodic work comes from the requeues.
    let changes = watcher(
        Api::<K>::all(ctx.client.clone()),
        watcher::Config::default(),
    )
    .default_backoff()
    .reflect(writer)
    .applied_objects()
    .predicate_filter(
        predicates::generation.combine(predicates::finalizers),
        Default::default(),
    );
    Controller::for_stream(changes, reader)
        .run(reconcile::<K>, error_policy::<K>, ctx)
        .for_each(|result| async move {
            if let Err(e) = result {
                log::debug!("reconcile: {e}");
            }
        })
        .await;
}

/// Runs the controllers of every kind on `ctx` until the future is dropped.
pub(crate) async fn run_with(ctx: Arc<Context>) {
    futures::join!(
        control::<MultisitePostgreSQL>(ctx.clone()),
        control::<PostgreSQLResource>(ctx.clone()),
        control::<RegionAgent>(ctx.clone()),
        crate::tenant::control(ctx)
    );
}

/// Runs the controllers until the process stops, as the only instance (no leader election:
/// see [`crate::leader::run_elected`] for several replicas). The CRDs must be installed
/// (`harmony-operator crds | kubectl apply -f -`).
pub async fn run(client: Client, config: OperatorConfig) {
    run_with(context(client, config, None)).await;
}
