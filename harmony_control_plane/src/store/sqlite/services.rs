//! Service instances in SQLite: every state change is a compare-and-set on (state, attempts).
//! The statements PostgreSQL shares are in [`crate::store::sql`].

use harmony_agent_protocol::InstanceState;
use rusqlite::{Connection, OptionalExtension, Row, params};
use serde_json::Value;
use std::collections::HashMap;

use super::conversion;
use crate::store::sql::{self, SERVICE_COLUMNS as COLUMNS};
use crate::store::{Outcome, ServiceRecord, now_ms};

fn row(r: &Row<'_>) -> rusqlite::Result<ServiceRecord> {
    let state: String = r.get(3)?;
    let outputs: String = r.get(6)?;
    let spec: String = r.get(7)?;
    Ok(ServiceRecord {
        id: r.get(0)?,
        service_type: r.get(1)?,
        region: r.get(2)?,
        state: InstanceState::parse(&state)
            .ok_or_else(|| conversion(3, format!("unknown instance state {state:?}")))?,
        detail: r.get(4)?,
        provider: r.get(5)?,
        outputs: serde_json::from_str(&outputs)
            .map_err(|e| conversion(6, format!("outputs: {e}")))?,
        spec: serde_json::from_str(&spec).map_err(|e| conversion(7, format!("spec: {e}")))?,
        attempts: r.get(8)?,
        created_at: r.get(9)?,
        updated_at: r.get(10)?,
        owner: crate::store::tenancy::owner_of(r.get(11)?, r.get(12)?),
        zone: r.get::<_, Option<String>>(13)?.unwrap_or_default(),
        parent: r.get(14)?,
    })
}

pub(super) fn one(c: &Connection, id: &str) -> rusqlite::Result<Option<ServiceRecord>> {
    c.query_row(sql::SERVICE.sqlite, [id], row).optional()
}

/// SQLite's own `INSERT OR IGNORE` (PostgreSQL: `ON CONFLICT (id) DO NOTHING`).
pub(super) fn insert(c: &Connection, rec: &ServiceRecord) -> rusqlite::Result<bool> {
    let n = c.execute(
        &format!(
            "INSERT OR IGNORE INTO service_instances ({COLUMNS})
             VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10, ?11, ?12, ?13,
                 COALESCE(NULLIF(?14, ''), (SELECT zone FROM regions WHERE name = ?3), ''), ?15)"
        ),
        params![
            rec.id,
            rec.service_type,
            rec.region,
            rec.state.as_str(),
            rec.detail,
            rec.provider,
            Value::Object(rec.outputs.clone()).to_string(),
            rec.spec.to_string(),
            rec.attempts,
            rec.created_at,
            rec.updated_at,
            rec.owner.as_ref().map(|o| &o.tenant),
            rec.owner.as_ref().map(|o| &o.project),
            rec.zone,
            rec.parent,
        ],
    )?;
    Ok(n == 1)
}

pub(super) fn all(c: &Connection) -> rusqlite::Result<Vec<ServiceRecord>> {
    let mut stmt = c.prepare(sql::SERVICES.sqlite)?;
    let rows = stmt.query_map([], row)?;
    rows.collect()
}

pub(super) fn in_state(
    c: &Connection,
    state: InstanceState,
) -> rusqlite::Result<Vec<ServiceRecord>> {
    let mut stmt = c.prepare(sql::SERVICES_IN_STATE.sqlite)?;
    let rows = stmt.query_map([state.as_str()], row)?;
    rows.collect()
}

pub(super) fn live_by_region(c: &Connection) -> rusqlite::Result<HashMap<String, usize>> {
    let mut stmt = c.prepare(sql::LIVE_SERVICES_BY_REGION.sqlite)?;
    let rows = stmt.query_map([], |r| Ok((r.get(0)?, r.get::<_, i64>(1)? as usize)))?;
    rows.collect()
}

pub(super) fn claim_queued(
    c: &mut Connection,
    id: &str,
    detail: &str,
) -> rusqlite::Result<Option<ServiceRecord>> {
    let tx = c.transaction()?;
    let n = tx.execute(sql::CLAIM_QUEUED.sqlite, params![id, detail, now_ms()])?;
    // SQLite's own: the row read again (PostgreSQL's statement returns it).
    let rec = if n == 1 { one(&tx, id)? } else { None };
    tx.commit()?;
    Ok(rec)
}

pub(super) fn cancel_queued(c: &Connection, id: &str) -> rusqlite::Result<bool> {
    let n = c.execute(sql::CANCEL_QUEUED.sqlite, [id])?;
    Ok(n == 1)
}

pub(super) fn next_attempt(
    c: &mut Connection,
    id: &str,
    from: (InstanceState, u32),
    to: InstanceState,
    detail: &str,
) -> rusqlite::Result<Option<ServiceRecord>> {
    let tx = c.transaction()?;
    let n = tx.execute(
        sql::NEXT_ATTEMPT.sqlite,
        params![id, from.0.as_str(), from.1, to.as_str(), detail, now_ms()],
    )?;
    let rec = if n == 1 { one(&tx, id)? } else { None };
    tx.commit()?;
    Ok(rec)
}

pub(super) fn settle(
    c: &Connection,
    id: &str,
    from: (InstanceState, u32),
    outcome: &Outcome,
) -> rusqlite::Result<bool> {
    let outputs = outcome
        .outputs
        .as_ref()
        .map(|o| Value::Object(o.clone()).to_string());
    let n = c.execute(
        sql::SETTLE.sqlite,
        params![
            id,
            from.0.as_str(),
            from.1,
            outcome.state.as_str(),
            outcome.detail,
            outcome.provider,
            outputs,
            now_ms()
        ],
    )?;
    Ok(n == 1)
}

pub(super) fn remove_if(
    c: &Connection,
    id: &str,
    from: (InstanceState, u32),
) -> rusqlite::Result<bool> {
    let n = c.execute(
        sql::REMOVE_SERVICE_IF.sqlite,
        params![id, from.0.as_str(), from.1],
    )?;
    Ok(n == 1)
}

pub(super) fn remove(c: &Connection, id: &str, region: &str) -> rusqlite::Result<bool> {
    let n = c.execute(sql::REMOVE_SERVICE.sqlite, params![id, region])?;
    Ok(n == 1)
}
