//! Durable requests in SQLite. The statements PostgreSQL shares are in [`crate::store::sql`].

use rusqlite::{Connection, OptionalExtension, Row, params};
use std::collections::HashMap;

use super::{bytes32, conversion};
use crate::store::sql::{self, REQUEST_COLUMNS as COLUMNS};
use crate::store::{NewRequest, RequestRecord, RequestState, Submitted};

fn row(r: &Row<'_>) -> rusqlite::Result<RequestRecord> {
    let state: String = r.get(5)?;
    Ok(RequestRecord {
        id: r.get(0)?,
        region: r.get(1)?,
        op: r.get(2)?,
        params: r.get(3)?,
        body_hash: bytes32(r, 4, "a request body hash")?,
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
    c.query_row(sql::REQUEST.sqlite, [id], row).optional()
}

pub(super) fn submit(c: &mut Connection, r: &NewRequest) -> rusqlite::Result<Submitted> {
    let tx = c.transaction()?;
    let n = tx.execute(
        sql::SUBMIT_REQUEST.sqlite,
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

/// SQLite's own (PostgreSQL marks a batch at once).
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
    let error = crate::store::status::failure_of(res_json);
    let n = c.execute(
        sql::FINISH_REQUEST.sqlite,
        params![id, state.as_str(), res_json, now, error],
    )?;
    Ok(n == 1)
}

pub(super) fn prune(c: &Connection, older_than: i64) -> rusqlite::Result<u64> {
    c.execute(sql::PRUNE_PROGRESS.sqlite, [older_than])?;
    let n = c.execute(sql::PRUNE_REQUESTS.sqlite, [older_than])?;
    Ok(n as u64)
}

pub(super) fn unanswered_counts(
    c: &Connection,
) -> rusqlite::Result<HashMap<(String, String), u64>> {
    let mut stmt = c.prepare(sql::UNANSWERED_COUNTS.sqlite)?;
    let rows = stmt.query_map([], |r| {
        Ok(((r.get(0)?, r.get(1)?), r.get::<_, i64>(2)?.max(0) as u64))
    })?;
    rows.collect()
}

/// SQLite's own: PostgreSQL orders the `DISTINCT` rows by their output columns (`ORDER BY 1, 2`).
pub(super) fn queued_zones(c: &Connection) -> rusqlite::Result<Vec<(String, String)>> {
    let mut stmt = c.prepare(
        "SELECT DISTINCT region, COALESCE(zone, '') FROM requests WHERE state = 'queued'
         ORDER BY region, zone",
    )?;
    let rows = stmt.query_map([], |r| Ok((r.get(0)?, r.get(1)?)))?;
    rows.collect()
}
