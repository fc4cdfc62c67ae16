//! Regions reached only through their agent: a client for the control plane's HTTP API and
//! `AgentTopology`, which implements `K8sClient` by sending v1 ops through the control plane.

mod client;
mod topology;

pub use client::{
    ControlPlaneClient, ControlPlaneError, CreatedRegion, NewService, RegionStatus, ServiceInstance,
};
pub use harmony_agent_protocol::SecretString;
pub use topology::AgentTopology;
