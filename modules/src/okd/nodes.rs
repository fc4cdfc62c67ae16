//! The join phase of one role: wait for each bound host to register as a Node and become
//! Ready, approving the kubelet certificate signing requests (CSRs) of exactly those hosts.

use async_trait::async_trait;
use std::collections::{BTreeSet, HashSet};
use std::time::{Duration, Instant};

use harmony::domain::capability::{
    BootEvent, BootPhase, CapabilityError, ClusterNodes, NodeReadiness,
};
use harmony::domain::interpret::{Interpret, InterpretName};
use harmony::domain::inventory::HostRole;
use harmony::domain::{
    ChangeAction, ExecutionMode, InterpretError, Inventory, ObjectChange, Outcome, Score,
    ValidationError, report_progress,
};
use harmony_types::{MacAddress, Version};

use super::node_identity::{
    NodeNames, POLL, Verdict, classify, describe_left, describe_node, read_or_wait, transient,
};
use super::{OkdTopology, capability_error, version};

/// How long a join phase waits for its nodes unless told otherwise.
pub const DEFAULT_NODE_TIMEOUT: Duration = Duration::from_secs(60 * 60);

/// Waits for the hosts of one role to join the installed cluster as Ready nodes, approving
/// their kubelets' CSRs: the node-bootstrapper's client CSR for `system:node:<host>` and then
/// the node's own serving CSR, for bound hosts of this role only. Every other pending CSR is
/// left pending and reported.
#[derive(Debug, Clone)]
pub struct OkdNodesScore {
    role: HostRole,
    timeout: Duration,
}

impl OkdNodesScore {
    /// The join phase of `role`, waiting up to [`DEFAULT_NODE_TIMEOUT`].
    pub fn new(role: HostRole) -> Self {
        Self {
            role,
            timeout: DEFAULT_NODE_TIMEOUT,
        }
    }

    /// Waits up to `timeout` for the nodes instead.
    pub fn with_timeout(mut self, timeout: Duration) -> Self {
        self.timeout = timeout;
        self
    }

    fn title(&self) -> &'static str {
        match self.role {
            HostRole::Bootstrap => "OKD bootstrap node",
            HostRole::ControlPlane => "OKD control-plane nodes",
            HostRole::Worker => "OKD worker nodes",
        }
    }
}

impl<T: OkdTopology + ClusterNodes> Score<T> for OkdNodesScore {
    fn name(&self) -> String {
        self.title().into()
    }

    fn create_interpret(&self) -> Box<dyn Interpret<T>> {
        Box::new(self.clone())
    }

    fn parameters(&self) -> serde_json::Value {
        serde_json::json!({ "role": self.role, "timeout_seconds": self.timeout.as_secs() })
    }

    fn validate_on(&self, topology: &T) -> Result<(), ValidationError> {
        if topology.mode() == ExecutionMode::Apply
            && !topology.layout().hosts_for(self.role).is_empty()
        {
            topology.check_access()?;
        }
        Ok(())
    }
}

#[async_trait]
impl<T: OkdTopology + ClusterNodes> Interpret<T> for OkdNodesScore {
    fn name(&self) -> InterpretName {
        InterpretName("OkdNodes")
    }

    fn version(&self) -> Version {
        version()
    }

    async fn execute(&self, _: &Inventory, topology: &T) -> Result<Outcome, InterpretError> {
        let layout = topology.layout();
        if layout.hosts_for(self.role).is_empty() {
            return Ok(Outcome::noop(format!(
                "the topology declares no {} hosts",
                self.role
            )));
        }
        let bindings = topology
            .host_bindings()
            .await
            .map_err(capability_error("reading bindings", &[]))?;
        let mut bound: Vec<String> = bindings
            .iter()
            .filter(|b| b.role == self.role)
            .map(|b| b.logical.to_string())
            .collect();
        bound.sort();
        bound.dedup();
        if topology.mode() != ExecutionMode::Apply {
            let hosts = if bound.is_empty() {
                "the bound hosts".to_string()
            } else {
                bound.join(", ")
            };
            return Ok(Outcome::noop(format!(
                "{} mode: no cluster is contacted; with --apply this phase waits up to {}s for {hosts} to be Ready nodes and approves their kubelet CSRs",
                topology.mode(),
                self.timeout.as_secs()
            )));
        }
        if bound.is_empty() {
            return Err(capability_error(
                format!("joining {} nodes", self.role),
                &[],
            )(CapabilityError::InvalidObject {
                object: format!("{} hosts", self.role),
                problem: format!(
                    "no {} host is bound in the inventory; run the {} hosts phase first",
                    self.role, self.role
                ),
            }));
        }
        let names = NodeNames::new(layout, bound.iter().map(String::as_str));
        let mut proven: HashSet<MacAddress> = HashSet::new();
        let mut ready_seen: HashSet<MacAddress> = HashSet::new();
        let cluster = topology.cluster_description();
        let mut changes: Vec<ObjectChange> = Vec::new();
        let mut approved: Vec<String> = Vec::new();
        let started = Instant::now();
        loop {
            let read = read_or_wait(topology.pending_csrs().await, started, self.timeout);
            let Some(pending) = read
                .await
                .map_err(capability_error("listing pending CSRs", &changes))?
            else {
                continue;
            };
            let mut left: Vec<String> = Vec::new();
            for csr in &pending {
                let (kind, logical) = match classify(csr, &names, self.role) {
                    Verdict::Client(l) => ("client", l),
                    Verdict::Serving(l) => ("serving", l),
                    Verdict::Leave(why) => {
                        left.push(describe_left(csr, &why));
                        continue;
                    }
                };
                let reason = format!(
                    "Harmony: kubelet {kind} certificate of bound {} host {logical}",
                    self.role
                );
                match topology.approve_csr(&csr.name, &reason).await {
                    Ok(()) => {}
                    // Still pending: the next round approves it.
                    Err(e) if transient(&e) => {
                        report_progress(format!("{e}; retrying"));
                        continue;
                    }
                    Err(e) => {
                        return Err(capability_error(
                            format!("approving CSR {}", csr.name),
                            &changes,
                        )(e));
                    }
                }
                report_progress(format!(
                    "approved CSR {} ({kind} certificate of {logical})",
                    csr.name
                ));
                approved.push(format!(
                    "approved CSR {}: kubelet {kind} certificate of {logical} (requester {})",
                    csr.name, csr.requester
                ));
                changes.push(ObjectChange {
                    object: format!(
                        "certificates.k8s.io/v1 CertificateSigningRequest {}",
                        csr.name
                    ),
                    action: ChangeAction::Update,
                    location: Some(cluster.clone()),
                    diff: Vec::new(),
                    status: None,
                });
            }
            let read = read_or_wait(topology.nodes().await, started, self.timeout);
            let Some(nodes) = read
                .await
                .map_err(capability_error("listing Nodes", &changes))?
            else {
                continue;
            };
            let statuses = names.statuses(&bound, &nodes);
            // A registered Node proves its host booted the installer: a later hosts phase
            // stops asking the operator to reboot it.
            let registered: Vec<MacAddress> = bindings
                .iter()
                .filter(|b| b.role == self.role && !proven.contains(&b.mac))
                .filter(|b| {
                    statuses
                        .get(b.logical.as_str())
                        .is_some_and(Option::is_some)
                })
                .map(|b| b.mac)
                .collect();
            // The boot timeline: when this phase first saw each Node, then each Ready.
            let now = super::power_on::now_ms();
            for mac in &registered {
                topology
                    .record_boot_phase(*mac, BootPhase::NodeRegistered, now)
                    .await
                    .map_err(capability_error("recording boot timelines", &changes))?;
            }
            let newly_ready: Vec<MacAddress> = bindings
                .iter()
                .filter(|b| b.role == self.role && !ready_seen.contains(&b.mac))
                .filter(|b| {
                    statuses
                        .get(b.logical.as_str())
                        .is_some_and(|n| n.is_some_and(|n| n.readiness == NodeReadiness::Ready))
                })
                .map(|b| b.mac)
                .collect();
            for mac in newly_ready {
                topology
                    .record_boot_phase(mac, BootPhase::NodeReady, now)
                    .await
                    .map_err(capability_error("recording boot timelines", &changes))?;
                ready_seen.insert(mac);
            }
            if !registered.is_empty() {
                let waiting = topology
                    .awaiting_boot(&registered)
                    .await
                    .map_err(capability_error("recording boot evidence", &changes))?;
                for mac in waiting {
                    topology
                        .record_boot_event(mac, BootEvent::Booted)
                        .await
                        .map_err(capability_error("recording boot evidence", &changes))?;
                }
                proven.extend(registered);
            }
            let ready = statuses
                .values()
                .filter(|n| n.is_some_and(|n| n.readiness == NodeReadiness::Ready))
                .count();
            let left_set: BTreeSet<String> = left.into_iter().collect();
            if ready == bound.len() {
                let macs: Vec<MacAddress> = bindings
                    .iter()
                    .filter(|b| b.role == self.role)
                    .map(|b| b.mac)
                    .collect();
                let timelines = topology
                    .timelines(&macs)
                    .await
                    .map_err(capability_error("reading boot timelines", &changes))?;
                let mut outcome = Outcome::from_changes(changes);
                outcome.message = format!(
                    "{ready} of {} {} node(s) Ready; {} CSR(s) approved",
                    bound.len(),
                    self.role,
                    approved.len()
                );
                outcome.details = statuses
                    .iter()
                    .map(|(l, n)| describe_node(l, *n))
                    .chain(approved)
                    .chain(left_set.iter().map(|l| format!("left pending: {l}")))
                    .chain(timelines.iter().map(|t| format!("timeline {}", t.line())))
                    .collect();
                outcome = outcome.with_data(serde_json::json!({ "timeline": timelines }));
                let unbound = layout.hosts_for(self.role).len() - bound.len();
                if unbound > 0 {
                    outcome
                        .details
                        .push(format!("{unbound} {} host(s) not bound yet", self.role));
                }
                return Ok(outcome);
            }
            let missing: Vec<&str> = statuses
                .iter()
                .filter(|(_, n)| n.is_none())
                .map(|(l, _)| l.as_str())
                .collect();
            let not_ready: Vec<String> = statuses
                .iter()
                .filter_map(|(l, n)| {
                    n.filter(|n| n.readiness != NodeReadiness::Ready)
                        .map(|n| describe_node(l, Some(n)))
                })
                .collect();
            if started.elapsed() >= self.timeout {
                let mut last = Vec::new();
                if !missing.is_empty() {
                    last.push(format!("not registered: {}", missing.join(", ")));
                }
                if !not_ready.is_empty() {
                    last.push(format!("NotReady: {}", not_ready.join(", ")));
                }
                if left_set.is_empty() {
                    last.push("no CSR left pending".into());
                } else {
                    last.push(format!(
                        "CSRs left pending: {}",
                        left_set.iter().cloned().collect::<Vec<_>>().join("; ")
                    ));
                }
                return Err(capability_error(
                    format!("joining {} nodes", self.role),
                    &changes,
                )(CapabilityError::Timeout {
                    waited_for: format!(
                        "{} {} host(s) to be Ready nodes of {cluster}",
                        bound.len(),
                        self.role
                    ),
                    after: self.timeout,
                    last_seen: last.join("; "),
                }));
            }
            report_progress(format!(
                "{ready}/{} {} node(s) Ready{}{}; {} CSR(s) approved, {} left pending",
                bound.len(),
                self.role,
                if missing.is_empty() {
                    String::new()
                } else {
                    format!("; waiting for {} to register", missing.join(", "))
                },
                if not_ready.is_empty() {
                    String::new()
                } else {
                    format!("; {}", not_ready.join(", "))
                },
                approved.len(),
                left_set.len()
            ));
            tokio::time::sleep(POLL).await;
        }
    }
}
