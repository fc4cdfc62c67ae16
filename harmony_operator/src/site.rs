//! Sites as data: `Site` resources name the clusters the controller may target.

use kube::api::Api;
use kube::{Client, CustomResource};
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

use harmony::domain::RunContext;
use harmony::domain::capability::SecretBytes;
use harmony::infra::control_plane::{AgentTopology, ControlPlaneClient};
use harmony::infra::either::EitherTopology;
use harmony::infra::kube::{K8sTopology, KubeTarget};
use harmony::infra::multi_site::MultiSiteTopology;
use harmony::types::{Dns1123Label, RegionId};
use k8s_openapi::api::core::v1::Secret;

/// A cluster the operator may place objects on, reached directly with a kubeconfig Secret.
#[derive(CustomResource, JsonSchema, Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[kube(
    group = "harmony.io",
    version = "v1alpha1",
    kind = "Site",
    doc = "A site (one Kubernetes cluster) Harmony's operator may target"
)]
#[serde(rename_all = "camelCase")]
pub struct SiteSpec {
    /// The Secret holding a kubeconfig for the site (direct access).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub kubeconfig_secret: Option<SecretKeyRef>,
    /// The region whose agent reaches the site, through the control plane (no credentials here).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub region: Option<String>,
}

/// A key of a Secret in a namespace.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct SecretKeyRef {
    /// The Secret's namespace.
    pub namespace: String,
    /// The Secret's name.
    pub name: String,
    /// The data key; `kubeconfig` by default.
    #[serde(default = "default_key")]
    pub key: String,
}

fn default_key() -> String {
    "kubeconfig".into()
}

/// Why a site cannot be used; each becomes a status condition, never a crash.
#[derive(Debug, thiserror::Error)]
pub enum SiteError {
    /// No `Site` resource has that name.
    #[error(
        "site {name:?} is not declared; declared sites: {known}; create a Site resource named {name:?}"
    )]
    Unknown {
        /// The name asked for.
        name: String,
        /// The declared sites, comma-separated (or "none").
        known: String,
    },
    /// The Site names no way to reach it, or one the operator does not support.
    #[error("site {name:?}: {reason}")]
    Unusable {
        /// The site.
        name: String,
        /// What is wrong and what to do.
        reason: String,
    },
    /// The control plane's API server could not be read.
    #[error("reading sites: {}", harmony::infra::kube::describe_error(.0))]
    Api(#[from] kube::Error),
}

/// One site, reached directly with a kubeconfig (`Left`) or through its region's agent (`Right`).
pub type SiteTopology = EitherTopology<K8sTopology, AgentTopology>;

/// The topology of the named sites, each reached as its `Site` says: a kubeconfig Secret, or
/// its region's agent through `control_plane`.
pub async fn topology(
    client: &Client,
    names: &[String],
    ctx: &RunContext,
    control_plane: Option<&ControlPlaneClient>,
) -> Result<MultiSiteTopology<SiteTopology>, SiteError> {
    let sites: Api<Site> = Api::all(client.clone());
    let mut out = Vec::new();
    for name in names {
        let Some(site) = sites.get_opt(name).await? else {
            let mut known: Vec<String> = sites
                .list(&Default::default())
                .await?
                .items
                .into_iter()
                .filter_map(|s| s.metadata.name)
                .collect();
            known.sort();
            return Err(SiteError::Unknown {
                name: name.clone(),
                known: if known.is_empty() {
                    "none".into()
                } else {
                    known.join(", ")
                },
            });
        };
        let unusable = |reason: String| SiteError::Unusable {
            name: name.clone(),
            reason,
        };
        let label = Dns1123Label::parse(name).map_err(|e| unusable(e.to_string()))?;
        let topology = match (&site.spec.kubeconfig_secret, &site.spec.region) {
            (Some(secret_ref), _) => {
                let secrets: Api<Secret> = Api::namespaced(client.clone(), &secret_ref.namespace);
                let secret = secrets.get_opt(&secret_ref.name).await?.ok_or_else(|| {
                    unusable(format!(
                        "Secret {}/{} does not exist",
                        secret_ref.namespace, secret_ref.name
                    ))
                })?;
                let kubeconfig = secret
                    .data
                    .as_ref()
                    .and_then(|d| d.get(&secret_ref.key))
                    .ok_or_else(|| {
                        unusable(format!(
                            "Secret {}/{} has no key {:?}",
                            secret_ref.namespace, secret_ref.name, secret_ref.key
                        ))
                    })?;
                let target = KubeTarget::Inline(SecretBytes::new(kubeconfig.0.clone()));
                EitherTopology::Left(K8sTopology::new(name.clone(), target, ctx))
            }
            (None, Some(region)) => {
                let region =
                    RegionId::parse(region).map_err(|e| unusable(format!("spec.region: {e}")))?;
                let control_plane = control_plane.ok_or_else(|| {
                    unusable("sites reached through a region agent need the operator to run with a control plane (harmony-control-plane --operator-kubeconfig)".into())
                })?;
                EitherTopology::Right(AgentTopology::new(
                    name.clone(),
                    region,
                    control_plane.clone(),
                    ctx,
                ))
            }
            (None, None) => {
                return Err(unusable(
                    "it names neither spec.kubeconfigSecret nor spec.region; give one".into(),
                ));
            }
        };
        out.push((label, topology));
    }
    Ok(MultiSiteTopology::new("operator", out))
}
