//! Waiting for applied objects to become current (rolled out, bound, complete): one watch per
//! (resource, namespace) holding waited objects, one pod watch per namespace holding workloads,
//! the status rules of [`crate::domain::capability::k8s_status`], and a stop at the first
//! hopeless state instead of the timeout.

use futures::stream::{self, BoxStream, StreamExt};
use kube::api::{Api, DynamicObject, TypeMeta};
use kube::discovery::ApiResource;
use kube::runtime::watcher::{self, Event};
use kube::runtime::{WatchStreamExt, watcher as watch};
use serde_json::Value;
use std::collections::{BTreeMap, HashMap, HashSet};
use std::time::Duration;
use tokio::time::Instant;

use super::resolve::ResolvedKind;
use super::topology::K8sTopology;
use super::wait_pods::{NamespacePods, workload_names};
use crate::domain::capability::{
    CapabilityError, ObjectRef, ObjectStatus, Readiness, object_status, selects_pods,
};
use crate::domain::{WaitedStatus, report_progress};

/// Namespaced objects that name no namespace live here (as in `apply`).
const DEFAULT_NAMESPACE: &str = "default";
/// How often objects whose kind cannot be watched (403 on watch) are read instead.
const TICK: Duration = Duration::from_secs(2);
/// How long, after an object failed, the wait goes on reading objects it has not read yet,
/// so the failure's report says where every object stands.
const SETTLE: Duration = Duration::from_secs(2);
/// How often the progress line is repeated while nothing changes.
const HEARTBEAT: Duration = Duration::from_secs(10);

/// Kinds whose objects are current as soon as they exist: they have no status a controller
/// fills in. An apply that succeeded proves they exist, so they are neither watched nor read.
fn exists_is_current(group: &str, kind: &str) -> bool {
    matches!(
        (group, kind),
        (
            "",
            "ConfigMap" | "Secret" | "ServiceAccount" | "LimitRange" | "Endpoints" | "PodTemplate"
        ) | (
            "rbac.authorization.k8s.io",
            "Role" | "RoleBinding" | "ClusterRole" | "ClusterRoleBinding"
        ) | ("networking.k8s.io", "NetworkPolicy" | "IngressClass")
            | ("storage.k8s.io", "StorageClass")
            | ("scheduling.k8s.io", "PriorityClass")
            | ("coordination.k8s.io", "Lease")
            | (
                "admissionregistration.k8s.io",
                "ValidatingWebhookConfiguration"
                    | "MutatingWebhookConfiguration"
                    | "ValidatingAdmissionPolicy"
                    | "ValidatingAdmissionPolicyBinding"
            )
    )
}

/// A (resource, namespace) one watch covers.
#[derive(Clone, PartialEq, Eq, Hash)]
struct Scope {
    plural: String,
    group: String,
    version: String,
    namespace: Option<String>,
}

/// One object being waited for.
struct Waited {
    reference: ObjectRef,
    /// Index into `scopes`; `None` for kinds that are current once they exist.
    scope: Option<usize>,
    /// Namespace as applied (the default filled in), for pod lookups.
    namespace: Option<String>,
    /// Whether pods selected by this object can make it fail.
    workload: bool,
    live: Option<Value>,
    /// Whether its watch (or a GET) has said anything about it yet: until then a missing
    /// `live` means "not read yet", not "gone".
    read: bool,
    status: ObjectStatus,
    current_after: Option<Duration>,
}

/// What one watch covers and knows.
struct ScopeState {
    api: Api<DynamicObject>,
    /// Items of a watch or list carry no apiVersion and kind; the status rules need them.
    types: TypeMeta,
    /// Waited objects by name (index into `Waited`).
    names: HashMap<String, usize>,
    /// Names seen since the last `Init` (a re-list): names missing at `InitDone` are gone.
    seen_in_init: HashSet<String>,
    /// Read with a GET each tick because the watch was refused.
    polled: bool,
    /// The last error the watch reported, for the timeout message.
    last_error: Option<String>,
}

/// An event from one of the merged watches.
enum Update {
    Object(usize, Result<Event<DynamicObject>, watcher::Error>),
    Pods(String, Result<Event<DynamicObject>, watcher::Error>),
}

/// Each waited object's final status, in the order given.
pub(super) type WaitResult = Vec<(ObjectRef, WaitedStatus)>;

impl K8sTopology {
    /// Waits until every object in `objects` is current, stopping early at the first object
    /// that failed. Returns each object's status; the caller decides what is an error.
    pub(super) async fn wait_current(
        &self,
        objects: &[ObjectRef],
        timeout: Duration,
    ) -> Result<(WaitResult, Option<Duration>), CapabilityError> {
        let conn = self.connection()?;
        let started = Instant::now();
        let deadline = started + timeout;
        let mut waited: Vec<Waited> = Vec::with_capacity(objects.len());
        let mut scopes: Vec<ScopeState> = Vec::new();
        let mut scope_index: HashMap<Scope, usize> = HashMap::new();
        let mut pod_namespaces: BTreeMap<String, ApiResource> = BTreeMap::new();
        for r in objects {
            let kind: ResolvedKind = self.kinds.resolve(&conn.client, &conn.server, r).await?;
            let namespace = kind.namespaced.then(|| {
                r.namespace
                    .clone()
                    .unwrap_or_else(|| DEFAULT_NAMESPACE.to_string())
            });
            let index = waited.len();
            let plain = exists_is_current(r.group(), &r.kind);
            let scope = (!plain).then(|| {
                let key = Scope {
                    plural: kind.resource.plural.clone(),
                    group: kind.resource.group.clone(),
                    version: kind.resource.version.clone(),
                    namespace: namespace.clone(),
                };
                let i = *scope_index.entry(key).or_insert_with(|| {
                    scopes.push(ScopeState {
                        api: self
                            .api(&kind, namespace.as_deref())
                            .unwrap_or_else(|_| Api::all_with(conn.client.clone(), &kind.resource)),
                        types: TypeMeta {
                            api_version: kind.resource.api_version.clone(),
                            kind: kind.resource.kind.clone(),
                        },
                        names: HashMap::new(),
                        seen_in_init: HashSet::new(),
                        polled: false,
                        last_error: None,
                    });
                    scopes.len() - 1
                });
                scopes[i].names.insert(r.name.clone(), index);
                i
            });
            let workload = !plain && selects_pods(r.group(), &r.kind);
            if workload && let Some(ns) = &namespace {
                pod_namespaces.insert(ns.clone(), pod_resource());
            }
            waited.push(Waited {
                reference: r.clone(),
                scope,
                namespace,
                workload,
                live: None,
                read: false,
                status: if plain {
                    ObjectStatus::new(Readiness::Current, "Exists", "exists")
                } else {
                    ObjectStatus::new(Readiness::InProgress, "Reading", "not read yet")
                },
                current_after: plain.then_some(Duration::ZERO),
            });
        }
        let mut pods: HashMap<String, NamespacePods> = HashMap::new();
        let mut streams: Vec<BoxStream<'static, Update>> = Vec::new();
        // Pods first: a workload's first reading then already weighs the pods listed with it,
        // so a pod that failed before the wait (and will send no further event) still counts.
        for (ns, resource) in &pod_namespaces {
            let api: Api<DynamicObject> = Api::namespaced_with(conn.client.clone(), ns, resource);
            let ns = ns.clone();
            streams.push(
                watcher::watcher(api, watch::Config::default())
                    .default_backoff()
                    .map(move |e| Update::Pods(ns.clone(), e))
                    .boxed(),
            );
        }
        for (i, s) in scopes.iter().enumerate() {
            let mut config = watch::Config::default();
            if s.names.len() == 1
                && let Some(name) = s.names.keys().next()
            {
                config = config.fields(&format!("metadata.name={name}"));
            }
            streams.push(
                watcher::watcher(s.api.clone(), config)
                    .default_backoff()
                    .map(move |e| Update::Object(i, e))
                    .boxed(),
            );
        }
        let total = waited.len();
        let mut merged = stream::select_all(streams);
        let mut tick = tokio::time::interval(TICK);
        tick.tick().await;
        let mut last_current = usize::MAX;
        let mut last_line = Instant::now();
        let mut failed_at: Option<Instant> = None;
        let mut streams_open = !merged.is_empty();
        let timed_out = loop {
            let current = waited
                .iter()
                .filter(|w| w.status.state == Readiness::Current)
                .count();
            if current == total {
                break None;
            }
            // Stop at the first failure, once every object has been read at least once (or
            // SETTLE passed), so the report says where the others stand rather than "not read
            // yet".
            if waited.iter().any(|w| w.status.state == Readiness::Failed) {
                let since = *failed_at.get_or_insert_with(Instant::now);
                let all_read = waited.iter().all(|w| w.scope.is_none() || w.read);
                if all_read || since.elapsed() >= SETTLE {
                    break None;
                }
            }
            if current != last_current {
                last_current = current;
                last_line = Instant::now();
                report_progress(progress_line(&waited, current, started));
            }
            tokio::select! {
                update = merged.next(), if streams_open => {
                    match update {
                        None => streams_open = false,
                        Some(Update::Object(i, event)) => {
                            apply_event(&mut scopes[i], &mut waited, event, &pods, started);
                        }
                        Some(Update::Pods(ns, event)) => {
                            let changed = pod_event(pods.entry(ns.clone()).or_default(), event);
                            refresh_pods_of(&mut waited, &ns, changed, &pods, started);
                        }
                    }
                }
                _ = tick.tick() => {
                    self.poll_refused(&mut scopes, &mut waited, &pods, started).await;
                    if last_line.elapsed() >= HEARTBEAT {
                        last_line = Instant::now();
                        report_progress(progress_line(&waited, current, started));
                    }
                }
                _ = tokio::time::sleep_until(deadline) => break Some(timeout),
            }
        };
        let result = waited
            .into_iter()
            .map(|w| {
                let mut status = w.status;
                if timed_out.is_some()
                    && status.state != Readiness::Current
                    && let Some(e) = w
                        .scope
                        .and_then(|i| scopes.get(i))
                        .and_then(|s| s.last_error.as_ref())
                {
                    status.message = format!("{} (last watch error: {e})", status.message);
                }
                (
                    w.reference,
                    WaitedStatus {
                        status,
                        time_to_current_s: w.current_after.map(|d| round_ms(d.as_secs_f64())),
                    },
                )
            })
            .collect();
        Ok((result, timed_out))
    }

    /// Reads, one GET each, the objects of scopes whose watch was refused (an identity that
    /// may get but not watch a kind).
    async fn poll_refused(
        &self,
        scopes: &mut [ScopeState],
        waited: &mut [Waited],
        pods: &HashMap<String, NamespacePods>,
        started: Instant,
    ) {
        for scope in scopes.iter_mut().filter(|s| s.polled) {
            for (name, &i) in &scope.names {
                match scope.api.get_opt(name).await {
                    Ok(found) => {
                        waited[i].read = true;
                        waited[i].live = found.and_then(|mut o| {
                            o.types = Some(scope.types.clone());
                            serde_json::to_value(o).ok()
                        });
                        refresh(&mut waited[i], pods, started);
                    }
                    Err(e) => scope.last_error = Some(super::error::describe(&e)),
                }
            }
        }
    }
}

fn pod_resource() -> ApiResource {
    ApiResource {
        group: String::new(),
        version: "v1".into(),
        api_version: "v1".into(),
        kind: "Pod".into(),
        plural: "pods".into(),
    }
}

fn round_ms(s: f64) -> f64 {
    (s * 1000.0).round() / 1000.0
}

/// One watch event on a scope of waited objects.
fn apply_event(
    scope: &mut ScopeState,
    waited: &mut [Waited],
    event: Result<Event<DynamicObject>, watcher::Error>,
    pods: &HashMap<String, NamespacePods>,
    started: Instant,
) {
    match event {
        Ok(Event::Init) => scope.seen_in_init.clear(),
        Ok(Event::InitApply(mut o)) | Ok(Event::Apply(mut o)) => {
            let Some(name) = o.metadata.name.clone() else {
                return;
            };
            scope.seen_in_init.insert(name.clone());
            if let Some(&i) = scope.names.get(&name) {
                o.types = Some(scope.types.clone());
                waited[i].live = serde_json::to_value(o).ok();
                waited[i].read = true;
                refresh(&mut waited[i], pods, started);
            }
        }
        Ok(Event::Delete(o)) => {
            if let Some(&i) = o.metadata.name.as_ref().and_then(|n| scope.names.get(n)) {
                waited[i].live = None;
                waited[i].read = true;
                refresh(&mut waited[i], pods, started);
            }
        }
        Ok(Event::InitDone) => {
            for (name, &i) in &scope.names {
                if !scope.seen_in_init.contains(name) {
                    waited[i].live = None;
                    waited[i].read = true;
                    refresh(&mut waited[i], pods, started);
                }
            }
        }
        Err(e) => {
            if refused(&e) {
                scope.polled = true;
            }
            scope.last_error = Some(watch_error(&e));
        }
    }
}

/// Whether the server refused the watch itself (no `list`/`watch` permission): the objects
/// are then read one by one.
fn refused(e: &watcher::Error) -> bool {
    match e {
        watcher::Error::InitialListFailed(kube::Error::Api(s))
        | watcher::Error::WatchStartFailed(kube::Error::Api(s)) => s.code == 403,
        _ => false,
    }
}

fn watch_error(e: &watcher::Error) -> String {
    match e {
        watcher::Error::InitialListFailed(k)
        | watcher::Error::WatchStartFailed(k)
        | watcher::Error::WatchFailed(k) => super::error::describe(k),
        other => other.to_string(),
    }
}

/// One watch event on a namespace's pods; returns the controller (kind, name) of the pod that
/// changed, or `None` when the whole namespace must be looked at again (a re-list).
fn pod_event(
    pods: &mut NamespacePods,
    event: Result<Event<DynamicObject>, watcher::Error>,
) -> Option<Option<(String, String)>> {
    match event {
        Ok(Event::Init) => {
            pods.clear();
            None
        }
        Ok(Event::InitApply(mut o)) | Ok(Event::Apply(mut o)) => {
            o.types = Some(TypeMeta {
                api_version: "v1".into(),
                kind: "Pod".into(),
            });
            serde_json::to_value(o).ok().map(|v| pods.apply(v))
        }
        Ok(Event::Delete(o)) => o.metadata.name.as_deref().map(|n| pods.delete(n)),
        Ok(Event::InitDone) | Err(_) => Some(None),
    }
}

/// Re-decides the workloads of `namespace` a pod event concerns: those that may own the pod
/// (by its controller), or all of them after a re-list.
fn refresh_pods_of(
    waited: &mut [Waited],
    namespace: &str,
    changed: Option<Option<(String, String)>>,
    pods: &HashMap<String, NamespacePods>,
    started: Instant,
) {
    let owners: Option<Vec<String>> = match &changed {
        None => None,
        Some(None) => return,
        Some(Some((kind, name))) => Some(workload_names(kind, name)),
    };
    for w in waited.iter_mut().filter(|w| {
        w.workload
            && w.namespace.as_deref() == Some(namespace)
            && owners
                .as_ref()
                .is_none_or(|o| o.contains(&w.reference.name))
    }) {
        refresh(w, pods, started);
    }
}

/// Re-decides one object's status from what is known of it (and its pods).
fn refresh(w: &mut Waited, pods: &HashMap<String, NamespacePods>, started: Instant) {
    if w.scope.is_none() {
        return;
    }
    let Some(live) = &w.live else {
        if !w.read {
            return;
        }
        w.status = ObjectStatus::new(
            Readiness::NotFound,
            "NotFound",
            "the object no longer exists (deleted after the apply?)",
        );
        return;
    };
    let mut status = object_status(live);
    if status.state == Readiness::InProgress
        && w.workload
        && let Some(failed) = w
            .namespace
            .as_ref()
            .and_then(|ns| pods.get(ns))
            .and_then(|ns| ns.failure_for(live))
    {
        status = failed;
    }
    if status.state == Readiness::Current && w.current_after.is_none() {
        w.current_after = Some(started.elapsed());
    }
    w.status = status;
}

/// `3 of 5 current; waiting for apps/v1 Deployment shop/web: Available: 0/1 (12 s)`.
fn progress_line(waited: &[Waited], current: usize, started: Instant) -> String {
    let pending = waited.iter().find(|w| w.status.state != Readiness::Current);
    let elapsed = started.elapsed().as_secs();
    match pending {
        None => format!("{current} of {} current", waited.len()),
        Some(w) => format!(
            "waiting: {current} of {} current; {}: {} ({}) [{elapsed} s]",
            waited.len(),
            w.reference,
            w.status.message,
            w.status.reason
        ),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn kinds_without_status_are_current_once_applied() {
        assert!(exists_is_current("", "ConfigMap"));
        assert!(exists_is_current(
            "rbac.authorization.k8s.io",
            "ClusterRole"
        ));
        assert!(!exists_is_current("apps", "Deployment"));
        assert!(!exists_is_current("", "Service"));
        assert!(!exists_is_current("postgresql.cnpg.io", "Cluster"));
    }
}
