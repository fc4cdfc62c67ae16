//! Tenants: a tenant of the control plane with its cap per region, and its projects with their
//! quota per region, declared through the `TenantAdmin` capability (`TenantScore`) or as a
//! `Tenant` resource the operator reconciles.

mod plan;
mod resource;
mod score;
mod validate;

pub use resource::{Tenant, TenantProjectSpec, TenantSpec};
pub use score::TenantScore;
