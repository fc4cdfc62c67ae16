//! Whether a server-side apply of an object would provably change nothing, decided from the
//! live object alone (read by the phase's LIST), so that its PATCH (or, in plan mode, its
//! dry-run PATCH) need not be sent.
//!
//! Both must hold, read from the live object's `managedFields` (the format of
//! kubernetes-sigs/structured-merge-diff, `FieldsV1`):
//!
//! 1. **Harmony owns exactly what it declares.** Its field manager's `Apply` entry (same
//!    `apiVersion`, no subresource) lists exactly the fields the desired object sets: the same
//!    `f:` names at every level; for an associative list the same `k:` keys, one per element;
//!    for a set the same `v:` values; an atomic field or list is a leaf. An apply that no longer
//!    declared a field it owns would remove it, so a different set is a change.
//! 2. **Every declared value is live.** Each field the desired object sets has the same value
//!    in the live object (live may hold more: defaults, other managers' fields). A leaf of the
//!    field set (scalar, atomic map or list) is compared whole; lists element by element, in
//!    order and length; scalars exactly (`"1000m"` is not `"1"`: a quantity the server
//!    normalised is sent again).
//!
//! Any doubt answers "not provably unchanged" (`false`): no Harmony entry, another version, an
//! `i:` (index) or unknown item, a `null` or `generateName` in the desired object, a list of
//! mixed kinds. The caller then sends the PATCH as before.

use serde_json::{Map, Value};

/// Whether applying `desired` as `manager` to `live` would change nothing (see the module
/// docs). `live` is the object as the server returned it, `managedFields` included.
pub(super) fn provably_unchanged(desired: &Value, live: &Value, manager: &str) -> bool {
    let Some(fields) = applied_fields(live, manager, desired.get("apiVersion")) else {
        return false;
    };
    let Some(declared) = declared_fields(desired) else {
        return false;
    };
    unchanged(&declared, live, fields)
}

/// The `fieldsV1` of `manager`'s `Apply` entry for `api_version` (main resource only).
fn applied_fields<'a>(
    live: &'a Value,
    manager: &str,
    api_version: Option<&Value>,
) -> Option<&'a Value> {
    let entries = live.pointer("/metadata/managedFields")?.as_array()?;
    let mut ours = entries.iter().filter(|e| {
        e.get("manager").and_then(Value::as_str) == Some(manager)
            && e.get("operation").and_then(Value::as_str) == Some("Apply")
            && e.get("subresource")
                .and_then(Value::as_str)
                .is_none_or(str::is_empty)
    });
    let entry = ours.next()?;
    if ours.next().is_some()
        || entry.get("apiVersion") != api_version
        || entry.get("fieldsType").and_then(Value::as_str) != Some("FieldsV1")
    {
        return None;
    }
    entry.get("fieldsV1")
}

/// The part of `desired` that field ownership covers: without `apiVersion`, `kind`,
/// `metadata.name` and `metadata.namespace` (the object's identity, never listed). `None` when
/// the object holds something this check does not decide (`null`, `generateName`).
fn declared_fields(desired: &Value) -> Option<Value> {
    let mut object = desired.as_object()?.clone();
    object.remove("apiVersion");
    object.remove("kind");
    if let Some(Value::Object(meta)) = object.get_mut("metadata") {
        if meta.contains_key("generateName") {
            return None;
        }
        meta.remove("name");
        meta.remove("namespace");
        if meta.is_empty() {
            object.remove("metadata");
        }
    }
    let declared = Value::Object(object);
    (!has_null(&declared)).then_some(declared)
}

fn has_null(v: &Value) -> bool {
    match v {
        Value::Null => true,
        Value::Object(m) => m.values().any(has_null),
        Value::Array(a) => a.iter().any(has_null),
        _ => false,
    }
}

/// The children of a `fieldsV1` node, without the `.` marker (the node itself).
fn children(node: &Value) -> Option<Vec<(&str, &Value)>> {
    Some(
        node.as_object()?
            .iter()
            .filter(|(k, _)| k.as_str() != ".")
            .map(|(k, v)| (k.as_str(), v))
            .collect(),
    )
}

/// Whether the field set `node` lists exactly the fields `declared` sets, each holding its
/// declared value in `live`. A leaf of the field set (a scalar, or an atomic map or list) must
/// be live exactly as declared: its owner owns the whole value.
fn unchanged(declared: &Value, live: &Value, node: &Value) -> bool {
    let Some(kids) = children(node) else {
        return false;
    };
    if kids.is_empty() {
        return declared == live;
    }
    match (declared, live) {
        (Value::Object(map), Value::Object(live_map)) => {
            kids.len() == map.len()
                && kids.iter().all(|(k, child)| {
                    let Some(name) = k.strip_prefix("f:") else {
                        return false;
                    };
                    match (map.get(name), live_map.get(name)) {
                        (Some(d), Some(l)) => unchanged(d, l, child),
                        _ => false,
                    }
                })
        }
        // In order and length: a reordered, shortened or extended list is sent again.
        (Value::Array(items), Value::Array(live_items)) if items.len() == live_items.len() => {
            if kids.iter().all(|(k, _)| k.starts_with("k:")) {
                associative_unchanged(items, live_items, &kids)
            } else if kids.iter().all(|(k, _)| k.starts_with("v:")) {
                items == live_items && set_owned(items, &kids)
            } else {
                // `i:` items or mixed: not decided here.
                false
            }
        }
        _ => false,
    }
}

/// The key fields of a `k:{...}` item.
fn item_key(k: &str) -> Option<Map<String, Value>> {
    match serde_json::from_str(k.strip_prefix("k:")?) {
        Ok(Value::Object(m)) => Some(m),
        _ => None,
    }
}

/// Whether `element` has exactly the values of `key` at its key fields.
fn matches_key(element: &Value, key: &Map<String, Value>) -> bool {
    !key.is_empty() && key.iter().all(|(f, v)| element.get(f) == Some(v))
}

/// Whether a declared element is the one keyed `key` in Harmony's entry `node`: each key field
/// it sets has the key's value; a key field it leaves out was not set by Harmony (no `f:` of
/// it in `node`): the server defaulted it when the entry was recorded (a Service port's
/// `protocol`), and the live element at its place must hold that key.
fn declared_key(element: &Value, key: &Map<String, Value>, node: &Value) -> bool {
    !key.is_empty()
        && key.iter().all(|(f, v)| match element.get(f) {
            Some(declared) => declared == v,
            None => node.get(format!("f:{f}")).is_none(),
        })
}

/// An associative list: one `k:` item per declared element, and each live element at the same
/// place has the same key and holds the declared fields.
fn associative_unchanged(items: &[Value], live: &[Value], kids: &[(&str, &Value)]) -> bool {
    if items.len() != kids.len() {
        return false;
    }
    let mut used = vec![false; kids.len()];
    items.iter().zip(live).all(|(item, live_item)| {
        let found = kids.iter().enumerate().find(|(i, (k, node))| {
            !used[*i]
                && item_key(k).is_some_and(|key| {
                    declared_key(item, &key, node) && matches_key(live_item, &key)
                })
        });
        match found {
            Some((i, (_, node))) => {
                used[i] = true;
                unchanged(item, live_item, node)
            }
            None => false,
        }
    })
}

/// A set: its `v:` items are exactly the declared values.
fn set_owned(items: &[Value], kids: &[(&str, &Value)]) -> bool {
    let values: Option<Vec<Value>> = kids
        .iter()
        .map(|(k, _)| serde_json::from_str(k.strip_prefix("v:")?).ok())
        .collect();
    let Some(values) = values else {
        return false;
    };
    items.len() == values.len()
        && items.iter().all(|i| values.contains(i))
        && values.iter().all(|v| items.contains(v))
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn deployment() -> Value {
        json!({
            "apiVersion": "apps/v1", "kind": "Deployment",
            "metadata": {"name": "web", "namespace": "shop", "labels": {"app": "web"}},
            "spec": {
                "replicas": 2,
                "selector": {"matchLabels": {"app": "web"}},
                "template": {
                    "metadata": {"labels": {"app": "web"}},
                    "spec": {"containers": [{
                        "name": "web", "image": "nginx:1.27",
                        "env": [{"name": "A", "value": "1"}, {"name": "B", "value": "2"}],
                        "args": ["--x", "--y"]
                    }]}
                }
            }
        })
    }

    /// What the API server records for `deployment()` applied by `harmony`.
    fn fields() -> Value {
        json!({
            "f:metadata": {"f:labels": {"f:app": {}}},
            "f:spec": {
                "f:replicas": {},
                "f:selector": {},
                "f:template": {
                    "f:metadata": {"f:labels": {"f:app": {}}},
                    "f:spec": {"f:containers": {"k:{\"name\":\"web\"}": {
                        ".": {}, "f:name": {}, "f:image": {}, "f:args": {},
                        "f:env": {
                            "k:{\"name\":\"A\"}": {".": {}, "f:name": {}, "f:value": {}},
                            "k:{\"name\":\"B\"}": {".": {}, "f:name": {}, "f:value": {}}
                        }
                    }}}
                }
            }
        })
    }

    /// The live object: the desired one, server defaults, another manager's label, and the
    /// managed fields.
    fn live(fields: Value) -> Value {
        let mut live = deployment();
        live["metadata"]["labels"]["team"] = json!("blue");
        live["metadata"]["resourceVersion"] = json!("7");
        live["spec"]["strategy"] = json!({"type": "RollingUpdate"});
        live["spec"]["template"]["spec"]["containers"][0]["terminationMessagePath"] =
            json!("/dev/termination-log");
        live["metadata"]["managedFields"] = json!([
            {"manager": "kubectl", "operation": "Update", "apiVersion": "apps/v1",
             "fieldsType": "FieldsV1", "fieldsV1": {"f:metadata": {"f:labels": {"f:team": {}}}}},
            {"manager": "harmony", "operation": "Apply", "apiVersion": "apps/v1",
             "fieldsType": "FieldsV1", "fieldsV1": fields}
        ]);
        live
    }

    #[test]
    fn an_object_harmony_owns_as_declared_with_live_values_is_unchanged() {
        assert!(provably_unchanged(
            &deployment(),
            &live(fields()),
            "harmony"
        ));
    }

    #[test]
    fn any_drift_or_doubt_sends_the_patch() {
        let desired = deployment();
        let drifted = |edit: &dyn Fn(&mut Value)| {
            let mut l = live(fields());
            edit(&mut l);
            provably_unchanged(&desired, &l, "harmony")
        };
        // Values changed by someone else.
        assert!(!drifted(&|l| l["spec"]["replicas"] = json!(5)));
        assert!(!drifted(
            &|l| l["spec"]["template"]["spec"]["containers"][0]["image"] = json!("nginx:1.28")
        ));
        assert!(!drifted(&|l| {
            l["metadata"]["labels"]
                .as_object_mut()
                .unwrap()
                .remove("app");
        }));
        // A list reordered, shortened or extended.
        assert!(!drifted(&|l| {
            let env = &mut l["spec"]["template"]["spec"]["containers"][0]["env"];
            env.as_array_mut().unwrap().reverse();
        }));
        assert!(!drifted(&|l| {
            let env = &mut l["spec"]["template"]["spec"]["containers"][0]["env"];
            env.as_array_mut().unwrap().pop();
        }));
        assert!(!drifted(&|l| {
            let args = &mut l["spec"]["template"]["spec"]["containers"][0]["args"];
            args.as_array_mut().unwrap().push(json!("--z"));
        }));
        // Another manager took a field: Harmony's entry no longer lists it.
        assert!(!drifted(&|l| {
            let f = &mut l["metadata"]["managedFields"][1]["fieldsV1"]["f:spec"];
            f.as_object_mut().unwrap().remove("f:replicas");
        }));
        // No entry of Harmony's, another version, an index item.
        assert!(!provably_unchanged(&desired, &live(fields()), "other"));
        assert!(!drifted(
            &|l| l["metadata"]["managedFields"][1]["apiVersion"] = json!("apps/v1beta2")
        ));
        assert!(!drifted(&|l| {
            l["metadata"]["managedFields"][1]["fieldsV1"]["f:spec"]["f:template"]["f:spec"]["f:containers"] =
                json!({"i:0": {}});
        }));
        assert!(!provably_unchanged(&desired, &json!({}), "harmony"));
    }

    #[test]
    fn a_declared_field_harmony_does_not_own_or_owns_undeclared_is_a_change() {
        // Desired now also sets a field the last apply did not.
        let mut more = deployment();
        more["metadata"]["annotations"] = json!({"note": "x"});
        assert!(!provably_unchanged(&more, &live(fields()), "harmony"));
        // An atomic map (a leaf of the field set) holding a key no longer declared.
        let mut l = live(fields());
        l["spec"]["selector"]["matchLabels"]["tier"] = json!("front");
        assert!(!provably_unchanged(&deployment(), &l, "harmony"));
        // Desired no longer sets a field Harmony owns: the apply would remove it.
        let mut less = deployment();
        less["spec"].as_object_mut().unwrap().remove("replicas");
        assert!(!provably_unchanged(&less, &live(fields()), "harmony"));
    }

    #[test]
    fn quantities_the_server_normalised_are_sent_again() {
        let mut desired = deployment();
        desired["spec"]["template"]["spec"]["containers"][0]["resources"] =
            json!({"limits": {"cpu": "1000m"}});
        let mut f = fields();
        f["f:spec"]["f:template"]["f:spec"]["f:containers"]["k:{\"name\":\"web\"}"]["f:resources"] =
            json!({"f:limits": {"f:cpu": {}}});
        let mut l = live(f);
        l["spec"]["template"]["spec"]["containers"][0]["resources"] =
            json!({"limits": {"cpu": "1"}});
        assert!(!provably_unchanged(&desired, &l, "harmony"));
        l["spec"]["template"]["spec"]["containers"][0]["resources"]["limits"]["cpu"] =
            json!("1000m");
        assert!(provably_unchanged(&desired, &l, "harmony"));
    }

    #[test]
    fn a_key_field_the_server_defaulted_matches_only_its_live_value() {
        let desired = json!({"apiVersion": "v1", "kind": "Service", "metadata": {"name": "web"},
            "spec": {"ports": [{"name": "http", "port": 80}]}});
        let recorded = json!({"f:spec": {"f:ports": {"k:{\"port\":80,\"protocol\":\"TCP\"}":
            {".": {}, "f:name": {}, "f:port": {}}}}});
        let live = |protocol: &str, fields: Value| {
            json!({"metadata": {"name": "web", "managedFields": [
                {"manager": "harmony", "operation": "Apply", "apiVersion": "v1",
                 "fieldsType": "FieldsV1", "fieldsV1": fields}]},
                "spec": {"ports": [{"name": "http", "port": 80, "protocol": protocol}]}})
        };
        assert!(provably_unchanged(
            &desired,
            &live("TCP", recorded.clone()),
            "harmony"
        ));
        assert!(!provably_unchanged(
            &desired,
            &live("UDP", recorded),
            "harmony"
        ));
        // Harmony set the protocol before and no longer does: the apply would drop it.
        let set = json!({"f:spec": {"f:ports": {"k:{\"port\":80,\"protocol\":\"TCP\"}":
            {".": {}, "f:name": {}, "f:port": {}, "f:protocol": {}}}}});
        assert!(!provably_unchanged(&desired, &live("TCP", set), "harmony"));
    }

    /// The field set a server records for an applied `value` whose maps are all granular and
    /// lists all atomic (a leaf each).
    fn recorded(value: &Value) -> Value {
        match value {
            Value::Object(m) if !m.is_empty() => Value::Object(
                m.iter()
                    .map(|(k, v)| (format!("f:{k}"), recorded(v)))
                    .collect(),
            ),
            _ => json!({}),
        }
    }

    fn leaf() -> impl proptest::strategy::Strategy<Value = Value> {
        use proptest::prelude::*;
        prop_oneof![
            any::<i32>().prop_map(Value::from),
            any::<bool>().prop_map(Value::from),
            "[a-z0-9]{0,6}".prop_map(Value::from),
            proptest::collection::vec("[a-z]{1,3}".prop_map(Value::from), 0..3)
                .prop_map(Value::Array),
        ]
    }

    fn object() -> impl proptest::strategy::Strategy<Value = Value> {
        use proptest::prelude::*;
        leaf().prop_recursive(3, 24, 4, |inner| {
            proptest::collection::btree_map("[a-z]{1,4}", inner, 1..4)
                .prop_map(|m| Value::Object(m.into_iter().collect()))
        })
    }

    proptest::proptest! {
        /// What the server recorded for exactly this object, live as applied: unchanged. Any
        /// changed leaf, and any field the object no longer declares: a change.
        #[test]
        fn a_recorded_object_is_unchanged_and_any_edit_is_not(
            spec in proptest::collection::btree_map("[a-z]{1,4}", object(), 1..4),
            pick in 0usize..64,
            other in leaf(),
        ) {
            let spec = Value::Object(spec.into_iter().collect());
            let desired = json!({"apiVersion": "v1", "kind": "Thing",
                "metadata": {"name": "t"}, "spec": spec});
            let mut live = desired.clone();
            live["metadata"]["managedFields"] = json!([{"manager": "harmony",
                "operation": "Apply", "apiVersion": "v1", "fieldsType": "FieldsV1",
                "fieldsV1": {"f:spec": recorded(&desired["spec"])}}]);
            proptest::prop_assert!(provably_unchanged(&desired, &live, "harmony"));
            // Change one leaf of the live object to another value.
            let mut leaves = Vec::new();
            paths(&desired["spec"], "/spec".into(), &mut leaves);
            let path = &leaves[pick % leaves.len()];
            let mut edited = live.clone();
            *edited.pointer_mut(path).unwrap() = other.clone();
            if edited.pointer(path) != desired.pointer(path) {
                proptest::prop_assert!(!provably_unchanged(&desired, &edited, "harmony"), "{path}");
            }
            // Declare one field less: Harmony owns it, the apply would remove it.
            let mut fewer = desired.clone();
            let (parent, key) = path.rsplit_once('/').unwrap();
            fewer.pointer_mut(parent).unwrap().as_object_mut().unwrap().remove(key);
            if fewer.pointer(parent) != Some(&json!({})) {
                proptest::prop_assert!(!provably_unchanged(&fewer, &live, "harmony"), "{path}");
            }
        }

        /// Whatever a server (or an attacker) puts in managedFields, the decision never panics.
        #[test]
        fn any_managed_fields_are_decided_without_panic(fields in object(), desired in object()) {
            let live = json!({"metadata": {"managedFields": [{"manager": "harmony",
                "operation": "Apply", "apiVersion": "v1", "fieldsType": "FieldsV1",
                "fieldsV1": fields}]}});
            let desired = json!({"apiVersion": "v1", "spec": desired});
            let _ = provably_unchanged(&desired, &live, "harmony");
        }
    }

    /// JSON pointers of every leaf under `v`.
    fn paths(v: &Value, at: String, out: &mut Vec<String>) {
        match v {
            Value::Object(m) if !m.is_empty() => {
                for (k, child) in m {
                    paths(child, format!("{at}/{k}"), out);
                }
            }
            _ => out.push(at),
        }
    }

    #[test]
    fn sets_match_by_value_and_nulls_are_doubt() {
        let desired = json!({"apiVersion": "v1", "kind": "ConfigMap",
            "metadata": {"name": "c", "finalizers": ["a/b", "c/d"]}});
        let entry = |v: Value| {
            json!({"metadata": {"name": "c", "finalizers": ["a/b", "c/d"], "managedFields": [
                {"manager": "harmony", "operation": "Apply", "apiVersion": "v1",
                 "fieldsType": "FieldsV1", "fieldsV1": v}]}})
        };
        let set =
            json!({"f:metadata": {"f:finalizers": {".": {}, "v:\"a/b\"": {}, "v:\"c/d\"": {}}}});
        assert!(provably_unchanged(&desired, &entry(set), "harmony"));
        let other = json!({"f:metadata": {"f:finalizers": {"v:\"a/b\"": {}, "v:\"x/y\"": {}}}});
        assert!(!provably_unchanged(&desired, &entry(other), "harmony"));
        let mut nulled = desired.clone();
        nulled["data"] = Value::Null;
        let set = json!({"f:metadata": {"f:finalizers": {"v:\"a/b\"": {}, "v:\"c/d\"": {}}}});
        assert!(!provably_unchanged(&nulled, &entry(set), "harmony"));
    }
}
