use serde_json::Value;

/// Fields the server maintains that say nothing about what was declared.
const METADATA_NOISE: &[&str] = &[
    "managedFields",
    "resourceVersion",
    "generation",
    "uid",
    "creationTimestamp",
    "selfLink",
];

/// The object as a person compares it: without status, managed fields and server bookkeeping.
pub(super) fn comparable(value: &Value) -> Value {
    let mut v = value.clone();
    if let Value::Object(map) = &mut v {
        map.remove("status");
        if let Some(Value::Object(meta)) = map.get_mut("metadata") {
            for k in METADATA_NOISE {
                meta.remove(*k);
            }
        }
    }
    v
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn strips_noise_keeps_intent() {
        let v = json!({"metadata": {"name": "a", "resourceVersion": "7", "managedFields": [], "labels": {"x": "1"}},
                       "spec": {"replicas": 2}, "status": {"ready": 1}});
        assert_eq!(
            comparable(&v),
            json!({"metadata": {"name": "a", "labels": {"x": "1"}}, "spec": {"replicas": 2}})
        );
    }
}
