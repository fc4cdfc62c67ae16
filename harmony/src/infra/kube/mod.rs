//! The Kubernetes capability over kube-rs: server-side apply, dry-run plans, discovery of any kind.

mod apply;
mod applyset;
mod error;
mod normalize;
mod quota;
mod resolve;
mod topology;

pub use applyset::ownership_record;
pub use topology::{FIELD_MANAGER, K8sTopology, KubeTarget};
