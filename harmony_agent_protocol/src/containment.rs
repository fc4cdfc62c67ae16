//! Containment: a regional object lives in its parent's region and zone. An object labelled
//! [`REGION_LABEL`] (or [`ZONE_LABEL`]) belongs to that region (zone); sending it anywhere else
//! is refused before anything is stored or sent, by the control plane (422 `containment`) and by
//! `AgentTopology`, with the same words.

use serde_json::Value;
use std::fmt;

use crate::tenancy::{REGION_LABEL, ZONE_LABEL};

/// An object whose region or zone label names another place than where it is being sent.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Misplaced {
    /// The object (`Kind namespace/name`, or `Kind name`).
    pub object: String,
    /// The label at fault ([`REGION_LABEL`] or [`ZONE_LABEL`]).
    pub label: &'static str,
    /// What the label says.
    pub labelled: String,
    /// The target region.
    pub region: String,
    /// The target zone, when known.
    pub zone: Option<String>,
}

impl fmt::Display for Misplaced {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let target = match &self.zone {
            Some(z) => format!("region {} zone {z}", self.region),
            None => format!("region {}", self.region),
        };
        let what = if self.label == REGION_LABEL {
            "region"
        } else {
            "zone"
        };
        write!(
            f,
            "containment: {} is labelled {}={}, so it belongs to {what} {}, but it is sent to {target}; a child lives in its parent's region and zone: send it to {what} {} or fix the label",
            self.object, self.label, self.labelled, self.labelled, self.labelled
        )
    }
}

/// How an object is named in messages: `Kind namespace/name` or `Kind name`.
pub fn object_name(manifest: &Value) -> String {
    let text = |v: Option<&Value>| v.and_then(Value::as_str).unwrap_or("").to_string();
    let meta = manifest.get("metadata");
    let kind = text(manifest.get("kind"));
    let name = text(meta.and_then(|m| m.get("name")));
    match meta
        .and_then(|m| m.get("namespace"))
        .and_then(Value::as_str)
    {
        Some(ns) if !ns.is_empty() => format!("{kind} {ns}/{name}"),
        _ => format!("{kind} {name}"),
    }
}

/// The value of `label` on `manifest`, if it has one.
pub fn label<'a>(manifest: &'a Value, label: &str) -> Option<&'a str> {
    manifest
        .get("metadata")?
        .get("labels")?
        .get(label)?
        .as_str()
}

/// The first object of `manifests` labelled for another region than `region` (or, when `zone`
/// is given, another zone than `zone`).
pub fn first_misplaced<'a>(
    manifests: impl IntoIterator<Item = &'a Value>,
    region: &str,
    zone: Option<&str>,
) -> Option<Misplaced> {
    for m in manifests {
        let found = match (label(m, REGION_LABEL), label(m, ZONE_LABEL)) {
            (Some(r), _) if r != region => Some((REGION_LABEL, r)),
            (_, Some(z)) if zone.is_some_and(|zone| zone != z) => Some((ZONE_LABEL, z)),
            _ => None,
        };
        if let Some((label, labelled)) = found {
            return Some(Misplaced {
                object: object_name(m),
                label,
                labelled: labelled.to_string(),
                region: region.to_string(),
                zone: zone.map(str::to_string),
            });
        }
    }
    None
}

/// The objects an op's params carry with their labels: `manifests` (apply_manifests) and
/// `objects` (delete_manifests; plain references carry no labels and pass).
pub fn objects_of(params: &Value) -> Vec<&Value> {
    ["manifests", "objects"]
        .iter()
        .filter_map(|k| params.get(*k).and_then(Value::as_array))
        .flatten()
        .collect()
}

/// The one zone the objects' [`ZONE_LABEL`]s agree on, if they name exactly one.
pub fn labelled_zone<'a>(objects: impl IntoIterator<Item = &'a Value>) -> Option<String> {
    let mut zones: Vec<&str> = objects
        .into_iter()
        .filter_map(|m| label(m, ZONE_LABEL))
        .collect();
    zones.sort_unstable();
    zones.dedup();
    match zones.as_slice() {
        [one] => Some((*one).to_string()),
        _ => None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn cm(name: &str, labels: Value) -> Value {
        json!({"apiVersion": "v1", "kind": "ConfigMap",
               "metadata": {"name": name, "namespace": "app", "labels": labels}})
    }

    #[test]
    fn objects_labelled_for_another_region_or_zone_are_named_with_both_places() {
        let ok = cm("a", json!({REGION_LABEL: "eu", ZONE_LABEL: "z1"}));
        let other_region = cm("b", json!({REGION_LABEL: "us"}));
        let other_zone = cm("c", json!({ZONE_LABEL: "z2"}));
        let unlabelled = cm("d", json!({}));
        assert_eq!(first_misplaced([&ok, &unlabelled], "eu", Some("z1")), None);
        let m = first_misplaced([&ok, &other_region], "eu", Some("z1")).unwrap();
        assert_eq!(
            (m.object.as_str(), m.label),
            ("ConfigMap app/b", REGION_LABEL)
        );
        let shown = m.to_string();
        assert!(
            shown.contains("ConfigMap app/b")
                && shown.contains("harmony.io/region=us")
                && shown.contains("region eu zone z1"),
            "{shown}"
        );
        let m = first_misplaced([&other_zone], "eu", Some("z1")).unwrap();
        assert_eq!((m.label, m.labelled.as_str()), (ZONE_LABEL, "z2"));
        // Without a target zone, only the region is checked.
        assert_eq!(first_misplaced([&other_zone], "eu", None), None);
    }

    #[test]
    fn the_objects_of_apply_and_delete_params_are_found_and_their_zone_agreed() {
        let params = json!({"manifests": [cm("a", json!({ZONE_LABEL: "z2"})), cm("b", json!({}))]});
        let objects = objects_of(&params);
        assert_eq!(objects.len(), 2);
        assert_eq!(labelled_zone(objects.clone()), Some("z2".into()));
        let mixed = json!({"manifests": [cm("a", json!({ZONE_LABEL: "z2"})), cm("b", json!({ZONE_LABEL: "z3"}))]});
        assert_eq!(labelled_zone(objects_of(&mixed)), None);
        assert!(objects_of(&json!({"objects": []})).is_empty());
        assert!(objects_of(&json!(null)).is_empty());
    }
}
