use serde_json::Value;
use serde_yaml::{Mapping, Value as Yaml};

/// Keys written first, in this order, at the top level and in `metadata`; the rest sorted.
const TOP_FIRST: &[&str] = &["apiVersion", "kind", "metadata"];
const META_FIRST: &[&str] = &["name", "namespace"];

/// Serialises a manifest as YAML with a fixed key order, independent of map implementation.
pub fn to_stable_yaml(value: &Value) -> Result<String, serde_yaml::Error> {
    serde_yaml::to_string(&convert(value, TOP_FIRST))
}

fn convert(value: &Value, first: &[&str]) -> Yaml {
    match value {
        Value::Object(map) => {
            let mut keys: Vec<&String> = map.keys().collect();
            keys.sort_by_key(|k| {
                (
                    first.iter().position(|f| f == k).unwrap_or(first.len()),
                    k.as_str(),
                )
            });
            let mut out = Mapping::new();
            for k in keys {
                let child_first = if first == TOP_FIRST && k == "metadata" {
                    META_FIRST
                } else {
                    &[]
                };
                out.insert(Yaml::String(k.clone()), convert(&map[k], child_first));
            }
            Yaml::Mapping(out)
        }
        Value::Array(items) => Yaml::Sequence(items.iter().map(|v| convert(v, &[])).collect()),
        Value::String(s) => Yaml::String(s.clone()),
        Value::Number(n) => serde_yaml::to_value(n).unwrap_or(Yaml::Null),
        Value::Bool(b) => Yaml::Bool(*b),
        Value::Null => Yaml::Null,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn identity_keys_first_rest_sorted() {
        let v = json!({"spec": {"b": 1, "a": [ {"z": 1, "y": 2} ]}, "metadata": {"labels": {"x": "1"}, "namespace": "n", "name": "w"}, "kind": "K", "apiVersion": "v1"});
        let y = to_stable_yaml(&v).unwrap();
        assert_eq!(
            y,
            "apiVersion: v1\nkind: K\nmetadata:\n  name: w\n  namespace: n\n  labels:\n    x: '1'\nspec:\n  a:\n  - y: 2\n    z: 1\n  b: 1\n"
        );
        let back: Value = serde_yaml::from_str(&y).unwrap();
        assert_eq!(back, v);
    }
}
