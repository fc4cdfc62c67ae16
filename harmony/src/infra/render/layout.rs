use std::path::PathBuf;

use crate::domain::capability::ObjectRef;

/// Relative path of an object's file inside a site folder.
///
/// `kubernetes/namespaces/<ns>/<kind>[.<group>]_<name>.yaml`, or `kubernetes/cluster/...` for
/// cluster-scoped objects. `_` cannot occur in Kubernetes names, so the split is unambiguous.
pub fn object_path(r: &ObjectRef) -> PathBuf {
    let kind = r.kind.to_ascii_lowercase();
    let file = match r.group() {
        "" => format!("{kind}_{}.yaml", r.name),
        group => format!("{kind}.{group}_{}.yaml", r.name),
    };
    let base = PathBuf::from("kubernetes");
    match &r.namespace {
        Some(ns) => base.join("namespaces").join(ns).join(file),
        None => base.join("cluster").join(file),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn paths_are_stable_and_grouped() {
        let r = ObjectRef {
            api_version: "apps/v1".into(),
            kind: "Deployment".into(),
            namespace: Some("shop".into()),
            name: "web".into(),
        };
        assert_eq!(
            object_path(&r),
            PathBuf::from("kubernetes/namespaces/shop/deployment.apps_web.yaml")
        );
        let ns = ObjectRef {
            api_version: "v1".into(),
            kind: "Namespace".into(),
            namespace: None,
            name: "shop".into(),
        };
        assert_eq!(
            object_path(&ns),
            PathBuf::from("kubernetes/cluster/namespace_shop.yaml")
        );
    }
}
