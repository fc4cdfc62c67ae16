//! Ownership and pruning, following the ApplySet conventions (KEP-3659) so kubectl can read them.
//!
//! Each owner (a Score) has a parent ConfigMap in `harmony-system` (in its project's namespace
//! for a tenant's owner, see [`ApplySet::for_owner_in`]) labelled
//! `applyset.kubernetes.io/id`, whose annotations list the group-kinds and namespaces its members
//! live in. Every member carries `applyset.kubernetes.io/part-of: <id>`. Pruning lists exactly
//! those kinds and namespaces with that label selector, so an object Harmony does not own is
//! never a candidate.

use base64::Engine;
use base64::engine::general_purpose::URL_SAFE_NO_PAD;
use serde_json::{Value, json};
use sha2::{Digest, Sha256};
use std::collections::BTreeSet;

use crate::domain::capability::{CapabilityError, K8sObject, ObjectRef};

/// Namespace of the parent objects.
pub(super) const PARENT_NAMESPACE: &str = "harmony-system";
pub(super) const PART_OF: &str = "applyset.kubernetes.io/part-of";
const ID: &str = "applyset.kubernetes.io/id";
const GROUP_KINDS: &str = "applyset.kubernetes.io/contains-group-kinds";
const NAMESPACES: &str = "applyset.kubernetes.io/additional-namespaces";
const TOOLING: &str = "applyset.kubernetes.io/tooling";
const MANAGED_BY: &str = "app.kubernetes.io/managed-by";

/// The ownership record (ApplySet parent) of `owner`: after its members are pruned, deleting it
/// forgets the owner entirely.
pub fn ownership_record(owner: &str) -> ObjectRef {
    ApplySet::for_owner(owner).parent
}

/// The set of objects one owner manages.
pub(super) struct ApplySet {
    pub id: String,
    pub parent: ObjectRef,
}

/// What the parent records: member group-kinds (`Kind` or `Kind.group`) and namespaces.
#[derive(Debug, Default, Clone, PartialEq, Eq)]
pub(super) struct Contents {
    pub group_kinds: BTreeSet<String>,
    pub namespaces: BTreeSet<String>,
}

impl Contents {
    pub(super) fn of(objects: &[K8sObject]) -> Self {
        Self {
            group_kinds: objects.iter().map(|o| group_kind(o.reference())).collect(),
            namespaces: objects
                .iter()
                .filter_map(|o| o.reference().namespace.clone())
                .collect(),
        }
    }

    pub(super) fn union(&self, other: &Self) -> Self {
        Self {
            group_kinds: self
                .group_kinds
                .union(&other.group_kinds)
                .cloned()
                .collect(),
            namespaces: self.namespaces.union(&other.namespaces).cloned().collect(),
        }
    }

    /// Reads the parent's annotations; a missing parent means an empty set.
    pub(super) fn from_parent(parent: Option<&K8sObject>) -> Self {
        let annotation = |key: &str| -> BTreeSet<String> {
            parent
                .and_then(|p| p.value().pointer("/metadata/annotations"))
                .and_then(|a| a.get(key))
                .and_then(Value::as_str)
                .map(|s| {
                    s.split(',')
                        .filter(|x| !x.is_empty())
                        .map(str::to_string)
                        .collect()
                })
                .unwrap_or_default()
        };
        Self {
            group_kinds: annotation(GROUP_KINDS),
            namespaces: annotation(NAMESPACES),
        }
    }
}

/// `Kind` for the core group, `Kind.group` otherwise, as ApplySet annotations spell them.
pub(super) fn group_kind(r: &ObjectRef) -> String {
    match r.group() {
        "" => r.kind.clone(),
        g => format!("{}.{g}", r.kind),
    }
}

/// Splits `Kind.group` back into (group, kind).
pub(super) fn split_group_kind(gk: &str) -> (&str, &str) {
    match gk.split_once('.') {
        Some((kind, group)) => (group, kind),
        None => ("", gk),
    }
}

/// A DNS-1123-safe rendering of an owner name (`Deployment web` -> `deployment-web`).
fn slug(owner: &str) -> String {
    let mut s: String = owner
        .chars()
        .map(|c| {
            if c.is_ascii_alphanumeric() {
                c.to_ascii_lowercase()
            } else {
                '-'
            }
        })
        .collect();
    while s.contains("--") {
        s = s.replace("--", "-");
    }
    let s = s.trim_matches('-');
    let s = if s.len() > 50 { &s[..50] } else { s };
    s.trim_end_matches('-').to_string()
}

impl ApplySet {
    pub(super) fn for_owner(owner: &str) -> Self {
        Self::for_owner_in(owner, None)
    }

    /// The set of `owner` recorded in `namespace` (`None`: the cluster-wide `harmony-system`).
    /// The namespace is part of the id, so equal owner names in two namespaces never share
    /// members.
    pub(super) fn for_owner_in(owner: &str, namespace: Option<&str>) -> Self {
        let namespace = namespace.unwrap_or(PARENT_NAMESPACE);
        let name = format!("harmony-{}", slug(owner));
        // The id formula is the KEP's: base64url(sha256(<name>.<namespace>.<kind>.<group>)).
        let digest = Sha256::digest(format!("{name}.{namespace}.ConfigMap.").as_bytes());
        Self {
            id: format!("applyset-{}-v1", URL_SAFE_NO_PAD.encode(digest)),
            parent: ObjectRef {
                api_version: "v1".into(),
                kind: "ConfigMap".into(),
                namespace: Some(namespace.into()),
                name,
            },
        }
    }

    /// The namespace the parent lives in.
    fn parent_namespace(&self) -> &str {
        self.parent.namespace.as_deref().unwrap_or(PARENT_NAMESPACE)
    }

    /// The member with its ownership labels.
    pub(super) fn label(&self, object: &K8sObject) -> K8sObject {
        object
            .clone()
            .with_label(PART_OF, &self.id)
            .with_label(MANAGED_BY, "harmony")
    }

    /// The parent ConfigMap recording `contents`.
    pub(super) fn parent_object(
        &self,
        owner: &str,
        contents: &Contents,
    ) -> Result<K8sObject, CapabilityError> {
        let join = |s: &BTreeSet<String>| s.iter().cloned().collect::<Vec<_>>().join(",");
        let namespaces: BTreeSet<String> = contents
            .namespaces
            .iter()
            .filter(|n| *n != self.parent_namespace())
            .cloned()
            .collect();
        K8sObject::new(json!({
            "apiVersion": "v1",
            "kind": "ConfigMap",
            "metadata": {
                "name": self.parent.name,
                "namespace": self.parent_namespace(),
                "labels": { ID: self.id, MANAGED_BY: "harmony" },
                "annotations": {
                    TOOLING: format!("harmony/v{}", env!("CARGO_PKG_VERSION")),
                    GROUP_KINDS: join(&contents.group_kinds),
                    NAMESPACES: join(&namespaces),
                    "harmony.io/owner": owner,
                }
            }
        }))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ids_slugs_and_group_kinds() {
        let a = ApplySet::for_owner("Deployment web");
        assert_eq!(a.parent.name, "harmony-deployment-web");
        assert!(
            a.id.starts_with("applyset-") && a.id.ends_with("-v1") && a.id.len() <= 63,
            "{}",
            a.id
        );
        assert_ne!(a.id, ApplySet::for_owner("Deployment api").id);
        assert_eq!(split_group_kind("Deployment.apps"), ("apps", "Deployment"));
        assert_eq!(
            split_group_kind("Cluster.postgresql.cnpg.io"),
            ("postgresql.cnpg.io", "Cluster")
        );
        assert_eq!(split_group_kind("ConfigMap"), ("", "ConfigMap"));
        let r = ObjectRef {
            api_version: "apps/v1".into(),
            kind: "Deployment".into(),
            namespace: None,
            name: "x".into(),
        };
        assert_eq!(group_kind(&r), "Deployment.apps");
    }

    #[test]
    fn equal_owner_names_in_two_namespaces_are_two_sets() {
        let a = ApplySet::for_owner_in("web", Some("acme-web"));
        let b = ApplySet::for_owner_in("web", Some("beta-web"));
        assert_ne!(a.id, b.id);
        assert_ne!(a.id, ApplySet::for_owner("web").id);
        assert_eq!(a.parent.namespace.as_deref(), Some("acme-web"));
        let parent = a
            .parent_object(
                "web",
                &Contents {
                    group_kinds: ["ConfigMap".to_string()].into(),
                    namespaces: ["acme-web".to_string()].into(),
                },
            )
            .unwrap();
        assert_eq!(
            parent.value().pointer("/metadata/namespace"),
            Some(&json!("acme-web"))
        );
    }

    #[test]
    fn parent_round_trips_contents() {
        let set = ApplySet::for_owner("x");
        let contents = Contents {
            group_kinds: ["ConfigMap".to_string(), "Deployment.apps".to_string()].into(),
            namespaces: ["a".to_string(), "b".to_string()].into(),
        };
        let parent = set.parent_object("x", &contents).unwrap();
        assert_eq!(Contents::from_parent(Some(&parent)), contents);
        assert_eq!(Contents::from_parent(None), Contents::default());
    }
}
