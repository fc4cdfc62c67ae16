//! The sanity check and the installation report.

use async_trait::async_trait;

use harmony::domain::capability::{DnsRecord, HostBinding};
use harmony::domain::interpret::{Interpret, InterpretName};
use harmony::domain::inventory::HostRole;
use harmony::domain::{ExecutionMode, InterpretError, Inventory, Outcome, Score};
use harmony_types::Version;

use super::{OkdTopology, capability_error, dns_records, version};

/// Cross-checks inventory bindings, DHCP reservations, DNS records and iPXE scripts: every
/// bound host has its role's logical host, its reserved address and its script; in apply mode
/// it also lists which hosts fetched their script. Fails on any inconsistency.
#[derive(Debug, Clone, Copy)]
pub struct OkdSanityCheckScore;

/// Lists, per role, each logical host, its address, MAC, physical host and boot status.
#[derive(Debug, Clone, Copy)]
pub struct OkdInstallationReportScore;

impl<T: OkdTopology> Score<T> for OkdSanityCheckScore {
    fn name(&self) -> String {
        "OKD sanity check".into()
    }

    fn create_interpret(&self) -> Box<dyn Interpret<T>> {
        Box::new(*self)
    }

    fn parameters(&self) -> serde_json::Value {
        serde_json::json!({})
    }
}

impl<T: OkdTopology> Score<T> for OkdInstallationReportScore {
    fn name(&self) -> String {
        "OKD installation report".into()
    }

    fn create_interpret(&self) -> Box<dyn Interpret<T>> {
        Box::new(*self)
    }

    fn parameters(&self) -> serde_json::Value {
        serde_json::json!({})
    }
}

fn script_path(b: &HostBinding) -> String {
    format!("/ipxe/{}.ipxe", b.mac.to_hyphenated())
}

#[async_trait]
impl<T: OkdTopology> Interpret<T> for OkdSanityCheckScore {
    fn name(&self) -> InterpretName {
        InterpretName("OkdSanityCheck")
    }

    fn version(&self) -> Version {
        version()
    }

    async fn execute(&self, _: &Inventory, topology: &T) -> Result<Outcome, InterpretError> {
        let layout = topology.layout();
        let err = |what: &str| capability_error(what.to_string(), &[]);
        let bindings = topology
            .host_bindings()
            .await
            .map_err(err("reading bindings"))?;
        let reservations = topology.bindings().await.map_err(err("reading DHCP"))?;
        let records = topology.records().await.map_err(err("reading DNS"))?;
        let log = topology
            .access_log()
            .await
            .map_err(err("reading the HTTP log"))?;
        let mut problems = Vec::new();
        let mut details = Vec::new();
        for b in &bindings {
            match layout.role_of(&b.logical) {
                Some(r) if r == b.role => {}
                Some(r) => problems.push(format!(
                    "host {} has role {} but is bound to {}, a {r} logical host",
                    b.host, b.role, b.logical
                )),
                None => problems.push(format!(
                    "host {} is bound to {}, which the topology does not declare",
                    b.host, b.logical
                )),
            }
            let logical = layout
                .hosts_for(b.role)
                .iter()
                .find(|l| l.name == b.logical);
            match (logical, reservations.iter().find(|r| r.mac == b.mac)) {
                (Some(l), Some(r)) if r.ip == l.ip && r.hostname == l.name => {}
                (Some(l), Some(r)) => problems.push(format!(
                    "DHCP reserves {} / {} for {} but {} is {}",
                    r.ip, r.hostname, b.mac, l.name, l.ip
                )),
                (_, None) => {
                    problems.push(format!("no DHCP reservation for {} ({})", b.logical, b.mac))
                }
                (None, _) => {}
            }
            let fetched = log
                .iter()
                .any(|a| a.path == script_path(b) && a.status == 200);
            if topology.mode() == ExecutionMode::Apply {
                details.push(format!(
                    "{} ({}): {}",
                    b.logical,
                    b.mac,
                    if fetched {
                        "fetched its iPXE script"
                    } else {
                        "has not fetched its iPXE script yet"
                    }
                ));
            }
        }
        let wanted = dns_records(layout).map_err(err("building DNS records"))?;
        for r in wanted {
            if !records.contains(&r) {
                problems.push(format!("DNS does not serve {r}"));
            }
        }
        let bound: usize = [
            HostRole::Bootstrap,
            HostRole::ControlPlane,
            HostRole::Worker,
        ]
        .iter()
        .map(|r| bindings.iter().filter(|b| b.role == *r).count())
        .sum();
        if problems.is_empty() {
            let mut o = Outcome::noop(format!(
                "consistent: {bound} bound host(s), their reservations, scripts and the cluster's DNS records"
            ));
            o.details = details;
            Ok(o)
        } else {
            let mut o = Outcome::failed(format!("{} problem(s) found", problems.len()));
            o.details = problems.into_iter().chain(details).collect();
            Ok(o)
        }
    }
}

#[async_trait]
impl<T: OkdTopology> Interpret<T> for OkdInstallationReportScore {
    fn name(&self) -> InterpretName {
        InterpretName("OkdInstallationReport")
    }

    fn version(&self) -> Version {
        version()
    }

    async fn execute(&self, _: &Inventory, topology: &T) -> Result<Outcome, InterpretError> {
        let layout = topology.layout();
        let err = |what: &str| capability_error(what.to_string(), &[]);
        let bindings = topology
            .host_bindings()
            .await
            .map_err(err("reading bindings"))?;
        let log = topology
            .access_log()
            .await
            .map_err(err("reading the HTTP log"))?;
        let records = topology.records().await.map_err(err("reading DNS"))?;
        let mut lines = vec![
            format!(
                "cluster {}: API https://{}:6443 and *.{} at {}",
                layout.cluster_domain(),
                layout.fqdn("api"),
                layout.fqdn("apps"),
                layout.load_balancer
            ),
            format!(
                "DNS serves {} record(s); boot server {}",
                records
                    .iter()
                    .filter(|r| matches!(r, DnsRecord::A { .. } | DnsRecord::Wildcard { .. }))
                    .count(),
                topology.base_url()
            ),
        ];
        for role in [
            HostRole::Bootstrap,
            HostRole::ControlPlane,
            HostRole::Worker,
        ] {
            for l in layout.hosts_for(role) {
                let b = bindings.iter().find(|b| b.logical == l.name);
                let line = match b {
                    Some(b) => {
                        let fetched = log
                            .iter()
                            .any(|a| a.path == script_path(b) && a.status == 200);
                        format!(
                            "{:<13} {:<10} {:<15} {} host {}{}",
                            role.to_string(),
                            l.name.to_string(),
                            l.ip.to_string(),
                            b.mac,
                            b.host,
                            if fetched { ", iPXE script fetched" } else { "" }
                        )
                    }
                    None => format!(
                        "{:<13} {:<10} {:<15} not bound yet",
                        role.to_string(),
                        l.name.to_string(),
                        l.ip.to_string()
                    ),
                };
                lines.push(line);
            }
        }
        let mut o = Outcome::noop(format!(
            "{} of {} logical host(s) bound",
            bindings.len(),
            1 + layout.control_plane.len() + layout.workers.len()
        ));
        o.details = lines;
        Ok(o)
    }
}
