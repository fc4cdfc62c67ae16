//! The placement rules: which plane each object of one apply goes to, and why. Pure, no I/O.
//!
//! Runnables go to the control plane with what their pods need at run time (ServiceAccount and
//! its image pull secrets, the RBAC binding it, ConfigMaps, Secrets and PersistentVolumeClaims
//! the pod template uses, Services selecting the pods). Everything else goes to the data plane. Precedence: the `harmony.io/plane` annotation, then a per-kind override set
//! on the topology, then these rules.

use std::collections::{BTreeMap, BTreeSet};
use std::fmt;

use super::references::{
    Key, bound_service_accounts, data_references, pod_references, role_of,
    service_account_pull_secrets,
};
use super::selection::selects;
use crate::domain::capability::{CapabilityError, K8sObject, ObjectRef};

/// Annotation that pins an object to `control`, `data` or `both`, overriding every rule.
pub const PLANE_ANNOTATION: &str = "harmony.io/plane";

/// Reason given to objects no rule claims.
const NOT_NEEDED: &str = "not needed by any pod";

/// How many consumers a reason names before it summarises the rest.
const REASONS_SHOWN: usize = 3;

/// One of the two API servers.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum Plane {
    /// Runs the pods: runnables and what they need.
    Control,
    /// Holds every other object, custom resources included.
    Data,
}

impl Plane {
    /// Both planes, control first.
    pub const ALL: [Plane; 2] = [Plane::Control, Plane::Data];

    /// `control-plane` or `data-plane`, as reports and render folders spell it.
    pub fn label(self) -> &'static str {
        match self {
            Plane::Control => "control-plane",
            Plane::Data => "data-plane",
        }
    }

    fn index(self) -> usize {
        match self {
            Plane::Control => 0,
            Plane::Data => 1,
        }
    }
}

impl fmt::Display for Plane {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.label())
    }
}

/// Where an object goes.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Placement {
    /// The control-plane API server only.
    Control,
    /// The data-plane API server only.
    Data,
    /// Both API servers (an object pods read that data-plane objects also refer to).
    Both,
}

impl Placement {
    /// The planes this placement applies to, control first.
    pub fn planes(self) -> &'static [Plane] {
        match self {
            Placement::Control => &[Plane::Control],
            Placement::Data => &[Plane::Data],
            Placement::Both => &Plane::ALL,
        }
    }

    /// Reads `control`, `data` or `both` (the annotation's values).
    pub fn parse(text: &str) -> Option<Self> {
        match text {
            "control" => Some(Placement::Control),
            "data" => Some(Placement::Data),
            "both" => Some(Placement::Both),
            _ => None,
        }
    }

    fn of(control: bool, data: bool) -> Option<Self> {
        match (control, data) {
            (true, true) => Some(Placement::Both),
            (true, false) => Some(Placement::Control),
            (false, true) => Some(Placement::Data),
            (false, false) => None,
        }
    }

    /// Whether `plane` is one of this placement's planes.
    pub fn includes(self, plane: Plane) -> bool {
        self.planes().contains(&plane)
    }
}

impl fmt::Display for Placement {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            Placement::Control => "control",
            Placement::Data => "data",
            Placement::Both => "both",
        })
    }
}

/// How the rules treat a built-in kind.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum KindRule {
    /// Makes pods: always the control plane.
    Runnable,
    /// ConfigMap, Secret, ServiceAccount, PersistentVolumeClaim: wherever a pod template (or a
    /// data-plane object's `*SecretRef`/`*ConfigMapRef`, or a ServiceAccount's
    /// `imagePullSecrets`) uses it; the data plane when nothing does.
    PodInput,
    /// Service: wherever the pods its selector matches run; the data plane when it matches none.
    SelectsPods,
    /// RoleBinding, ClusterRoleBinding: wherever a ServiceAccount it binds is used by a pod.
    Binding,
    /// Role, ClusterRole: wherever a binding that references it goes.
    BoundRole,
    /// Namespace: wherever the objects inside it go.
    Namespace,
}

/// A built-in kind with a rule of its own. Kinds not listed, custom resources included, go to
/// the data plane.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct BuiltinKind {
    /// API group (`""` for core).
    pub group: &'static str,
    /// Kind.
    pub kind: &'static str,
    /// Whether objects of this kind live in a namespace (`default` when they name none).
    pub namespaced: bool,
    /// The rule that places it.
    pub rule: KindRule,
}

const fn kind(
    group: &'static str,
    kind: &'static str,
    namespaced: bool,
    rule: KindRule,
) -> BuiltinKind {
    BuiltinKind {
        group,
        kind,
        namespaced,
        rule,
    }
}

const RBAC: &str = "rbac.authorization.k8s.io";

/// Every built-in kind the rules know. A test asserts the plane of each one.
pub const BUILTIN_KINDS: &[BuiltinKind] = &[
    kind("", "Pod", true, KindRule::Runnable),
    kind("apps", "Deployment", true, KindRule::Runnable),
    kind("apps", "StatefulSet", true, KindRule::Runnable),
    kind("apps", "DaemonSet", true, KindRule::Runnable),
    kind("apps", "ReplicaSet", true, KindRule::Runnable),
    kind("batch", "Job", true, KindRule::Runnable),
    kind("batch", "CronJob", true, KindRule::Runnable),
    kind("", "ConfigMap", true, KindRule::PodInput),
    kind("", "Secret", true, KindRule::PodInput),
    kind("", "ServiceAccount", true, KindRule::PodInput),
    kind("", "PersistentVolumeClaim", true, KindRule::PodInput),
    kind("", "Service", true, KindRule::SelectsPods),
    kind(RBAC, "RoleBinding", true, KindRule::Binding),
    kind(RBAC, "ClusterRoleBinding", false, KindRule::Binding),
    kind(RBAC, "Role", true, KindRule::BoundRole),
    kind(RBAC, "ClusterRole", false, KindRule::BoundRole),
    kind("", "Namespace", false, KindRule::Namespace),
];

/// The built-in kind of `r`, if the rules know it.
pub fn builtin(r: &ObjectRef) -> Option<&'static BuiltinKind> {
    BUILTIN_KINDS
        .iter()
        .find(|k| k.kind == r.kind && k.group == r.group())
}

/// `Kind` for the core group, `Kind.group` otherwise: how per-kind overrides are keyed.
pub(super) fn group_kind(r: &ObjectRef) -> String {
    match r.group() {
        "" => r.kind.clone(),
        g => format!("{}.{g}", r.kind),
    }
}

/// The key of a declared object (namespace defaulted for namespaced built-in kinds).
pub(super) fn key_of(r: &ObjectRef) -> Key {
    Key::of(r, builtin(r).is_some_and(|k| k.namespaced))
}

/// Where one object goes and why.
#[derive(Debug, Clone, PartialEq, Eq, derive_new::new)]
#[new(visibility = "")]
pub struct Decision {
    /// The plane(s).
    pub placement: Placement,
    /// Why, for the report: `runnable`, `used by apps/v1 Deployment shop/web (envFrom)`, ...
    #[new(into)]
    pub reason: String,
}

/// Per-kind placements, keyed like [`group_kind`].
pub(super) type KindOverrides = BTreeMap<String, Placement>;

/// Who needs an object on one plane, and the sentence saying so.
#[derive(Debug, Clone)]
struct Need {
    by: String,
    reason: String,
}

/// Needs per plane, indexed by [`Plane::index`].
type PlaneNeeds = [Vec<Need>; 2];

fn summarise(needs: &[Need]) -> String {
    let mut seen = BTreeSet::new();
    let unique: Vec<&str> = needs
        .iter()
        .map(|n| n.reason.as_str())
        .filter(|r| seen.insert(*r))
        .collect();
    let mut text = unique
        .iter()
        .take(REASONS_SHOWN)
        .copied()
        .collect::<Vec<_>>()
        .join(", ");
    if unique.len() > REASONS_SHOWN {
        text.push_str(&format!(" and {} more", unique.len() - REASONS_SHOWN));
    }
    text
}

fn from_needs(needs: Option<&PlaneNeeds>) -> Decision {
    let empty = PlaneNeeds::default();
    let needs = needs.unwrap_or(&empty);
    let [control, data] = needs;
    match Placement::of(!control.is_empty(), !data.is_empty()) {
        None => Decision::new(Placement::Data, NOT_NEEDED),
        Some(Placement::Control) => Decision::new(Placement::Control, summarise(control)),
        Some(Placement::Data) => Decision::new(Placement::Data, summarise(data)),
        Some(Placement::Both) => Decision::new(
            Placement::Both,
            format!("{}; {}", summarise(control), summarise(data)),
        ),
    }
}

/// The placement an object's annotation or a kind override pins, if any.
fn pinned(
    object: &K8sObject,
    overrides: &KindOverrides,
) -> Result<Option<Decision>, CapabilityError> {
    let r = object.reference();
    let annotation = object
        .value()
        .pointer("/metadata/annotations")
        .and_then(|a| a.get(PLANE_ANNOTATION));
    if let Some(value) = annotation {
        return match value.as_str().and_then(Placement::parse) {
            Some(p) => Ok(Some(Decision::new(
                p,
                format!("annotation {PLANE_ANNOTATION}={p}"),
            ))),
            None => Err(CapabilityError::InvalidObject {
                object: r.to_string(),
                problem: format!(
                    "metadata.annotations.\"{PLANE_ANNOTATION}\" is {value}; use \"control\", \"data\" or \"both\""
                ),
            }),
        };
    }
    let gk = group_kind(r);
    Ok(overrides
        .get(&gk)
        .map(|p| Decision::new(*p, format!("kind override for {gk}"))))
}

fn push(needs: &mut BTreeMap<Key, PlaneNeeds>, target: Key, planes: &[Plane], need: &Need) {
    let entry = needs.entry(target).or_default();
    for p in planes {
        entry[p.index()].push(need.clone());
    }
}

/// Places `objects` (one apply), returning one decision per object, in order.
///
/// Fails only on an invalid `harmony.io/plane` annotation, naming the object.
pub(super) fn place(
    objects: &[K8sObject],
    overrides: &KindOverrides,
) -> Result<Vec<Decision>, CapabilityError> {
    let pins = objects
        .iter()
        .map(|o| pinned(o, overrides))
        .collect::<Result<Vec<_>, _>>()?;
    let rules: Vec<Option<KindRule>> = objects
        .iter()
        .map(|o| builtin(o.reference()).map(|k| k.rule))
        .collect();
    let mut decided: Vec<Option<Decision>> = vec![None; objects.len()];
    let mut needs: BTreeMap<Key, PlaneNeeds> = BTreeMap::new();
    let decide = |i: usize, otherwise: Decision| pins[i].clone().unwrap_or(otherwise);

    // Runnables and non-built-in objects are placed by kind alone; what they use follows them.
    for (i, o) in objects.iter().enumerate() {
        let by = o.reference().to_string();
        match rules[i] {
            Some(KindRule::Runnable) => {
                let d = decide(i, Decision::new(Placement::Control, "runnable"));
                for r in pod_references(o) {
                    let need = Need {
                        by: by.clone(),
                        reason: format!("used by {by} ({})", r.via),
                    };
                    push(&mut needs, r.target, d.placement.planes(), &need);
                }
                for (j, service) in objects.iter().enumerate() {
                    if rules[j] != Some(KindRule::SelectsPods) {
                        continue;
                    }
                    if let Some(selector) = selects(service, o) {
                        let need = Need {
                            by: by.clone(),
                            reason: format!("selects the pods of {by} ({selector})"),
                        };
                        push(
                            &mut needs,
                            key_of(service.reference()),
                            d.placement.planes(),
                            &need,
                        );
                    }
                }
                decided[i] = Some(d);
            }
            None => {
                let d = decide(i, Decision::new(Placement::Data, NOT_NEEDED));
                for (target, path) in data_references(o) {
                    let need = Need {
                        by: by.clone(),
                        reason: format!("referenced by {by} ({path})"),
                    };
                    push(&mut needs, target, d.placement.planes(), &need);
                }
                decided[i] = Some(d);
            }
            _ => {}
        }
    }
    // ServiceAccounts first: the image pull secrets they list go wherever they go.
    for (i, o) in objects.iter().enumerate() {
        if rules[i] != Some(KindRule::PodInput) || o.reference().kind != "ServiceAccount" {
            continue;
        }
        let d = decide(i, from_needs(needs.get(&key_of(o.reference()))));
        let sa = short(&key_of(o.reference()));
        for secret in service_account_pull_secrets(o) {
            let need = Need {
                by: o.reference().to_string(),
                reason: format!("image pull secret of ServiceAccount {sa}"),
            };
            push(&mut needs, secret, d.placement.planes(), &need);
        }
        decided[i] = Some(d);
    }
    for (i, o) in objects.iter().enumerate() {
        if matches!(rules[i], Some(KindRule::PodInput | KindRule::SelectsPods))
            && decided[i].is_none()
        {
            decided[i] = Some(decide(i, from_needs(needs.get(&key_of(o.reference())))));
        }
    }
    // A binding goes where the ServiceAccounts it binds run pods.
    for (i, o) in objects.iter().enumerate() {
        if rules[i] != Some(KindRule::Binding) {
            continue;
        }
        let mut own = PlaneNeeds::default();
        for sa in bound_service_accounts(o) {
            for plane in Plane::ALL {
                let users: BTreeSet<&str> = needs
                    .get(&sa)
                    .map(|n| &n[plane.index()])
                    .into_iter()
                    .flatten()
                    .map(|n| n.by.as_str())
                    .collect();
                if users.is_empty() {
                    continue;
                }
                let users: Vec<&str> = users.into_iter().collect();
                own[plane.index()].push(Need {
                    by: users.join(", "),
                    reason: format!(
                        "binds ServiceAccount {} used by {}",
                        short(&sa),
                        users.join(", ")
                    ),
                });
            }
        }
        let d = decide(i, from_needs(Some(&own)));
        if let Some(role) = role_of(o) {
            let by = o.reference().to_string();
            let need = Need {
                reason: format!("referenced by {by}"),
                by,
            };
            push(&mut needs, role, d.placement.planes(), &need);
        }
        decided[i] = Some(d);
    }
    for (i, o) in objects.iter().enumerate() {
        if rules[i] == Some(KindRule::BoundRole) {
            decided[i] = Some(decide(i, from_needs(needs.get(&key_of(o.reference())))));
        }
    }
    // A namespace goes wherever the objects inside it went.
    let mut used: BTreeMap<String, [bool; 2]> = BTreeMap::new();
    for (o, d) in objects.iter().zip(&decided) {
        if let (Some(ns), Some(d)) = (key_of(o.reference()).namespace, d) {
            let entry = used.entry(ns).or_default();
            for p in d.placement.planes() {
                entry[p.index()] = true;
            }
        }
    }
    for (i, o) in objects.iter().enumerate() {
        if rules[i] == Some(KindRule::Namespace) {
            let [control, data] = used
                .get(o.reference().name.as_str())
                .copied()
                .unwrap_or_default();
            let otherwise = match Placement::of(control, data) {
                Some(Placement::Control) => {
                    Decision::new(Placement::Control, "holds control-plane objects")
                }
                Some(Placement::Data) => Decision::new(Placement::Data, "holds data-plane objects"),
                Some(Placement::Both) => {
                    Decision::new(Placement::Both, "holds objects of both planes")
                }
                None => Decision::new(Placement::Data, "holds no object of this apply"),
            };
            decided[i] = Some(decide(i, otherwise));
        }
    }
    Ok(decided
        .into_iter()
        .map(|d| d.unwrap_or_else(|| Decision::new(Placement::Data, NOT_NEEDED)))
        .collect())
}

/// `shop/app` for a namespaced key, `app` otherwise.
fn short(k: &Key) -> String {
    match &k.namespace {
        Some(ns) => format!("{ns}/{}", k.name),
        None => k.name.clone(),
    }
}

#[cfg(test)]
#[path = "placement_tests.rs"]
mod tests;
