//! Finding one role's hosts before they are bound: the program's declared hosts, `--roles`,
//! `--assign` rules and the operator's choice, waiting for discovery in apply mode. Roles are
//! truthful: a role is never given to more hosts than it has logical hosts (slots), a size
//! rule never picks among more matches than the role needs, and never picks while machines
//! are still reporting, so identical machines are never told apart by arrival order.

use std::collections::{HashMap, HashSet};
use std::time::{Duration, Instant};

use harmony::domain::capability::{
    BootPhase, CapabilityError, DeclaredRole, HostMatch, HostSelector,
};
use harmony::domain::inventory::{HostRole, PhysicalHost, RoleAssignment};
use harmony::domain::operator::OperatorError;
use harmony::domain::{ExecutionMode, InterpretError, Inventory, ObjectChange, report_progress};
use harmony_types::{Id, MacAddress};

use super::rules::{assign_by_rules, describe};
use super::{Candidate, OkdTopology, capability_error, power_on};

const POLL: Duration = Duration::from_secs(2);

/// How long the set of discovered hosts must stay the same, with no machine holding a
/// discovery lease without having reported, before a size rule picks hosts.
pub(super) const SETTLE: Duration = Duration::from_secs(6);

pub(super) fn fail(action: &str, changes: &[ObjectChange], problem: String) -> InterpretError {
    capability_error(action, changes)(CapabilityError::InvalidObject {
        object: action.to_string(),
        problem,
    })
}

fn operator_error(e: OperatorError, changes: &[ObjectChange]) -> InterpretError {
    capability_error("asking the operator", changes)(CapabilityError::Unsupported {
        what: "this question".into(),
        backend: "the operator".into(),
        reason: e.to_string(),
    })
}

/// Hosts by id and by MAC, so matching thousands of hosts and declarations stays linear.
pub(super) struct HostIndex<'a> {
    by_id: HashMap<&'a Id, usize>,
    by_mac: HashMap<MacAddress, usize>,
}

impl<'a> HostIndex<'a> {
    pub(super) fn new(hosts: &'a [PhysicalHost]) -> Self {
        let mut by_id = HashMap::with_capacity(hosts.len());
        let mut by_mac = HashMap::with_capacity(hosts.len());
        // The first host wins, as a search from the front of the list would find it.
        for (i, h) in hosts.iter().enumerate().rev() {
            by_id.insert(&h.id, i);
            for m in &h.macs {
                by_mac.insert(*m, i);
            }
        }
        Self { by_id, by_mac }
    }

    /// The position of the host with inventory id `id`.
    pub(super) fn by_id(&self, id: &Id) -> Option<usize> {
        self.by_id.get(id).copied()
    }

    /// The position of the first host `selector` matches.
    fn find(&self, selector: &HostSelector) -> Option<usize> {
        match selector {
            HostSelector::Id(id) => self.by_id(id),
            HostSelector::Mac(mac) => self.by_mac.get(mac).copied(),
        }
    }
}

/// The first declaration matching a host, looked up by the host's id and MACs.
struct DeclaredIndex<'a> {
    declared: &'a [DeclaredRole],
    by_id: HashMap<&'a Id, usize>,
    by_mac: HashMap<MacAddress, usize>,
}

impl<'a> DeclaredIndex<'a> {
    fn new(declared: &'a [DeclaredRole]) -> Self {
        let mut by_id = HashMap::new();
        let mut by_mac = HashMap::new();
        for (i, d) in declared.iter().enumerate().rev() {
            match &d.host {
                HostSelector::Id(id) => {
                    by_id.insert(id, i);
                }
                HostSelector::Mac(mac) => {
                    by_mac.insert(*mac, i);
                }
            }
        }
        Self {
            declared,
            by_id,
            by_mac,
        }
    }

    /// The first declaration (in declaration order) that selects `host`.
    fn for_host(&self, host: &PhysicalHost) -> Option<&'a DeclaredRole> {
        let by_mac = host.macs.iter().filter_map(|m| self.by_mac.get(m));
        self.by_id
            .get(&host.id)
            .into_iter()
            .chain(by_mac)
            .min()
            .map(|&i| &self.declared[i])
    }
}

/// The role's slots (its logical hosts) and who holds each, for messages: `worker0 (host a),
/// worker1 (free)`, then hosts that have the role without a slot yet.
fn slots<T: OkdTopology>(
    role: HostRole,
    topology: &T,
    bindings: &[harmony::domain::capability::HostBinding],
    holders: &[&Id],
) -> String {
    let logical = topology.layout().hosts_for(role);
    let mut parts: Vec<String> = logical
        .iter()
        .map(|l| {
            match bindings
                .iter()
                .find(|b| b.role == role && b.logical == l.name)
            {
                Some(b) => format!("{} (host {})", l.name, b.host),
                None => format!("{} (free)", l.name),
            }
        })
        .collect();
    let bound: HashSet<&Id> = bindings.iter().map(|b| &b.host).collect();
    let unbound: Vec<String> = holders
        .iter()
        .filter(|h| !bound.contains(**h))
        .map(|h| h.to_string())
        .collect();
    if !unbound.is_empty() {
        parts.push(format!("role given, not bound yet: {}", unbound.join(", ")));
    }
    parts.join(", ")
}

/// Refuses giving `role` to `new` hosts when the role's holders would outnumber its slots.
fn check_slots<T: OkdTopology>(
    role: HostRole,
    topology: &T,
    roles: &[RoleAssignment],
    bindings: &[harmony::domain::capability::HostBinding],
    new: &[Id],
    source: &str,
) -> Result<(), String> {
    let needed = topology.layout().hosts_for(role).len();
    let holders: Vec<&Id> = roles
        .iter()
        .filter(|r| r.role == role)
        .map(|r| &r.host)
        .collect();
    let new: Vec<&Id> = new.iter().filter(|h| !holders.contains(h)).collect();
    // Holders beyond the slots from before this run are the binding step's error, in the
    // phase of their role: only new assignments are refused here.
    if new.is_empty() || holders.len() + new.len() <= needed {
        return Ok(());
    }
    let free = needed.saturating_sub(holders.len());
    let names: Vec<String> = new.iter().map(|h| h.to_string()).collect();
    Err(format!(
        "{source} gives the {role} role to host(s) {} but the role has {free} free slot(s) of {needed}: {}; nothing was written. Free a slot (remove the host that holds it from the inventory), declare another {role} logical host, or drop the rule",
        names.join(", "),
        slots(role, topology, bindings, &holders),
    ))
}

/// Whether discovery has settled, for size rules: no machine holds a DHCP lease without
/// having reported, and the hosts known have not changed for [`SETTLE`].
struct Settle {
    ids: Vec<Id>,
    since: Instant,
}

impl Settle {
    fn new() -> Self {
        Self {
            ids: Vec::new(),
            since: Instant::now(),
        }
    }

    /// Updates with the hosts known now; returns the MACs still booting (leased, not
    /// reported), or `None` once settled.
    fn observe(
        &mut self,
        hosts: &[PhysicalHost],
        leases: &[harmony::domain::capability::DhcpLease],
        reserved: &HashSet<MacAddress>,
    ) -> Option<Vec<String>> {
        let mut ids: Vec<Id> = hosts.iter().map(|h| h.id.clone()).collect();
        ids.sort();
        if ids != self.ids {
            self.ids = ids;
            self.since = Instant::now();
        }
        let known: HashSet<&MacAddress> = hosts.iter().flat_map(|h| &h.macs).collect();
        let booting: Vec<String> = leases
            .iter()
            .filter(|l| !known.contains(&l.mac) && !reserved.contains(&l.mac))
            .map(|l| format!("{} (leased {})", l.mac, l.ip))
            .collect();
        if !booting.is_empty() {
            return Some(booting);
        }
        (self.since.elapsed() < SETTLE).then(Vec::new)
    }
}

/// Records the declared inventory and roles, then waits (apply mode), asks (terminal) or
/// fails until `role` has enough hosts. Returns the candidates, each by its first MAC (the
/// one it PXE-boots from: discovery lists the boot NIC first).
pub(super) async fn acquire<T: OkdTopology>(
    role: HostRole,
    inventory: &Inventory,
    topology: &T,
    changes: &mut Vec<ObjectChange>,
) -> Result<Vec<Candidate>, InterpretError> {
    for h in &inventory.hosts {
        let c = topology
            .record_host(h)
            .await
            .map_err(capability_error("recording declared hosts", changes))?;
        changes.push(c);
    }
    for a in &inventory.assignments {
        let c = topology
            .assign_role(a)
            .await
            .map_err(capability_error("recording declared roles", changes))?;
        changes.push(c);
    }
    let needed = topology.layout().hosts_for(role).len();
    let started = Instant::now();
    let timeout = topology.discovery_timeout();
    let mut settle = Settle::new();
    let mut asked_held: HashSet<Id> = HashSet::new();
    let op = topology.operator();
    // `--bmc` hosts not yet discovered, PXE booted by Harmony once this run (apply mode).
    // When they were, what each BMC did, and whether the silent ones were reset once more.
    let mut powered: Powered = None;
    let mut phase_lines = power_on::PhaseLines::default();
    loop {
        // Reports held for the operator: asked about once each on a terminal.
        let held = topology
            .held_reports()
            .await
            .map_err(capability_error("reading the inventory", changes))?;
        for h in &held {
            if !op.can_prompt() || op.assumes_yes() || !asked_held.insert(h.reported.id.clone()) {
                continue;
            }
            let question = format!(
                "A discovery report from {} was held, not applied: {}. Reported: {}. Apply it (only if this machine really changed)?",
                h.client,
                h.difference,
                describe(&h.reported)
            );
            let yes = tokio::task::block_in_place(|| op.confirm(&question))
                .map_err(|e| operator_error(e, changes))?;
            if yes {
                let c = topology
                    .accept_held_report(&h.reported.id)
                    .await
                    .map_err(capability_error("applying a held report", changes))?;
                changes.push(c);
            }
        }
        let hosts = topology
            .known_hosts()
            .await
            .map_err(capability_error("reading the inventory", changes))?;
        let mut roles = topology
            .role_assignments()
            .await
            .map_err(capability_error("reading the inventory", changes))?;
        let bindings = topology
            .host_bindings()
            .await
            .map_err(capability_error("reading the inventory", changes))?;
        let index = HostIndex::new(&hosts);
        let mut with_role: HashSet<Id> = roles.iter().map(|r| r.host.clone()).collect();
        // `--roles`: every declared host found and without a role, checked against each
        // role's slots before any is written.
        let mut declared_new: Vec<RoleAssignment> = Vec::new();
        for declared in topology.declared_roles() {
            let Some(h) = index.find(&declared.host).map(|i| &hosts[i]) else {
                continue;
            };
            if !with_role.contains(&h.id) && !declared_new.iter().any(|a| a.host == h.id) {
                declared_new.push(RoleAssignment {
                    host: h.id.clone(),
                    role: declared.role,
                });
            }
        }
        for r in [
            HostRole::Bootstrap,
            HostRole::ControlPlane,
            HostRole::Worker,
        ] {
            let new: Vec<Id> = declared_new
                .iter()
                .filter(|a| a.role == r)
                .map(|a| a.host.clone())
                .collect();
            check_slots(r, topology, &roles, &bindings, &new, "--roles")
                .map_err(|e| fail(&format!("giving the {r} role by --roles"), changes, e))?;
        }
        for a in declared_new {
            let c = topology
                .assign_role(&a)
                .await
                .map_err(capability_error("recording --roles", changes))?;
            changes.push(c);
            with_role.insert(a.host.clone());
            roles.push(a);
        }
        let have_role = roles.iter().filter(|r| r.role == role).count();
        let by_host: HashMap<Id, HostRole> =
            roles.iter().map(|r| (r.host.clone(), r.role)).collect();
        // Size rules pick only once discovery has settled (apply mode, where machines report
        // while the phase waits); render and plan see a fixed inventory.
        let unsettled = if topology.mode() == ExecutionMode::Apply {
            let leases = topology
                .leases()
                .await
                .map_err(capability_error("reading DHCP leases", changes))?;
            let reserved: HashSet<MacAddress> = topology
                .bindings()
                .await
                .map_err(capability_error("reading DHCP reservations", changes))?
                .iter()
                .flat_map(|b| b.macs().copied())
                .collect();
            settle.observe(&hosts, &leases, &reserved)
        } else {
            None
        };
        let by_rules = assign_by_rules(
            role,
            topology.role_rules(),
            &hosts,
            &by_host,
            needed.saturating_sub(have_role),
            unsettled.is_none(),
        )
        .map_err(|e| fail(&format!("assigning {role} hosts by --assign"), changes, e))?;
        check_slots(role, topology, &roles, &bindings, &by_rules, "--assign")
            .map_err(|e| fail(&format!("giving the {role} role by --assign"), changes, e))?;
        for host in by_rules {
            let a = RoleAssignment { host, role };
            let c = topology
                .assign_role(&a)
                .await
                .map_err(capability_error("recording --assign roles", changes))?;
            changes.push(c);
            with_role.insert(a.host.clone());
            roles.push(a);
        }
        let bound_here = bindings.iter().filter(|b| b.role == role).count();
        let declared_index = DeclaredIndex::new(topology.declared_roles());
        let candidates: Vec<Candidate> = roles
            .iter()
            .filter(|r| r.role == role)
            .filter_map(|r| index.by_id(&r.host))
            .map(|i| &hosts[i])
            .filter_map(|h| {
                let declared = declared_index.for_host(h);
                Some(Candidate {
                    host: h.id.clone(),
                    mac: *h.macs.first()?,
                    logical: declared.and_then(|d| d.logical.clone()),
                })
            })
            .collect();
        let bound_hosts: HashSet<&Id> = bindings.iter().map(|b| &b.host).collect();
        let unbound = candidates
            .iter()
            .filter(|c| !bound_hosts.contains(&c.host))
            .count();
        let missing = needed.saturating_sub(bound_here + unbound);
        if missing == 0 {
            report_phases(topology, &powered, &mut phase_lines, changes).await?;
            return Ok(candidates);
        }
        let free: Vec<&PhysicalHost> = hosts
            .iter()
            .filter(|h| !with_role.contains(&h.id))
            .collect();
        if op.can_prompt() && !op.assumes_yes() && free.len() >= missing {
            let options: Vec<String> = free.iter().map(|h| describe(h)).collect();
            let question = format!(
                "Choose {missing} host(s) for the {role} role ({}):",
                topology
                    .layout()
                    .hosts_for(role)
                    .iter()
                    .map(|h| h.name.to_string())
                    .collect::<Vec<_>>()
                    .join(", ")
            );
            let chosen = tokio::task::block_in_place(|| op.choose(&question, &options, missing))
                .map_err(|e| operator_error(e, changes))?;
            for i in chosen {
                let Some(h) = free.get(i) else { continue };
                let a = RoleAssignment {
                    host: h.id.clone(),
                    role,
                };
                let c = topology
                    .assign_role(&a)
                    .await
                    .map_err(capability_error("assigning roles", changes))?;
                changes.push(c);
            }
            continue;
        }
        let have = bound_here + unbound;
        if topology.mode() == ExecutionMode::Apply && powered.is_none() {
            let known: HashSet<MacAddress> =
                hosts.iter().flat_map(|h| h.macs.iter().copied()).collect();
            let undiscovered: Vec<MacAddress> = topology
                .host_bmcs()
                .iter()
                .map(|b| b.mac)
                .filter(|m| !known.contains(m))
                .collect();
            // A host an earlier phase of this run powered into discovery within the boot wait
            // is still booting: followed, not cycled again.
            let timelines = topology
                .timelines(&undiscovered)
                .await
                .map_err(capability_error("reading boot timelines", changes))?;
            let recent = power_on::now_ms()
                - i64::try_from(power_on::boot_wait(topology).as_millis()).unwrap_or(i64::MAX);
            let booting: Vec<MacAddress> = timelines
                .iter()
                .filter(|t| {
                    t.latest()
                        .and_then(|b| b.at(BootPhase::PowerOnRequested))
                        .is_some_and(|at| at >= recent)
                })
                .map(|t| t.mac)
                .collect();
            let to_boot: Vec<MacAddress> = undiscovered
                .iter()
                .filter(|m| !booting.contains(m))
                .copied()
                .collect();
            let bmcs = power_on::with_bmc(topology, &to_boot);
            let mut boots = power_on::pxe_boot(topology, &bmcs, false).await;
            boots.extend(booting.iter().map(|mac| power_on::Boot {
                mac: *mac,
                line: format!("host {mac} is still booting from an earlier power-on: followed"),
                ok: true,
            }));
            for b in &boots {
                report_progress(format!("discovery: {}", b.line));
            }
            powered = Some((Instant::now(), boots, false));
            continue;
        }
        report_phases(topology, &powered, &mut phase_lines, changes).await?;
        // Half-way through the boot wait, the hosts cycled and still silent are reset once
        // more, forced.
        if let Some((at, boots, retried)) = &mut powered
            && !*retried
            && at.elapsed() >= power_on::boot_wait(topology) / 2
        {
            *retried = true;
            let known: HashSet<MacAddress> =
                hosts.iter().flat_map(|h| h.macs.iter().copied()).collect();
            let quiet: Vec<MacAddress> = boots
                .iter()
                .filter(|b| b.ok && !known.contains(&b.mac))
                .map(|b| b.mac)
                .collect();
            let again = power_on::with_bmc(topology, &quiet);
            for b in power_on::pxe_boot(topology, &again, true).await {
                report_progress(format!(
                    "discovery: no report yet: reset once more, forced: {}",
                    b.line
                ));
            }
        }
        if topology.mode() != ExecutionMode::Apply {
            return Err(fail(
                &format!("finding {role} hosts"),
                changes,
                format!(
                    "the {role} role needs {needed} host(s) and {have} have it ({} unassigned host(s) known); declare them in the program's inventory, with --roles FILE or --assign ROLE=RULE, or run on a terminal to choose",
                    free.len()
                ),
            ));
        }
        let held_note = if held.is_empty() {
            String::new()
        } else {
            let listed: Vec<String> = held
                .iter()
                .map(|h| format!("{} from {}: {}", h.reported.id, h.client, h.difference))
                .collect();
            format!(
                "; {} discovery report(s) held for the operator, not applied ({}): run on a terminal to review them",
                held.len(),
                listed.join("; ")
            )
        };
        let size_rules = topology
            .role_rules()
            .iter()
            .any(|r| r.role == role && matches!(r.matcher, HostMatch::Size { .. }));
        let settling = match &unsettled {
            Some(booting) if !booting.is_empty() && size_rules => format!(
                "; size rules wait until every booting machine has reported: {}",
                booting.join(", ")
            ),
            Some(_) if size_rules => {
                "; size rules wait until no new machine has reported for a few seconds".into()
            }
            _ => String::new(),
        };
        if started.elapsed() >= timeout {
            let known: HashSet<MacAddress> =
                hosts.iter().flat_map(|h| h.macs.iter().copied()).collect();
            let quiet: Vec<MacAddress> = powered
                .iter()
                .flat_map(|(_, boots, _)| boots)
                .filter(|b| b.ok && !known.contains(&b.mac))
                .map(|b| b.mac)
                .collect();
            let timelines = topology
                .timelines(&quiet)
                .await
                .map_err(capability_error("reading boot timelines", changes))?;
            let now = power_on::now_ms();
            let silent: Vec<String> = powered
                .iter()
                .flat_map(|(_, boots, _)| boots)
                .filter(|b| !b.ok)
                .map(|b| b.line.clone())
                .chain(
                    timelines
                        .iter()
                        .map(|t| power_on::stuck(t, now, power_on::Evidence::DiscoveryReport)),
                )
                .collect();
            let bmc_note = if silent.is_empty() {
                String::new()
            } else {
                format!("; {}", silent.join("; "))
            };
            return Err(capability_error(
                format!("discovering {role} hosts"),
                changes,
            )(CapabilityError::Timeout {
                waited_for: format!(
                    "{missing} more {role} host(s) to be discovered at {}discovery and given the role{settling}{held_note}{bmc_note}",
                    topology.base_url()
                ),
                after: timeout,
                last_seen: format!("{have} of {needed}, {} unassigned", free.len()),
            }));
        }
        report_progress(format!(
            "waiting for {missing} more {role} host(s): boot them into discovery (they report to {}discovery); {} unassigned known{}{settling}{held_note}",
            topology.base_url(),
            free.len(),
            if free.is_empty() {
                String::new()
            } else {
                format!(
                    " (give them the role with --assign {role}=mac:MAC, or run on a terminal to choose)"
                )
            }
        ));
        tokio::time::sleep(POLL).await;
    }
}

/// What the run's BMCs did for discovery: when, each host's result, whether the silent ones
/// were reset once more.
type Powered = Option<(Instant, Vec<power_on::Boot>, bool)>;

/// Prints the new boot phases of the hosts `powered` booted into discovery.
async fn report_phases<T: OkdTopology>(
    topology: &T,
    powered: &Powered,
    lines: &mut power_on::PhaseLines,
    changes: &[ObjectChange],
) -> Result<(), InterpretError> {
    let Some((_, boots, _)) = powered else {
        return Ok(());
    };
    let macs: Vec<MacAddress> = boots.iter().filter(|b| b.ok).map(|b| b.mac).collect();
    lines.report(
        &topology
            .timelines(&macs)
            .await
            .map_err(capability_error("reading boot timelines", changes))?,
    );
    Ok(())
}
