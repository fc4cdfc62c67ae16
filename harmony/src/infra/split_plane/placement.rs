//! The placement rules: which plane each object of one apply goes to, and why. Pure, no I/O.
//!
//! Runnables go to the control plane with what their pods need at run time (ServiceAccount,
//! the RBAC binding it, ConfigMaps and Secrets the pod template uses). Everything else goes to
//! the data plane. Precedence: the `harmony.io/plane` annotation, then a per-kind override set
//! on the topology, then these rules.

use std::collections::{BTreeMap, BTreeSet};
use std::fmt;

use super::references::{Key, bound_service_accounts, data_references, pod_references, role_of};
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
    /// ConfigMap, Secret, ServiceAccount: wherever a pod template (or a data-plane object's
    /// `*SecretRef`/`*ConfigMapRef`) uses it; the data plane when nothing does.
    PodInput,
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
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Decision {
    /// The plane(s).
    pub placement: Placement,
    /// Why, for the report: `runnable`, `used by apps/v1 Deployment shop/web (envFrom)`, ...
    pub reason: String,
}

impl Decision {
    fn new(placement: Placement, reason: impl Into<String>) -> Self {
        Self {
            placement,
            reason: reason.into(),
        }
    }
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
    for (i, o) in objects.iter().enumerate() {
        if rules[i] == Some(KindRule::PodInput) {
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
mod tests {
    use super::*;
    use serde_json::{Value, json};

    fn obj(v: Value) -> K8sObject {
        K8sObject::new(v).unwrap()
    }

    fn api_version(group: &str) -> String {
        if group.is_empty() {
            "v1".into()
        } else {
            format!("{group}/v1")
        }
    }

    /// A minimal object of a built-in kind named `x` (in namespace `x` when namespaced).
    fn of_kind(k: &BuiltinKind) -> K8sObject {
        let mut v = json!({"apiVersion": api_version(k.group), "kind": k.kind,
            "metadata": {"name": "x"}});
        if k.namespaced {
            v["metadata"]["namespace"] = json!("x");
        }
        if k.rule == KindRule::Binding {
            let role = if k.kind == "RoleBinding" {
                "Role"
            } else {
                "ClusterRole"
            };
            v["roleRef"] = json!({"apiGroup": RBAC, "kind": role, "name": "r"});
            v["subjects"] = json!([{"kind": "ServiceAccount", "name": "x", "namespace": "x"}]);
        }
        obj(v)
    }

    /// A Deployment in namespace `x` using ServiceAccount, ConfigMap and Secret `x`.
    fn consumer() -> K8sObject {
        obj(json!({"apiVersion": "apps/v1", "kind": "Deployment",
            "metadata": {"name": "consumer", "namespace": "x"},
            "spec": {"selector": {}, "template": {"spec": {"serviceAccountName": "x",
                "volumes": [{"name": "v", "configMap": {"name": "x"}}],
                "containers": [{"name": "c", "envFrom": [{"secretRef": {"name": "x"}}]}]}}}}))
    }

    fn binding(kind: &str, role_kind: &str) -> K8sObject {
        let mut b = json!({"apiVersion": "rbac.authorization.k8s.io/v1", "kind": kind,
            "metadata": {"name": "b", "namespace": "x"},
            "roleRef": {"apiGroup": RBAC, "kind": role_kind, "name": "x"},
            "subjects": [{"kind": "ServiceAccount", "name": "x", "namespace": "x"}]});
        if kind == "ClusterRoleBinding" {
            b["metadata"].as_object_mut().unwrap().remove("namespace");
        }
        obj(b)
    }

    fn placed(objects: &[K8sObject]) -> Vec<Decision> {
        place(objects, &KindOverrides::new()).unwrap()
    }

    #[test]
    fn every_builtin_kind_has_a_known_plane_alone_and_next_to_a_pod_that_uses_it() {
        use Placement::{Control, Data};
        let mut checked = 0;
        for k in BUILTIN_KINDS {
            // (alone, in the company of a control-plane pod that uses it)
            let (alone, used) = match (k.group, k.kind) {
                ("", "Pod")
                | ("apps", "Deployment")
                | ("apps", "StatefulSet")
                | ("apps", "DaemonSet")
                | ("apps", "ReplicaSet")
                | ("batch", "Job")
                | ("batch", "CronJob") => (Control, Control),
                ("", "ConfigMap") | ("", "Secret") | ("", "ServiceAccount") => (Data, Control),
                (RBAC, "RoleBinding") | (RBAC, "ClusterRoleBinding") => (Data, Control),
                (RBAC, "Role") | (RBAC, "ClusterRole") => (Data, Control),
                ("", "Namespace") => (Data, Control),
                other => panic!("{other:?} has no expected plane here: add it to this test"),
            };
            checked += 1;
            let object = of_kind(k);
            assert_eq!(
                placed(std::slice::from_ref(&object))[0].placement,
                alone,
                "{} alone",
                k.kind
            );
            let mut scenario = vec![object, consumer()];
            match k.kind {
                "Role" => scenario.push(binding("RoleBinding", "Role")),
                "ClusterRole" => scenario.push(binding("ClusterRoleBinding", "ClusterRole")),
                _ => {}
            }
            let d = &placed(&scenario)[0];
            assert_eq!(d.placement, used, "{} used: {d:?}", k.kind);
        }
        assert_eq!(checked, BUILTIN_KINDS.len());
        // Anything else, custom resources and CRDs included, goes to the data plane.
        for (api, kind) in [
            ("example.com/v1", "Widget"),
            ("v1", "Service"),
            ("apiextensions.k8s.io/v1", "CustomResourceDefinition"),
        ] {
            let o = obj(json!({"apiVersion": api, "kind": kind, "metadata": {"name": "x"}}));
            assert_eq!(placed(&[o, consumer()])[0], Decision::new(Data, NOT_NEEDED));
        }
    }

    #[test]
    fn reasons_name_the_consumer_and_how_it_uses_the_object() {
        let sa = obj(
            json!({"apiVersion": "v1", "kind": "ServiceAccount", "metadata": {"name": "x", "namespace": "x"}}),
        );
        let cm = obj(
            json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "x", "namespace": "x"}}),
        );
        let unused = obj(
            json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "y", "namespace": "x"}}),
        );
        let ns = obj(json!({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "x"}}));
        let d = placed(&[
            consumer(),
            sa,
            cm,
            unused,
            binding("RoleBinding", "Role"),
            ns,
        ]);
        let reasons: Vec<(Placement, &str)> =
            d.iter().map(|d| (d.placement, d.reason.as_str())).collect();
        assert_eq!(
            reasons,
            [
                (Placement::Control, "runnable"),
                (
                    Placement::Control,
                    "used by apps/v1 Deployment x/consumer (serviceAccountName)"
                ),
                (
                    Placement::Control,
                    "used by apps/v1 Deployment x/consumer (volume \"v\")"
                ),
                (Placement::Data, NOT_NEEDED),
                (
                    Placement::Control,
                    "binds ServiceAccount x/x used by apps/v1 Deployment x/consumer"
                ),
                (Placement::Both, "holds objects of both planes"),
            ]
        );
    }

    #[test]
    fn a_secret_used_by_a_pod_and_referenced_by_a_custom_resource_goes_to_both() {
        let secret = |name: &str| {
            obj(
                json!({"apiVersion": "v1", "kind": "Secret", "metadata": {"name": name, "namespace": "x"}}),
            )
        };
        let widget = obj(json!({"apiVersion": "example.com/v1", "kind": "Widget",
            "metadata": {"name": "w", "namespace": "x"},
            "spec": {"credentialsSecretRef": {"name": "x"}, "tokenSecretRef": {"name": "token"}}}));
        let d = placed(&[consumer(), widget, secret("x"), secret("token")]);
        assert_eq!(d[1].placement, Placement::Data);
        assert_eq!(d[2].placement, Placement::Both);
        assert_eq!(
            d[2].reason,
            "used by apps/v1 Deployment x/consumer (envFrom); referenced by example.com/v1 Widget x/w (spec.credentialsSecretRef)"
        );
        assert_eq!(
            d[3],
            Decision::new(
                Placement::Data,
                "referenced by example.com/v1 Widget x/w (spec.tokenSecretRef)"
            )
        );
    }

    #[test]
    fn the_annotation_beats_kind_overrides_which_beat_the_rules() {
        let pvc = obj(
            json!({"apiVersion": "v1", "kind": "PersistentVolumeClaim", "metadata": {"name": "data", "namespace": "x"}}),
        );
        let pinned_cm = obj(json!({"apiVersion": "v1", "kind": "ConfigMap",
            "metadata": {"name": "x", "namespace": "x", "annotations": {PLANE_ANNOTATION: "both"}}}));
        let job = obj(
            json!({"apiVersion": "batch/v1", "kind": "Job", "metadata": {"name": "j", "namespace": "x"},
            "spec": {"template": {"spec": {"containers": [{"name": "c", "envFrom": [{"secretRef": {"name": "s"}}]}]}}}}),
        );
        let secret = obj(
            json!({"apiVersion": "v1", "kind": "Secret", "metadata": {"name": "s", "namespace": "x"}}),
        );
        let overrides = KindOverrides::from([
            ("PersistentVolumeClaim".to_string(), Placement::Control),
            ("ConfigMap".to_string(), Placement::Data),
            ("Job.batch".to_string(), Placement::Data),
        ]);
        let d = place(&[pvc, pinned_cm, job, secret], &overrides).unwrap();
        assert_eq!(
            d[0],
            Decision::new(
                Placement::Control,
                "kind override for PersistentVolumeClaim"
            )
        );
        assert_eq!(
            d[1],
            Decision::new(Placement::Both, "annotation harmony.io/plane=both")
        );
        assert_eq!(
            d[2],
            Decision::new(Placement::Data, "kind override for Job.batch")
        );
        // What a runnable uses follows it, wherever it was put.
        assert_eq!(d[3].placement, Placement::Data);
    }

    #[test]
    fn an_invalid_annotation_names_the_object_and_the_accepted_values() {
        let bad = obj(json!({"apiVersion": "v1", "kind": "ConfigMap",
            "metadata": {"name": "x", "namespace": "x", "annotations": {PLANE_ANNOTATION: "control-plane"}}}));
        let err = place(&[bad], &KindOverrides::new())
            .unwrap_err()
            .to_string();
        assert!(err.contains("v1 ConfigMap x/x"), "{err}");
        assert!(err.contains("\"control\", \"data\" or \"both\""), "{err}");
    }

    #[test]
    fn many_consumers_are_summarised() {
        let mut objects: Vec<K8sObject> = (0..5)
            .map(|i| obj(json!({"apiVersion": "v1", "kind": "Pod", "metadata": {"name": format!("p{i}")},
                "spec": {"containers": [{"name": "c", "envFrom": [{"configMapRef": {"name": "shared"}}]}]}})))
            .collect();
        objects.push(obj(
            json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "shared"}}),
        ));
        let d = placed(&objects);
        assert_eq!(d[5].placement, Placement::Control);
        assert!(d[5].reason.ends_with("and 2 more"), "{}", d[5].reason);
    }
}
