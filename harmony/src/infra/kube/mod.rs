//! The Kubernetes capability over kube-rs: server-side apply, dry-run plans, discovery of any kind.

mod apply;
mod apply_object;
mod applyset;
mod error;
mod live_state;
mod normalize;
mod owned;
mod quota;
mod resolve;
mod topology;
mod unchanged;
mod wait;
mod wait_pods;

pub use applyset::ownership_record;
pub use error::describe as describe_error;
pub use topology::{DEFAULT_CONCURRENCY, FIELD_MANAGER, K8sTopology, KubeTarget};

/// Log targets under kube-rs that log a failure at error level although the same failure comes
/// back as the error Harmony reports: kube-rs's HTTP layer logs every failed request (a refused
/// connection, a 5xx answer), the platform certificate verifier every certificate it rejects.
/// A program's logger silences them below debug level (`-vv`), so that each failure is printed
/// once. With `env_logger`: `builder.filter_module(target, LevelFilter::Off)`.
pub const REPEATING_LOG_TARGETS: &[&str] =
    &["kube_client::client::builder", "rustls_platform_verifier"];
