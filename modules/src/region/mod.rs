//! Regions: rolling out the region agent that connects a cluster to the control plane.

mod cluster_rules;
mod manifests;
mod rbac;
mod resource;
mod rollout;
mod rollout_plan;

pub use cluster_rules::ClusterRule;
pub use manifests::{AGENT_NAME, BOOTSTRAP_SECRET, IDENTITY_SECRET};
pub use rbac::{
    MANAGED_CLUSTER_ROLE, OWNERSHIP_NAMESPACE, agent_user, default_rules, rbac_objects,
};
pub use resource::{RegionAgent, RegionAgentSpec};
pub use rollout::RegionAgentRolloutScore;
