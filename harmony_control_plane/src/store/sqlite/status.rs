//! Zone transitions, request summaries and progress lines in SQLite. The statements are
//! PostgreSQL's too ([`crate::store::sql`]); the single connection serialises a transition and
//! its history without a transaction of its own beyond the one here.

use rusqlite::{Connection, Row, params};

use super::conversion;
use crate::store::sql;
use crate::store::status::{
    HISTORY_PER_ZONE, PROGRESS_PER_REQUEST, ProgressLine, RequestSummary, StatusStore, ZoneState,
    health_word, parse_health,
};
use crate::store::{RequestState, StoreError};

/// The tables of zone transitions and progress lines, in SQLite's column types (the `error`
/// column of `requests` is in `schema::ADDED_COLUMNS`).
pub(super) const TABLES: &str = "
CREATE TABLE IF NOT EXISTS zone_states (
    region TEXT NOT NULL,
    zone TEXT NOT NULL,
    health TEXT NOT NULL,
    reason TEXT NOT NULL,
    since INTEGER NOT NULL,
    PRIMARY KEY (region, zone)
);
CREATE TABLE IF NOT EXISTS zone_state_history (
    n INTEGER PRIMARY KEY AUTOINCREMENT,
    region TEXT NOT NULL,
    zone TEXT NOT NULL,
    health TEXT NOT NULL,
    reason TEXT NOT NULL,
    since INTEGER NOT NULL
);
CREATE TABLE IF NOT EXISTS turns (
    job TEXT PRIMARY KEY,
    holder TEXT NOT NULL,
    until INTEGER NOT NULL
);
CREATE TABLE IF NOT EXISTS request_progress (
    id TEXT NOT NULL,
    slot INTEGER NOT NULL,
    n INTEGER NOT NULL,
    at INTEGER NOT NULL,
    stage TEXT NOT NULL,
    detail TEXT NOT NULL,
    PRIMARY KEY (id, slot)
);
";

fn state_row(r: &Row<'_>) -> rusqlite::Result<ZoneState> {
    let health: String = r.get(2)?;
    Ok(ZoneState {
        region: r.get(0)?,
        zone: r.get(1)?,
        health: parse_health(&health)
            .ok_or_else(|| conversion(2, format!("unknown health {health:?}")))?,
        reason: r.get(3)?,
        since: r.get(4)?,
    })
}

fn summary_row(r: &Row<'_>) -> rusqlite::Result<RequestSummary> {
    let state: String = r.get(4)?;
    Ok(RequestSummary {
        id: r.get(0)?,
        region: r.get(1)?,
        zone: r.get(2)?,
        op: r.get(3)?,
        state: RequestState::parse(&state)
            .ok_or_else(|| conversion(4, format!("unknown request state {state:?}")))?,
        tenant: r.get(5)?,
        created_at: r.get(6)?,
        sent_at: r.get(7)?,
        completed_at: r.get(8)?,
        error: r.get(9)?,
        zone_total: r.get::<_, i64>(10)?.max(0) as u64,
    })
}

fn record(c: &mut Connection, s: &ZoneState) -> rusqlite::Result<bool> {
    let tx = c.transaction()?;
    let values = params![s.region, s.zone, health_word(s.health), s.reason, s.since];
    let n = tx.execute(sql::RECORD_ZONE_STATE.sqlite, values)?;
    if n == 1 {
        tx.execute(sql::ADD_ZONE_HISTORY.sqlite, values)?;
        tx.execute(
            sql::TRIM_ZONE_HISTORY.sqlite,
            params![s.region, s.zone, HISTORY_PER_ZONE],
        )?;
    }
    tx.commit()?;
    Ok(n == 1)
}

/// The rows `statement` reads with `values`, each made a record by `read`.
fn all<T>(
    c: &Connection,
    statement: &str,
    values: impl rusqlite::Params,
    read: fn(&Row<'_>) -> rusqlite::Result<T>,
) -> rusqlite::Result<Vec<T>> {
    let mut stmt = c.prepare(statement)?;
    let rows = stmt.query_map(values, read)?;
    rows.collect()
}

fn progress_row(r: &Row<'_>) -> rusqlite::Result<ProgressLine> {
    Ok(ProgressLine {
        at: r.get(0)?,
        stage: r.get(1)?,
        detail: r.get(2)?,
    })
}

#[async_trait::async_trait]
impl StatusStore for super::SqliteStore {
    async fn record_zone_state(&self, s: &ZoneState) -> Result<bool, StoreError> {
        let s = s.clone();
        self.run("record a zone's state", move |c| record(c, &s))
            .await
    }

    async fn take_turn(
        &self,
        job: &str,
        holder: &str,
        now: i64,
        lease_ms: i64,
    ) -> Result<bool, StoreError> {
        let (job, holder) = (job.to_owned(), holder.to_owned());
        self.run("take a turn", move |c| {
            c.execute(sql::TAKE_TURN.sqlite, params![job, holder, now, lease_ms])
                .map(|n| n == 1)
        })
        .await
    }

    async fn zone_states(&self) -> Result<Vec<ZoneState>, StoreError> {
        self.run("list the zones' states", |c| {
            all(c, sql::ZONE_STATES.sqlite, [], state_row)
        })
        .await
    }

    async fn zone_history(
        &self,
        region: &str,
        zone: &str,
        limit: i64,
    ) -> Result<Vec<ZoneState>, StoreError> {
        let (region, zone) = (region.to_owned(), zone.to_owned());
        self.run("read a zone's history", move |c| {
            all(
                c,
                sql::ZONE_HISTORY.sqlite,
                params![region, zone, limit],
                state_row,
            )
        })
        .await
    }

    async fn unanswered_summaries(
        &self,
        tenant: Option<&str>,
        per_zone: i64,
    ) -> Result<Vec<RequestSummary>, StoreError> {
        let tenant = tenant.map(str::to_owned);
        self.run("list requests in flight", move |c| {
            let values = params![tenant, per_zone];
            all(c, sql::UNANSWERED_SUMMARIES.sqlite, values, summary_row)
        })
        .await
    }

    async fn recent_failures(
        &self,
        tenant: Option<&str>,
        since: i64,
        per_zone: i64,
    ) -> Result<Vec<RequestSummary>, StoreError> {
        let tenant = tenant.map(str::to_owned);
        self.run("list failed requests", move |c| {
            let values = params![tenant, since, per_zone];
            all(c, sql::RECENT_FAILURES.sqlite, values, summary_row)
        })
        .await
    }

    async fn add_progress(
        &self,
        id: &str,
        region: &str,
        zone: &str,
        n: u64,
        line: &ProgressLine,
    ) -> Result<bool, StoreError> {
        let (id, region, zone, line) = (
            id.to_owned(),
            region.to_owned(),
            zone.to_owned(),
            line.clone(),
        );
        let (slot, n) = (
            (n % PROGRESS_PER_REQUEST) as i64,
            n.min(i64::MAX as u64) as i64,
        );
        self.run("store a progress line", move |c| {
            let stored = c.execute(
                sql::ADD_PROGRESS.sqlite,
                params![id, slot, n, line.at, line.stage, line.detail, region, zone],
            )?;
            Ok(stored == 1)
        })
        .await
    }

    async fn progress(&self, id: &str) -> Result<Vec<ProgressLine>, StoreError> {
        let id = id.to_owned();
        self.run("read a request's progress", move |c| {
            all(c, sql::PROGRESS.sqlite, [id], progress_row)
        })
        .await
    }
}
