//! The `status` of Harmony's custom resources (PostgreSQL, region agents), written by the operator.

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

/// What the operator last observed and did for a resource.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct ResourceStatus {
    /// The `metadata.generation` this status describes.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub observed_generation: Option<i64>,
    /// `Ready`, `Progressing` and `Degraded`, each with a reason and a message.
    #[serde(default)]
    pub conditions: Vec<StatusCondition>,
    /// Per site: its role and what happened there last.
    #[serde(default)]
    pub sites: Vec<SiteState>,
    /// When the replication certificates were last copied to the replica sites (RFC 3339).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub last_certificate_sync: Option<String>,
}

/// One condition, as Kubernetes conditions are shaped.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct StatusCondition {
    /// `Ready`, `Progressing` or `Degraded`.
    #[serde(rename = "type")]
    pub type_: String,
    /// `True`, `False` or `Unknown`.
    pub status: String,
    /// A CamelCase reason (`Reconciled`, `UnknownSite`, `SecretsMissing`, ...).
    pub reason: String,
    /// What happened, for a person, never with secret values.
    pub message: String,
    /// When the status last changed (RFC 3339).
    pub last_transition_time: String,
    /// The generation this condition describes.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub observed_generation: Option<i64>,
}

/// The state of one site of a resource.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct SiteState {
    /// The site's name.
    pub site: String,
    /// `primary`, `replica` or `single`.
    pub role: String,
    /// `Synced`, `Failed` or `Pending`.
    pub state: String,
    /// What was done or went wrong there.
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub message: String,
}
