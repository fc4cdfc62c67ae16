//! `RegionAgent`: the rollout of a region's agent as a custom resource, for the operator.

use kube::CustomResource;
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};
use std::time::Duration;

use harmony::domain::ValidationError;
use harmony_types::{Dns1123Label, RegionId, ZoneId};

use super::cluster_rules::{ClusterRule, checked_rules};
use super::rollout::RegionAgentRolloutScore;
use crate::postgresql::ResourceStatus;

/// What a region's agent rollout should be: the spec of the `RegionAgent` resource, from which
/// the operator builds a [`RegionAgentRolloutScore`].
#[derive(CustomResource, JsonSchema, Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[kube(
    group = "harmony.io",
    version = "v1alpha1",
    kind = "RegionAgent",
    namespaced,
    status = "ResourceStatus",
    shortname = "ra",
    doc = "A region brought under the control plane: its agent rolled out through the site's direct kubeconfig",
    printcolumn = r#"{"name":"Region","type":"string","jsonPath":".spec.region"}"#,
    printcolumn = r#"{"name":"Ready","type":"string","jsonPath":".status.conditions[?(@.type==\"Ready\")].status"}"#
)]
#[serde(rename_all = "camelCase")]
pub struct RegionAgentSpec {
    /// The region (a DNS-1123 label).
    #[schemars(length(max = 63))]
    pub region: String,
    /// Its zone.
    #[schemars(length(max = 63))]
    pub zone: String,
    /// The `Site` (reached with a kubeconfig) the agent is installed through.
    #[schemars(length(max = 63))]
    pub site: String,
    /// The agent's container image.
    pub image: String,
    /// The namespace the agent runs in (default `harmony-agent`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub namespace: Option<String>,
    /// The URL agents dial, when it differs from the control plane's own.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub agent_url: Option<String>,
    /// The PEM CA bundle agents trust for the control plane (system roots otherwise).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub ca_pem: Option<String>,
    /// How long to wait for the zone to report healthy (default 300).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub wait_seconds: Option<u64>,
    /// RBAC rules for the cluster-scoped kinds the agent may touch (CRDs, ClusterRoles...);
    /// none by default. No wildcards, no Secrets, no namespaced kinds, no escalating verbs.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub cluster_rules: Vec<ClusterRule>,
}

impl RegionAgentRolloutScore {
    /// The Score a `RegionAgent` resource asks for; it reports to the control plane of the
    /// topology it runs on (its `RegionAdmin`).
    pub fn from_spec(spec: &RegionAgentSpec) -> Result<Self, ValidationError> {
        let region = RegionId::parse(&spec.region).map_err(|e| {
            ValidationError::new(
                "spec.region",
                e.to_string(),
                "use a DNS-1123 label such as \"eu-west\"",
            )
        })?;
        let zone = ZoneId::parse(&spec.zone).map_err(|e| {
            ValidationError::new(
                "spec.zone",
                e.to_string(),
                "use a DNS-1123 label such as \"paris-1\"",
            )
        })?;
        if spec.image.trim().is_empty() {
            return Err(ValidationError::new(
                "spec.image",
                "is empty",
                "give the agent's image, such as \"registry.example.com/harmony-agent:0.1\"",
            ));
        }
        let cluster_rules = checked_rules(&spec.cluster_rules)?;
        let mut score = RegionAgentRolloutScore::new(region, zone, spec.image.clone())
            .with_cluster_rules(cluster_rules);
        if let Some(ns) = &spec.namespace {
            let ns = Dns1123Label::parse(ns).map_err(|e| {
                ValidationError::new(
                    "spec.namespace",
                    e.to_string(),
                    "use a DNS-1123 label such as \"harmony-agent\"",
                )
            })?;
            score = score.in_namespace(ns);
        }
        if let Some(url) = &spec.agent_url {
            score = score.with_agent_url(url.clone());
        }
        if let Some(pem) = &spec.ca_pem {
            score = score.with_ca_pem(pem.clone());
        }
        if let Some(s) = spec.wait_seconds {
            score = score.with_wait(Duration::from_secs(s));
        }
        Ok(score)
    }

    /// The owner (ApplySet name) of the manifests the Score applies for `region`.
    pub fn owner_for(region: &str) -> String {
        format!("Region agent {region}")
    }
}
