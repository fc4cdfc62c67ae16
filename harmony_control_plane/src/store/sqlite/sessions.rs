//! Session rows (one per region and zone) in SQLite. The statements PostgreSQL shares are in
//! [`crate::store::sql`].

use rusqlite::{Connection, OptionalExtension, Row, params};

use crate::store::sql::{self, SESSION_COLUMNS as COLUMNS};
use crate::store::{Heartbeat, SessionRecord, merge_heartbeats};

fn row(r: &Row<'_>) -> rusqlite::Result<SessionRecord> {
    Ok(SessionRecord {
        region: r.get(0)?,
        zone: r.get(1)?,
        replica: r.get(2)?,
        conn: r.get(3)?,
        connected: r.get(4)?,
        connected_at: r.get(5)?,
        disconnected_at: r.get(6)?,
        last_heartbeat_at: r.get(7)?,
        hello_json: r.get(8)?,
        status_json: r.get(9)?,
        services_json: r.get(10)?,
        max_frame_bytes: r.get::<_, i64>(11)?.max(0) as u64,
    })
}

pub(super) fn open(c: &Connection, s: &SessionRecord) -> rusqlite::Result<bool> {
    let n = c.execute(
        sql::OPEN_SESSION.sqlite,
        params![
            s.region,
            s.zone,
            s.replica,
            s.conn,
            s.connected,
            s.connected_at,
            s.disconnected_at,
            s.last_heartbeat_at,
            s.hello_json,
            s.status_json,
            s.services_json,
            i64::try_from(s.max_frame_bytes).unwrap_or(i64::MAX),
        ],
    )?;
    Ok(n == 1)
}

/// One transaction (one disk sync) for the whole batch; beats of one connection merged first.
/// SQLite's own (PostgreSQL updates the batch in one statement, with `GREATEST`).
pub(super) fn heartbeats(c: &mut Connection, beats: &[Heartbeat]) -> rusqlite::Result<u64> {
    let beats = merge_heartbeats(beats);
    let tx = c.transaction()?;
    let mut n = 0u64;
    {
        let mut stmt = tx.prepare(
            "UPDATE sessions SET last_heartbeat_at = MAX(last_heartbeat_at, ?3),
                 status_json = COALESCE(?4, status_json)
             WHERE region = ?1 AND conn = ?2 AND connected",
        )?;
        for b in &beats {
            n += stmt.execute(params![b.region, b.conn, b.at, b.status_json])? as u64;
        }
    }
    tx.commit()?;
    Ok(n)
}

pub(super) fn services(
    c: &Connection,
    region: &str,
    conn: &str,
    services_json: &str,
) -> rusqlite::Result<bool> {
    let n = c.execute(
        sql::SESSION_SERVICES.sqlite,
        params![region, conn, services_json],
    )?;
    Ok(n == 1)
}

pub(super) fn close(c: &Connection, region: &str, conn: &str, now: i64) -> rusqlite::Result<bool> {
    let n = c.execute(sql::CLOSE_SESSION.sqlite, params![region, conn, now])?;
    Ok(n == 1)
}

pub(super) fn close_replica(c: &Connection, replica: &str, now: i64) -> rusqlite::Result<u64> {
    let n = c.execute(sql::CLOSE_REPLICA_SESSIONS.sqlite, params![replica, now])?;
    Ok(n as u64)
}

pub(super) fn one(
    c: &Connection,
    region: &str,
    zone: &str,
) -> rusqlite::Result<Option<SessionRecord>> {
    c.query_row(
        &format!("SELECT {COLUMNS} FROM sessions WHERE region = ?1 AND zone = ?2"),
        [region, zone],
        row,
    )
    .optional()
}

pub(super) fn of_region(c: &Connection, region: &str) -> rusqlite::Result<Vec<SessionRecord>> {
    let mut stmt = c.prepare(&format!(
        "SELECT {COLUMNS} FROM sessions WHERE region = ?1 ORDER BY zone"
    ))?;
    let rows = stmt.query_map([region], row)?;
    rows.collect()
}

pub(super) fn all(c: &Connection) -> rusqlite::Result<Vec<SessionRecord>> {
    let mut stmt = c.prepare(sql::SESSIONS.sqlite)?;
    let rows = stmt.query_map([], row)?;
    rows.collect()
}
