//! Giving discovered hosts a role by the operator's `--assign` rules, and describing hosts'
//! hardware for the prompt and for messages. A pure function: no service, no guessing.

use std::collections::{HashMap, HashSet};

use harmony::domain::capability::{HostMatch, RoleRule};
use harmony::domain::inventory::{Disk, HostRole, PhysicalHost};
use harmony_types::Id;

use crate::interpret_support::human;

/// A disk in a few words: name, size and kind (`vda 111.8 GiB SSD`). The name is escaped: an
/// inventory may predate report validation.
pub(super) fn describe_disk(d: &Disk) -> String {
    format!(
        "{} {} {}",
        d.name.escape_debug(),
        human(d.size_bytes),
        if d.rotational { "HDD" } else { "SSD" }
    )
}

/// A host's hardware in one line: id, MACs, CPUs, memory and each disk with its size and kind.
pub(super) fn describe(h: &PhysicalHost) -> String {
    let macs: Vec<String> = h.macs.iter().map(ToString::to_string).collect();
    let disks: Vec<String> = h.disks.iter().map(describe_disk).collect();
    format!(
        "{}: MAC {}; {} CPU; {} memory; {}{}",
        h.id,
        if macs.is_empty() {
            "none reported".to_string()
        } else {
            macs.join(", ")
        },
        h.cpu_count,
        human(h.memory_bytes),
        if disks.is_empty() {
            "no disk reported".to_string()
        } else {
            format!("disks {}", disks.join(", "))
        },
        h.serial
            .as_deref()
            .map(|s| format!("; serial {}", s.escape_debug()))
            .unwrap_or_default()
    )
}

/// The hosts `--assign` rules of `role` give that role: every host a MAC rule names, then the
/// hosts size rules match, when they are no more than the `need` still missing. A size rule
/// matching more hosts than that never picks among them: the error lists them and says how to
/// narrow the rule. Hosts that already have a role, and hosts a MAC rule names for any role,
/// are never taken by a size rule. Size rules pick only when `settled` (no machine is still
/// reporting), so identical machines are never told apart by arrival order; an ambiguous
/// match is an error whenever it is seen.
pub(super) fn assign_by_rules(
    role: HostRole,
    rules: &[RoleRule],
    hosts: &[PhysicalHost],
    roles: &HashMap<Id, HostRole>,
    need: usize,
    settled: bool,
) -> Result<Vec<Id>, String> {
    let mut picked: Vec<Id> = Vec::new();
    for rule in rules.iter().filter(|r| r.role == role) {
        let HostMatch::Mac(mac) = &rule.matcher else {
            continue;
        };
        // A host not discovered yet is waited for like any missing host.
        let Some(h) = hosts.iter().find(|h| h.macs.contains(mac)) else {
            continue;
        };
        match roles.get(&h.id) {
            Some(r) if *r == role => {}
            Some(r) => {
                return Err(format!(
                    "{rule}: host {} already has role {r}; a host keeps its role (drop the rule, or remove the host from the inventory to reassign it)",
                    h.id
                ));
            }
            None if !picked.contains(&h.id) => picked.push(h.id.clone()),
            None => {}
        }
    }
    let need = need.saturating_sub(picked.len());
    let size_rules: Vec<&RoleRule> = rules
        .iter()
        .filter(|r| r.role == role && matches!(r.matcher, HostMatch::Size { .. }))
        .collect();
    if need == 0 || size_rules.is_empty() {
        return Ok(picked);
    }
    let named: HashSet<&Id> = rules
        .iter()
        .filter(|r| matches!(r.matcher, HostMatch::Mac(_)))
        .filter_map(|r| hosts.iter().find(|h| r.matches(h)))
        .map(|h| &h.id)
        .collect();
    let matching: Vec<&PhysicalHost> = hosts
        .iter()
        .filter(|h| !roles.contains_key(&h.id) && !picked.contains(&h.id) && !named.contains(&h.id))
        .filter(|h| size_rules.iter().any(|r| r.matches(h)))
        .collect();
    if matching.len() > need {
        let rules: Vec<String> = size_rules.iter().map(|r| r.to_string()).collect();
        let listed: Vec<String> = matching
            .iter()
            .map(|h| format!("  {}", describe(h)))
            .collect();
        let example = matching
            .iter()
            .take(need)
            .filter_map(|h| h.macs.first())
            .map(|m| format!("--assign {role}=mac:{m}"))
            .collect::<Vec<_>>()
            .join(" ");
        return Err(format!(
            "{} {} {} unassigned hosts but the {role} role needs only {need} more, and a rule never picks among them:\n{}\nnarrow the rule: name the hosts you mean by MAC instead (e.g. {example}), or raise the minimum",
            rules.join(" and "),
            if rules.len() == 1 { "matches" } else { "match" },
            matching.len(),
            listed.join("\n"),
        ));
    }
    if settled {
        picked.extend(matching.into_iter().map(|h| h.id.clone()));
    }
    Ok(picked)
}

#[cfg(test)]
mod tests {
    use super::*;
    use harmony_types::{Disk, MacAddress};

    fn host(id: &str, mac: &str, memory_gib: u64, disk_gb: u64) -> PhysicalHost {
        PhysicalHost {
            id: Id::parse(id).unwrap(),
            hostname: None,
            serial: None,
            macs: vec![MacAddress::parse(mac).unwrap()],
            cpu_count: 4,
            memory_bytes: memory_gib << 30,
            disks: vec![Disk {
                name: "vda".into(),
                size_bytes: disk_gb * 1_000_000_000,
                rotational: false,
                ..Default::default()
            }],
        }
    }

    fn rules(texts: &[&str]) -> Vec<RoleRule> {
        texts.iter().map(|t| RoleRule::parse(t).unwrap()).collect()
    }

    fn ids(v: Vec<Id>) -> Vec<String> {
        v.into_iter().map(|i| i.to_string()).collect()
    }

    #[test]
    fn mac_rules_then_size_rules_never_guessing() {
        let hosts = vec![
            host("big-a", "52:54:00:00:00:01", 32, 500),
            host("big-b", "52:54:00:00:00:02", 32, 500),
            host("small", "52:54:00:00:00:03", 8, 100),
            host("cp", "52:54:00:00:00:04", 64, 500),
        ];
        let mut roles = HashMap::new();
        roles.insert(Id::parse("cp").unwrap(), HostRole::ControlPlane);
        let worker = HostRole::Worker;
        // By MAC: exactly the named host.
        let r = rules(&["worker=mac:52:54:00:00:00:03"]);
        assert_eq!(
            ids(assign_by_rules(worker, &r, &hosts, &roles, 2, true).unwrap()),
            ["small"]
        );
        // By size: both big hosts fit a need of two; the control-plane host is never taken.
        let r = rules(&["worker=min-memory:16GiB,min-disk:120GB"]);
        assert_eq!(
            ids(assign_by_rules(worker, &r, &hosts, &roles, 2, true).unwrap()),
            ["big-a", "big-b"]
        );
        // A need of one: two match, so nothing is picked and both are listed with the advice.
        let e = assign_by_rules(worker, &r, &hosts, &roles, 1, true).unwrap_err();
        assert!(
            e.contains("big-a") && e.contains("big-b") && !e.contains("small"),
            "{e}"
        );
        assert!(e.contains("--assign worker=mac:52:54:00:00:00:01"), "{e}");
        // A MAC rule for another role keeps its host out of a size rule's matches.
        let r = rules(&["worker=min-memory:16GiB", "bootstrap=mac:52:54:00:00:00:02"]);
        assert_eq!(
            ids(assign_by_rules(worker, &r, &hosts, &roles, 1, true).unwrap()),
            ["big-a"]
        );
        // While machines are still reporting, a size rule picks nothing (MAC rules still do),
        // but an ambiguity is an error at once.
        let r = rules(&["worker=min-memory:16GiB,min-disk:120GB"]);
        assert!(
            assign_by_rules(worker, &r, &hosts, &roles, 2, false)
                .unwrap()
                .is_empty()
        );
        assert!(assign_by_rules(worker, &r, &hosts, &roles, 1, false).is_err());
        let r = rules(&["worker=mac:52:54:00:00:00:03", "worker=min-memory:16GiB"]);
        assert_eq!(
            ids(assign_by_rules(worker, &r, &hosts, &roles, 3, false).unwrap()),
            ["small"]
        );
        // A MAC rule naming a host of another role fails naming both.
        let r = rules(&["worker=mac:52:54:00:00:00:04"]);
        let e = assign_by_rules(worker, &r, &hosts, &roles, 1, true).unwrap_err();
        assert!(e.contains("already has role control-plane"), "{e}");
    }

    #[test]
    fn describes_macs_cpu_memory_and_disks() {
        let d = describe(&host("m", "52:54:00:00:00:01", 16, 120));
        assert_eq!(
            d,
            "m: MAC 52:54:00:00:00:01; 4 CPU; 16.0 GiB memory; disks vda 111.8 GiB SSD"
        );
        let serial = PhysicalHost {
            serial: Some("CZJ1234567".into()),
            ..host("m", "52:54:00:00:00:01", 16, 120)
        };
        assert!(
            describe(&serial).ends_with("SSD; serial CZJ1234567"),
            "{}",
            describe(&serial)
        );
        // Text from an inventory written before reports were validated is escaped.
        let mut forged = host("m", "52:54:00:00:00:01", 16, 120);
        forged.serial = Some("x\nINFO fake".into());
        forged.disks[0].name = "vda\rchain".into();
        let d = describe(&forged);
        assert!(!d.contains('\n') && !d.contains('\r'), "{d}");
        assert!(
            d.contains("vda\\rchain") && d.contains("serial x\\nINFO fake"),
            "{d}"
        );
    }
}
