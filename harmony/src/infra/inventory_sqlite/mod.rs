//! The host inventory in SQLite: one embedded file (or memory), no server.
//!
//! Tables: `hosts` (facts), `roles` (host -> role) and `bindings` (host -> logical host, with
//! unique constraints so a host or a logical host is never bound twice), and `boot_events`
//! (reboot requests and boots seen, see `boots.rs`), and `held_reports` (discovery reports kept
//! for the operator, see `held.rs`).

mod boots;
mod held;

pub use boots::now_ms;
pub use held::identity_change;

use async_trait::async_trait;
use rusqlite::{Connection, OptionalExtension, params};
use std::path::{Path, PathBuf};
use std::sync::Mutex;

use harmony_types::{HostName, Id, MacAddress};

use crate::domain::capability::{
    BootEvent, BootPhase, CapabilityError, HeldReport, HostBinding, HostInventory, HostTimeline,
};
use crate::domain::inventory::{Disk, HostRole, PhysicalHost, RoleAssignment};
use crate::domain::{ChangeAction, ObjectChange};

const SCHEMA: &str = "
CREATE TABLE IF NOT EXISTS hosts (
    id TEXT PRIMARY KEY,
    hostname TEXT,
    macs TEXT NOT NULL,
    cpu_count INTEGER NOT NULL,
    memory_bytes INTEGER NOT NULL,
    disks TEXT NOT NULL,
    serial TEXT
);
CREATE TABLE IF NOT EXISTS roles (
    host TEXT PRIMARY KEY REFERENCES hosts(id),
    role TEXT NOT NULL
);
CREATE TABLE IF NOT EXISTS bindings (
    host TEXT PRIMARY KEY REFERENCES hosts(id),
    role TEXT NOT NULL,
    logical TEXT NOT NULL UNIQUE,
    mac TEXT NOT NULL UNIQUE
);
";

/// The SQLite inventory.
#[derive(Debug)]
pub struct SqliteInventory {
    location: String,
    path: Option<PathBuf>,
    conn: Mutex<Option<Connection>>,
}

fn db_error(location: &str, e: impl std::fmt::Display) -> CapabilityError {
    CapabilityError::Rejected {
        object: "host inventory".into(),
        server: format!("SQLite {location}"),
        message: e.to_string(),
    }
}

fn role_text(r: HostRole) -> &'static str {
    match r {
        HostRole::Bootstrap => "bootstrap",
        HostRole::ControlPlane => "control-plane",
        HostRole::Worker => "worker",
    }
}

fn parse_role(s: &str) -> Option<HostRole> {
    match s {
        "bootstrap" => Some(HostRole::Bootstrap),
        "control-plane" => Some(HostRole::ControlPlane),
        "worker" => Some(HostRole::Worker),
        _ => None,
    }
}

/// Whether the `hosts` table has the `serial` column (inventories written before it do not).
fn has_serial(conn: &Connection) -> rusqlite::Result<bool> {
    conn.query_row(
        "SELECT COUNT(*) FROM pragma_table_info('hosts') WHERE name = 'serial'",
        [],
        |r| r.get::<_, i64>(0),
    )
    .map(|n| n > 0)
}

fn prepare(conn: &Connection, location: &str) -> Result<(), CapabilityError> {
    conn.execute_batch(SCHEMA)
        .map_err(|e| db_error(location, e))?;
    if !has_serial(conn).map_err(|e| db_error(location, e))? {
        conn.execute_batch("ALTER TABLE hosts ADD COLUMN serial TEXT")
            .map_err(|e| db_error(location, e))?;
    }
    conn.execute_batch(boots::SCHEMA)
        .map_err(|e| db_error(location, e))?;
    conn.execute_batch(held::SCHEMA)
        .map_err(|e| db_error(location, e))?;
    conn.busy_timeout(std::time::Duration::from_secs(5))
        .map_err(|e| db_error(location, e))
}

impl SqliteInventory {
    /// Opens (creating when missing) the inventory file at `path`.
    pub fn open(path: &Path) -> Result<Self, CapabilityError> {
        let location = path.display().to_string();
        if let Some(dir) = path.parent().filter(|d| !d.as_os_str().is_empty()) {
            std::fs::create_dir_all(dir).map_err(|e| CapabilityError::Io {
                path: dir.display().to_string(),
                source: e,
            })?;
        }
        let conn = Connection::open(path).map_err(|e| db_error(&location, e))?;
        Self::init(conn, location)
    }

    /// Opens the inventory file at `path` for reading only: nothing is created, migrated or
    /// written (render and plan read `--inventory` this way, so the operator's file is untouched).
    pub fn open_read_only(path: &Path) -> Result<Self, CapabilityError> {
        let location = path.display().to_string();
        let conn = Connection::open_with_flags(path, rusqlite::OpenFlags::SQLITE_OPEN_READ_ONLY)
            .map_err(|e| db_error(&location, e))?;
        Ok(Self {
            location,
            path: None,
            conn: Mutex::new(Some(conn)),
        })
    }

    /// An inventory that lives in memory only (render mode, tests).
    pub fn in_memory() -> Result<Self, CapabilityError> {
        let conn = Connection::open_in_memory().map_err(|e| db_error(":memory:", e))?;
        Self::init(conn, ":memory:".into())
    }

    /// An inventory at `path` that is opened (and created) only when first used, so building
    /// a topology that then fails validation touches nothing.
    pub fn open_lazily(path: &Path) -> Self {
        Self {
            location: path.display().to_string(),
            path: Some(path.to_path_buf()),
            conn: Mutex::new(None),
        }
    }

    fn init(conn: Connection, location: String) -> Result<Self, CapabilityError> {
        prepare(&conn, &location)?;
        Ok(Self {
            location,
            path: None,
            conn: Mutex::new(Some(conn)),
        })
    }

    /// Where the inventory lives (a path or `:memory:`).
    pub fn location(&self) -> &str {
        &self.location
    }

    fn with<R>(
        &self,
        f: impl FnOnce(&Connection) -> Result<R, CapabilityError>,
    ) -> Result<R, CapabilityError> {
        let mut guard = self.conn.lock().unwrap_or_else(|p| p.into_inner());
        if guard.is_none()
            && let Some(path) = &self.path
        {
            *guard = Some(
                Self::open(path)?
                    .conn
                    .into_inner()
                    .unwrap_or_else(|p| p.into_inner())
                    .ok_or_else(|| self.err("not opened"))?,
            );
        }
        match guard.as_ref() {
            Some(conn) => f(conn),
            None => Err(self.err("the inventory is not open")),
        }
    }

    fn err(&self, e: impl std::fmt::Display) -> CapabilityError {
        db_error(&self.location, e)
    }

    fn corrupt(&self, what: &str, e: impl std::fmt::Display) -> CapabilityError {
        self.err(format!("row {what} cannot be read back: {e}"))
    }

    fn change(&self, object: String, action: ChangeAction) -> ObjectChange {
        ObjectChange {
            object,
            action,
            location: Some(format!("inventory {}", self.location)),
            diff: Vec::new(),
            status: None,
        }
    }

    /// Records a host synchronously (used by the discovery endpoint).
    pub fn record_host_sync(&self, host: &PhysicalHost) -> Result<ObjectChange, CapabilityError> {
        let macs = serde_json::to_string(&host.macs).map_err(|e| self.err(e))?;
        let disks = serde_json::to_string(&host.disks).map_err(|e| self.err(e))?;
        let hostname = host.hostname.as_ref().map(|h| h.to_string());
        let memory = i64::try_from(host.memory_bytes).unwrap_or(i64::MAX);
        self.with(|c| {
            type Row = (Option<String>, String, i64, i64, String, Option<String>);
            // Cached statements: a render records thousands of hosts, and parsing the SQL
            // anew for each was a seventh of a 10,000-host render.
            let old: Option<Row> = c
                .prepare_cached(
                    "SELECT hostname, macs, cpu_count, memory_bytes, disks, serial FROM hosts WHERE id = ?1",
                )
                .and_then(|mut s| {
                    s.query_row(params![host.id.as_str()], |r| {
                        Ok((r.get(0)?, r.get(1)?, r.get(2)?, r.get(3)?, r.get(4)?, r.get(5)?))
                    })
                })
                .optional()
                .map_err(|e| self.err(e))?;
            let new = (
                hostname.clone(),
                macs.clone(),
                i64::from(host.cpu_count),
                memory,
                disks.clone(),
                host.serial.clone(),
            );
            let action = match old {
                None => ChangeAction::Create,
                Some(o) if o == new => ChangeAction::Unchanged,
                Some(_) => ChangeAction::Update,
            };
            if action != ChangeAction::Unchanged {
                c.prepare_cached(
                    "INSERT INTO hosts (id, hostname, macs, cpu_count, memory_bytes, disks, serial)
                     VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7)
                     ON CONFLICT(id) DO UPDATE SET hostname = ?2, macs = ?3, cpu_count = ?4,
                        memory_bytes = ?5, disks = ?6, serial = ?7",
                )
                .and_then(|mut s| {
                    s.execute(params![
                        host.id.as_str(),
                        hostname,
                        macs,
                        host.cpu_count,
                        memory,
                        disks,
                        host.serial
                    ])
                })
                .map_err(|e| self.err(e))?;
            }
            Ok(self.change(format!("host {}", host.id), action))
        })
    }

    fn hosts_sync(&self) -> Result<Vec<PhysicalHost>, CapabilityError> {
        self.with(|c| self.read_hosts(c))
    }

    /// Every host, sorted by id, read without creating or changing anything: a lazily opened
    /// inventory whose file does not exist yet has none. Validation reads it this way, before
    /// a run may write.
    pub fn hosts_read_only(&self) -> Result<Vec<PhysicalHost>, CapabilityError> {
        let guard = self.conn.lock().unwrap_or_else(|p| p.into_inner());
        if let Some(conn) = guard.as_ref() {
            return self.read_hosts(conn);
        }
        drop(guard);
        let Some(path) = self.path.as_ref().filter(|p| p.is_file()) else {
            return Ok(Vec::new());
        };
        let conn = Connection::open_with_flags(path, rusqlite::OpenFlags::SQLITE_OPEN_READ_ONLY)
            .map_err(|e| self.err(e))?;
        let has_hosts: i64 = conn
            .query_row(
                "SELECT COUNT(*) FROM sqlite_master WHERE type = 'table' AND name = 'hosts'",
                [],
                |r| r.get(0),
            )
            .map_err(|e| self.err(e))?;
        if has_hosts == 0 {
            return Ok(Vec::new());
        }
        self.read_hosts(&conn)
    }

    fn read_hosts(&self, c: &Connection) -> Result<Vec<PhysicalHost>, CapabilityError> {
        {
            // A file opened read-only may predate the serial column; it has no serials then.
            let serial = if has_serial(c).map_err(|e| self.err(e))? {
                "serial"
            } else {
                "NULL"
            };
            let mut stmt = c
                .prepare(&format!(
                    "SELECT id, hostname, macs, cpu_count, memory_bytes, disks, {serial} FROM hosts ORDER BY id"
                ))
                .map_err(|e| self.err(e))?;
            let rows = stmt
                .query_map([], |r| {
                    Ok((
                        r.get::<_, String>(0)?,
                        r.get::<_, Option<String>>(1)?,
                        r.get::<_, String>(2)?,
                        r.get::<_, i64>(3)?,
                        r.get::<_, i64>(4)?,
                        r.get::<_, String>(5)?,
                        r.get::<_, Option<String>>(6)?,
                    ))
                })
                .map_err(|e| self.err(e))?;
            let mut out = Vec::new();
            for row in rows {
                let (id, hostname, macs, cpu, mem, disks, serial) = row.map_err(|e| self.err(e))?;
                out.push(PhysicalHost {
                    id: Id::parse(&id).map_err(|e| self.corrupt(&id, e))?,
                    hostname: hostname
                        .map(|h| HostName::parse(&h))
                        .transpose()
                        .map_err(|e| self.corrupt(&id, e))?,
                    serial,
                    macs: serde_json::from_str(&macs).map_err(|e| self.corrupt(&id, e))?,
                    cpu_count: u32::try_from(cpu).unwrap_or(0),
                    memory_bytes: u64::try_from(mem).unwrap_or(0),
                    disks: serde_json::from_str::<Vec<Disk>>(&disks)
                        .map_err(|e| self.corrupt(&id, e))?,
                });
            }
            Ok(out)
        }
    }
}

#[async_trait]
impl HostInventory for SqliteInventory {
    async fn known_hosts(&self) -> Result<Vec<PhysicalHost>, CapabilityError> {
        self.hosts_sync()
    }

    async fn record_host(&self, host: &PhysicalHost) -> Result<ObjectChange, CapabilityError> {
        self.record_host_sync(host)
    }

    async fn role_assignments(&self) -> Result<Vec<RoleAssignment>, CapabilityError> {
        self.with(|c| {
            let mut stmt = c
                .prepare("SELECT host, role FROM roles ORDER BY host")
                .map_err(|e| self.err(e))?;
            let rows = stmt
                .query_map([], |r| Ok((r.get::<_, String>(0)?, r.get::<_, String>(1)?)))
                .map_err(|e| self.err(e))?;
            let mut out = Vec::new();
            for row in rows {
                let (host, role) = row.map_err(|e| self.err(e))?;
                out.push(RoleAssignment {
                    host: Id::parse(&host).map_err(|e| self.corrupt(&host, e))?,
                    role: parse_role(&role)
                        .ok_or_else(|| self.corrupt(&host, format!("unknown role {role:?}")))?,
                });
            }
            Ok(out)
        })
    }

    async fn assign_role(
        &self,
        assignment: &RoleAssignment,
    ) -> Result<ObjectChange, CapabilityError> {
        let object = format!("role of host {}", assignment.host);
        self.with(|c| {
            let known: bool = c
                .prepare_cached("SELECT COUNT(*) FROM hosts WHERE id = ?1")
                .and_then(|mut s| {
                    s.query_row(params![assignment.host.as_str()], |r| r.get::<_, i64>(0))
                })
                .map_err(|e| self.err(e))?
                > 0;
            if !known {
                return Err(CapabilityError::InvalidObject {
                    object: object.clone(),
                    problem: format!(
                        "host {} is not in the inventory; discover it first (boot it into discovery) or declare it",
                        assignment.host
                    ),
                });
            }
            let old: Option<String> = c
                .prepare_cached("SELECT role FROM roles WHERE host = ?1")
                .and_then(|mut s| s.query_row(params![assignment.host.as_str()], |r| r.get(0)))
                .optional()
                .map_err(|e| self.err(e))?;
            let wanted = role_text(assignment.role);
            match old.as_deref() {
                Some(r) if r == wanted => Ok(self.change(object, ChangeAction::Unchanged)),
                Some(r) => Err(CapabilityError::InvalidObject {
                    object,
                    problem: format!(
                        "host {} already has role {r}; a host keeps its role (remove it from the inventory to reassign)",
                        assignment.host
                    ),
                }),
                None => {
                    c.prepare_cached("INSERT INTO roles (host, role) VALUES (?1, ?2)")
                        .and_then(|mut s| s.execute(params![assignment.host.as_str(), wanted]))
                        .map_err(|e| self.err(e))?;
                    Ok(self.change(object, ChangeAction::Create))
                }
            }
        })
    }

    async fn host_bindings(&self) -> Result<Vec<HostBinding>, CapabilityError> {
        self.with(|c| {
            self.query_bindings(
                c,
                "SELECT host, role, logical, mac FROM bindings ORDER BY logical",
                [],
            )
        })
    }

    async fn record_boot_event(
        &self,
        mac: MacAddress,
        event: BootEvent,
    ) -> Result<(), CapabilityError> {
        self.record_boot_event_sync(mac, event)
    }

    async fn record_boot_phase(
        &self,
        mac: MacAddress,
        phase: BootPhase,
        at_ms: i64,
    ) -> Result<(), CapabilityError> {
        self.record_boot_phase_sync(mac, phase, at_ms)
    }

    async fn timelines(&self, macs: &[MacAddress]) -> Result<Vec<HostTimeline>, CapabilityError> {
        self.timelines_sync(macs)
    }

    async fn awaiting_boot(&self, macs: &[MacAddress]) -> Result<Vec<MacAddress>, CapabilityError> {
        self.awaiting_boot_sync(macs)
    }

    async fn retired(&self, macs: &[MacAddress]) -> Result<Vec<MacAddress>, CapabilityError> {
        self.retired_sync(macs)
    }

    async fn held_reports(&self) -> Result<Vec<HeldReport>, CapabilityError> {
        self.held_reports_sync()
    }

    async fn accept_held_report(&self, id: &Id) -> Result<ObjectChange, CapabilityError> {
        self.accept_held_report_sync(id)
    }

    async fn bind_host(&self, binding: &HostBinding) -> Result<ObjectChange, CapabilityError> {
        let object = format!("binding {} -> {}", binding.host, binding.logical);
        let mac = binding.mac.to_string();
        self.with(|c| {
            // Only the rows sharing the host, the logical host or the MAC can conflict; each
            // column is a key, so this stays one indexed lookup however many hosts are bound.
            let related = self.query_bindings(
                c,
                "SELECT host, role, logical, mac FROM bindings \
                 WHERE host = ?1 OR logical = ?2 OR mac = ?3 ORDER BY logical",
                params![binding.host.as_str(), binding.logical.as_str(), mac],
            )?;
            if related.contains(binding) {
                return Ok(self.change(object, ChangeAction::Unchanged));
            }
            if let Some(other) = related.first() {
                return Err(CapabilityError::InvalidObject {
                    object,
                    problem: format!(
                        "conflicts with the existing binding {} ({}, {}) -> {}; a host, a MAC and a logical host are bound once",
                        other.host, other.role, other.mac, other.logical
                    ),
                });
            }
            c.prepare_cached(
                "INSERT INTO bindings (host, role, logical, mac) VALUES (?1, ?2, ?3, ?4)",
            )
            .and_then(|mut stmt| {
                stmt.execute(params![
                    binding.host.as_str(),
                    role_text(binding.role),
                    binding.logical.as_str(),
                    mac
                ])
            })
            .map_err(|e| self.err(e))?;
            Ok(self.change(object, ChangeAction::Create))
        })
    }
}

impl SqliteInventory {
    /// Runs a query returning binding rows (host, role, logical, mac) and reads them back.
    fn query_bindings(
        &self,
        c: &Connection,
        sql: &str,
        params: impl rusqlite::Params,
    ) -> Result<Vec<HostBinding>, CapabilityError> {
        let mut stmt = c.prepare_cached(sql).map_err(|e| self.err(e))?;
        let rows = stmt
            .query_map(params, |r| {
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
            let (host, role, logical, mac) = row.map_err(|e| self.err(e))?;
            out.push(HostBinding {
                host: Id::parse(&host).map_err(|e| self.corrupt(&host, e))?,
                role: parse_role(&role)
                    .ok_or_else(|| self.corrupt(&host, format!("unknown role {role:?}")))?,
                logical: HostName::parse(&logical).map_err(|e| self.corrupt(&host, e))?,
                mac: MacAddress::parse(&mac).map_err(|e| self.corrupt(&host, e))?,
            });
        }
        Ok(out)
    }
}

#[cfg(test)]
mod tests;
