//! Durable requests in SQLite.

use rusqlite::{Connection, OptionalExtension, Row, params};
use std::collections::HashMap;

use super::conversion;
use crate::store::{NewRequest, RequestRecord, RequestState, Submitted};

const COLUMNS: &str = "id, region, op, params, body_hash, state, res, seq, created_at, sent_at, \
     completed_at, deliveries, tenant, project, project_json, zone";

fn row(r: &Row<'_>) -> rusqlite::Result<RequestRecord> {
    let hash: Vec<u8> = r.get(4)?;
    let state: String = r.get(5)?;
    Ok(RequestRecord {
        id: r.get(0)?,
        region: r.get(1)?,
        op: r.get(2)?,
        params: r.get(3)?,
        body_hash: hash
            .try_into()
            .map_err(|_| conversion(4, "a request body hash is not 32 bytes".into()))?,
        state: RequestState::parse(&state)
            .ok_or_else(|| conversion(5, format!("unknown request state {state:?}")))?,
        res: r.get(6)?,
        seq: r.get(7)?,
        created_at: r.get(8)?,
        sent_at: r.get(9)?,
        completed_at: r.get(10)?,
        deliveries: r.get(11)?,
        scope: crate::store::tenancy::scope_of(r.get(12)?, r.get(13)?, r.get(14)?),
        zone: r.get::<_, Option<String>>(15)?.unwrap_or_default(),
    })
}

fn read(c: &Connection, id: &str) -> rusqlite::Result<Option<RequestRecord>> {
    c.query_row(
        &format!("SELECT {COLUMNS} FROM requests WHERE id = ?1"),
        [id],
        row,
    )
    .optional()
}

pub(super) fn submit(c: &mut Connection, r: &NewRequest) -> rusqlite::Result<Submitted> {
    let tx = c.transaction()?;
    let n = tx.execute(
        "INSERT INTO requests (id, region, op, params, body_hash, state, created_at,
             tenant, project, project_json, zone)
         VALUES (?1, ?2, ?3, ?4, ?5, 'queued', ?6, ?7, ?8, ?9,
             COALESCE(NULLIF(?10, ''), (SELECT zone FROM regions WHERE name = ?2), ''))
         ON CONFLICT(id) DO NOTHING",
        params![
            r.id,
            r.region,
            r.op,
            r.params,
            &r.body_hash[..],
            r.created_at,
            r.scope.as_ref().map(|s| &s.tenant),
            r.scope.as_ref().map(|s| &s.project),
            r.scope.as_ref().map(|s| &s.project_json),
            r.zone
        ],
    )?;
    let outcome = if n == 1 {
        Submitted::Created
    } else {
        let stored = read(&tx, &r.id)?.ok_or(rusqlite::Error::QueryReturnedNoRows)?;
        crate::store::classify(r, stored)
    };
    tx.commit()?;
    Ok(outcome)
}

pub(super) fn one(c: &Connection, id: &str) -> rusqlite::Result<Option<RequestRecord>> {
    read(c, id)
}

pub(super) fn unanswered(
    c: &Connection,
    region: &str,
    zone: &str,
) -> rusqlite::Result<Vec<RequestRecord>> {
    let mut stmt = c.prepare(&format!(
        "SELECT {COLUMNS} FROM requests WHERE region = ?1 AND zone = ?2
           AND state IN ('queued', 'sent')
         ORDER BY seq"
    ))?;
    let rows = stmt.query_map([region, zone], row)?;
    rows.collect()
}

pub(super) fn mark_sent(c: &Connection, id: &str, now: i64) -> rusqlite::Result<bool> {
    let n = c.execute(
        "UPDATE requests SET state = 'sent', sent_at = ?2, deliveries = deliveries + 1
         WHERE id = ?1 AND state IN ('queued', 'sent')",
        params![id, now],
    )?;
    Ok(n == 1)
}

/// `state` is `done` or `cancelled`: only an unanswered request takes it.
pub(super) fn finish(
    c: &Connection,
    id: &str,
    state: RequestState,
    res_json: &str,
    now: i64,
) -> rusqlite::Result<bool> {
    let n = c.execute(
        "UPDATE requests SET state = ?2, res = ?3, completed_at = ?4
         WHERE id = ?1 AND state IN ('queued', 'sent')",
        params![id, state.as_str(), res_json, now],
    )?;
    Ok(n == 1)
}

pub(super) fn prune(c: &Connection, older_than: i64) -> rusqlite::Result<u64> {
    let n = c.execute(
        "DELETE FROM requests WHERE state IN ('done', 'cancelled') AND completed_at < ?1",
        [older_than],
    )?;
    Ok(n as u64)
}

pub(super) fn unanswered_counts(
    c: &Connection,
) -> rusqlite::Result<HashMap<(String, String), u64>> {
    let mut stmt = c.prepare(
        "SELECT region, COALESCE(zone, ''), COUNT(*) FROM requests
         WHERE state IN ('queued', 'sent') GROUP BY region, zone",
    )?;
    let rows = stmt.query_map([], |r| {
        Ok(((r.get(0)?, r.get(1)?), r.get::<_, i64>(2)?.max(0) as u64))
    })?;
    rows.collect()
}

pub(super) fn queued_zones(c: &Connection) -> rusqlite::Result<Vec<(String, String)>> {
    let mut stmt = c.prepare(
        "SELECT DISTINCT region, COALESCE(zone, '') FROM requests WHERE state = 'queued'
         ORDER BY region, zone",
    )?;
    let rows = stmt.query_map([], |r| Ok((r.get(0)?, r.get(1)?)))?;
    rows.collect()
}
