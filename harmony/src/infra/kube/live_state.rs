//! What the server holds for a phase's objects, learned with one paginated LIST per (resource,
//! namespace) instead of a GET per object.

use futures::FutureExt;
use futures::future::BoxFuture;
use futures::stream::{self, StreamExt};
use kube::api::{DynamicObject, ListParams, TypeMeta};
use std::collections::{BTreeSet, HashMap};

use super::apply::DEFAULT_NAMESPACE;
use super::resolve::ResolvedKind;
use super::topology::K8sTopology;
use crate::domain::capability::{K8sObject, ObjectRef};

/// Items per LIST page when learning a phase's live objects: large enough that 1,000 objects
/// of a kind in a namespace cost two round trips, small enough that a page stays a few MiB.
const LIST_PAGE: u32 = 500;
/// A LIST stops paging once it has read this many items beyond the ones a phase declares
/// (plus one page): a namespace holding far more objects of a kind than are applied would
/// otherwise cost more to list than a GET per applied object. Objects not seen by then are
/// fetched one by one.
const LIST_SLACK_FACTOR: usize = 4;

/// A (resource, namespace) a phase applies objects to: what one LIST covers.
#[derive(Clone, PartialEq, Eq, Hash)]
pub(super) struct ListScope {
    group: String,
    version: String,
    plural: String,
    namespace: Option<String>,
}

impl ListScope {
    /// The scope of object `r`, of kind `kind`.
    fn of(kind: &ResolvedKind, r: &ObjectRef) -> Self {
        Self {
            group: kind.resource.group.clone(),
            version: kind.resource.version.clone(),
            plural: kind.resource.plural.clone(),
            namespace: kind.namespaced.then(|| {
                r.namespace
                    .as_deref()
                    .unwrap_or(DEFAULT_NAMESPACE)
                    .to_string()
            }),
        }
    }
}

/// Object `r`'s place in a [`LiveState`], given its kind.
pub(super) fn live_key(kind: &ResolvedKind, r: &ObjectRef) -> LiveKey {
    (ListScope::of(kind, r), r.name.clone())
}

/// The names of the objects a [`LiveState`] shows absent (for the namespaces' own state: the
/// namespaces that do not exist).
pub(super) fn absent_names(live: &LiveState) -> impl Iterator<Item = &str> {
    live.iter()
        .filter(|(_, object)| object.is_none())
        .map(|((_, name), _)| name.as_str())
}

/// What the server held for each object just before a phase, keyed by scope and name:
/// `Some(None)` means absent. An object with no entry is unknown and is read with a GET.
pub(super) type LiveState = HashMap<LiveKey, Option<DynamicObject>>;
/// An object's place in [`LiveState`]: its scope and name.
pub(super) type LiveKey = (ListScope, String);
/// The entries one LIST vouches for.
type Listed = Vec<(LiveKey, Option<DynamicObject>)>;

impl K8sTopology {
    /// Learns the live state of a phase's objects with one paginated LIST per (resource,
    /// namespace) holding two or more of them, so that applying an object costs one request
    /// (the PATCH) instead of two (GET, then PATCH). An object whose kind does not resolve
    /// gets no entry: applying it reports that error.
    ///
    /// A scope with a single object is left to a GET: a LIST would cost the same one request
    /// and return more. A LIST that fails (typically 403: the agent's least-privilege
    /// ServiceAccount may get and patch resource quotas, limit ranges, role bindings and CRDs
    /// without being allowed to list them) leaves its objects to a GET each, which is what
    /// a GET-only permission allows and reports any real error against the object itself.
    ///
    /// Objects in `absent_namespaces` (namespaces this apply saw absent) are known absent
    /// without a request: no object can live in a namespace that does not exist.
    pub(super) async fn live_state(
        &self,
        objects: &[&K8sObject],
        absent_namespaces: &BTreeSet<String>,
    ) -> LiveState {
        let mut live = LiveState::new();
        let Ok(conn) = self.connection() else {
            return live;
        };
        let mut scopes: HashMap<ListScope, (ResolvedKind, Vec<String>)> = HashMap::new();
        // Sequential: after the first object of a kind, resolving is a cache lookup.
        for o in objects {
            let r = o.reference();
            let Ok(kind) = self.kinds.resolve(&conn.client, &conn.server, r).await else {
                continue;
            };
            let (scope, name) = live_key(&kind, r);
            if scope
                .namespace
                .as_ref()
                .is_some_and(|ns| absent_namespaces.contains(ns))
            {
                live.insert((scope, name), None);
                continue;
            }
            scopes
                .entry(scope)
                .or_insert_with(|| (kind, Vec::new()))
                .1
                .push(name);
        }
        let lists: Vec<BoxFuture<'_, Listed>> = scopes
            .into_iter()
            .filter(|(_, (_, names))| names.len() > 1)
            .map(|(scope, (kind, names))| {
                async move {
                    let listed = self.list_scope(&kind, &scope, &names).await;
                    listed
                        .into_iter()
                        .map(|(name, o)| ((scope.clone(), name), o))
                        .collect()
                }
                .boxed()
            })
            .collect();
        let found: Vec<_> = stream::iter(lists)
            .buffer_unordered(self.concurrency())
            .collect()
            .await;
        live.extend(found.into_iter().flatten());
        live
    }

    /// Lists one scope page by page and says, for each of `names` it can vouch for, whether
    /// the object exists. Names left out (list refused, or stopped early) are read with a GET.
    async fn list_scope(
        &self,
        kind: &ResolvedKind,
        scope: &ListScope,
        names: &[String],
    ) -> Vec<(String, Option<DynamicObject>)> {
        let Ok(api) = self.api(kind, scope.namespace.as_deref()) else {
            return Vec::new();
        };
        let wanted: BTreeSet<&str> = names.iter().map(String::as_str).collect();
        let budget = wanted.len() * LIST_SLACK_FACTOR + LIST_PAGE as usize;
        // Items of a list carry no apiVersion and kind; the report compares whole objects.
        let types = TypeMeta {
            api_version: kind.resource.api_version.clone(),
            kind: kind.resource.kind.clone(),
        };
        let mut seen: HashMap<String, DynamicObject> = HashMap::new();
        let mut read = 0;
        let mut params = ListParams::default().limit(LIST_PAGE);
        let complete = loop {
            let Ok(page) = api.list(&params).await else {
                return Vec::new();
            };
            read += page.items.len();
            for mut item in page.items {
                let Some(name) = item.metadata.name.clone() else {
                    continue;
                };
                if wanted.contains(name.as_str()) {
                    item.types = Some(types.clone());
                    seen.insert(name, item);
                }
            }
            match page.metadata.continue_.filter(|c| !c.is_empty()) {
                None => break true,
                // Every declared object is known: the rest of the list cannot change that.
                Some(_) if seen.len() == wanted.len() => break false,
                Some(_) if read >= budget => break false,
                Some(token) => params = params.continue_token(&token),
            }
        };
        wanted
            .into_iter()
            .filter_map(|name| match seen.remove(name) {
                Some(o) => Some((name.to_string(), Some(o))),
                None if complete => Some((name.to_string(), None)),
                None => None,
            })
            .collect()
    }
}
