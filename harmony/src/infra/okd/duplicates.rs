//! Duplicate MACs: one MAC is one machine. Two hosts sharing a MAC — inside the program's
//! declared inventory, inside the inventory file, or one in each — would bind or boot the wrong
//! machine, so the run stops before anything is touched, naming both hosts.

use std::collections::HashMap;

use harmony_types::{Id, MacAddress};

use crate::domain::ValidationError;
use crate::domain::inventory::PhysicalHost;

/// Where a host was declared, for messages and for the flag that fixes it.
#[derive(Clone, Copy, PartialEq, Eq)]
pub(super) enum Source<'a> {
    /// The program's own inventory (the `Inventory` it passes to `run_program`).
    Program,
    /// The inventory file: `--inventory FILE` (`true`) or the services folder's own (`false`).
    File(&'a str, bool),
}

impl Source<'_> {
    fn describe(self) -> String {
        match self {
            Source::Program => "the program's declared inventory".into(),
            Source::File(path, true) => format!("--inventory {path}"),
            Source::File(path, false) => format!("the inventory {path}"),
        }
    }

    fn field(self) -> &'static str {
        match self {
            Source::Program => "inventory",
            Source::File(_, true) => "--inventory",
            Source::File(_, false) => "inventory file",
        }
    }
}

/// The first two hosts (different ids) that share a MAC, declared first in `program`, then in
/// the file: an error naming both hosts, the MAC and where each was declared.
pub(super) fn check_unique_macs(
    program: &[PhysicalHost],
    file: &[PhysicalHost],
    file_source: Source<'_>,
) -> Result<(), ValidationError> {
    let mut seen: HashMap<MacAddress, (&Id, Source<'_>)> = HashMap::new();
    let all = program
        .iter()
        .map(|h| (h, Source::Program))
        .chain(file.iter().map(|h| (h, file_source)));
    for (host, source) in all {
        for mac in &host.macs {
            match seen.get(mac) {
                None => {
                    seen.insert(*mac, (&host.id, source));
                }
                // The same machine declared in the program and recorded in the file (a re-run
                // records the declared hosts) is one host, not two.
                Some((id, first)) if **id == host.id && *first != source => {}
                Some((id, first)) => {
                    let (id, first) = (*id, *first);
                    let problem = if first == source {
                        format!(
                            "hosts {id} and {} in {} both have MAC {mac}",
                            host.id,
                            source.describe()
                        )
                    } else {
                        format!(
                            "host {id} in {} and host {} in {} both have MAC {mac}",
                            first.describe(),
                            host.id,
                            source.describe()
                        )
                    };
                    let fix = match (first, source) {
                        (Source::Program, Source::Program) => {
                            "give each host of the program's inventory its own MACs (one MAC is one machine)".to_string()
                        }
                        (Source::Program, file) => format!(
                            "one MAC is one machine: correct the MAC in the program's inventory, or remove host {} from {} (or use another inventory file)",
                            host.id,
                            file.describe()
                        ),
                        (file, _) => format!(
                            "one MAC is one machine: remove one of the two hosts from {} (or give another inventory file)",
                            file.describe()
                        ),
                    };
                    return Err(ValidationError::new(source.field(), problem, fix));
                }
            }
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn host(id: &str, mac: &str) -> PhysicalHost {
        PhysicalHost {
            id: Id::parse(id).unwrap(),
            hostname: None,
            serial: None,
            macs: vec![MacAddress::parse(mac).unwrap()],
            cpu_count: 4,
            memory_bytes: 8 << 30,
            disks: vec![],
        }
    }

    #[test]
    fn a_mac_shared_by_two_hosts_is_refused_wherever_they_are_declared() {
        let file = Source::File("inv.sqlite", true);
        let a = host("a", "52:54:00:00:00:01");
        let b = host("b", "52:54:00:00:00:01");
        let c = host("c", "52:54:00:00:00:03");
        let e = check_unique_macs(&[a.clone(), b.clone()], &[], file).unwrap_err();
        assert_eq!(e.field, "inventory");
        assert!(e.problem.contains("hosts a and b in the program's"), "{e}");
        let e = check_unique_macs(&[], &[c.clone(), a.clone(), b.clone()], file).unwrap_err();
        assert_eq!(e.field, "--inventory");
        assert!(
            e.problem.contains(
                "hosts a and b in --inventory inv.sqlite both have MAC 52:54:00:00:00:01"
            ),
            "{e}"
        );
        let e = check_unique_macs(std::slice::from_ref(&a), std::slice::from_ref(&b), file)
            .unwrap_err();
        assert!(
            e.problem.contains(
                "host a in the program's declared inventory and host b in --inventory inv.sqlite"
            ),
            "{e}"
        );
        // The same host in both places, and distinct MACs, are fine.
        check_unique_macs(&[a.clone(), c.clone()], &[a, c], file).unwrap();
    }
}
