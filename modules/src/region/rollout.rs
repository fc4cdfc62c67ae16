use async_trait::async_trait;
use serde_json::{Value, json};
use std::sync::Arc;
use std::time::{Duration, Instant};

use harmony::domain::capability::{
    CapabilityError, K8sClient, RegionAdmin, RegionState, ZoneState,
};
use harmony::domain::interpret::{Interpret, InterpretName};
use harmony::domain::{
    ExecutionMode, InterpretError, Inventory, ObjectChange, Outcome, Score, Topology,
    ValidationError, report_progress,
};
use harmony::infra::control_plane::SecretString;
use harmony_types::{Dns1123Label, RegionId, Version, ZoneId};

use super::manifests::{AGENT_NAME, AgentSpec, BOOTSTRAP_SECRET, manifests};
use super::rbac::default_rules;
use super::rollout_plan::ZoneStep;
use crate::k8s::apply_objects;

const DEFAULT_WAIT: Duration = Duration::from_secs(300);
const POLL: Duration = Duration::from_millis(500);

/// Brings one zone of a region (a cluster with its own agent) under the control plane: through
/// the topology's [`RegionAdmin`] capability it creates the region with this zone when the region
/// is missing, or adds the zone when the region exists without it (receiving the zone agent's
/// one-time bootstrap token either way); applies the agent's manifests through the zone's
/// **direct** `K8sClient` (kubeconfig: the one documented bootstrap path); then waits until the
/// control plane reports **this zone** healthy (not the region, which another zone's agent may
/// keep healthy).
///
/// Run it on each zone's direct topology wrapped with the control plane's admin client
/// (`harmony::infra::region_site::RegionSiteTopology`), one Score per zone; on a topology
/// without `RegionAdmin` it does not compile. Idempotent: when the zone exists and its agent
/// holds an identity, no token is minted and the manifests are re-applied without a bootstrap
/// Secret; a zone created earlier whose agent never connected gets a fresh token (the old one
/// may have expired). A decommissioned region or zone is refused, not re-created.
#[derive(Debug, Clone)]
pub struct RegionAgentRolloutScore {
    /// Shared, so `create_interpret` (a clone) copies a pointer, not the CA bundle and the RBAC
    /// rules; the builders copy it only if a clone already shares it.
    input: Arc<RolloutInput>,
}

/// What [`RegionAgentRolloutScore`] declares.
#[derive(Debug, Clone)]
struct RolloutInput {
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
        let input = RolloutInput {
            region,
            zone,
            agent_url: None,
            ca_pem: None,
            image: image.into(),
            namespace: AGENT_NAME.to_string(),
            rules: default_rules(),
            cluster_rules: Vec::new(),
            wait: DEFAULT_WAIT,
        };
        Self {
            input: Arc::new(input),
        }
    }

    /// The URL agents dial (e.g. the public name on 443), when it differs from the admin URL.
    pub fn with_agent_url(mut self, url: impl Into<String>) -> Self {
        Arc::make_mut(&mut self.input).agent_url = Some(url.into());
        self
    }

    /// The PEM CA bundle agents trust for the control plane (system roots otherwise).
    pub fn with_ca_pem(mut self, pem: impl Into<String>) -> Self {
        Arc::make_mut(&mut self.input).ca_pem = Some(pem.into());
        self
    }

    /// The namespace the agent runs in (default `harmony-agent`).
    pub fn in_namespace(mut self, namespace: Dns1123Label) -> Self {
        Arc::make_mut(&mut self.input).namespace = namespace.to_string();
        self
    }

    /// The agent's rights inside the namespaces it manages: the rules of ClusterRole
    /// `harmony-agent-managed` (default [`default_rules`]; see `region::rbac` for all it gets).
    pub fn with_rules(mut self, rules: Vec<Value>) -> Self {
        Arc::make_mut(&mut self.input).rules = rules;
        self
    }

    /// Cluster-wide RBAC rules the agent also gets (none by default), through a ClusterRole and
    /// ClusterRoleBinding: name here the cluster-scoped kinds your Scores apply through the
    /// agent (e.g. CRDs), or namespaced rights it needs outside managed namespaces.
    pub fn with_cluster_rules(mut self, rules: Vec<Value>) -> Self {
        Arc::make_mut(&mut self.input).cluster_rules = rules;
        self
    }

    /// How long to wait for the zone to report healthy to the control plane (default 5 minutes).
    pub fn with_wait(mut self, wait: Duration) -> Self {
        Arc::make_mut(&mut self.input).wait = wait;
        self
    }

    /// The URL agents dial: the one given, or the control plane's.
    fn agent_url<'a>(&'a self, admin: &'a impl RegionAdmin) -> &'a str {
        self.input
            .agent_url
            .as_deref()
            .unwrap_or_else(|| admin.control_plane_url())
    }

    fn spec<'a>(&'a self, agent_url: &'a str, token: Option<&'a str>) -> AgentSpec<'a> {
        AgentSpec {
            namespace: &self.input.namespace,
            region: self.input.region.as_str(),
            zone: self.input.zone.as_str(),
            control_plane_url: agent_url,
            ca_pem: self.input.ca_pem.as_deref(),
            image: &self.input.image,
            rules: &self.input.rules,
            cluster_rules: &self.input.cluster_rules,
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
            action: format!(
                "{action} for region {} zone {}",
                self.input.region, self.input.zone
            ),
            applied,
            source,
        }
    }

    /// The control-plane change `step` makes, as reported.
    fn control_plane_change(
        &self,
        admin: &impl RegionAdmin,
        step: ZoneStep,
        status: Option<&RegionState>,
    ) -> Option<ObjectChange> {
        let (object, action) =
            step.change(self.input.region.as_str(), self.input.zone.as_str(), status)?;
        Some(ObjectChange {
            object,
            action,
            location: Some(admin.control_plane_url().to_string()),
            diff: Vec::new(),
            status: None,
        })
    }

    /// A refusal to go on with a decommissioned region or zone, naming the way back.
    fn decommissioned(&self, admin: &impl RegionAdmin, step: ZoneStep) -> InterpretError {
        let (object, message) = if step == ZoneStep::RegionDecommissioned {
            (
                format!("region {}", self.input.region),
                "the region was decommissioned (its identity revoked); re-create it on purpose with POST /v1/admin/regions, or drop it from the run".to_string(),
            )
        } else {
            (
                format!("zone {} of region {}", self.input.zone, self.input.region),
                format!(
                    "the zone was decommissioned (its identity revoked); add it again on purpose with POST /v1/admin/regions/{}/zones {{\"zone\": \"{}\"}}, or drop it from the run",
                    self.input.region, self.input.zone
                ),
            )
        };
        self.capability(
            "checking the region",
            Vec::new(),
            CapabilityError::Rejected {
                object,
                server: admin.control_plane_url().to_string(),
                message,
            },
        )
    }

    /// A token that someone else received: the region or zone was created concurrently.
    fn taken(&self, action: &str, object: String) -> InterpretError {
        self.capability(
            action,
            Vec::new(),
            CapabilityError::Conflict {
                object,
                manager: "another admin API client".into(),
                fields: "bootstrap token".into(),
            },
        )
    }

    /// Decides whether the zone's agent needs a bootstrap token and mints it (apply mode only):
    /// creating the region with this zone, adding the zone to the region, or a fresh token for
    /// a zone whose agent never connected.
    async fn token(
        &self,
        admin: &impl RegionAdmin,
        status: Option<&RegionState>,
        mode: ExecutionMode,
        changes: &mut Vec<ObjectChange>,
    ) -> Result<Option<SecretString>, InterpretError> {
        let step = ZoneStep::decide(status, self.input.zone.as_str());
        let (region, zone) = (&self.input.region, &self.input.zone);
        let grant = match step {
            ZoneStep::RegionDecommissioned | ZoneStep::ZoneDecommissioned => {
                return Err(self.decommissioned(admin, step));
            }
            ZoneStep::Bootstrapped => return Ok(None),
            _ if mode != ExecutionMode::Apply => {
                changes.extend(self.control_plane_change(admin, step, status));
                return Ok(Some(SecretString::new("<minted at apply time>")));
            }
            ZoneStep::NewToken => {
                report_progress(format!(
                    "zone {zone} of region {region} exists but its agent never connected: minting a new bootstrap token"
                ));
                admin
                    .new_bootstrap_token(region, zone)
                    .await
                    .map_err(|e| self.capability("minting a bootstrap token", Vec::new(), e))?
            }
            ZoneStep::AddZone => {
                report_progress(format!(
                    "adding zone {zone} to region {region} on the control plane"
                ));
                admin
                    .add_zone(region, zone)
                    .await
                    .map_err(|e| self.capability("adding the zone", Vec::new(), e))?
                    // Added concurrently by someone else: its token is theirs.
                    .ok_or_else(|| {
                        self.taken("adding the zone", format!("zone {zone} of region {region}"))
                    })?
            }
            ZoneStep::CreateRegion => {
                report_progress(format!(
                    "creating region {region} with zone {zone} on the control plane"
                ));
                admin
                    .create_region(region, zone)
                    .await
                    .map_err(|e| self.capability("creating the region", Vec::new(), e))?
                    // Created concurrently by someone else: its token is theirs.
                    .ok_or_else(|| self.taken("creating the region", format!("region {region}")))?
            }
        };
        changes.extend(self.control_plane_change(admin, step, status));
        Ok(Some(grant.token))
    }

    /// Waits until the control plane reports this Score's zone healthy (the region's health
    /// would answer for another zone's agent).
    async fn wait_healthy(
        &self,
        admin: &impl RegionAdmin,
        applied: &[ObjectChange],
    ) -> Result<ZoneState, InterpretError> {
        let started = Instant::now();
        loop {
            let last_seen = match admin.region_state(&self.input.region).await {
                Ok(Some(r)) => match r.zone(self.input.zone.as_str()) {
                    Some(z) if z.is_healthy() => return Ok(z.clone()),
                    Some(z) => format!("{}: {}", z.health, z.health_reason),
                    None => format!("the region has no zone {}", self.input.zone),
                },
                Ok(None) => "the region does not exist".to_string(),
                Err(e) => e.to_string(),
            };
            if started.elapsed() >= self.input.wait {
                return Err(self.capability(
                    "waiting for the agent",
                    applied.to_vec(),
                    CapabilityError::Timeout {
                        waited_for: format!(
                            "region {} to report healthy in zone {} to the control plane at {} (agent Deployment {}/{AGENT_NAME})",
                            self.input.region,
                            self.input.zone,
                            admin.control_plane_url(),
                            self.input.namespace
                        ),
                        after: self.input.wait,
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
    /// Also the owner of the objects it applies: the same for every zone of the region (each
    /// zone is its own cluster), so a one-zone region's objects keep their owner.
    fn name(&self) -> String {
        format!("Region agent {}", self.input.region)
    }

    fn create_interpret(&self) -> Box<dyn Interpret<T>> {
        Box::new(self.clone())
    }

    fn parameters(&self) -> Value {
        json!({
            "region": self.input.region, "zone": self.input.zone,
            "agent_url": self.input.agent_url.as_deref().unwrap_or("the control plane's URL"),
            "image": self.input.image, "namespace": self.input.namespace,
            "ca_bundle": self.input.ca_pem.is_some(), "wait_s": self.input.wait.as_secs(),
        })
    }

    fn validate(&self) -> Result<(), ValidationError> {
        if self.input.image.trim().is_empty() {
            return Err(ValidationError::new(
                "image",
                "is empty",
                "give the agent image, e.g. registry.example.com/harmony-agent:0.1.0",
            ));
        }
        match &self.input.agent_url {
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
                .region_state(&self.input.region)
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
                    "a bootstrap token would be minted for region {} zone {} and stored in Secret {}/{BOOTSTRAP_SECRET}",
                    self.input.region, self.input.zone, self.input.namespace
                ));
            }
            return Ok(outcome);
        }
        report_progress(format!(
            "waiting for zone {} of region {} to report healthy",
            self.input.zone, self.input.region
        ));
        let status = self.wait_healthy(topology, &changes).await?;
        let mut outcome = Outcome::from_changes(changes).with_detail(format!(
            "region {} zone {} healthy through the control plane (agent {})",
            self.input.region,
            self.input.zone,
            status.agent_version.as_deref().unwrap_or("unknown")
        ));
        if token.is_some() {
            outcome = outcome.with_detail(format!(
                "bootstrap token for zone {} delivered in Secret {}/{BOOTSTRAP_SECRET} (single use)",
                self.input.zone, self.input.namespace
            ));
        }
        Ok(outcome)
    }
}
