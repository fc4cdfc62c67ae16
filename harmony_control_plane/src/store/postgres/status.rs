//! Zone transitions, request summaries and progress lines in PostgreSQL. A transition and its
//! history are written in one transaction; replicas recording the same change at once take
//! turns on the zone's row, and the second finds the health already written. The statements
//! SQLite shares are in [`crate::store::sql`].

use super::cached::Cached;
use deadpool_postgres::Client;
use std::collections::{HashMap, HashSet};
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

/// Transitions, their history rows and the histories' trim in one statement (one round trip,
/// no explicit transaction): PostgreSQL's own, with [`sql::RECORD_ZONE_STATE`]'s rule (`$1`..`$5`
/// are arrays here, one row each). Each zone's agent records two or three transitions as it
/// connects, so with many agents (re)connecting these were most of the database's work when
/// each was its own statement: in a storm of 30,000 reconnects, 80,000 statements and 60 s of
/// PostgreSQL's time (docs/benchmarks.md). The trim sees the rows from before the statement (as
/// every part of it does), so it keeps `$6` of them and the new one: it finds each zone's cut
/// (its `$6 + 1`th newest row) once and deletes that row and older ones through the index. The
/// `NOT IN` it replaces ran its subquery once per history row of the zone (20), three quarters
/// of the statement's time (EXPLAIN ANALYZE, 30,000 zones of 20 rows: 0.58 of 0.78 ms; 0.13
/// ms now). The zones are written in key order, so two batches lock the rows they share in the
/// same order (no deadlock); a zone appears at most once per statement (see [`record_many`]).
const RECORD_TRANSITIONS: &str = concat!(
    "WITH t AS (
        SELECT * FROM unnest($1::text[], $2::text[], $3::text[], $4::text[], $5::int8[])
            AS t(region, zone, health, reason, since)
     ),
     up AS (
        INSERT INTO zone_states (region, zone, health, reason, since)
        SELECT region, zone, health, reason, since FROM t ORDER BY region, zone ",
    sql::zone_state_conflict_rule!(),
    "
        RETURNING region, zone, health, reason, since
     ),
     added AS (
        INSERT INTO zone_state_history (region, zone, health, reason, since)
        SELECT region, zone, health, reason, since FROM up
        RETURNING region, zone
     ),
     trimmed AS (
        DELETE FROM zone_state_history h
        USING (SELECT a.region, a.zone,
                      (SELECT x.n FROM zone_state_history x
                       WHERE x.region = a.region AND x.zone = a.zone
                       ORDER BY x.n DESC OFFSET $6 LIMIT 1) AS cut
               FROM added a) c
        WHERE h.region = c.region AND h.zone = c.zone AND h.n <= c.cut
     )
     SELECT region, zone FROM up"
);

/// Records `states` as [`StatusStore::record_zone_state`] would one after the other: whether
/// each was recorded. One statement per round, a round holding each zone's next transition
/// (usually one round: a zone seldom appears twice in a batch).
pub(super) async fn record_many(c: &Client, states: &[ZoneState]) -> Result<Vec<bool>, Error> {
    let mut recorded = vec![false; states.len()];
    // The round of each state: how many earlier states name the same zone.
    let mut seen: HashMap<(&str, &str), usize> = HashMap::new();
    let mut rounds: Vec<Vec<usize>> = Vec::new();
    for (i, s) in states.iter().enumerate() {
        let round = seen.entry((&s.region, &s.zone)).or_insert(0);
        if rounds.len() <= *round {
            rounds.push(Vec::new());
        }
        rounds[*round].push(i);
        *round += 1;
    }
    let kept = HISTORY_PER_ZONE - 1;
    for round in rounds {
        let column = |f: fn(&ZoneState) -> String| -> Vec<String> {
            round.iter().map(|&i| f(&states[i])).collect()
        };
        let regions = column(|s| s.region.clone());
        let zones = column(|s| s.zone.clone());
        let healths = column(|s| health_word(s.health).to_string());
        let reasons = column(|s| s.reason.clone());
        let since: Vec<i64> = round.iter().map(|&i| states[i].since).collect();
        let rows = c
            .query_cached(
                RECORD_TRANSITIONS,
                &[&regions, &zones, &healths, &reasons, &since, &kept],
            )
            .await?;
        let written: HashSet<(String, String)> = rows
            .iter()
            .map(|r| Ok((r.try_get(0)?, r.try_get(1)?)))
            .collect::<Result<_, Error>>()?;
        for &i in &round {
            let key = (states[i].region.clone(), states[i].zone.clone());
            recorded[i] = written.contains(&key);
        }
    }
    Ok(recorded)
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
        self.batched.zone_state.call(s.clone()).await
    }

    async fn record_zone_states(&self, states: &[ZoneState]) -> Result<Vec<bool>, StoreError> {
        let mut recorded = Vec::with_capacity(states.len());
        for chunk in states.chunks(super::batched::MAX_BATCH) {
            recorded.extend(
                self.with("record zones' states", async |c| {
                    record_many(c, chunk).await
                })
                .await?,
            );
        }
        Ok(recorded)
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
