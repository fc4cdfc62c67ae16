use async_trait::async_trait;
use serde_json::{Value, json};
use std::time::{Duration, Instant};

use harmony::domain::capability::{CapabilityError, K8sClient, RegionAdmin, RegionState};
use harmony::domain::interpret::{Interpret, InterpretName};
use harmony::domain::{
    ChangeAction, ExecutionMode, InterpretError, Inventory, ObjectChange, Outcome, Score, Topology,
    ValidationError, report_progress,
};
use harmony::infra::agent::SecretString;
use harmony_types::{Dns1123Label, RegionId, Version, ZoneId};

use super::manifests::{AGENT_NAME, AgentSpec, BOOTSTRAP_SECRET, manifests};
use super::rbac::default_rules;
use crate::k8s::apply_objects;

const DEFAULT_WAIT: Duration = Duration::from_secs(300);
const POLL: Duration = Duration::from_millis(500);

/// Brings one region under the control plane: creates the region through the topology's
/// [`RegionAdmin`] capability when missing (receiving its one-time bootstrap token), applies the
/// agent's manifests through the region's **direct** `K8sClient` (kubeconfig: the one documented
/// bootstrap path), then waits until the control plane reports the region healthy.
///
/// Run it on each region's direct topology wrapped with the control plane's admin client
/// (`harmony::infra::region_site::RegionSiteTopology`), one Score per region; on a topology
/// without `RegionAdmin` it does not compile. Idempotent: when the region exists and its agent
/// holds an identity, no token is minted and the manifests are re-applied without a bootstrap
/// Secret; a region created earlier whose agent never connected gets a fresh token (the old one
/// may have expired).
#[derive(Debug, Clone)]
pub struct RegionAgentRolloutScore {
    region: RegionId,
    zone: ZoneId,
    /// The URL agents dial; the control plane's own URL (from the topology) when `None`.
    agent_url: Option<String>,
    ca_pem: Option<String>,
    image: String,
    namespace: String,
    rules: Vec<Value>,
    cluster_rules: Vec<Value>,
    wait: Duration,
}

impl RegionAgentRolloutScore {
    /// The agent for `region`/`zone`, running `image`, reporting to the control plane of the
    /// topology it runs on (its [`RegionAdmin`]). Agents dial that control plane's URL unless
    /// [`Self::with_agent_url`].
    pub fn new(region: RegionId, zone: ZoneId, image: impl Into<String>) -> Self {
        Self {
            region,
            zone,
            agent_url: None,
            ca_pem: None,
            image: image.into(),
            namespace: AGENT_NAME.to_string(),
            rules: default_rules(),
            cluster_rules: Vec::new(),
            wait: DEFAULT_WAIT,
        }
    }

    /// The URL agents dial (e.g. the public name on 443), when it differs from the admin URL.
    pub fn with_agent_url(mut self, url: impl Into<String>) -> Self {
        self.agent_url = Some(url.into());
        self
    }

    /// The PEM CA bundle agents trust for the control plane (system roots otherwise).
    pub fn with_ca_pem(mut self, pem: impl Into<String>) -> Self {
        self.ca_pem = Some(pem.into());
        self
    }

    /// The namespace the agent runs in (default `harmony-agent`).
    pub fn in_namespace(mut self, namespace: Dns1123Label) -> Self {
        self.namespace = namespace.to_string();
        self
    }

    /// The agent's rights inside the namespaces it manages: the rules of ClusterRole
    /// `harmony-agent-managed` (default [`default_rules`]; see `region::rbac` for all it gets).
    pub fn with_rules(mut self, rules: Vec<Value>) -> Self {
        self.rules = rules;
        self
    }

    /// Cluster-wide RBAC rules the agent also gets (none by default), through a ClusterRole and
    /// ClusterRoleBinding: name here the cluster-scoped kinds your Scores apply through the
    /// agent (e.g. CRDs), or namespaced rights it needs outside managed namespaces.
    pub fn with_cluster_rules(mut self, rules: Vec<Value>) -> Self {
        self.cluster_rules = rules;
        self
    }

    /// How long to wait for the region to become healthy (default 5 minutes).
    pub fn with_wait(mut self, wait: Duration) -> Self {
        self.wait = wait;
        self
    }

    /// The URL agents dial: the one given, or the control plane's.
    fn agent_url<'a>(&'a self, admin: &'a impl RegionAdmin) -> &'a str {
        self.agent_url
            .as_deref()
            .unwrap_or_else(|| admin.control_plane_url())
    }

    fn spec<'a>(&'a self, agent_url: &'a str, token: Option<&'a str>) -> AgentSpec<'a> {
        AgentSpec {
            namespace: &self.namespace,
            region: self.region.as_str(),
            zone: self.zone.as_str(),
            control_plane_url: agent_url,
            ca_pem: self.ca_pem.as_deref(),
            image: &self.image,
            rules: &self.rules,
            cluster_rules: &self.cluster_rules,
            bootstrap_token: token,
        }
    }

    fn capability(
        &self,
        action: &str,
        applied: Vec<ObjectChange>,
        source: CapabilityError,
    ) -> InterpretError {
        InterpretError::Capability {
            action: format!("{action} for region {}", self.region),
            applied,
            source,
        }
    }

    fn region_change(&self, admin: &impl RegionAdmin, action: ChangeAction) -> ObjectChange {
        ObjectChange {
            object: format!("control-plane Region {}", self.region),
            action,
            location: Some(admin.control_plane_url().to_string()),
            diff: Vec::new(),
        }
    }

    /// Decides whether a bootstrap token is needed and mints it (apply mode only).
    async fn token(
        &self,
        admin: &impl RegionAdmin,
        status: Option<&RegionState>,
        mode: ExecutionMode,
        changes: &mut Vec<ObjectChange>,
    ) -> Result<Option<SecretString>, InterpretError> {
        match status {
            Some(s) if s.decommissioned => Err(self.capability(
                "checking the region",
                Vec::new(),
                CapabilityError::Rejected {
                    object: format!("region {}", self.region),
                    server: admin.control_plane_url().to_string(),
                    message: "the region was decommissioned (its identity revoked); re-create it on purpose with POST /v1/admin/regions, or drop it from the run".into(),
                },
            )),
            // The agent holds an identity: never mint another token.
            Some(s) if s.bootstrapped => Ok(None),
            _ if mode != ExecutionMode::Apply => {
                changes.push(self.region_change(
                    admin,
                    if status.is_some() {
                        ChangeAction::Update
                    } else {
                        ChangeAction::Create
                    },
                ));
                Ok(Some(SecretString::new("<minted at apply time>")))
            }
            Some(_) => {
                report_progress(format!(
                    "region {} exists but its agent never connected: minting a new bootstrap token",
                    self.region
                ));
                let grant = admin
                    .new_bootstrap_token(&self.region)
                    .await
                    .map_err(|e| self.capability("minting a bootstrap token", Vec::new(), e))?;
                changes.push(self.region_change(admin, ChangeAction::Update));
                Ok(Some(grant.token))
            }
            None => {
                report_progress(format!("creating region {} on the control plane", self.region));
                let created = admin
                    .create_region(&self.region, &self.zone)
                    .await
                    .map_err(|e| self.capability("creating the region", Vec::new(), e))?;
                match created {
                    Some(grant) => {
                        changes.push(self.region_change(admin, ChangeAction::Create));
                        Ok(Some(grant.token))
                    }
                    // Created concurrently by someone else: its token is theirs.
                    None => Err(self.capability(
                        "creating the region",
                        Vec::new(),
                        CapabilityError::Conflict {
                            object: format!("region {}", self.region),
                            manager: "another admin API client".into(),
                            fields: "bootstrap token".into(),
                        },
                    )),
                }
            }
        }
    }

    async fn wait_healthy(
        &self,
        admin: &impl RegionAdmin,
        applied: &[ObjectChange],
    ) -> Result<RegionState, InterpretError> {
        let started = Instant::now();
        loop {
            let last_seen = match admin.region_state(&self.region).await {
                Ok(Some(s)) if s.is_healthy() => return Ok(s),
                Ok(Some(s)) => format!("{}: {}", s.health, s.health_reason),
                Ok(None) => "the region does not exist".to_string(),
                Err(e) => e.to_string(),
            };
            if started.elapsed() >= self.wait {
                return Err(self.capability(
                    "waiting for the agent",
                    applied.to_vec(),
                    CapabilityError::Timeout {
                        waited_for: format!(
                            "region {} to report healthy to the control plane at {} (agent Deployment {}/{AGENT_NAME})",
                            self.region,
                            admin.control_plane_url(),
                            self.namespace
                        ),
                        after: self.wait,
                        last_seen,
                    },
                ));
            }
            tokio::time::sleep(POLL).await;
        }
    }
}

/// Agents only dial TLS.
fn check_agent_url(url: &str) -> Result<(), ValidationError> {
    if url.starts_with("https://") || url.starts_with("wss://") {
        return Ok(());
    }
    Err(ValidationError::new(
        "agent_url",
        format!("{url:?} is not a TLS URL"),
        "agents only dial TLS: use https://host[:port] or wss://host[:port]",
    ))
}

impl<T: Topology + K8sClient + RegionAdmin> Score<T> for RegionAgentRolloutScore {
    fn name(&self) -> String {
        format!("Region agent {}", self.region)
    }

    fn create_interpret(&self) -> Box<dyn Interpret<T>> {
        Box::new(self.clone())
    }

    fn parameters(&self) -> Value {
        json!({
            "region": self.region, "zone": self.zone,
            "agent_url": self.agent_url.as_deref().unwrap_or("the control plane's URL"),
            "image": self.image, "namespace": self.namespace,
            "ca_bundle": self.ca_pem.is_some(), "wait_s": self.wait.as_secs(),
        })
    }

    fn validate(&self) -> Result<(), ValidationError> {
        if self.image.trim().is_empty() {
            return Err(ValidationError::new(
                "image",
                "is empty",
                "give the agent image, e.g. registry.example.com/harmony-agent:0.1.0",
            ));
        }
        match &self.agent_url {
            Some(url) => check_agent_url(url),
            None => Ok(()),
        }
    }

    fn validate_on(&self, topology: &T) -> Result<(), ValidationError> {
        check_agent_url(self.agent_url(topology))
    }
}

#[async_trait]
impl<T: Topology + K8sClient + RegionAdmin> Interpret<T> for RegionAgentRolloutScore {
    fn name(&self) -> InterpretName {
        InterpretName("RegionAgentRollout")
    }

    fn version(&self) -> Version {
        crate::interpret_support::version()
    }

    async fn execute(
        &self,
        _inventory: &Inventory,
        topology: &T,
    ) -> Result<Outcome, InterpretError> {
        let mode = topology.mode();
        let status = if mode == ExecutionMode::Render {
            None
        } else {
            topology
                .region_state(&self.region)
                .await
                .map_err(|e| self.capability("reading the region", Vec::new(), e))?
        };
        let mut changes = Vec::new();
        let token = self
            .token(topology, status.as_ref(), mode, &mut changes)
            .await?;
        let agent_url = self.agent_url(topology);
        let objects = manifests(&self.spec(agent_url, token.as_ref().map(SecretString::expose)))
            .map_err(|e| self.capability("building the agent manifests", changes.clone(), e))?;
        let subject = <Self as Score<T>>::name(self);
        let applied = apply_objects(topology, &subject, &objects)
            .await
            .map_err(|e| match e {
                InterpretError::Capability {
                    action,
                    applied,
                    source,
                } => InterpretError::Capability {
                    action,
                    applied: [changes.clone(), applied].concat(),
                    source,
                },
                other => other,
            })?;
        changes.extend(applied.changes);
        if mode != ExecutionMode::Apply {
            let mut outcome = Outcome::from_changes(changes);
            if token.is_some() {
                outcome = outcome.with_detail(format!(
                    "a bootstrap token would be minted for region {} and stored in Secret {}/{BOOTSTRAP_SECRET}",
                    self.region, self.namespace
                ));
            }
            return Ok(outcome);
        }
        report_progress(format!(
            "waiting for region {} to report healthy",
            self.region
        ));
        let status = self.wait_healthy(topology, &changes).await?;
        let mut outcome = Outcome::from_changes(changes).with_detail(format!(
            "region {} healthy through the control plane (agent {})",
            self.region,
            status.agent_version.as_deref().unwrap_or("unknown")
        ));
        if token.is_some() {
            outcome = outcome.with_detail(format!(
                "bootstrap token delivered in Secret {}/{BOOTSTRAP_SECRET} (single use)",
                self.namespace
            ));
        }
        Ok(outcome)
    }
}
