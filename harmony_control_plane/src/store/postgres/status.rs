//! Zone transitions, request summaries and progress lines in PostgreSQL. A transition and its
//! history are written in one transaction; replicas recording the same change at once take
//! turns on the zone's row, and the second finds the health already written. The statements
//! SQLite shares are in [`crate::store::sql`].

use super::cached::Cached;
use deadpool_postgres::Client;
use std::sync::LazyLock;
use tokio_postgres::Row;
use tokio_postgres::types::ToSql;

use super::{Error, PostgresStore};
use crate::store::sql;
use crate::store::status::{
    HISTORY_PER_ZONE, PROGRESS_PER_REQUEST, ProgressLine, RequestSummary, StatusStore, ZoneState,
    health_word, parse_health,
};
use crate::store::{RequestState, StoreError};

/// The tables of zone transitions and progress lines and the `error` column of `requests`, in
/// PostgreSQL's column types; run before [`sql::INDEXES`], which indexes them.
pub(super) const TABLES: &str = "
CREATE TABLE IF NOT EXISTS zone_states (
    region TEXT NOT NULL,
    zone TEXT NOT NULL,
    health TEXT NOT NULL,
    reason TEXT NOT NULL,
    since BIGINT NOT NULL,
    PRIMARY KEY (region, zone)
);
CREATE TABLE IF NOT EXISTS zone_state_history (
    n BIGSERIAL PRIMARY KEY,
    region TEXT NOT NULL,
    zone TEXT NOT NULL,
    health TEXT NOT NULL,
    reason TEXT NOT NULL,
    since BIGINT NOT NULL
);
CREATE TABLE IF NOT EXISTS turns (
    job TEXT PRIMARY KEY,
    holder TEXT NOT NULL,
    until BIGINT NOT NULL
);
CREATE TABLE IF NOT EXISTS request_progress (
    id TEXT NOT NULL,
    slot BIGINT NOT NULL,
    n BIGINT NOT NULL,
    at BIGINT NOT NULL,
    stage TEXT NOT NULL,
    detail TEXT NOT NULL,
    PRIMARY KEY (id, slot)
);
ALTER TABLE requests ADD COLUMN IF NOT EXISTS error TEXT;
";

fn state_row(r: &Row) -> Result<ZoneState, Error> {
    let health: String = r.try_get(2)?;
    Ok(ZoneState {
        region: r.try_get(0)?,
        zone: r.try_get(1)?,
        health: parse_health(&health)
            .ok_or_else(|| Error::Data(format!("unknown health {health:?}")))?,
        reason: r.try_get(3)?,
        since: r.try_get(4)?,
    })
}

fn summary_row(r: &Row) -> Result<RequestSummary, Error> {
    let state: String = r.try_get(4)?;
    Ok(RequestSummary {
        id: r.try_get(0)?,
        region: r.try_get(1)?,
        zone: r.try_get(2)?,
        op: r.try_get(3)?,
        state: RequestState::parse(&state)
            .ok_or_else(|| Error::Data(format!("unknown request state {state:?}")))?,
        tenant: r.try_get(5)?,
        created_at: r.try_get(6)?,
        sent_at: r.try_get(7)?,
        completed_at: r.try_get(8)?,
        error: r.try_get(9)?,
        zone_total: r.try_get::<_, i64>(10)?.max(0) as u64,
    })
}

fn progress_row(r: &Row) -> Result<ProgressLine, Error> {
    Ok(ProgressLine {
        at: r.try_get(0)?,
        stage: r.try_get(1)?,
        detail: r.try_get(2)?,
    })
}

/// A transition, its history row and the history's trim in one statement (one round trip,
/// no explicit transaction): PostgreSQL's own, around the shared [`sql::RECORD_ZONE_STATE`]
/// (`$1`..`$5`). Each zone's agent records two or three transitions as it connects, so with
/// many agents bootstrapping these were most of the database's round trips when each was a
/// transaction of three statements. The trim sees the rows from before the statement (as every
/// part of it does), so it keeps `$6` of them and the new one.
static RECORD_TRANSITION: LazyLock<String> = LazyLock::new(|| {
    format!(
        "WITH up AS ({} RETURNING region, zone, health, reason, since),
         added AS (
            INSERT INTO zone_state_history (region, zone, health, reason, since)
            SELECT region, zone, health, reason, since FROM up
            RETURNING n
         ),
         trimmed AS (
            DELETE FROM zone_state_history
            WHERE EXISTS (SELECT 1 FROM added) AND region = $1 AND zone = $2
              AND n NOT IN (SELECT n FROM zone_state_history WHERE region = $1 AND zone = $2
                            ORDER BY n DESC LIMIT $6)
         )
         SELECT count(*) FROM up",
        sql::RECORD_ZONE_STATE.postgres
    )
});

async fn record(c: &Client, s: &ZoneState) -> Result<bool, Error> {
    let health = health_word(s.health);
    let kept = HISTORY_PER_ZONE - 1;
    let row = c
        .query_one_cached(
            &RECORD_TRANSITION,
            &[&s.region, &s.zone, &health, &s.reason, &s.since, &kept],
        )
        .await?;
    Ok(row.try_get::<_, i64>(0)? == 1)
}

/// The rows `statement` reads with `values`, each made a record by `read`.
async fn all<T>(
    c: &Client,
    statement: &str,
    values: &[&(dyn ToSql + Sync)],
    read: fn(&Row) -> Result<T, Error>,
) -> Result<Vec<T>, Error> {
    c.query_cached(statement, values)
        .await?
        .iter()
        .map(read)
        .collect()
}

impl PostgresStore {
    /// Runs `f` on a pooled connection as operation `op`.
    async fn with<T>(
        &self,
        op: &'static str,
        f: impl AsyncFnOnce(&mut Client) -> Result<T, Error>,
    ) -> Result<T, StoreError> {
        let mut c = self.client(op).await?;
        f(&mut c).await.map_err(|e| super::pg_error(op, e))
    }
}

#[async_trait::async_trait]
impl StatusStore for PostgresStore {
    async fn record_zone_state(&self, s: &ZoneState) -> Result<bool, StoreError> {
        self.with("record a zone's state", async |c| record(c, s).await)
            .await
    }

    async fn take_turn(
        &self,
        job: &str,
        holder: &str,
        now: i64,
        lease_ms: i64,
    ) -> Result<bool, StoreError> {
        self.with("take a turn", async |c| {
            let n = c
                .execute_cached(sql::TAKE_TURN.postgres, &[&job, &holder, &now, &lease_ms])
                .await?;
            Ok(n == 1)
        })
        .await
    }

    async fn zone_states(&self) -> Result<Vec<ZoneState>, StoreError> {
        self.with("list the zones' states", async |c| {
            all(c, sql::ZONE_STATES.postgres, &[], state_row).await
        })
        .await
    }

    async fn zone_history(
        &self,
        region: &str,
        zone: &str,
        limit: i64,
    ) -> Result<Vec<ZoneState>, StoreError> {
        self.with("read a zone's history", async |c| {
            let values: [&(dyn ToSql + Sync); 3] = [&region, &zone, &limit];
            all(c, sql::ZONE_HISTORY.postgres, &values, state_row).await
        })
        .await
    }

    async fn unanswered_summaries(
        &self,
        tenant: Option<&str>,
        per_zone: i64,
    ) -> Result<Vec<RequestSummary>, StoreError> {
        self.with("list requests in flight", async |c| {
            all(
                c,
                sql::UNANSWERED_SUMMARIES.postgres,
                &[&tenant, &per_zone],
                summary_row,
            )
            .await
        })
        .await
    }

    async fn recent_failures(
        &self,
        tenant: Option<&str>,
        since: i64,
        per_zone: i64,
    ) -> Result<Vec<RequestSummary>, StoreError> {
        self.with("list failed requests", async |c| {
            let values: [&(dyn ToSql + Sync); 3] = [&tenant, &since, &per_zone];
            all(c, sql::RECENT_FAILURES.postgres, &values, summary_row).await
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
        let (slot, n) = (
            (n % PROGRESS_PER_REQUEST) as i64,
            n.min(i64::MAX as u64) as i64,
        );
        self.with("store a progress line", async |c| {
            let stored = c
                .execute_cached(
                    sql::ADD_PROGRESS.postgres,
                    &[
                        &id,
                        &slot,
                        &n,
                        &line.at,
                        &line.stage,
                        &line.detail,
                        &region,
                        &zone,
                    ],
                )
                .await?;
            Ok(stored == 1)
        })
        .await
    }

    async fn progress(&self, id: &str) -> Result<Vec<ProgressLine>, StoreError> {
        self.with("read a request's progress", async |c| {
            all(c, sql::PROGRESS.postgres, &[&id], progress_row).await
        })
        .await
    }
}
