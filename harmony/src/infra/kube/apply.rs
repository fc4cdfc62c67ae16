use async_trait::async_trait;
use futures::FutureExt;
use futures::future::BoxFuture;
use futures::stream::{self, StreamExt};
use kube::api::{Api, DeleteParams, DynamicObject};
use std::collections::{BTreeSet, HashMap};
use std::sync::Arc;
use std::time::Duration;

use super::apply_object::{PhaseRules, PhaseTask, apply_object};
use super::error::map;
use super::live_state::{LiveState, absent_names, live_key};
use super::resolve::ResolvedKind;
use super::topology::K8sTopology;
use crate::domain::capability::{
    ApplyFailure, ApplyOptions, CapabilityError, K8sClient, K8sObject, ObjectRef, Readiness,
    WaitCondition, WaitOutcome,
};
use crate::domain::{ChangeAction, ObjectChange, WaitPolicy, WaitedStatus, report_progress};

/// Namespaced objects that name no namespace go here, as with kubectl and no context namespace.
pub(super) const DEFAULT_NAMESPACE: &str = "default";
/// How long applied CRDs get to become Established before their custom resources are applied.
const CRD_ESTABLISH_TIMEOUT: Duration = Duration::from_secs(60);
const POLL_INTERVAL: Duration = Duration::from_millis(250);

fn is_namespace(r: &ObjectRef) -> bool {
    r.api_version == "v1" && r.kind == "Namespace"
}

fn is_crd(r: &ObjectRef) -> bool {
    r.group() == "apiextensions.k8s.io" && r.kind == "CustomResourceDefinition"
}

/// The kinds a CRD manifest serves, one per served version (empty when the manifest is partial).
fn served_kinds(crd: &serde_json::Value) -> Vec<ObjectRef> {
    let spec = &crd["spec"];
    let (Some(group), Some(kind)) = (spec["group"].as_str(), spec["names"]["kind"].as_str()) else {
        return Vec::new();
    };
    spec["versions"]
        .as_array()
        .into_iter()
        .flatten()
        .filter(|v| v["served"].as_bool().unwrap_or(true))
        .filter_map(|v| v["name"].as_str())
        .map(|version| ObjectRef {
            api_version: format!("{group}/{version}"),
            kind: kind.to_string(),
            namespace: None,
            name: String::new(),
        })
        .collect()
}

impl K8sTopology {
    pub(super) fn api(
        &self,
        kind: &ResolvedKind,
        namespace: Option<&str>,
    ) -> Result<Api<DynamicObject>, CapabilityError> {
        let client = self.connection()?.client.clone();
        Ok(if kind.namespaced {
            Api::namespaced_with(
                client,
                namespace.unwrap_or(DEFAULT_NAMESPACE),
                &kind.resource,
            )
        } else {
            Api::all_with(client, &kind.resource)
        })
    }

    async fn api_for(&self, r: &ObjectRef) -> Result<Api<DynamicObject>, CapabilityError> {
        let conn = self.connection()?;
        let kind = self.kinds.resolve(&conn.client, &conn.server, r).await?;
        self.api(&kind, r.namespace.as_deref())
    }

    fn server(&self) -> String {
        self.connection()
            .map(|c| c.server.clone())
            .unwrap_or_default()
    }

    /// What this topology does to objects, for progress lines: `comparing` in plan mode
    /// (server-side dry run), `applying` otherwise.
    fn verb(&self) -> &'static str {
        if self.dry_run() {
            "comparing"
        } else {
            "applying"
        }
    }

    /// Applies one phase concurrently (bounded), keeping input order in the result.
    async fn apply_phase(
        &self,
        objects: &[&K8sObject],
        force: bool,
        done: &mut Vec<ObjectChange>,
    ) -> Result<(), CapabilityError> {
        let live = self.live_state(objects, &BTreeSet::new()).await;
        self.apply_known(objects, live, force, done).await
    }

    /// [`Self::apply_phase`] with the phase's live state already learned (an object with no
    /// entry in `live` is read with a GET).
    async fn apply_known(
        &self,
        objects: &[&K8sObject],
        mut live: LiveState,
        force: bool,
        done: &mut Vec<ObjectChange>,
    ) -> Result<(), CapabilityError> {
        let conn = self.connection()?;
        let rules = Arc::new(PhaseRules {
            force,
            dry_run: self.dry_run(),
            skip_unchanged: self.skip_unchanged(),
            field_manager: self.field_manager().to_string(),
            server: self.server(),
        });
        let mut ordered: Vec<Option<Result<ObjectChange, CapabilityError>>> =
            (0..objects.len()).map(|_| None).collect();
        // Owned jobs, so that the phase runs as one task on the runtime's workers, beside the
        // HTTP connections' tasks, instead of on the caller's (often `block_on`'s) thread:
        // every request and response then crossed threads, and 1,000 creates cost Harmony
        // 0.25 s of CPU instead of 0.19 s (bench_apply, ADR 0036).
        let mut jobs: Vec<BoxFuture<'static, (usize, Result<ObjectChange, CapabilityError>)>> =
            Vec::with_capacity(objects.len());
        for (i, o) in objects.iter().enumerate() {
            let r = o.reference();
            let kind = self.kinds.resolve(&conn.client, &conn.server, r).await;
            match kind.and_then(|kind| {
                let api = self.api(&kind, r.namespace.as_deref())?;
                Ok((api, live.remove(&live_key(&kind, r))))
            }) {
                Ok((api, known)) => {
                    let (rules, object) = (rules.clone(), K8sObject::clone(o));
                    jobs.push(
                        async move { (i, apply_object(&rules, &api, &object, known).await) }
                            .boxed(),
                    );
                }
                Err(e) => ordered[i] = Some(Err(e)),
            }
        }
        let concurrency = self.concurrency();
        let phase = PhaseTask::spawn(
            stream::iter(jobs)
                .buffer_unordered(concurrency)
                .collect::<Vec<_>>(),
        );
        for (i, r) in phase.finish(&rules.server).await? {
            ordered[i] = Some(r);
        }
        let mut first_error = None;
        for r in ordered.into_iter().flatten() {
            match r {
                Ok(c) => done.push(c),
                Err(e) if first_error.is_none() => first_error = Some(e),
                Err(_) => {}
            }
        }
        first_error.map_or(Ok(()), Err)
    }

    /// Namespaces used by `objects` that are neither declared nor present: created first.
    async fn implicit_namespaces(
        &self,
        objects: &[K8sObject],
    ) -> Result<Vec<K8sObject>, CapabilityError> {
        let declared: BTreeSet<&str> = objects
            .iter()
            .map(K8sObject::reference)
            .filter(|r| is_namespace(r))
            .map(|r| r.name.as_str())
            .collect();
        let used: BTreeSet<&str> = objects
            .iter()
            .filter_map(|o| o.reference().namespace.as_deref())
            .filter(|ns| !declared.contains(ns))
            .collect();
        let mut missing = Vec::new();
        for ns in used {
            let object = K8sObject::new(
                serde_json::json!({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": ns}}),
            )?;
            if self.get(object.reference()).await?.is_none() {
                missing.push(object);
            }
        }
        Ok(missing)
    }

    async fn wait_established(&self, crds: &[&K8sObject]) -> Result<(), CapabilityError> {
        for crd in crds {
            self.wait_for(
                crd.reference(),
                &WaitCondition::condition("Established"),
                CRD_ESTABLISH_TIMEOUT,
            )
            .await?;
        }
        self.kinds.clear().await;
        // Established can come before the server's discovery serves the new kinds; custom
        // resources applied in that gap would be refused as unknown kinds.
        let deadline = tokio::time::Instant::now() + CRD_ESTABLISH_TIMEOUT;
        for kind in crds.iter().flat_map(|c| served_kinds(c.value())) {
            let conn = self.connection()?;
            loop {
                match self.kinds.resolve(&conn.client, &conn.server, &kind).await {
                    Ok(_) => break,
                    Err(CapabilityError::UnknownKind { .. })
                        if tokio::time::Instant::now() < deadline =>
                    {
                        tokio::time::sleep(POLL_INTERVAL).await;
                    }
                    Err(e) => return Err(e),
                }
            }
        }
        Ok(())
    }
    /// Applies without ownership bookkeeping: namespaces, then CRDs (awaited), then the rest.
    pub(super) async fn apply_plain(
        &self,
        objects: &[K8sObject],
        force: bool,
    ) -> Result<Vec<ObjectChange>, ApplyFailure> {
        let mut done = Vec::with_capacity(objects.len());
        let fail = |done: Vec<ObjectChange>, error| ApplyFailure {
            applied: done,
            error,
        };
        let implicit = match self.implicit_namespaces(objects).await {
            Ok(n) => n,
            Err(e) => return Err(fail(done, e)),
        };
        let namespaces: Vec<&K8sObject> = implicit
            .iter()
            .chain(objects.iter().filter(|o| is_namespace(o.reference())))
            .collect();
        let crds: Vec<&K8sObject> = objects.iter().filter(|o| is_crd(o.reference())).collect();
        let mut rest: Vec<&K8sObject> = objects
            .iter()
            .filter(|o| !is_namespace(o.reference()) && !is_crd(o.reference()))
            .collect();
        // The namespaces' live state says which are absent, and no object can live in a
        // namespace that does not exist: their objects are known absent without a LIST (a
        // first apply into new namespaces lists nothing but the namespaces). Without CRDs,
        // every other kind resolves now, and the LISTs of the namespaces that exist need not
        // wait for the namespaces' PATCHes, which change no object: they run meanwhile.
        let ns_live = self.live_state(&namespaces, &BTreeSet::new()).await;
        let absent: BTreeSet<String> = implicit
            .iter()
            .map(|n| n.reference().name.as_str())
            .chain(absent_names(&ns_live))
            .map(str::to_string)
            .collect();
        let (namespaced, live) = if crds.is_empty() {
            let (applied, live) = futures::join!(
                self.apply_known(&namespaces, ns_live, force, &mut done),
                self.live_state(&rest, &absent)
            );
            (applied, Some(live))
        } else {
            let applied = self
                .apply_known(&namespaces, ns_live, force, &mut done)
                .await;
            (applied, None)
        };
        if let Err(e) = namespaced {
            return Err(fail(done, e));
        }
        if self.dry_run() {
            // A dry run cannot create a namespace, and the server refuses to dry-run objects
            // inside one that does not exist: those objects are planned as creates unvalidated.
            let pending: BTreeSet<&str> = namespaces
                .iter()
                .zip(&done)
                .filter(|(_, c)| c.action == ChangeAction::Create)
                .map(|(n, _)| n.reference().name.as_str())
                .collect();
            let server = self.server();
            rest.retain(|o| {
                let inside = o
                    .reference()
                    .namespace
                    .as_deref()
                    .is_some_and(|ns| pending.contains(ns));
                if inside {
                    done.push(ObjectChange {
                        object: o.reference().to_string(),
                        action: ChangeAction::Create,
                        location: Some(format!(
                            "{server} (namespace not created yet: not validated by the server)"
                        )),
                        diff: Vec::new(),
                        status: None,
                    });
                }
                !inside
            });
        }
        if !crds.is_empty() {
            if let Err(e) = self.apply_phase(&crds, force, &mut done).await {
                return Err(fail(done, e));
            }
            if !self.dry_run()
                && let Err(e) = self.wait_established(&crds).await
            {
                return Err(fail(done, e));
            }
        }
        report_progress(format!(
            "{} namespace(s) and CRD(s) ready, {} {} object(s)",
            done.len(),
            self.verb(),
            rest.len()
        ));
        let live = match live {
            Some(live) => live,
            None => self.live_state(&rest, &absent).await,
        };
        if let Err(e) = self.apply_known(&rest, live, force, &mut done).await {
            return Err(fail(done, e));
        }
        Ok(done)
    }
}

impl K8sTopology {
    /// [`K8sClient::apply`] with `wait` instead of this topology's wait policy (the region
    /// agent takes the policy from each request). Plan mode never waits.
    pub async fn apply_with_wait(
        &self,
        objects: &[K8sObject],
        options: &ApplyOptions,
        wait: WaitPolicy,
    ) -> Result<Vec<ObjectChange>, ApplyFailure> {
        let force = options.force_conflicts || self.force_all();
        let changes = match &options.owner {
            None => self.apply_plain(objects, force).await,
            Some(owner) => {
                let namespace = options.owner_namespace.as_deref();
                self.apply_owned(owner, namespace, objects, force).await
            }
        }?;
        if self.dry_run() || !wait.enabled || objects.is_empty() {
            return Ok(changes);
        }
        self.wait_applied(objects, changes, wait.timeout).await
    }

    /// Waits for the applied `objects` to become current and records each one's final status
    /// in its change; fails naming every object that is not current.
    async fn wait_applied(
        &self,
        objects: &[K8sObject],
        mut changes: Vec<ObjectChange>,
        timeout: Duration,
    ) -> Result<Vec<ObjectChange>, ApplyFailure> {
        let mut seen = BTreeSet::new();
        let refs: Vec<ObjectRef> = objects
            .iter()
            .map(|o| o.reference().clone())
            .filter(|r| seen.insert(r.clone()))
            .collect();
        report_progress(format!(
            "waiting for {} object(s) to be current (timeout {} s)",
            refs.len(),
            timeout.as_secs()
        ));
        let (statuses, timed_out) = match self.wait_current(&refs, timeout).await {
            Ok(s) => s,
            Err(error) => {
                return Err(ApplyFailure {
                    applied: changes,
                    error,
                });
            }
        };
        let mut not_current = Vec::new();
        let mut by_name: HashMap<String, WaitedStatus> = HashMap::new();
        for (r, status) in statuses {
            if status.status.state != Readiness::Current {
                not_current.push((r.to_string(), status.status.clone()));
            }
            by_name.insert(r.to_string(), status);
        }
        for c in changes
            .iter_mut()
            .filter(|c| c.action != ChangeAction::Delete)
        {
            c.status = by_name.remove(&c.object);
        }
        if not_current.is_empty() {
            report_progress(format!("{} object(s) current", refs.len()));
            Ok(changes)
        } else {
            Err(ApplyFailure {
                applied: changes,
                error: CapabilityError::NotCurrent {
                    objects: not_current,
                    timed_out,
                },
            })
        }
    }
}

#[async_trait]
impl K8sClient for K8sTopology {
    async fn apply(
        &self,
        objects: &[K8sObject],
        options: &ApplyOptions,
    ) -> Result<Vec<ObjectChange>, ApplyFailure> {
        self.apply_with_wait(objects, options, self.wait_policy())
            .await
    }

    async fn get(&self, object: &ObjectRef) -> Result<Option<K8sObject>, CapabilityError> {
        let api = self.api_for(object).await?;
        let found = api
            .get_opt(&object.name)
            .await
            .map_err(|e| map(object, &self.server(), e))?;
        match found {
            None => Ok(None),
            Some(o) => K8sObject::new(serde_json::to_value(o).map_err(|e| {
                CapabilityError::InvalidObject {
                    object: object.to_string(),
                    problem: e.to_string(),
                }
            })?)
            .map(Some),
        }
    }

    async fn delete(&self, object: &ObjectRef) -> Result<ObjectChange, CapabilityError> {
        let api = self.api_for(object).await?;
        let server = self.server();
        let params = DeleteParams {
            dry_run: self.dry_run(),
            ..DeleteParams::background()
        };
        let action = match api.delete(&object.name, &params).await {
            Ok(_) => ChangeAction::Delete,
            Err(kube::Error::Api(s)) if s.code == 404 => ChangeAction::Unchanged,
            Err(e) => return Err(map(object, &server, e)),
        };
        Ok(ObjectChange {
            object: object.to_string(),
            action,
            location: Some(server),
            diff: Vec::new(),
            status: None,
        })
    }

    async fn wait_for(
        &self,
        object: &ObjectRef,
        condition: &WaitCondition,
        timeout: Duration,
    ) -> Result<WaitOutcome, CapabilityError> {
        condition
            .poll(
                format!("{condition} on {object}"),
                timeout,
                POLL_INTERVAL,
                || self.get(object),
            )
            .await
    }

    fn apply_progress(&self, what: &str) -> String {
        let server = self.server();
        let at = if server.is_empty() {
            String::new()
        } else {
            format!(" at {server}")
        };
        if self.dry_run() {
            format!(
                "{} {what} with the cluster{at} (server-side dry run; nothing is changed)",
                self.verb()
            )
        } else {
            format!("{} {what} to the cluster{at}", self.verb())
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_crd_serves_one_kind_per_served_version() {
        let crd = serde_json::json!({
            "apiVersion": "apiextensions.k8s.io/v1",
            "kind": "CustomResourceDefinition",
            "spec": {
                "group": "example.com",
                "names": {"kind": "Widget"},
                "versions": [
                    {"name": "v1", "served": true},
                    {"name": "v1beta1", "served": false},
                    {"name": "v2"},
                ],
            },
        });
        let kinds: Vec<String> = served_kinds(&crd)
            .iter()
            .map(|r| format!("{} {}", r.api_version, r.kind))
            .collect();
        assert_eq!(kinds, ["example.com/v1 Widget", "example.com/v2 Widget"]);
        assert!(served_kinds(&serde_json::json!({"spec": {}})).is_empty());
    }
}
