//! Applying as an owner: the ApplySet parent record, its members, and pruning what the owner
//! no longer declares.

use kube::api::{Api, DynamicObject, ListParams};
use kube::discovery::Scope;
use std::collections::BTreeSet;

use super::applyset::{ApplySet, Contents, PART_OF, split_group_kind};
use super::error::describe;
use super::topology::K8sTopology;
use crate::domain::capability::{ApplyFailure, CapabilityError, K8sClient, K8sObject, ObjectRef};
use crate::domain::{ObjectChange, report_progress};

impl K8sTopology {
    /// Applies as `owner` (recorded in `namespace`, or cluster-wide): parent record first
    /// (superset of kinds), members labelled, then prune (with `--prune`) and shrink the record
    /// to what is declared now. An owner recorded in a namespace prunes in that namespace only,
    /// whatever its record says.
    pub(super) async fn apply_owned(
        &self,
        owner: &str,
        namespace: Option<&str>,
        objects: &[K8sObject],
        force: bool,
    ) -> Result<Vec<ObjectChange>, ApplyFailure> {
        let fail = |applied, error| ApplyFailure { applied, error };
        let set = ApplySet::for_owner_in(owner, namespace);
        let members: Vec<K8sObject> = objects.iter().map(|o| set.label(o)).collect();
        let current = Contents::of(&members);
        let previous = match self.get(&set.parent).await {
            Ok(p) => Contents::from_parent(p.as_ref()),
            Err(e) => return Err(fail(Vec::new(), e)),
        };
        // Recording every kind that may hold members before touching them means an
        // interrupted run can still find and prune them later.
        let superset = previous.union(&current);
        let parent = set
            .parent_object(owner, &superset)
            .map_err(|e| fail(Vec::new(), e))?;
        let mut done = self.apply_plain(&[parent], force).await?;
        if let Err(f) = self
            .apply_plain(&members, force)
            .await
            .map(|c| done.extend(c))
        {
            return Err(fail([done, f.applied].concat(), f.error));
        }
        if !self.prune_enabled() {
            return Ok(done);
        }
        let keep: BTreeSet<MemberKey> = members.iter().map(|m| member_key(m.reference())).collect();
        let scope = match namespace {
            Some(ns) => Contents {
                group_kinds: superset.group_kinds.clone(),
                namespaces: [ns.to_string()].into(),
            },
            None => superset.clone(),
        };
        match self.prune(&set, &scope, &keep, namespace.is_none()).await {
            Ok(deleted) => done.extend(deleted),
            Err(e) => return Err(fail(done, e)),
        }
        if superset != current {
            let parent = set
                .parent_object(owner, &current)
                .map_err(|e| fail(Vec::new(), e))?;
            if let Err(f) = self
                .apply_plain(&[parent], force)
                .await
                .map(|c| done.extend(c))
            {
                return Err(fail([done, f.applied].concat(), f.error));
            }
        }
        Ok(done)
    }

    /// Deletes objects labelled as members of `set`, in the kinds and namespaces of `scope`,
    /// that are not in `keep` (cluster-scoped kinds only when `cluster_wide`). Only objects
    /// carrying the set's label are ever listed.
    async fn prune(
        &self,
        set: &ApplySet,
        scope: &Contents,
        keep: &BTreeSet<MemberKey>,
        cluster_wide: bool,
    ) -> Result<Vec<ObjectChange>, CapabilityError> {
        let conn = self.connection()?;
        let selector = format!("{PART_OF}={}", set.id);
        let mut deleted = Vec::new();
        for gk in &scope.group_kinds {
            let (group, kind) = split_group_kind(gk);
            // A kind the server no longer serves cannot hold members any more.
            let Some((resource, caps)) = kube::discovery::group(&conn.client, group)
                .await
                .ok()
                .and_then(|g| g.recommended_kind(kind))
            else {
                continue;
            };
            let apis: Vec<Api<DynamicObject>> = if caps.scope == Scope::Namespaced {
                scope
                    .namespaces
                    .iter()
                    .map(|ns| Api::namespaced_with(conn.client.clone(), ns, &resource))
                    .collect()
            } else if cluster_wide {
                vec![Api::all_with(conn.client.clone(), &resource)]
            } else {
                continue;
            };
            for api in apis {
                let listed = api
                    .list(&ListParams::default().labels(&selector))
                    .await
                    .map_err(|e| CapabilityError::Unreachable {
                        server: conn.server.clone(),
                        reason: format!(
                            "listing {gk} owned by {}: {}",
                            set.parent.name,
                            describe(&e)
                        ),
                    })?;
                for item in listed {
                    let r = ObjectRef {
                        api_version: resource.api_version.clone(),
                        kind: kind.to_string(),
                        namespace: item.metadata.namespace.clone(),
                        name: item.metadata.name.clone().unwrap_or_default(),
                    };
                    if keep.contains(&member_key(&r)) {
                        continue;
                    }
                    report_progress(format!("pruning {r}"));
                    deleted.push(self.delete(&r).await?);
                }
            }
        }
        Ok(deleted)
    }
}

/// Identity of a member regardless of API version: group, kind, namespace, name.
type MemberKey = (String, String, Option<String>, String);

fn member_key(r: &ObjectRef) -> MemberKey {
    (
        r.group().to_string(),
        r.kind.clone(),
        r.namespace.clone(),
        r.name.clone(),
    )
}
