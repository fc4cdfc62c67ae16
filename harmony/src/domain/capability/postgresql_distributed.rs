//! A PostgreSQL cluster spread over sites, each site able to become the primary: the
//! capability behind the multi-site Score, switchover and failover.
//!
//! Every site's cluster knows every site by a member name (`<cluster>-<site>`) and is told which
//! member is the primary; the others stream from it. Moving the primary is telling every site
//! another primary (with, for a switchover without loss, the demoted primary's token). On
//! Kubernetes this is CloudNativePG's distributed topology (`harmony::infra::cnpg::distributed`).

use async_trait::async_trait;

use super::{ApplyFailure, CapabilityError, PostgresCluster, PrimaryExposure};
use super::{ReplicationCredentials, ReplicationSource};
use crate::domain::ValidationError;
use crate::domain::outcome::ObjectChange;
use harmony_types::Dns1123Label;

/// The member name of `site`'s cluster, as every site knows it: `<cluster>-<site>`.
pub fn member_name(cluster: &str, site: &str) -> String {
    format!("{cluster}-{site}")
}

/// One site of a distributed cluster.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Member {
    /// The site's name in the topology.
    pub site: String,
    /// Its member name (`<cluster>-<site>`).
    pub name: Dns1123Label,
    /// How the other sites reach its cluster; `None` when it is not exposed, and then it can
    /// neither be a primary the others stream from nor be switched to.
    pub exposure: Option<PrimaryExposure>,
}

/// A cluster as every site runs it, and its sites sorted by name (so every site lists them in
/// the same order, whoever is primary).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct DistributedCluster {
    cluster: PostgresCluster,
    members: Vec<Member>,
}

impl DistributedCluster {
    /// `cluster` (its `server_alt_dns_names` are ignored: each site gets its own host) on every
    /// site of `sites`, each with its exposure. Fails naming a site whose member name is no label.
    pub fn new(
        cluster: PostgresCluster,
        sites: Vec<(String, Option<PrimaryExposure>)>,
    ) -> Result<Self, ValidationError> {
        let mut members = Vec::new();
        for (site, exposure) in sites {
            let text = member_name(cluster.name.as_str(), &site);
            let name = Dns1123Label::parse(&text).map_err(|e| {
                ValidationError::new(
                    "topology",
                    format!("the member name {text:?} of site {site} is invalid: {e}"),
                    "shorten the cluster or site name (together at most 62 characters)",
                )
            })?;
            members.push(Member {
                site,
                name,
                exposure,
            });
        }
        members.sort_by(|a, b| a.site.cmp(&b.site));
        Ok(Self { cluster, members })
    }

    /// The cluster as every site runs it.
    pub fn cluster(&self) -> &PostgresCluster {
        &self.cluster
    }

    /// Every site, sorted by name.
    pub fn members(&self) -> &[Member] {
        &self.members
    }

    /// The member on `site`.
    pub fn get(&self, site: &str) -> Option<&Member> {
        self.members.iter().find(|m| m.site == site)
    }

    /// The site whose member name is `name`.
    pub fn site_of(&self, name: &str) -> Option<&str> {
        self.members
            .iter()
            .find(|m| m.name.as_str() == name)
            .map(|m| m.site.as_str())
    }

    /// The member name of `site`.
    pub fn name_of(&self, site: &str) -> String {
        member_name(self.cluster.name.as_str(), site)
    }

    /// How the other sites stream from `site`: `None` when it is not exposed.
    pub fn source(&self, site: &str) -> Option<ReplicationSource> {
        let m = self.get(site)?;
        Some(ReplicationSource {
            name: m.name.clone(),
            primary: self.cluster.name.clone(),
            exposure: m.exposure.clone()?,
        })
    }

    /// Where `site` streams from while `primary` is the primary: the primary. The primary
    /// itself names the first other exposed site (by name), which it would stream from if
    /// demoted, or itself when there is none.
    pub fn source_for(&self, site: &str, primary: &str) -> String {
        if site != primary {
            return self.name_of(primary);
        }
        let other = self
            .members
            .iter()
            .find(|m| m.site != site && m.exposure.is_some());
        self.name_of(other.map_or(site, |m| m.site.as_str()))
    }
}

/// Who a site's cluster is told is the primary.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct MemberRole {
    /// The primary's site.
    pub primary: String,
    /// The demoted primary's token, given only to the site being promoted in a switchover.
    pub promotion_token: Option<String>,
}

impl MemberRole {
    /// `site` is the primary; no token.
    pub fn primary_is(site: &str) -> Self {
        Self {
            primary: site.to_string(),
            promotion_token: None,
        }
    }
}

/// What a site's cluster declares about its place among the sites.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ReplicaShape {
    /// Nothing: a standalone primary.
    None,
    /// A standalone replica of another cluster (CloudNativePG `spec.replica.enabled`): it
    /// cannot be switched over.
    Standalone {
        /// Whether replica mode is on.
        enabled: bool,
    },
    /// A member of a distributed cluster.
    Distributed {
        /// The member name of the primary.
        primary: String,
        /// Its own member name.
        self_name: String,
        /// The member it streams from.
        source: String,
        /// The token it was given to be promoted with.
        promotion_token: Option<String>,
    },
}

/// A site's live cluster: what it declares and what its operator reported.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct MemberState {
    /// What it declares.
    pub shape: ReplicaShape,
    /// The member its cluster was first copied from (`pg_basebackup`), if any.
    pub bootstrap_source: Option<String>,
    /// Published by the operator once a demoted primary has shut down cleanly.
    pub demotion_token: Option<String>,
    /// The token the operator last promoted it with.
    pub last_promotion_token: Option<String>,
    /// A demotion is under way.
    pub switch_in_progress: bool,
    /// The operator's phase (`Cluster in healthy state`, ...).
    pub phase: Option<String>,
    /// The PostgreSQL timeline: every promotion starts a new, higher one.
    pub timeline: Option<u64>,
    /// The instance that is the (designated) primary.
    pub current_primary: Option<String>,
}

impl MemberState {
    /// The member this cluster names primary (distributed only).
    pub fn says_primary(&self) -> Option<&str> {
        match &self.shape {
            ReplicaShape::Distributed { primary, .. } => Some(primary),
            _ => None,
        }
    }

    /// Whether this cluster names itself primary.
    pub fn claims_primary(&self) -> bool {
        matches!(&self.shape, ReplicaShape::Distributed { primary, self_name, .. } if primary == self_name)
    }

    /// The demotion token, once the operator has finished demoting this cluster.
    pub fn demotion_done(&self) -> Option<&str> {
        if self.switch_in_progress || self.claims_primary() {
            return None;
        }
        self.demotion_token.as_deref()
    }

    /// Whether the operator has promoted this cluster with `token`.
    pub fn promoted_with(&self, token: &str) -> bool {
        self.claims_primary() && self.last_promotion_token.as_deref() == Some(token)
    }

    /// The phase, or `no phase reported`, for messages.
    pub fn phase_text(&self) -> &str {
        self.phase.as_deref().unwrap_or("no phase reported")
    }
}

/// A distributed PostgreSQL cluster, on one site.
#[async_trait]
#[diagnostic::on_unimplemented(
    message = "topology `{Self}` cannot run a distributed PostgreSQL cluster's members (`DistributedPostgreSQL`)",
    label = "this Score needs sites that implement `DistributedPostgreSQL` (it reads and promotes the members of a multisite cluster)",
    note = "every Kubernetes topology offers it through CloudNativePG (RenderTopology, K8sTopology, DefaultTopology, AgentTopology, SplitPlaneTopology, RegionSiteTopology): use one of them for each site, e.g. `MultiSiteTopology<DefaultTopology>`, or implement `K8sClient` or `DistributedPostgreSQL` for `{Self}`"
)]
pub trait DistributedPostgreSQL: Send + Sync {
    /// This site's live cluster, `None` when there is none.
    async fn member_state(
        &self,
        cluster: &PostgresCluster,
    ) -> Result<Option<MemberState>, CapabilityError>;

    /// Creates or updates this site's cluster (`site` of `cluster`) with `role`, whole, owned by
    /// `owner`. `existing` is what [`Self::member_state`] read: what only matters when the
    /// cluster is created (its bootstrap) is kept as it is.
    async fn apply_member(
        &self,
        cluster: &DistributedCluster,
        site: &str,
        role: &MemberRole,
        existing: Option<&MemberState>,
        owner: &str,
    ) -> Result<Vec<ObjectChange>, ApplyFailure>;

    /// Stores on this site, owned by `owner`, what it needs to stream from each of `sources`:
    /// their `streaming_replica` client certificate and key, and their CA certificate (never its
    /// key). Re-applying re-syncs rotated certificates.
    async fn store_credentials(
        &self,
        cluster: &PostgresCluster,
        sources: &[(ReplicationSource, ReplicationCredentials)],
        owner: &str,
    ) -> Result<Vec<ObjectChange>, ApplyFailure>;
}
