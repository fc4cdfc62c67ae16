//! Kubernetes Scores: any typed resource, untyped manifests of mixed kinds, and namespaces.

mod apply;
mod manifests;
mod namespace;
mod resource;

pub use apply::apply_objects;
pub use manifests::K8sManifestsScore;
pub use namespace::NamespaceScore;
pub use resource::K8sResourceScore;
