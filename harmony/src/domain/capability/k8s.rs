//! The Kubernetes capability: apply, get, delete and wait on objects of any kind.

use async_trait::async_trait;
use serde::Serialize;
use serde_json::Value;
use std::fmt;
use std::time::Duration;

use super::CapabilityError;
use crate::domain::outcome::ObjectChange;

/// Identity of a Kubernetes object: `apiVersion`, `kind`, optional namespace, name.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize)]
pub struct ObjectRef {
    /// `v1`, `apps/v1`, `postgresql.cnpg.io/v1`.
    pub api_version: String,
    /// `Deployment`, `Cluster`, ...
    pub kind: String,
    /// Namespace, absent for cluster-scoped objects.
    pub namespace: Option<String>,
    /// `metadata.name`.
    pub name: String,
}

impl ObjectRef {
    /// The API group (`""` for the core group).
    pub fn group(&self) -> &str {
        self.api_version
            .rsplit_once('/')
            .map(|(g, _)| g)
            .unwrap_or("")
    }

    /// The API version without the group (`v1`).
    pub fn version(&self) -> &str {
        self.api_version
            .rsplit_once('/')
            .map(|(_, v)| v)
            .unwrap_or(&self.api_version)
    }
}

impl fmt::Display for ObjectRef {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match &self.namespace {
            Some(ns) => write!(f, "{} {} {}/{}", self.api_version, self.kind, ns, self.name),
            None => write!(f, "{} {} {}", self.api_version, self.kind, self.name),
        }
    }
}

/// A Kubernetes object of any kind as a JSON tree whose identity fields were checked.
#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(transparent)]
pub struct K8sObject {
    value: Value,
    #[serde(skip)]
    reference: ObjectRef,
}

impl K8sObject {
    /// Checks that `value` has `apiVersion`, `kind` and `metadata.name` as non-empty strings.
    pub fn new(value: Value) -> Result<Self, CapabilityError> {
        let text = |ptr: &str| {
            value
                .pointer(ptr)
                .and_then(Value::as_str)
                .filter(|s| !s.is_empty())
        };
        let described = || {
            format!(
                "{} {}",
                text("/kind").unwrap_or("<no kind>"),
                text("/metadata/name").unwrap_or("<no name>")
            )
        };
        let missing = |field: &str| CapabilityError::InvalidObject {
            object: described(),
            problem: format!(
                "{field} is missing or not a non-empty string; set it in the manifest"
            ),
        };
        if !value.is_object() {
            return Err(CapabilityError::InvalidObject {
                object: "<not an object>".into(),
                problem: "a manifest must be a mapping with apiVersion, kind and metadata".into(),
            });
        }
        let reference = ObjectRef {
            api_version: text("/apiVersion")
                .ok_or_else(|| missing("apiVersion"))?
                .to_string(),
            kind: text("/kind").ok_or_else(|| missing("kind"))?.to_string(),
            namespace: text("/metadata/namespace").map(str::to_string),
            name: text("/metadata/name")
                .ok_or_else(|| missing("metadata.name"))?
                .to_string(),
        };
        Ok(Self { value, reference })
    }

    /// The object's identity.
    pub fn reference(&self) -> &ObjectRef {
        &self.reference
    }

    /// The full manifest (secret values included: never print it, use [`Self::redacted`]).
    pub fn value(&self) -> &Value {
        &self.value
    }

    /// The manifest with Secret values replaced, safe to show.
    pub fn redacted(&self) -> Value {
        crate::domain::redact::redact_object(&self.value)
    }

    /// Whether this is a core/v1 Secret.
    pub fn is_secret(&self) -> bool {
        crate::domain::redact::is_secret(&self.value)
    }

    /// The status (`True`, `False`, `Unknown`) of the condition `condition_type`, if reported.
    pub fn condition_status(&self, condition_type: &str) -> Option<&str> {
        self.value
            .pointer("/status/conditions")?
            .as_array()?
            .iter()
            .find(|c| c.get("type").and_then(Value::as_str) == Some(condition_type))?
            .get("status")
            .and_then(Value::as_str)
    }

    /// Every reported condition as `Type=Status (Reason)`, for messages about what a wait saw.
    pub fn describe_conditions(&self) -> String {
        let conditions: Vec<String> = self
            .value
            .pointer("/status/conditions")
            .and_then(Value::as_array)
            .map(|cs| {
                cs.iter()
                    .map(|c| {
                        let field = |k: &str| c.get(k).and_then(Value::as_str).unwrap_or("?");
                        format!(
                            "{}={} ({})",
                            field("type"),
                            field("status"),
                            field("reason")
                        )
                    })
                    .collect()
            })
            .unwrap_or_default();
        if conditions.is_empty() {
            "no conditions yet".into()
        } else {
            conditions.join(", ")
        }
    }

    /// Adds (or replaces) a label in `metadata.labels`.
    pub fn with_label(mut self, key: &str, value: &str) -> Self {
        if let Some(Value::Object(meta)) = self.value.get_mut("metadata") {
            let labels = meta
                .entry("labels")
                .or_insert_with(|| Value::Object(Default::default()));
            if let Value::Object(map) = labels {
                map.insert(key.into(), Value::String(value.into()));
            }
        }
        self
    }

    /// Sets `metadata.namespace` when absent (for namespaced kinds the caller knows about).
    pub fn with_default_namespace(mut self, namespace: &str) -> Self {
        if self.reference.namespace.is_none()
            && let Some(Value::Object(meta)) = self.value.get_mut("metadata")
        {
            meta.insert("namespace".into(), Value::String(namespace.into()));
            self.reference.namespace = Some(namespace.into());
        }
        self
    }
}

/// How to apply.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct ApplyOptions {
    /// Take ownership of fields another field manager owns instead of failing.
    pub force_conflicts: bool,
    /// Who owns these objects (the Score's name). Owned objects are labelled so that those the
    /// owner no longer declares can be pruned; nothing without the owner's label is ever pruned.
    pub owner: Option<String>,
    /// Where the owner's record lives, when it belongs to one namespace (a tenant's project):
    /// the record is kept there, so equal owner names in two namespaces are two owners, and a
    /// prune lists that namespace only. `None`: the cluster-wide record in `harmony-system`.
    pub owner_namespace: Option<String>,
}

/// What to wait for on an object.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum WaitCondition {
    /// The object exists.
    Exists,
    /// The object is gone.
    Deleted,
    /// `status.conditions[type=condition_type].status == status`.
    Condition {
        /// Condition type, e.g. `Available`, `Established`, `Ready`.
        condition_type: String,
        /// Expected status, usually `True`.
        status: String,
    },
}

impl WaitCondition {
    /// A named condition with status `True`.
    pub fn condition(condition_type: &str) -> Self {
        WaitCondition::Condition {
            condition_type: condition_type.into(),
            status: "True".into(),
        }
    }

    /// Whether `current` (the object as read, `None` when absent) satisfies the condition;
    /// otherwise what was seen instead, for the timeout message.
    pub fn check(&self, current: Option<&K8sObject>) -> Result<(), String> {
        match (current, self) {
            (Some(_), WaitCondition::Exists) | (None, WaitCondition::Deleted) => Ok(()),
            (Some(_), WaitCondition::Deleted) => Err("still exists".into()),
            (None, _) => Err("does not exist".into()),
            (
                Some(o),
                WaitCondition::Condition {
                    condition_type,
                    status,
                },
            ) => {
                if o.condition_status(condition_type) == Some(status.as_str()) {
                    Ok(())
                } else {
                    Err(o.describe_conditions())
                }
            }
        }
    }
}

impl fmt::Display for WaitCondition {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            WaitCondition::Exists => f.write_str("existence"),
            WaitCondition::Deleted => f.write_str("deletion"),
            WaitCondition::Condition {
                condition_type,
                status,
            } => {
                write!(f, "condition {condition_type}={status}")
            }
        }
    }
}

/// How a wait ended when it did not fail.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum WaitOutcome {
    /// The condition was observed.
    Satisfied,
    /// The backend has no live state to observe (render mode); nothing was checked.
    Skipped {
        /// Why the wait was skipped.
        reason: String,
    },
}

impl WaitCondition {
    /// Reads the object with `get` every `poll` until the condition holds or `timeout` passes:
    /// the loop of every [`K8sClient::wait_for`]. Errors a wait rides out, as `kubectl wait`
    /// does (unreachable, timed out, rejected, forbidden, not found), become the last thing
    /// seen; any other ends the wait. The timeout names `waited_for` and the last thing seen.
    pub async fn poll<F, Fut>(
        &self,
        waited_for: String,
        timeout: Duration,
        poll: Duration,
        mut get: F,
    ) -> Result<WaitOutcome, CapabilityError>
    where
        F: FnMut() -> Fut,
        Fut: std::future::Future<Output = Result<Option<K8sObject>, CapabilityError>>,
    {
        let started = std::time::Instant::now();
        loop {
            let last_seen = match get().await {
                Ok(current) => match self.check(current.as_ref()) {
                    Ok(()) => return Ok(WaitOutcome::Satisfied),
                    Err(seen) => seen,
                },
                Err(
                    e @ (CapabilityError::Unreachable { .. }
                    | CapabilityError::Timeout { .. }
                    | CapabilityError::Rejected { .. }
                    | CapabilityError::Forbidden { .. }
                    | CapabilityError::NotFound { .. }),
                ) => format!("error: {e}"),
                Err(e) => return Err(e),
            };
            if started.elapsed() >= timeout {
                return Err(CapabilityError::Timeout {
                    waited_for,
                    after: timeout,
                    last_seen,
                });
            }
            tokio::time::sleep(poll).await;
        }
    }
}

/// An apply that stopped part-way: what was applied before, and the error.
#[derive(Debug, thiserror::Error)]
#[error("{error}")]
pub struct ApplyFailure {
    /// Changes made before the failure.
    pub applied: Vec<ObjectChange>,
    /// The failure.
    #[source]
    pub error: CapabilityError,
}

/// Apply, read, delete and wait on Kubernetes objects of any kind, CRDs included.
///
/// In plan mode `apply` and `delete` compute and return the change without making it.
#[async_trait]
#[diagnostic::on_unimplemented(
    message = "topology `{Self}` has no Kubernetes capability (`K8sClient`)",
    label = "this Score needs a topology that implements `K8sClient`",
    note = "use a topology that offers Kubernetes (RenderTopology, K8sTopology, DefaultTopology) or implement `K8sClient` for `{Self}`; the PostgreSQL capabilities (`PostgreSQL`, `DistributedPostgreSQL`) come with Kubernetes, through CloudNativePG"
)]
pub trait K8sClient: Send + Sync {
    /// Applies `objects` (namespaces and CRDs first) and reports one change per object.
    async fn apply(
        &self,
        objects: &[K8sObject],
        options: &ApplyOptions,
    ) -> Result<Vec<ObjectChange>, ApplyFailure>;

    /// Reads an object; `None` when it does not exist.
    async fn get(&self, object: &ObjectRef) -> Result<Option<K8sObject>, CapabilityError>;

    /// Deletes an object; `Unchanged` when it was already absent.
    async fn delete(&self, object: &ObjectRef) -> Result<ObjectChange, CapabilityError>;

    /// Waits until `condition` holds on `object`, or fails with what was last seen.
    async fn wait_for(
        &self,
        object: &ObjectRef,
        condition: &WaitCondition,
        timeout: Duration,
    ) -> Result<WaitOutcome, CapabilityError>;

    /// The progress line for applying `what` (e.g. `3 object(s)`), in the words of what this
    /// client really does: a live client applies, render mode writes files (and names where),
    /// plan mode compares.
    fn apply_progress(&self, what: &str) -> String {
        format!("applying {what}")
    }
}

/// A borrowed Kubernetes client is one.
#[async_trait]
impl<K: K8sClient + ?Sized> K8sClient for &K {
    async fn apply(
        &self,
        objects: &[K8sObject],
        options: &ApplyOptions,
    ) -> Result<Vec<ObjectChange>, ApplyFailure> {
        (**self).apply(objects, options).await
    }

    async fn get(&self, object: &ObjectRef) -> Result<Option<K8sObject>, CapabilityError> {
        (**self).get(object).await
    }

    async fn delete(&self, object: &ObjectRef) -> Result<ObjectChange, CapabilityError> {
        (**self).delete(object).await
    }

    async fn wait_for(
        &self,
        object: &ObjectRef,
        condition: &WaitCondition,
        timeout: Duration,
    ) -> Result<WaitOutcome, CapabilityError> {
        (**self).wait_for(object, condition, timeout).await
    }

    fn apply_progress(&self, what: &str) -> String {
        (**self).apply_progress(what)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[tokio::test]
    async fn a_wait_rides_out_transient_errors_and_ends_on_others() {
        let ready = K8sObject::new(json!({"apiVersion": "apps/v1", "kind": "Deployment",
            "metadata": {"name": "web"},
            "status": {"conditions": [{"type": "Available", "status": "True"}]}}))
        .unwrap();
        let available = WaitCondition::condition("Available");
        let tick = Duration::from_millis(1);
        // A rejected read (an admission webhook restarting) is ridden out.
        let mut reads = vec![
            Ok(Some(ready.clone())),
            Err(CapabilityError::Rejected {
                object: "web".into(),
                server: "test".into(),
                message: "webhook unavailable".into(),
            }),
        ];
        let outcome = available
            .poll(
                "Available on web".into(),
                Duration::from_secs(5),
                tick,
                || {
                    let next = reads.pop().expect("read again after satisfied");
                    async move { next }
                },
            )
            .await
            .unwrap();
        assert_eq!(outcome, WaitOutcome::Satisfied);
        // A conflict is no transient state: the wait ends with it.
        let e = available
            .poll(
                "Available on web".into(),
                Duration::from_secs(5),
                tick,
                || async {
                    Err(CapabilityError::Conflict {
                        object: "web".into(),
                        manager: "other".into(),
                        fields: ".spec".into(),
                    })
                },
            )
            .await
            .unwrap_err();
        assert!(matches!(e, CapabilityError::Conflict { .. }), "{e}");
        // Out of time: the timeout names what was awaited and the last error seen.
        let e = available
            .poll("Available on web".into(), Duration::ZERO, tick, || async {
                Err(CapabilityError::NotFound {
                    object: "web".into(),
                    server: "test".into(),
                    message: "namespace shop not found".into(),
                })
            })
            .await
            .unwrap_err()
            .to_string();
        assert!(
            e.contains("Available on web") && e.contains("namespace shop not found"),
            "{e}"
        );
    }

    #[test]
    fn a_wait_condition_says_what_it_saw_instead() {
        let ready = |status: &str| {
            K8sObject::new(json!({"apiVersion": "apps/v1", "kind": "Deployment",
                "metadata": {"name": "web"},
                "status": {"conditions": [{"type": "Available", "status": status, "reason": "R"}]}}))
            .unwrap()
        };
        let available = WaitCondition::condition("Available");
        assert_eq!(available.check(Some(&ready("True"))), Ok(()));
        assert_eq!(
            available.check(Some(&ready("False"))),
            Err("Available=False (R)".to_string())
        );
        assert_eq!(available.check(None), Err("does not exist".to_string()));
        assert_eq!(WaitCondition::Exists.check(Some(&ready("True"))), Ok(()));
        assert_eq!(WaitCondition::Deleted.check(None), Ok(()));
        assert_eq!(
            WaitCondition::Deleted.check(Some(&ready("True"))),
            Err("still exists".to_string())
        );
    }

    #[test]
    fn identity_is_checked_and_named() {
        let o = K8sObject::new(json!({"apiVersion": "apps/v1", "kind": "Deployment",
            "metadata": {"name": "web", "namespace": "shop"}}))
        .unwrap();
        assert_eq!(o.reference().to_string(), "apps/v1 Deployment shop/web");
        assert_eq!(
            (o.reference().group(), o.reference().version()),
            ("apps", "v1")
        );
        let err = K8sObject::new(json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {}}))
            .unwrap_err();
        assert!(
            err.to_string().contains("metadata.name is missing"),
            "{err}"
        );
        let err =
            K8sObject::new(json!({"kind": "ConfigMap", "metadata": {"name": "x"}})).unwrap_err();
        assert!(
            err.to_string().contains("ConfigMap x") && err.to_string().contains("apiVersion"),
            "{err}"
        );
    }

    #[test]
    fn default_namespace_only_fills_gaps() {
        let o = K8sObject::new(
            json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "x"}}),
        )
        .unwrap()
        .with_default_namespace("default");
        assert_eq!(o.reference().namespace.as_deref(), Some("default"));
        assert_eq!(o.value()["metadata"]["namespace"], "default");
        let o = o.with_default_namespace("other");
        assert_eq!(o.reference().namespace.as_deref(), Some("default"));
    }
}
