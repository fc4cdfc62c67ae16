//! `SplitPlaneTopology`: one `K8sClient` over two API servers, placing each object by the rules
//! of [`super::placement`], checking closure first, and labelling every change with its plane.

use async_trait::async_trait;
use std::collections::{BTreeMap, BTreeSet};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Mutex, MutexGuard};
use std::time::Duration;

use super::closure;
use super::placement::{
    Decision, KindOverrides, KindRule, Placement, Plane, builtin, group_kind, key_of, place,
};
use super::references::Key;
use crate::domain::capability::{
    ApplyFailure, ApplyOptions, CapabilityError, K8sClient, K8sObject, ObjectRef, WaitCondition,
    WaitOutcome,
};
use crate::domain::{
    ChangeAction, ExecutionMode, ObjectChange, PreparationError, PreparationOutcome, RunContext,
    Topology,
};
use crate::infra::render::RenderTopology;

/// The data key of the kubeconfig Secret given to runnables.
pub const KUBECONFIG_KEY: &str = "kubeconfig";

/// A Secret on the control plane holding credentials for the data plane.
struct KubeconfigSecret {
    namespace: String,
    name: String,
    // Never printed: the topology has no Debug and reports show only the Secret's identity.
    kubeconfig: String,
}

impl KubeconfigSecret {
    fn object(&self) -> Result<K8sObject, CapabilityError> {
        K8sObject::new(serde_json::json!({
            "apiVersion": "v1",
            "kind": "Secret",
            "metadata": {
                "name": self.name,
                "namespace": self.namespace,
                "labels": {"app.kubernetes.io/managed-by": "harmony"},
            },
            "type": "Opaque",
            "stringData": { KUBECONFIG_KEY: self.kubeconfig },
        }))
    }

    fn key(&self) -> Key {
        Key {
            group: String::new(),
            kind: "Secret".into(),
            namespace: Some(self.namespace.clone()),
            name: self.name.clone(),
        }
    }
}

/// One topology over two API servers: runnables and what their pods need on the control plane,
/// everything else on the data plane. Generic over the plane clients, so the same Scores apply
/// to two `K8sTopology` values or render into two folders with [`SplitPlaneTopology::rendered`].
pub struct SplitPlaneTopology<C, D = C> {
    name: String,
    control: C,
    data: D,
    overrides: KindOverrides,
    kubeconfig: Option<KubeconfigSecret>,
    prune: bool,
    /// Where objects went earlier in this run: later Scores' closure checks count them (in plan
    /// mode they are not live yet), and get/delete/wait go to the right plane.
    placed: Mutex<BTreeMap<Key, BTreeSet<Plane>>>,
    kubeconfig_applied: AtomicBool,
}

impl<C, D> SplitPlaneTopology<C, D> {
    /// A split topology named `name`; `ctx` tells it whether `--prune` was asked, so a plane a
    /// Score no longer uses is still pruned.
    pub fn new(name: impl Into<String>, control: C, data: D, ctx: &RunContext) -> Self {
        Self {
            name: name.into(),
            control,
            data,
            overrides: KindOverrides::new(),
            kubeconfig: None,
            prune: ctx.prune,
            placed: Mutex::new(BTreeMap::new()),
            kubeconfig_applied: AtomicBool::new(false),
        }
    }

    /// Places every object of `group_kind` (`Kind` for core kinds, `Kind.group` otherwise, e.g.
    /// `PersistentVolumeClaim`, `Job.batch`) on `placement`; the object annotation still wins.
    pub fn with_kind_placement(
        mut self,
        group_kind: impl Into<String>,
        placement: Placement,
    ) -> Self {
        self.overrides.insert(group_kind.into(), placement);
        self
    }

    /// Gives runnables a Secret `namespace/name` on the control plane whose key `kubeconfig`
    /// holds `kubeconfig` (credentials for the data plane). Applied once per run before the first
    /// control-plane objects, without an owner (never pruned); reports show only its identity.
    pub fn with_data_plane_kubeconfig(
        mut self,
        namespace: impl Into<String>,
        name: impl Into<String>,
        kubeconfig: impl Into<String>,
    ) -> Self {
        self.kubeconfig = Some(KubeconfigSecret {
            namespace: namespace.into(),
            name: name.into(),
            kubeconfig: kubeconfig.into(),
        });
        self
    }

    /// The control-plane client.
    pub fn control(&self) -> &C {
        &self.control
    }

    /// The data-plane client.
    pub fn data(&self) -> &D {
        &self.data
    }

    fn placed(&self) -> MutexGuard<'_, BTreeMap<Key, BTreeSet<Plane>>> {
        // A panic elsewhere cannot leave the map half-updated (single inserts), so keep using it.
        self.placed.lock().unwrap_or_else(|e| e.into_inner())
    }
}

impl SplitPlaneTopology<RenderTopology> {
    /// Render mode: `<out>/control-plane/kubernetes/...` and `<out>/data-plane/kubernetes/...`.
    pub fn rendered(name: impl Into<String>, ctx: &RunContext) -> Self {
        let site = |plane: Plane| RenderTopology::from_context(ctx).with_site(plane.label());
        Self::new(name, site(Plane::Control), site(Plane::Data), ctx)
    }
}

/// `control-plane: runnable`, or `both (data-plane): ...` for an object on both planes.
fn label(plane: Plane, d: &Decision) -> String {
    match d.placement {
        Placement::Both => format!("both ({plane}): {}", d.reason),
        _ => format!("{plane}: {}", d.reason),
    }
}

/// Puts the plane and the reason in front of the backend's location (server or file).
fn relabel(plane: Plane, mut c: ObjectChange, labels: &BTreeMap<String, String>) -> ObjectChange {
    let why = labels.get(&c.object).cloned().unwrap_or_else(|| {
        // Objects the plane client added on its own: implicit namespaces, ownership records, prunes.
        if c.action == ChangeAction::Delete {
            format!("{plane}: pruned, no longer declared")
        } else if c.object.starts_with("v1 Namespace ") {
            format!("{plane}: namespace used by objects placed here")
        } else {
            format!("{plane}: ownership record")
        }
    });
    c.location = Some(match c.location.take() {
        Some(loc) => format!("{why} @ {loc}"),
        None => why,
    });
    c
}

impl<C, D> SplitPlaneTopology<C, D>
where
    C: K8sClient + Topology,
    D: K8sClient + Topology,
{
    /// Where each of `objects` would go and why, without touching either plane.
    pub fn placement(&self, objects: &[K8sObject]) -> Result<Vec<Decision>, CapabilityError> {
        place(objects, &self.overrides)
    }

    fn client(&self, plane: Plane) -> &dyn K8sClient {
        match plane {
            Plane::Control => &self.control,
            Plane::Data => &self.data,
        }
    }

    fn remember(&self, plane: Plane, objects: &[K8sObject]) {
        let mut placed = self.placed();
        for o in objects {
            placed
                .entry(key_of(o.reference()))
                .or_default()
                .insert(plane);
        }
    }

    /// Fails, naming pod template and missing object, when a runnable needs an object that is
    /// neither declared for its plane (now or earlier in this run) nor present there. A
    /// ServiceAccount this apply does not declare is read on the runnable's plane: the image
    /// pull secrets it lists are needed there too.
    async fn check_closure(
        &self,
        objects: &[K8sObject],
        decisions: &[Decision],
    ) -> Result<(), CapabilityError> {
        let mut requirements = closure::requirements(objects, decisions);
        let mut live: BTreeMap<(Plane, Key), bool> = BTreeMap::new();
        let earlier = self.placed().clone();
        for (plane, template, sa) in closure::undeclared_service_accounts(objects, decisions) {
            // Declared earlier in this run (maybe not live yet, in plan mode): that apply
            // placed its pull secrets with it.
            if earlier.get(&sa).is_some_and(|p| p.contains(&plane)) {
                continue;
            }
            let found = match live.get(&(plane, sa.clone())) {
                Some(false) => None,
                _ => self.client(plane).get(&sa.object_ref()).await?,
            };
            live.insert((plane, sa), found.is_some());
            if let Some(account) = found {
                requirements.extend(closure::live_pull_secrets(plane, &template, &account));
            }
        }
        if requirements.is_empty() {
            return Ok(());
        }
        let mut declared_on = earlier;
        for (o, d) in objects.iter().zip(decisions) {
            declared_on
                .entry(key_of(o.reference()))
                .or_default()
                .extend(d.placement.planes());
        }
        if let Some(k) = &self.kubeconfig {
            declared_on
                .entry(k.key())
                .or_default()
                .insert(Plane::Control);
        }
        let mut missing = Vec::new();
        for r in requirements {
            if declared_on
                .get(&r.target)
                .is_some_and(|planes| planes.contains(&r.plane))
            {
                continue;
            }
            let lookup = (r.plane, r.target.clone());
            let present = match live.get(&lookup) {
                Some(p) => *p,
                None => {
                    let p = self
                        .client(r.plane)
                        .get(&r.target.object_ref())
                        .await?
                        .is_some();
                    live.insert(lookup, p);
                    p
                }
            };
            if !present {
                missing.push(r);
            }
        }
        if missing.is_empty() {
            Ok(())
        } else {
            Err(closure::error(&missing, &declared_on))
        }
    }

    /// Applies the data-plane kubeconfig Secret once per run, before control-plane objects.
    async fn apply_kubeconfig(
        &self,
        options: &ApplyOptions,
    ) -> Result<Vec<ObjectChange>, ApplyFailure> {
        let Some(k) = &self.kubeconfig else {
            return Ok(Vec::new());
        };
        if self.kubeconfig_applied.load(Ordering::SeqCst) {
            return Ok(Vec::new());
        }
        let secret = k.object().map_err(|error| ApplyFailure {
            applied: Vec::new(),
            error,
        })?;
        let unowned = ApplyOptions {
            owner: None,
            ..options.clone()
        };
        let labels = BTreeMap::from([(
            secret.reference().to_string(),
            format!(
                "{}: kubeconfig for runnables to reach the data plane",
                Plane::Control
            ),
        )]);
        let relabel_all = |changes: Vec<ObjectChange>| -> Vec<ObjectChange> {
            changes
                .into_iter()
                .map(|c| relabel(Plane::Control, c, &labels))
                .collect()
        };
        match self
            .control
            .apply(std::slice::from_ref(&secret), &unowned)
            .await
        {
            Ok(changes) => {
                self.kubeconfig_applied.store(true, Ordering::SeqCst);
                self.remember(Plane::Control, std::slice::from_ref(&secret));
                Ok(relabel_all(changes))
            }
            Err(f) => Err(ApplyFailure {
                applied: relabel_all(f.applied),
                error: f.error,
            }),
        }
    }

    /// The planes an object not placed in this run lives on: its kind override, else its kind's rule.
    fn candidate_planes(&self, object: &ObjectRef) -> Vec<Plane> {
        if let Some(planes) = self.placed().get(&key_of(object)) {
            return planes.iter().copied().collect();
        }
        if let Some(p) = self.overrides.get(&group_kind(object)) {
            return p.planes().to_vec();
        }
        match builtin(object).map(|k| k.rule) {
            Some(KindRule::Runnable) => vec![Plane::Control],
            // Pod inputs, RBAC and namespaces may be on either plane.
            Some(_) => Plane::ALL.to_vec(),
            None => vec![Plane::Data],
        }
    }
}

#[async_trait]
impl<C, D> Topology for SplitPlaneTopology<C, D>
where
    C: K8sClient + Topology,
    D: K8sClient + Topology,
{
    fn name(&self) -> &str {
        &self.name
    }

    fn mode(&self) -> ExecutionMode {
        self.control.mode()
    }

    async fn ensure_ready(&self) -> Result<PreparationOutcome, PreparationError> {
        let fail = |reason: String| PreparationError {
            topology: self.name.clone(),
            reason,
        };
        if self.control.mode() != self.data.mode() {
            return Err(fail(format!(
                "the control plane runs in {} mode but the data plane in {} mode; build both from the same RunContext",
                self.control.mode(),
                self.data.mode()
            )));
        }
        let (control, data) =
            futures::future::join(self.control.ensure_ready(), self.data.ensure_ready()).await;
        let mut failures = Vec::new();
        let mut messages = Vec::new();
        for (plane, result) in [(Plane::Control, control), (Plane::Data, data)] {
            match result {
                Ok(PreparationOutcome::Success(m)) => messages.push(format!("{plane}: {m}")),
                Ok(PreparationOutcome::Noop) => {}
                Err(e) => failures.push(format!(
                    "{plane} (topology {:?}) is not ready: {}",
                    e.topology, e.reason
                )),
            }
        }
        if !failures.is_empty() {
            return Err(fail(failures.join("; ")));
        }
        Ok(if messages.is_empty() {
            PreparationOutcome::Noop
        } else {
            PreparationOutcome::Success(messages.join("; "))
        })
    }
}

#[async_trait]
impl<C, D> K8sClient for SplitPlaneTopology<C, D>
where
    C: K8sClient + Topology,
    D: K8sClient + Topology,
{
    /// Places, checks closure (nothing is applied when it fails), then applies the data plane
    /// and the control plane, each with the same owner so each plane prunes its own objects.
    async fn apply(
        &self,
        objects: &[K8sObject],
        options: &ApplyOptions,
    ) -> Result<Vec<ObjectChange>, ApplyFailure> {
        let early = |error| ApplyFailure {
            applied: Vec::new(),
            error,
        };
        let decisions = place(objects, &self.overrides).map_err(early)?;
        self.check_closure(objects, &decisions)
            .await
            .map_err(early)?;
        let mut done: Vec<ObjectChange> = Vec::new();
        // Data plane first: controllers started on the control plane find their APIs served.
        for plane in [Plane::Data, Plane::Control] {
            let mut mine = Vec::new();
            let mut labels = BTreeMap::new();
            for (o, d) in objects.iter().zip(&decisions) {
                if d.placement.includes(plane) {
                    mine.push(o.clone());
                    labels.insert(o.reference().to_string(), label(plane, d));
                }
            }
            if plane == Plane::Control && !mine.is_empty() {
                match self.apply_kubeconfig(options).await {
                    Ok(c) => done.extend(c),
                    Err(f) => {
                        done.extend(f.applied);
                        return Err(ApplyFailure {
                            applied: done,
                            error: f.error,
                        });
                    }
                }
            }
            // An owner with nothing left on a plane still applies (empty) there to prune it.
            if mine.is_empty() && !(self.prune && options.owner.is_some()) {
                continue;
            }
            match self.client(plane).apply(&mine, options).await {
                Ok(changes) => {
                    done.extend(changes.into_iter().map(|c| relabel(plane, c, &labels)));
                    self.remember(plane, &mine);
                }
                Err(f) => {
                    done.extend(f.applied.into_iter().map(|c| relabel(plane, c, &labels)));
                    return Err(ApplyFailure {
                        applied: done,
                        error: f.error,
                    });
                }
            }
        }
        Ok(done)
    }

    /// Reads from the plane the object was placed on in this run, else the planes its kind
    /// may live on (control first).
    async fn get(&self, object: &ObjectRef) -> Result<Option<K8sObject>, CapabilityError> {
        for plane in self.candidate_planes(object) {
            if let Some(found) = self.client(plane).get(object).await? {
                return Ok(Some(found));
            }
        }
        Ok(None)
    }

    /// Deletes from every plane the object may be on.
    async fn delete(&self, object: &ObjectRef) -> Result<ObjectChange, CapabilityError> {
        let mut action = ChangeAction::Unchanged;
        let mut locations = Vec::new();
        for plane in self.candidate_planes(object) {
            let c = self.client(plane).delete(object).await?;
            if c.action == ChangeAction::Delete {
                action = ChangeAction::Delete;
            }
            locations.push(match c.location {
                Some(loc) => format!("{plane} @ {loc}"),
                None => plane.to_string(),
            });
        }
        self.placed().remove(&key_of(object));
        Ok(ObjectChange {
            object: object.to_string(),
            action,
            location: Some(locations.join("; ")),
            diff: Vec::new(),
            status: None,
        })
    }

    /// Waits on the plane(s) the object is on: all of them for deletion, else the first that
    /// has it (the last candidate when none has it yet).
    async fn wait_for(
        &self,
        object: &ObjectRef,
        condition: &WaitCondition,
        timeout: Duration,
    ) -> Result<WaitOutcome, CapabilityError> {
        let planes = self.candidate_planes(object);
        let chosen: Vec<Plane> = if *condition == WaitCondition::Deleted || planes.len() == 1 {
            planes
        } else {
            let mut holder = None;
            for plane in &planes {
                if self.client(*plane).get(object).await?.is_some() {
                    holder = Some(*plane);
                    break;
                }
            }
            holder.or(planes.last().copied()).into_iter().collect()
        };
        let mut outcome = WaitOutcome::Satisfied;
        for plane in chosen {
            if let WaitOutcome::Skipped { reason } = self
                .client(plane)
                .wait_for(object, condition, timeout)
                .await?
            {
                outcome = WaitOutcome::Skipped {
                    reason: format!("{plane}: {reason}"),
                };
            }
        }
        Ok(outcome)
    }

    /// One line per plane when the planes say different things (two render folders, say).
    fn apply_progress(&self, what: &str) -> String {
        let data = self.client(Plane::Data).apply_progress(what);
        let control = self.client(Plane::Control).apply_progress(what);
        if data == control {
            data
        } else {
            format!("data plane: {data}; control plane: {control}")
        }
    }
}

#[cfg(test)]
#[path = "topology_tests.rs"]
mod tests;
