//! Secret redaction: every place that shows an object to a person goes through here.

use serde_json::Value;

use super::outcome::FieldChange;

/// The text shown instead of a secret value.
pub const REDACTED: &str = "<redacted>";

/// Whether `value` is a Kubernetes Secret (core/v1), whose `data`/`stringData` are secret.
pub fn is_secret(value: &Value) -> bool {
    value.get("kind").and_then(Value::as_str) == Some("Secret")
        && value.get("apiVersion").and_then(Value::as_str) == Some("v1")
}

/// A copy of `value` with every Secret value replaced by [`REDACTED`] (keys stay visible).
pub fn redact_object(value: &Value) -> Value {
    let mut v = value.clone();
    if is_secret(value) {
        for field in ["data", "stringData"] {
            if let Some(Value::Object(map)) = v.get_mut(field) {
                for val in map.values_mut() {
                    *val = Value::String(REDACTED.into());
                }
            }
        }
        strip_last_applied(&mut v);
    }
    v
}

/// `kubectl.kubernetes.io/last-applied-configuration` holds a full copy of a Secret.
fn strip_last_applied(v: &mut Value) {
    if let Some(Value::Object(ann)) = v.pointer_mut("/metadata/annotations")
        && let Some(val) = ann.get_mut("kubectl.kubernetes.io/last-applied-configuration")
    {
        *val = Value::String(REDACTED.into());
    }
}

/// Redacts the values in a diff of a Secret: paths under `data`/`stringData` keep only the key.
pub fn redact_changes(secret: bool, changes: Vec<FieldChange>) -> Vec<FieldChange> {
    if !secret {
        return changes;
    }
    changes
        .into_iter()
        .map(|c| {
            let sensitive = ["data", "stringData", "metadata.annotations"]
                .iter()
                .any(|p| c.path == *p || c.path.starts_with(&format!("{p}.")));
            if sensitive {
                FieldChange {
                    old: c.old.map(|_| REDACTED.to_string()),
                    new: c.new.map(|_| REDACTED.to_string()),
                    path: c.path,
                }
            } else {
                c
            }
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::domain::diff::field_changes;
    use serde_json::json;

    #[test]
    fn secret_values_are_hidden_keys_kept() {
        let s = json!({"apiVersion": "v1", "kind": "Secret", "metadata": {"name": "db"},
                       "data": {"password": "aHVudGVyMg=="}, "stringData": {"token": "hunter2"}});
        let r = redact_object(&s).to_string();
        assert!(!r.contains("hunter2") && !r.contains("aHVudGVyMg=="), "{r}");
        assert!(r.contains("password") && r.contains("token"), "{r}");
        let cm = json!({"apiVersion": "v1", "kind": "ConfigMap", "data": {"a": "visible"}});
        assert_eq!(redact_object(&cm), cm);
    }

    #[test]
    fn secret_diffs_are_hidden() {
        let old = json!({"data": {"password": "b2xk"}, "metadata": {"labels": {"a": "1"}}});
        let new = json!({"data": {"password": "bmV3"}, "metadata": {"labels": {"a": "2"}}});
        let changes = redact_changes(true, field_changes(&old, &new));
        let text = format!("{changes:?}");
        assert!(!text.contains("b2xk") && !text.contains("bmV3"), "{text}");
        assert!(
            text.contains("data.password") && text.contains("\\\"2\\\""),
            "{text}"
        );
    }
}
