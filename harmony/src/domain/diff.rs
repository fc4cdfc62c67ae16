//! Field-level differences between two JSON-like object trees.

use serde_json::Value;

use super::outcome::FieldChange;

/// Lists the leaf fields that differ between `old` and `new`, in path order.
///
/// Objects are walked key by key; arrays and scalars are compared whole, because a list element
/// has no stable identity here and a whole-list line reads better than index noise.
pub fn field_changes(old: &Value, new: &Value) -> Vec<FieldChange> {
    let mut out = Vec::new();
    walk("", old, new, &mut out);
    out
}

fn walk(path: &str, old: &Value, new: &Value, out: &mut Vec<FieldChange>) {
    match (old, new) {
        (Value::Object(a), Value::Object(b)) => {
            let mut keys: Vec<&String> = a.keys().chain(b.keys()).collect();
            keys.sort();
            keys.dedup();
            for k in keys {
                let p = if path.is_empty() {
                    k.clone()
                } else {
                    format!("{path}.{k}")
                };
                match (a.get(k), b.get(k)) {
                    (Some(x), Some(y)) => walk(&p, x, y, out),
                    (Some(x), None) => out.push(FieldChange {
                        path: p,
                        old: Some(x.to_string()),
                        new: None,
                    }),
                    (None, Some(y)) => out.push(FieldChange {
                        path: p,
                        old: None,
                        new: Some(y.to_string()),
                    }),
                    (None, None) => {}
                }
            }
        }
        (a, b) if a == b => {}
        (a, b) => out.push(FieldChange {
            path: path.to_string(),
            old: Some(a.to_string()),
            new: Some(b.to_string()),
        }),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn reports_added_removed_and_changed_leaves() {
        let old = json!({"spec": {"replicas": 1, "gone": true, "ports": [80]}, "same": "x"});
        let new =
            json!({"spec": {"replicas": 3, "ports": [80, 443], "added": {"a": 1}}, "same": "x"});
        let paths: Vec<(String, Option<String>, Option<String>)> = field_changes(&old, &new)
            .into_iter()
            .map(|c| (c.path, c.old, c.new))
            .collect();
        assert_eq!(
            paths,
            vec![
                ("spec.added".into(), None, Some("{\"a\":1}".into())),
                ("spec.gone".into(), Some("true".into()), None),
                (
                    "spec.ports".into(),
                    Some("[80]".into()),
                    Some("[80,443]".into())
                ),
                ("spec.replicas".into(), Some("1".into()), Some("3".into())),
            ]
        );
        assert!(field_changes(&old, &old).is_empty());
    }
}
