//! Discovery reports held for the operator: a report that would change a known host's MACs or
//! identity (its serial), or that claims a MAC another host has, is kept here instead of being
//! applied, and shown to the operator, who accepts it or leaves it.

use rusqlite::{OptionalExtension, params};

use harmony_types::Id;

use super::SqliteInventory;
use crate::domain::capability::{CapabilityError, HeldReport};
use crate::domain::inventory::PhysicalHost;
use crate::domain::{ChangeAction, ObjectChange};

/// One row per reported host id: a newer report replaces the older one.
pub(super) const SCHEMA: &str = "
CREATE TABLE IF NOT EXISTS held_reports (
    id TEXT PRIMARY KEY,
    report TEXT NOT NULL,
    client TEXT NOT NULL,
    difference TEXT NOT NULL,
    seq INTEGER NOT NULL
);
";

/// What applying `reported` would change about the hosts already known, or `None` when it
/// changes neither MACs nor identity (new hardware facts of the same machine are applied).
pub fn identity_change(reported: &PhysicalHost, known: &[PhysicalHost]) -> Option<String> {
    let mut differences = Vec::new();
    if let Some(old) = known.iter().find(|h| h.id == reported.id) {
        let mut before = old.macs.clone();
        let mut after = reported.macs.clone();
        before.sort();
        after.sort();
        if before != after {
            let list = |m: &[harmony_types::MacAddress]| {
                m.iter()
                    .map(|m| m.to_string())
                    .collect::<Vec<_>>()
                    .join(", ")
            };
            differences.push(format!("MACs [{}] -> [{}]", list(&before), list(&after)));
        }
        if old.serial.is_some() && old.serial != reported.serial {
            let show = |s: &Option<String>| {
                s.as_deref()
                    .map_or("none".to_string(), |s| s.escape_debug().to_string())
            };
            differences.push(format!(
                "serial {} -> {}",
                show(&old.serial),
                show(&reported.serial)
            ));
        }
    }
    for other in known.iter().filter(|h| h.id != reported.id) {
        for mac in reported.macs.iter().filter(|m| other.macs.contains(m)) {
            differences.push(format!("MAC {mac} belongs to host {}", other.id));
        }
    }
    (!differences.is_empty()).then(|| differences.join("; "))
}

impl SqliteInventory {
    /// Keeps `reported` for the operator instead of applying it.
    pub fn hold_report_sync(
        &self,
        reported: &PhysicalHost,
        client: &str,
        difference: &str,
    ) -> Result<(), CapabilityError> {
        let json = serde_json::to_string(reported).map_err(|e| self.err(e))?;
        self.with(|c| {
            c.execute(
                "INSERT INTO held_reports (id, report, client, difference, seq)
                 VALUES (?1, ?2, ?3, ?4, (SELECT COALESCE(MAX(seq), 0) + 1 FROM held_reports))
                 ON CONFLICT(id) DO UPDATE SET report = ?2, client = ?3, difference = ?4,
                    seq = (SELECT COALESCE(MAX(seq), 0) + 1 FROM held_reports)",
                params![reported.id.as_str(), json, client, difference],
            )
            .map(|_| ())
            .map_err(|e| self.err(e))
        })
    }

    /// Every held report, oldest first.
    pub fn held_reports_sync(&self) -> Result<Vec<HeldReport>, CapabilityError> {
        self.with(|c| {
            let mut stmt = c
                .prepare("SELECT id, report, client, difference FROM held_reports ORDER BY seq")
                .map_err(|e| self.err(e))?;
            let rows = stmt
                .query_map([], |r| {
                    Ok((
                        r.get::<_, String>(0)?,
                        r.get::<_, String>(1)?,
                        r.get::<_, String>(2)?,
                        r.get::<_, String>(3)?,
                    ))
                })
                .map_err(|e| self.err(e))?;
            let mut out = Vec::new();
            for row in rows {
                let (id, report, client, difference) = row.map_err(|e| self.err(e))?;
                out.push(HeldReport {
                    reported: serde_json::from_str(&report).map_err(|e| self.corrupt(&id, e))?,
                    client,
                    difference,
                });
            }
            Ok(out)
        })
    }

    /// Applies the held report of host `id` and forgets it; "not found" when none is held.
    pub fn accept_held_report_sync(&self, id: &Id) -> Result<ObjectChange, CapabilityError> {
        let report: Option<String> = self.with(|c| {
            c.query_row(
                "SELECT report FROM held_reports WHERE id = ?1",
                params![id.as_str()],
                |r| r.get(0),
            )
            .optional()
            .map_err(|e| self.err(e))
        })?;
        let Some(report) = report else {
            return Err(CapabilityError::InvalidObject {
                object: format!("held discovery report of host {id}"),
                problem: "no report of this host is held; nothing to accept".into(),
            });
        };
        let host: PhysicalHost =
            serde_json::from_str(&report).map_err(|e| self.corrupt(id.as_str(), e))?;
        // Another host's MACs go with the report: the machine that really has them is this one.
        self.with(|c| {
            for other in self.read_hosts(c)?.iter().filter(|h| h.id != host.id) {
                let kept: Vec<_> = other
                    .macs
                    .iter()
                    .filter(|m| !host.macs.contains(m))
                    .copied()
                    .collect();
                if kept.len() != other.macs.len() {
                    let macs = serde_json::to_string(&kept).map_err(|e| self.err(e))?;
                    c.execute(
                        "UPDATE hosts SET macs = ?2 WHERE id = ?1",
                        params![other.id.as_str(), macs],
                    )
                    .map_err(|e| self.err(e))?;
                }
            }
            Ok(())
        })?;
        let change = self.record_host_sync(&host)?;
        self.with(|c| {
            c.execute(
                "DELETE FROM held_reports WHERE id = ?1",
                params![id.as_str()],
            )
            .map(|_| ())
            .map_err(|e| self.err(e))
        })?;
        Ok(ObjectChange {
            action: match change.action {
                ChangeAction::Unchanged => ChangeAction::Update,
                a => a,
            },
            ..change
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use harmony_types::MacAddress;

    fn host(id: &str, macs: &[&str], serial: Option<&str>) -> PhysicalHost {
        PhysicalHost {
            id: Id::parse(id).unwrap(),
            hostname: None,
            serial: serial.map(Into::into),
            macs: macs.iter().map(|m| MacAddress::parse(m).unwrap()).collect(),
            cpu_count: 2,
            memory_bytes: 1 << 30,
            disks: Vec::new(),
        }
    }

    #[test]
    fn changes_of_macs_or_serial_or_another_hosts_mac_are_named() {
        let known = [
            host(
                "a",
                &["52:54:00:00:00:01", "52:54:00:00:00:02"],
                Some("SN-A"),
            ),
            host("b", &["52:54:00:00:00:03"], None),
        ];
        // The same machine, MACs in another order, more memory: applied.
        let mut same = host(
            "a",
            &["52:54:00:00:00:02", "52:54:00:00:00:01"],
            Some("SN-A"),
        );
        same.memory_bytes = 2 << 30;
        assert_eq!(identity_change(&same, &known), None);
        assert_eq!(
            identity_change(&host("new", &["52:54:00:00:00:09"], None), &known),
            None
        );
        let d = identity_change(&host("a", &["52:54:00:00:00:01"], Some("SN-A")), &known).unwrap();
        assert_eq!(
            d,
            "MACs [52:54:00:00:00:01, 52:54:00:00:00:02] -> [52:54:00:00:00:01]"
        );
        let d = identity_change(
            &host(
                "a",
                &["52:54:00:00:00:01", "52:54:00:00:00:02"],
                Some("SN-X\n"),
            ),
            &known,
        )
        .unwrap();
        assert_eq!(d, "serial SN-A -> SN-X\\n");
        let d = identity_change(&host("forged", &["52:54:00:00:00:03"], None), &known).unwrap();
        assert_eq!(d, "MAC 52:54:00:00:00:03 belongs to host b");
    }

    #[test]
    fn a_held_report_is_kept_until_accepted_and_then_applied() {
        let inv = SqliteInventory::in_memory().unwrap();
        inv.record_host_sync(&host("a", &["52:54:00:00:00:01"], Some("SN-A")))
            .unwrap();
        inv.record_host_sync(&host("b", &["52:54:00:00:00:03"], None))
            .unwrap();
        let moved = host(
            "a",
            &["52:54:00:00:00:01", "52:54:00:00:00:03"],
            Some("SN-A"),
        );
        inv.hold_report_sync(
            &moved,
            "10.0.0.9",
            "MAC 52:54:00:00:00:03 belongs to host b",
        )
        .unwrap();
        inv.hold_report_sync(&moved, "10.0.0.9", "again").unwrap();
        let held = inv.held_reports_sync().unwrap();
        assert_eq!(held.len(), 1, "one per host id: {held:?}");
        assert_eq!(held[0].difference, "again");
        let hosts = inv.hosts_sync().unwrap();
        assert_eq!(hosts[0].macs.len(), 1, "not applied while held");
        let e = inv
            .accept_held_report_sync(&Id::parse("b").unwrap())
            .unwrap_err();
        assert!(
            e.to_string().contains("no report of this host is held"),
            "{e}"
        );
        let c = inv
            .accept_held_report_sync(&Id::parse("a").unwrap())
            .unwrap();
        assert_eq!(c.action, ChangeAction::Update);
        let hosts = inv.hosts_sync().unwrap();
        assert_eq!(hosts[0].macs, moved.macs);
        assert!(
            hosts[1].macs.is_empty(),
            "b no longer claims the MAC that moved: {hosts:?}"
        );
        assert!(inv.held_reports_sync().unwrap().is_empty());
    }
}
