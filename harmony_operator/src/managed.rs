//! What each managed kind does: which sites it uses, what it owns, and how its Score runs.

use async_trait::async_trait;
use kube::Resource;
use serde::Serialize;
use serde::de::DeserializeOwned;
use std::fmt::Debug;

use harmony::domain::capability::MultiSite;
use harmony::domain::capability::postgresql::ReplicationReport;
use harmony::domain::{InterpretError, Inventory, Outcome, Score};
use harmony::infra::control_plane::ControlPlaneClient;
use harmony::infra::multi_site::MultiSiteTopology;
use harmony::infra::region_site::RegionSiteTopology;
use harmony_modules::postgresql::{PostgreSQLResource, PostgreSQLScore, ResourceStatus};
use harmony_modules::region::{RegionAgent, RegionAgentRolloutScore};

use crate::OperatorConfig;
use crate::site::SiteTopology;

/// What each managed kind does (the multi-site kind is in `crate::multisite`).
#[async_trait]
pub(crate) trait Managed:
    Resource<DynamicType = (), Scope = k8s_openapi::NamespaceResourceScope>
    + Clone
    + Debug
    + Serialize
    + DeserializeOwned
    + Send
    + Sync
    + 'static
{
    /// The status written last.
    fn last_status(&self) -> Option<&ResourceStatus>;
    /// Each site the resource uses, with its role.
    fn sites(&self) -> Vec<(String, &'static str)>;
    /// The ApplySet owners of what the Score applies.
    fn owners(&self) -> Vec<String>;
    /// Whether it has replicas whose streaming decides Ready (the `ReplicasStreaming` condition).
    fn has_replicas(&self) -> bool {
        false
    }
    /// Validates the Score, then runs it on `topology`.
    async fn run(
        &self,
        topology: &MultiSiteTopology<SiteTopology>,
        config: &OperatorConfig,
    ) -> Result<Ran, Failure>;
}

/// A run that reached the intent.
pub(crate) struct Ran {
    /// What the Score did.
    pub outcome: Outcome,
    /// The replicas' streaming and lag, read after the apply (resources with replicas).
    pub replication: Option<ReplicationReport>,
}

impl From<Outcome> for Ran {
    fn from(outcome: Outcome) -> Self {
        Self {
            outcome,
            replication: None,
        }
    }
}

/// Why a run did not reach the intent.
pub(crate) enum Failure {
    /// The Score's validation refused the spec: the message names the field and the fix.
    Invalid(String),
    /// The Score failed on a site.
    Interpret(InterpretError),
    /// The switchover the spec asks for was refused (the target lags): nothing was changed.
    SwitchoverRefused(String),
    /// The switchover the spec asks for failed part-way.
    Switchover(InterpretError),
}

#[async_trait]
impl Managed for PostgreSQLResource {
    fn last_status(&self) -> Option<&ResourceStatus> {
        self.status.as_ref()
    }

    fn sites(&self) -> Vec<(String, &'static str)> {
        self.spec
            .site
            .iter()
            .map(|s| (s.clone(), "single"))
            .collect()
    }

    fn owners(&self) -> Vec<String> {
        vec![PostgreSQLScore::from_resource(self).owner()]
    }

    async fn run(
        &self,
        topology: &MultiSiteTopology<SiteTopology>,
        _config: &OperatorConfig,
    ) -> Result<Ran, Failure> {
        let score = PostgreSQLScore::from_resource(self);
        Score::<SiteTopology>::validate(&score).map_err(|e| Failure::Invalid(e.to_string()))?;
        let name = self.spec.site.clone().unwrap_or_default();
        let site = topology.site(&name).ok_or_else(|| {
            Failure::Invalid(format!("invalid site: {name:?} is not in the topology"))
        })?;
        Score::<SiteTopology>::create_interpret(&score)
            .execute(&Inventory::empty(), site)
            .await
            .map(Ran::from)
            .map_err(Failure::Interpret)
    }
}

#[async_trait]
impl Managed for RegionAgent {
    fn last_status(&self) -> Option<&ResourceStatus> {
        self.status.as_ref()
    }

    fn sites(&self) -> Vec<(String, &'static str)> {
        vec![(self.spec.site.clone(), "agent")]
    }

    fn owners(&self) -> Vec<String> {
        vec![RegionAgentRolloutScore::owner_for(&self.spec.region)]
    }

    async fn run(
        &self,
        topology: &MultiSiteTopology<SiteTopology>,
        config: &OperatorConfig,
    ) -> Result<Ran, Failure> {
        let control_plane = config.control_plane.as_ref().ok_or_else(|| {
            Failure::Invalid("a RegionAgent needs the operator to run with a control plane (harmony-control-plane --operator-kubeconfig)".into())
        })?;
        let score = RegionAgentRolloutScore::from_spec(&self.spec)
            .map_err(|e| Failure::Invalid(e.to_string()))?;
        let site = topology.site(&self.spec.site).ok_or_else(|| {
            Failure::Invalid(format!(
                "invalid spec.site: {:?} is not in the topology",
                self.spec.site
            ))
        })?;
        // The site applies the agent; the control plane's admin client creates the region.
        let region_site = RegionSiteTopology::new(site, control_plane);
        Score::<RegionSiteTopology<&SiteTopology, &ControlPlaneClient>>::validate(&score)
            .and_then(|()| score.validate_on(&region_site))
            .map_err(|e| Failure::Invalid(e.to_string()))?;
        Score::<RegionSiteTopology<&SiteTopology, &ControlPlaneClient>>::create_interpret(&score)
            .execute(&Inventory::empty(), &region_site)
            .await
            .map(Ran::from)
            .map_err(Failure::Interpret)
    }
}
