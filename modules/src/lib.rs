//! Scores and their Interprets, one folder per domain.
//!
//! `k8s` is always built; Cargo features add the others (`okd`, `postgresql`, `region`,
//! `tenant`), each with the `harmony` adapters it needs, so a plain Kubernetes program does not
//! compile them.

mod interpret_support;
pub mod k8s;
#[cfg(feature = "okd")]
pub mod okd;
#[cfg(feature = "postgresql")]
pub mod postgresql;
#[cfg(feature = "region")]
pub mod region;
#[cfg(feature = "tenant")]
pub mod tenant;

/// Compiles the code in README.md so the "Writing a Score" guide cannot rot.
#[cfg(doctest)]
#[doc = include_str!("../../README.md")]
pub struct ReadmeDoctests;

/// Compiles the Rust snippets of the PostgreSQL guide (`docs/modules/multisite_postgresql.md`).
#[cfg(doctest)]
#[doc = include_str!("../../docs/modules/multisite_postgresql.md")]
pub struct MultisitePostgresqlGuide;

/// Compiles the Rust snippet of the split-plane guide (`docs/split-plane.md`); it uses only
/// `harmony`, which this crate depends on.
#[cfg(doctest)]
#[doc = include_str!("../../docs/split-plane.md")]
pub struct SplitPlaneGuide;

/// Compiles the snippets of the Kubernetes Scores guide (`docs/kubernetes-scores.md`).
#[cfg(doctest)]
#[doc = include_str!("../../docs/kubernetes-scores.md")]
pub struct KubernetesScoresGuide;

/// Compiles the snippet of the live-cluster guide (`docs/kubernetes.md`); it uses only `harmony`.
#[cfg(doctest)]
#[doc = include_str!("../../docs/kubernetes.md")]
pub struct KubernetesGuide;

/// Compiles the bootstrap snippet of the multi-region guide (`docs/modules/multi_region.md`).
#[cfg(doctest)]
#[doc = include_str!("../../docs/modules/multi_region.md")]
pub struct MultiRegionGuide;

/// Compiles the topology snippet of the OKD guide (`docs/modules/okd.md`).
#[cfg(doctest)]
#[doc = include_str!("../../docs/modules/okd.md")]
pub struct OkdGuide;

/// Compiles the `ControlPlaneClient` snippet of the service-providers guide
/// (`docs/modules/service_providers.md`); it uses `harmony` and `serde_json`, which this crate has.
#[cfg(doctest)]
#[doc = include_str!("../../docs/modules/service_providers.md")]
pub struct ServiceProvidersGuide;

/// Compiles ADR 0002's snippets: the capability bound on a Score, and the registration on a
/// topology without `K8sClient` that must fail with E0277.
#[cfg(doctest)]
#[doc = include_str!("../../adr/0002-capabilities-as-traits.md")]
pub struct CapabilitiesAsTraitsAdr;
