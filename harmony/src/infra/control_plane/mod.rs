//! Regions reached only through their agent: a client for the control plane's HTTP API and
//! `AgentTopology`, which implements `K8sClient` by sending v1 ops through the control plane.
//!
//! The request and response bodies are `harmony_api`'s, shared with the server; the TLS set-up
//! is `harmony_http`'s, shared with every Harmony HTTP client.

mod client;
mod client_admin;
mod errors;
mod region_admin;
mod stream;
mod tenancy;
mod tenant_admin;
mod topology;

#[cfg(test)]
mod tests;

pub use client::{
    ControlPlaneClient, ControlPlaneError, CreatedRegion, NewService, RegionStatus, ZoneStatus,
    Zoned,
};
pub use harmony_agent_protocol::SecretString;
pub use harmony_api::{ApiError, Health, RequestEvent, RequestEventKind, ServiceInstance};
pub use topology::AgentTopology;
