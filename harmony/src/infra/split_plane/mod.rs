//! Split control plane: runnables and what their pods need on one API server (the control
//! plane), every other object on another (the data plane). See `docs/split-plane.md`.
//!
//! - [`placement`]: the rules, pure, with the list of built-in kinds they know;
//! - `references`: what a pod template, a ServiceAccount or a custom resource refers to;
//! - `selection`: which Services select a runnable's pods;
//! - `closure`: the check that every object a pod needs is on the pod's plane;
//! - [`SplitPlaneTopology`]: the topology applying, reporting and pruning per plane.

mod closure;
pub mod placement;
mod references;
mod selection;
mod topology;

pub use placement::{BUILTIN_KINDS, Decision, PLANE_ANNOTATION, Placement, Plane};
pub use topology::{KUBECONFIG_KEY, SplitPlaneTopology};
