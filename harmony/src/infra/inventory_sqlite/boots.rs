//! Boot evidence: when the operator was asked to reboot a host, and when the host was last seen
//! booting (it fetched its per-MAC iPXE script, reported to discovery, or registered as a
//! Node). A re-run compares the two instead of trusting that nothing changed.

use rusqlite::{OptionalExtension, params};

use harmony_types::MacAddress;

use super::SqliteInventory;
use crate::domain::capability::{BootEvent, BootPhase, CapabilityError, HostTimeline, PhaseAt};

/// One row per event, in the order they happened: `seq` orders them even when the clock
/// steps back or two events share a millisecond.
pub(super) const SCHEMA: &str = "
CREATE TABLE IF NOT EXISTS boot_events (
    seq INTEGER PRIMARY KEY AUTOINCREMENT,
    mac TEXT NOT NULL,
    event TEXT NOT NULL,
    at_ms INTEGER NOT NULL
);
CREATE INDEX IF NOT EXISTS boot_events_mac ON boot_events(mac, event);
";

fn event_text(e: BootEvent) -> &'static str {
    match e {
        BootEvent::RebootRequested => "reboot-requested",
        BootEvent::Booted => "booted",
        BootEvent::Retired => "retired",
    }
}

pub use crate::domain::capability::timeline::now_ms;

impl SqliteInventory {
    /// Records `event` for the host booting from `mac`, now (used by the HTTP boot server).
    pub fn record_boot_event_sync(
        &self,
        mac: MacAddress,
        event: BootEvent,
    ) -> Result<(), CapabilityError> {
        self.with(|c| {
            c.prepare_cached("INSERT INTO boot_events (mac, event, at_ms) VALUES (?1, ?2, ?3)")
                .and_then(|mut s| s.execute(params![mac.to_string(), event_text(event), now_ms()]))
                .map(|_| ())
                .map_err(|e| self.err(e))
        })
    }

    /// Records that the host booting from `mac` reached `phase` at `at_ms`.
    pub fn record_boot_phase_sync(
        &self,
        mac: MacAddress,
        phase: BootPhase,
        at_ms: i64,
    ) -> Result<(), CapabilityError> {
        self.with(|c| {
            c.prepare_cached("INSERT INTO boot_events (mac, event, at_ms) VALUES (?1, ?2, ?3)")
                .and_then(|mut s| s.execute(params![mac.to_string(), phase.as_str(), at_ms]))
                .map(|_| ())
                .map_err(|e| self.err(e))
        })
    }

    /// The boot timeline of each host of `macs`, from its recorded phases.
    pub fn timelines_sync(
        &self,
        macs: &[MacAddress],
    ) -> Result<Vec<HostTimeline>, CapabilityError> {
        self.with(|c| {
            let mut stmt = c
                .prepare_cached("SELECT event, at_ms FROM boot_events WHERE mac = ?1 ORDER BY seq")
                .map_err(|e| self.err(e))?;
            let mut out = Vec::with_capacity(macs.len());
            for mac in macs {
                let rows = stmt
                    .query_map(params![mac.to_string()], |r| {
                        Ok((r.get::<_, String>(0)?, r.get::<_, i64>(1)?))
                    })
                    .map_err(|e| self.err(e))?;
                let mut events = Vec::new();
                for row in rows {
                    let (event, at_ms) = row.map_err(|e| self.err(e))?;
                    if let Some(phase) = BootPhase::parse(&event) {
                        events.push(PhaseAt { phase, at_ms });
                    }
                }
                out.push(HostTimeline::from_events(*mac, events));
            }
            Ok(out)
        })
    }

    /// The MACs among `macs` whose last reboot request came after their last boot.
    pub fn awaiting_boot_sync(
        &self,
        macs: &[MacAddress],
    ) -> Result<Vec<MacAddress>, CapabilityError> {
        self.later(macs, BootEvent::RebootRequested, BootEvent::Booted)
    }

    /// The MACs among `macs` retired after their last reboot request.
    pub fn retired_sync(&self, macs: &[MacAddress]) -> Result<Vec<MacAddress>, CapabilityError> {
        self.later(macs, BootEvent::Retired, BootEvent::RebootRequested)
    }

    /// The MACs among `macs` with a `newer` event after their last `older` one (or none).
    fn later(
        &self,
        macs: &[MacAddress],
        newer: BootEvent,
        older: BootEvent,
    ) -> Result<Vec<MacAddress>, CapabilityError> {
        self.with(|c| {
            let mut stmt = c
                .prepare_cached("SELECT MAX(seq) FROM boot_events WHERE mac = ?1 AND event = ?2")
                .map_err(|e| self.err(e))?;
            let mut last = |mac: &MacAddress, event: BootEvent| -> Result<i64, CapabilityError> {
                stmt.query_row(params![mac.to_string(), event_text(event)], |r| {
                    r.get::<_, Option<i64>>(0)
                })
                .optional()
                .map(|v| v.flatten().unwrap_or(0))
                .map_err(|e| self.err(e))
            };
            let mut out = Vec::new();
            for mac in macs {
                let recent = last(mac, newer)?;
                if recent > 0 && recent > last(mac, older)? {
                    out.push(*mac);
                }
            }
            Ok(out)
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_host_awaits_boot_from_the_request_until_it_is_seen_booting() {
        let inv = SqliteInventory::in_memory().unwrap();
        let a = MacAddress::parse("52:54:00:00:00:01").unwrap();
        let b = MacAddress::parse("52:54:00:00:00:02").unwrap();
        // A boot seen before any request proves nothing is pending.
        inv.record_boot_event_sync(a, BootEvent::Booted).unwrap();
        assert_eq!(inv.awaiting_boot_sync(&[a, b]).unwrap(), vec![]);
        for m in [a, b] {
            inv.record_boot_event_sync(m, BootEvent::RebootRequested)
                .unwrap();
        }
        assert_eq!(inv.awaiting_boot_sync(&[a, b]).unwrap(), vec![a, b]);
        inv.record_boot_event_sync(b, BootEvent::Booted).unwrap();
        assert_eq!(inv.awaiting_boot_sync(&[a, b]).unwrap(), vec![a]);
        // Asked again: b awaits again until it boots again.
        inv.record_boot_event_sync(b, BootEvent::RebootRequested)
            .unwrap();
        assert_eq!(inv.awaiting_boot_sync(&[a, b]).unwrap(), vec![a, b]);
    }

    #[test]
    fn a_retired_host_stays_retired_until_it_is_asked_to_reboot_again() {
        let inv = SqliteInventory::in_memory().unwrap();
        let a = MacAddress::parse("52:54:00:00:00:01").unwrap();
        let b = MacAddress::parse("52:54:00:00:00:02").unwrap();
        inv.record_boot_event_sync(a, BootEvent::RebootRequested)
            .unwrap();
        assert_eq!(inv.retired_sync(&[a, b]).unwrap(), vec![]);
        inv.record_boot_event_sync(a, BootEvent::Retired).unwrap();
        // Booting does not bring it back; being asked to reboot (a reinstall) does.
        inv.record_boot_event_sync(a, BootEvent::Booted).unwrap();
        assert_eq!(inv.retired_sync(&[a, b]).unwrap(), vec![a]);
        inv.record_boot_event_sync(a, BootEvent::RebootRequested)
            .unwrap();
        assert_eq!(inv.retired_sync(&[a, b]).unwrap(), vec![]);
    }
}
