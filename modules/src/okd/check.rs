//! The sanity check and the installation report.

use async_trait::async_trait;
use std::collections::{HashMap, HashSet};

use harmony::domain::capability::{DnsRecord, HostBinding, HttpAccess, LogicalHost};
use harmony::domain::interpret::{Interpret, InterpretName};
use harmony::domain::inventory::HostRole;
use harmony::domain::{ExecutionMode, InterpretError, Inventory, Outcome, Score};
use harmony_types::{HostName, Version};

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

/// Every role, in the order reports list them.
const ROLES: [HostRole; 3] = [
    HostRole::Bootstrap,
    HostRole::ControlPlane,
    HostRole::Worker,
];

/// The paths the HTTP server answered with 200: the scripts hosts fetched.
fn fetched_scripts(log: &[HttpAccess]) -> HashSet<&str> {
    log.iter()
        .filter(|a| a.status == 200)
        .map(|a| a.path.as_str())
        .collect()
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
        // Lookups by key instead of a search per binding: a check covers thousands of hosts.
        // Each map keeps the first entry, as a search from the front would find it.
        let mut role_of: HashMap<&HostName, HostRole> = HashMap::new();
        let mut logical_of: HashMap<(HostRole, &HostName), &LogicalHost> = HashMap::new();
        for role in ROLES {
            for l in layout.hosts_for(role) {
                role_of.entry(&l.name).or_insert(role);
                logical_of.entry((role, &l.name)).or_insert(l);
            }
        }
        let mut reservation_of = HashMap::with_capacity(reservations.len());
        for r in &reservations {
            reservation_of.entry(r.mac).or_insert(r);
        }
        let fetched_paths = fetched_scripts(&log);
        for b in &bindings {
            match role_of.get(&b.logical).copied() {
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
            let logical = logical_of.get(&(b.role, &b.logical)).copied();
            match (logical, reservation_of.get(&b.mac).copied()) {
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
            let fetched = fetched_paths.contains(script_path(b).as_str());
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
        let served: HashSet<&DnsRecord> = records.iter().collect();
        for r in wanted {
            if !served.contains(&r) {
                problems.push(format!("DNS does not serve {r}"));
            }
        }
        let bound: usize = ROLES
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
        // The first binding of each logical host, found by key: reports cover thousands.
        let mut binding_of = HashMap::with_capacity(bindings.len());
        for b in &bindings {
            binding_of.entry(&b.logical).or_insert(b);
        }
        let fetched_paths = fetched_scripts(&log);
        for role in ROLES {
            for l in layout.hosts_for(role) {
                let b = binding_of.get(&l.name).copied();
                let line = match b {
                    Some(b) => {
                        let fetched = fetched_paths.contains(script_path(b).as_str());
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
        // Where every bound host's time went, boot by boot (phases Harmony saw).
        let macs: Vec<_> = bindings.iter().map(|b| b.mac).collect();
        let timelines = topology
            .timelines(&macs)
            .await
            .map_err(err("reading boot timelines"))?;
        lines.extend(
            timelines
                .iter()
                .filter(|t| !t.boots.is_empty())
                .map(|t| format!("timeline {}", t.line())),
        );
        let mut o = Outcome::noop(format!(
            "{} of {} logical host(s) bound",
            bindings.len(),
            1 + layout.control_plane.len() + layout.workers.len()
        ));
        o.details = lines;
        Ok(o.with_data(serde_json::json!({ "timeline": timelines })))
    }
}
