//! Bootstrap removal: once the control plane runs on its own (every control-plane host a Ready
//! node), the bootstrap host leaves the API (6443) and machine-config (22623) backends.

use async_trait::async_trait;
use std::time::{Duration, Instant};

use harmony::domain::capability::{
    BootEvent, CapabilityError, ClusterLayout, ClusterNodes, LoadBalancerService, NodeReadiness,
};
use harmony::domain::interpret::{Interpret, InterpretName};
use harmony::domain::inventory::HostRole;
use harmony::domain::{
    ChangeAction, ExecutionMode, InterpretError, Inventory, Outcome, Score, ValidationError,
    report_progress,
};
use harmony_types::Version;

use super::node_identity::{NodeNames, POLL, read_or_wait};
use super::nodes::DEFAULT_NODE_TIMEOUT;
use super::{OkdTopology, capability_error, load_balancer_services, version};

/// The ports whose backends the bootstrap host serves only while the cluster bootstraps.
pub const BOOTSTRAP_PORTS: [u16; 2] = [6443, 22623];

/// Waits until every control-plane host is a Ready node, then takes the bootstrap host out of
/// the load balancer's 6443 and 22623 backends (haproxy is checked and reloaded). Idempotent:
/// once removed, a re-run changes nothing.
#[derive(Debug, Clone)]
pub struct OkdBootstrapRemovalScore {
    timeout: Duration,
}

impl Default for OkdBootstrapRemovalScore {
    fn default() -> Self {
        Self::new()
    }
}

impl OkdBootstrapRemovalScore {
    /// Waits up to [`DEFAULT_NODE_TIMEOUT`] for the control plane.
    pub fn new() -> Self {
        Self {
            timeout: DEFAULT_NODE_TIMEOUT,
        }
    }

    /// Waits up to `timeout` for the control plane instead.
    pub fn with_timeout(mut self, timeout: Duration) -> Self {
        self.timeout = timeout;
        self
    }
}

/// The MACs bound to the bootstrap logical host.
pub(crate) async fn bootstrap_macs<T: OkdTopology>(
    topology: &T,
) -> Result<Vec<harmony_types::MacAddress>, CapabilityError> {
    Ok(topology
        .host_bindings()
        .await?
        .into_iter()
        .filter(|b| b.role == HostRole::Bootstrap)
        .map(|b| b.mac)
        .collect())
}

/// The load-balancer services of the cluster with the bootstrap host out of the 6443 and
/// 22623 backends: what the load balancer serves once the control plane runs on its own.
pub fn services_without_bootstrap(layout: &ClusterLayout) -> Vec<LoadBalancerService> {
    let mut services = load_balancer_services(layout);
    for s in &mut services {
        if BOOTSTRAP_PORTS.contains(&s.port) {
            s.backends.retain(|b| b.name != layout.bootstrap.name);
        }
    }
    services
}

impl<T: OkdTopology + ClusterNodes> Score<T> for OkdBootstrapRemovalScore {
    fn name(&self) -> String {
        "OKD bootstrap removal".into()
    }

    fn create_interpret(&self) -> Box<dyn Interpret<T>> {
        Box::new(self.clone())
    }

    fn parameters(&self) -> serde_json::Value {
        serde_json::json!({ "timeout_seconds": self.timeout.as_secs() })
    }

    fn validate_on(&self, topology: &T) -> Result<(), ValidationError> {
        if topology.mode() == ExecutionMode::Apply {
            topology.check_access()?;
        }
        Ok(())
    }
}

#[async_trait]
impl<T: OkdTopology + ClusterNodes> Interpret<T> for OkdBootstrapRemovalScore {
    fn name(&self) -> InterpretName {
        InterpretName("OkdBootstrapRemoval")
    }

    fn version(&self) -> Version {
        version()
    }

    async fn execute(&self, _: &Inventory, topology: &T) -> Result<Outcome, InterpretError> {
        let layout = topology.layout();
        let bootstrap = &layout.bootstrap;
        let host = format!("bootstrap host {} ({})", bootstrap.name, bootstrap.ip);
        let backends = "the api (6443) and machine-config (22623) backends";
        let what = format!("{host} out of {backends}");
        if topology.mode() != ExecutionMode::Apply {
            // Rendering the configuration without the bootstrap host would hand the operator
            // a load balancer the cluster cannot bootstrap through.
            return Ok(Outcome::noop(format!(
                "{} mode: no cluster is contacted and the load balancer keeps the bootstrap host; with --apply, once the control-plane nodes are Ready, this phase takes the {what}",
                topology.mode()
            )));
        }
        let control_plane: Vec<String> = layout
            .hosts_for(HostRole::ControlPlane)
            .iter()
            .map(|h| h.name.to_string())
            .collect();
        let names = NodeNames::new(layout, control_plane.iter().map(String::as_str));
        let started = Instant::now();
        loop {
            let read = read_or_wait(topology.nodes().await, started, self.timeout);
            let Some(nodes) = read.await.map_err(capability_error("listing Nodes", &[]))? else {
                continue;
            };
            let statuses = names.statuses(&control_plane, &nodes);
            let waiting: Vec<String> = statuses
                .iter()
                .filter(|(_, n)| n.is_none_or(|n| n.readiness != NodeReadiness::Ready))
                .map(|(l, n)| match n {
                    None => format!("{l} not registered"),
                    Some(n) => format!("{l} {}", n.readiness),
                })
                .collect();
            if waiting.is_empty() {
                break;
            }
            if started.elapsed() >= self.timeout {
                return Err(capability_error("removing the bootstrap host", &[])(
                    CapabilityError::Timeout {
                        waited_for: format!(
                            "the control-plane nodes ({}) of {} to be Ready; the bootstrap host stays in the load balancer",
                            control_plane.join(", "),
                            topology.cluster_description()
                        ),
                        after: self.timeout,
                        last_seen: waiting.join(", "),
                    },
                ));
            }
            report_progress(format!(
                "waiting for the control plane before removing the bootstrap host: {}",
                waiting.join(", ")
            ));
            tokio::time::sleep(POLL).await;
        }
        report_progress(format!("taking the {what}"));
        let changes = topology
            .ensure_services(&services_without_bootstrap(layout))
            .await
            .map_err(capability_error("removing the bootstrap host", &[]))?;
        // Recorded so the prepare phase of later runs leaves the bootstrap host out too,
        // instead of putting it back for this phase to take out again.
        for mac in bootstrap_macs(topology).await.map_err(capability_error(
            "recording the bootstrap host's removal",
            &changes,
        ))? {
            topology
                .record_boot_event(mac, BootEvent::Retired)
                .await
                .map_err(capability_error(
                    "recording the bootstrap host's removal",
                    &changes,
                ))?;
        }
        let changed = changes.iter().any(|c| c.action != ChangeAction::Unchanged);
        let mut outcome = Outcome::from_changes(changes);
        outcome.message = if changed {
            format!(
                "control plane Ready; took the {what}; the load balancer was checked and reloaded"
            )
        } else {
            format!(
                "control plane Ready; the {host} was already out of {backends}: nothing to change"
            )
        };
        outcome.details = vec![
            format!("control-plane nodes Ready: {}", control_plane.join(", ")),
            format!("the bootstrap host {} can be powered off", bootstrap.name),
        ];
        Ok(outcome)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_the_bootstrap_host_leaves_only_the_bootstrap_ports() {
        let layout = super::super::node_identity::tests_layout();
        let before = load_balancer_services(&layout);
        let after = services_without_bootstrap(&layout);
        for (b, a) in before.iter().zip(&after) {
            let names: Vec<&str> = a.backends.iter().map(|s| s.name.as_str()).collect();
            if BOOTSTRAP_PORTS.contains(&b.port) {
                assert_eq!(names, ["cp0", "cp1", "cp2"], "{}", b.name);
            } else {
                assert_eq!(a, b);
            }
        }
        assert!(
            before[0]
                .backends
                .iter()
                .any(|s| s.name.as_str() == "bootstrap"),
            "prepare serves the bootstrap host"
        );
    }
}
