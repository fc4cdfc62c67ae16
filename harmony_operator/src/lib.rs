//! Harmony as an operator: `MultisitePostgreSQL`, `PostgreSQL` and `RegionAgent` resources
//! reconciled continuously against the sites declared as `Site` resources, and `Tenant`
//! resources declared on the control plane.
//!
//! - [`site`]: the `Site` resource and how a site name becomes a topology;
//! - [`conditions`]: the status the controller writes;
//! - [`controller`]: the reconcile loops, finalizers and back-off;
//! - `tenant`: the `Tenant` controller (the control plane only, no site);
//! - [`leader`]: leader election among replicas on a `coordination.k8s.io` Lease;
//! - [`cli`]: the `harmony-operator` program.
//!
//! User guide: `docs/operator.md`.

pub mod cli;
pub mod conditions;
pub mod controller;
mod health;
pub mod leader;
mod managed;
mod multisite;
mod once;
pub mod site;
mod tenant;

use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition;
use kube::CustomResourceExt;

pub use controller::{OperatorConfig, run};
pub use leader::{LeaderElection, run_elected};
pub use site::{Site, SiteSpec};

/// The name of the finalizer the controller puts on the resources it manages.
pub const FINALIZER: &str = "harmony.io/cleanup";

/// The CRDs the operator serves, generated from the Rust types.
pub fn crds() -> Vec<CustomResourceDefinition> {
    vec![
        harmony_modules::postgresql::MultisitePostgreSQL::crd(),
        harmony_modules::postgresql::PostgreSQLResource::crd(),
        harmony_modules::region::RegionAgent::crd(),
        Site::crd(),
        harmony_modules::tenant::Tenant::crd(),
    ]
}

/// The CRDs as one multi-document YAML stream, as `harmony-operator crds` prints it.
pub fn crds_yaml() -> Result<String, serde_yaml::Error> {
    let mut out = String::new();
    for crd in crds() {
        out.push_str("---\n");
        out.push_str(&serde_yaml::to_string(&crd)?);
    }
    Ok(out)
}
