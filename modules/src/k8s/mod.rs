//! Kubernetes Scores: any typed resource, and namespaces.

mod apply;
mod namespace;
mod resource;

pub use apply::apply_objects;
pub use namespace::NamespaceScore;
pub use resource::K8sResourceScore;
