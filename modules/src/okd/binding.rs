//! Binding physical hosts to logical hosts of one role: a pure function, so the rule "a host
//! is only ever bound to a logical host of its own role" is tested without any service.

use std::collections::{HashMap, HashSet};

use harmony::domain::capability::{HostBinding, LogicalHost};
use harmony::domain::inventory::HostRole;
use harmony_types::{HostName, Id, MacAddress};

/// A physical host that has the role and may be bound.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Candidate {
    /// Its inventory id.
    pub host: Id,
    /// The MAC it PXE-boots from.
    pub mac: MacAddress,
    /// A logical host it was declared for, if any.
    pub logical: Option<HostName>,
}

/// Binding is impossible as asked.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum BindingError {
    /// A host was declared for a logical host that is not one of the role's.
    #[error(
        "host {host} is declared for {logical}, which is not a {role} logical host; bind it to one of: {allowed}"
    )]
    WrongRole {
        /// The physical host.
        host: Id,
        /// The logical host asked for.
        logical: HostName,
        /// The role.
        role: HostRole,
        /// The role's logical hosts.
        allowed: String,
    },
    /// An existing binding of this role points outside the role's logical hosts.
    #[error(
        "host {host} is bound as {role} to {logical}, which is no longer a {role} logical host; remove the binding from the inventory"
    )]
    Stale {
        /// The physical host.
        host: Id,
        /// Its logical host.
        logical: HostName,
        /// The role.
        role: HostRole,
    },
    /// A host has the role but every logical host of the role is taken.
    #[error(
        "host {host} has the {role} role but no {role} logical host is free: {slots}; free a slot (remove the host that holds it from the inventory) or declare another {role} logical host"
    )]
    NoFreeSlot {
        /// The physical host left without a slot.
        host: Id,
        /// The role.
        role: HostRole,
        /// Each logical host of the role and the host holding it.
        slots: String,
    },
    /// Two hosts want the same logical host.
    #[error("{logical} is wanted by hosts {first} and {second}; declare each logical host once")]
    Taken {
        /// The logical host.
        logical: HostName,
        /// The host that has it.
        first: Id,
        /// The host that also wants it.
        second: Id,
    },
}

/// Every binding of `role` after binding `candidates`: existing bindings of the role are kept,
/// declared candidates take their logical host, the others fill the free logical hosts in
/// declaration order. Only `logical` (the role's logical hosts) is ever handed out.
pub fn plan_bindings(
    role: HostRole,
    logical: &[LogicalHost],
    existing: &[HostBinding],
    candidates: &[Candidate],
) -> Result<Vec<HostBinding>, BindingError> {
    let allowed = || {
        logical
            .iter()
            .map(|h| h.name.to_string())
            .collect::<Vec<_>>()
            .join(", ")
    };
    // Sets keyed by host and logical host keep this linear: a render binds thousands of hosts.
    let names: HashSet<&HostName> = logical.iter().map(|l| &l.name).collect();
    let mut out: Vec<HostBinding> = Vec::new();
    let mut bound: HashSet<Id> = HashSet::new();
    // The first host holding each logical host, named when another one wants it.
    let mut taken: HashMap<HostName, Id> = HashMap::new();
    for b in existing.iter().filter(|b| b.role == role) {
        if !names.contains(&b.logical) {
            return Err(BindingError::Stale {
                host: b.host.clone(),
                logical: b.logical.clone(),
                role,
            });
        }
        bound.insert(b.host.clone());
        taken
            .entry(b.logical.clone())
            .or_insert_with(|| b.host.clone());
        out.push(b.clone());
    }
    for c in candidates.iter().filter(|c| c.logical.is_some()) {
        let Some(name) = &c.logical else { continue };
        if !names.contains(name) {
            return Err(BindingError::WrongRole {
                host: c.host.clone(),
                logical: name.clone(),
                role,
                allowed: allowed(),
            });
        }
        if bound.contains(&c.host) {
            continue;
        }
        if let Some(other) = taken.get(name) {
            return Err(BindingError::Taken {
                logical: name.clone(),
                first: other.clone(),
                second: c.host.clone(),
            });
        }
        bound.insert(c.host.clone());
        taken.insert(name.clone(), c.host.clone());
        out.push(HostBinding {
            host: c.host.clone(),
            role,
            logical: name.clone(),
            mac: c.mac,
        });
    }
    // Logical hosts only ever become taken, so one cursor walks the free ones in order.
    let mut free_hosts = logical.iter();
    for c in candidates.iter().filter(|c| c.logical.is_none()) {
        if bound.contains(&c.host) {
            continue;
        }
        let Some(free) = free_hosts.find(|l| !taken.contains_key(&l.name)) else {
            let slots: Vec<String> = logical
                .iter()
                .map(|l| match taken.get(&l.name) {
                    Some(h) => format!("{} (host {h})", l.name),
                    None => format!("{} (free)", l.name),
                })
                .collect();
            return Err(BindingError::NoFreeSlot {
                host: c.host.clone(),
                role,
                slots: slots.join(", "),
            });
        };
        bound.insert(c.host.clone());
        taken.insert(free.name.clone(), c.host.clone());
        out.push(HostBinding {
            host: c.host.clone(),
            role,
            logical: free.name.clone(),
            mac: c.mac,
        });
    }
    out.sort_by(|a, b| a.logical.cmp(&b.logical));
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;
    use harmony_types::IpAddress;

    fn lh(name: &str, ip: &str) -> LogicalHost {
        LogicalHost::new(
            HostName::parse(name).unwrap(),
            IpAddress::parse(ip).unwrap(),
        )
    }

    fn cand(id: &str, mac: &str, logical: Option<&str>) -> Candidate {
        Candidate {
            host: Id::parse(id).unwrap(),
            mac: MacAddress::parse(mac).unwrap(),
            logical: logical.map(|l| HostName::parse(l).unwrap()),
        }
    }

    #[test]
    fn workers_are_bound_only_to_worker_logical_hosts() {
        let workers = [lh("worker0", "10.0.0.21"), lh("worker1", "10.0.0.22")];
        let control_plane = ["cp0", "cp1", "cp2"];
        let candidates: Vec<Candidate> = (1..=2)
            .map(|i| cand(&format!("h{i}"), &format!("52:54:00:00:00:0{i}"), None))
            .collect();
        let out = plan_bindings(HostRole::Worker, &workers, &[], &candidates).unwrap();
        // A third host with the role finds no slot: an error naming it and the slots, never a
        // host silently left unbound.
        let mut three = candidates.clone();
        three.push(cand("h3", "52:54:00:00:00:03", None));
        let err = plan_bindings(HostRole::Worker, &workers, &[], &three).unwrap_err();
        assert_eq!(
            err.to_string(),
            "host h3 has the worker role but no worker logical host is free: worker0 (host h1), worker1 (host h2); free a slot (remove the host that holds it from the inventory) or declare another worker logical host"
        );
        assert_eq!(
            out.len(),
            2,
            "only as many bindings as worker logical hosts"
        );
        for b in &out {
            assert_eq!(b.role, HostRole::Worker);
            assert!(
                !control_plane.contains(&b.logical.as_str()),
                "worker host {} bound to control-plane logical host {}",
                b.host,
                b.logical
            );
            assert!(workers.iter().any(|w| w.name == b.logical));
        }
        let err = plan_bindings(
            HostRole::Worker,
            &workers,
            &[],
            &[cand("h1", "52:54:00:00:00:01", Some("cp0"))],
        )
        .unwrap_err();
        assert!(matches!(err, BindingError::WrongRole { .. }), "{err}");
        assert!(err.to_string().contains("worker0, worker1"), "{err}");
    }

    #[test]
    fn existing_bindings_are_kept_and_rerun_is_stable() {
        let workers = [lh("worker0", "10.0.0.21"), lh("worker1", "10.0.0.22")];
        let c = [
            cand("h1", "52:54:00:00:00:01", None),
            cand("h2", "52:54:00:00:00:02", Some("worker0")),
        ];
        let first = plan_bindings(HostRole::Worker, &workers, &[], &c).unwrap();
        assert_eq!(first[0].host.as_str(), "h2", "declared host takes worker0");
        assert_eq!(first[1].host.as_str(), "h1");
        let again = plan_bindings(HostRole::Worker, &workers, &first, &c).unwrap();
        assert_eq!(again, first);
        let stale = HostBinding {
            host: Id::parse("old").unwrap(),
            role: HostRole::Worker,
            logical: HostName::parse("worker7").unwrap(),
            mac: MacAddress::parse("52:54:00:00:00:99").unwrap(),
        };
        let err = plan_bindings(HostRole::Worker, &workers, &[stale], &c).unwrap_err();
        assert!(matches!(err, BindingError::Stale { .. }), "{err}");
    }

    #[test]
    fn a_logical_host_wanted_twice_names_its_holder() {
        let workers = [lh("worker0", "10.0.0.21"), lh("worker1", "10.0.0.22")];
        let c = [
            cand("h1", "52:54:00:00:00:01", Some("worker1")),
            cand("h2", "52:54:00:00:00:02", Some("worker1")),
        ];
        let err = plan_bindings(HostRole::Worker, &workers, &[], &c).unwrap_err();
        assert_eq!(
            err,
            BindingError::Taken {
                logical: HostName::parse("worker1").unwrap(),
                first: Id::parse("h1").unwrap(),
                second: Id::parse("h2").unwrap(),
            }
        );
        // Undeclared hosts fill the logical hosts the declared ones left, in order.
        let c = [
            cand("h3", "52:54:00:00:00:03", None),
            cand("h1", "52:54:00:00:00:01", Some("worker0")),
        ];
        let out = plan_bindings(HostRole::Worker, &workers, &[], &c).unwrap();
        let got: Vec<(&str, &str)> = out
            .iter()
            .map(|b| (b.host.as_str(), b.logical.as_str()))
            .collect();
        assert_eq!(got, [("h1", "worker0"), ("h3", "worker1")]);
    }
}
