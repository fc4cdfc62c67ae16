//! Zone transitions, request summaries and progress lines (the `StatusStore`).
//!
//! Left in the adapters: the tables' column types (`status::TABLES` of each), and how a
//! transition is written with its history: SQLite runs [`RECORD_ZONE_STATE`],
//! [`ADD_ZONE_HISTORY`] and [`TRIM_ZONE_HISTORY`] in a transaction; PostgreSQL wraps
//! [`RECORD_ZONE_STATE`] in one statement that does all three (one round trip).
//! A parameter that may be `NULL` is written `CAST($n AS TEXT)`, which both dialects read (and
//! which tells PostgreSQL its type).

/// The columns of a `RequestSummary`, in its order, from a `requests` row (`zone_total` is
/// the query's).
macro_rules! summary_columns {
    () => {
        "id, region, COALESCE(zone, '') AS zone, op, state, tenant, created_at, sent_at, \
         completed_at, error"
    };
}

/// What a recorded zone state does to the stored one: written over a stored state of another
/// health that started no later (both dialects; PostgreSQL's batched statement too).
macro_rules! zone_state_conflict_rule {
    () => {
        "ON CONFLICT (region, zone) DO UPDATE SET health = EXCLUDED.health,
               reason = EXCLUDED.reason, since = EXCLUDED.since
             WHERE zone_states.health <> EXCLUDED.health AND zone_states.since <= EXCLUDED.since"
    };
}
pub(crate) use zone_state_conflict_rule;

statements! {
    /// Records state `$3` (reason `$4`, since `$5`) of zone `$2` of region `$1`: inserted when
    /// the zone has none, else written over a stored state of another health that started no
    /// later.
    RECORD_ZONE_STATE = concat!("INSERT INTO zone_states (region, zone, health, reason, since)
             VALUES ($1, $2, $3, $4, $5) ", zone_state_conflict_rule!());
    /// Adds a transition (`$1`..`$5` as in [`RECORD_ZONE_STATE`]) to the zone's history.
    ADD_ZONE_HISTORY = "INSERT INTO zone_state_history (region, zone, health, reason, since)
             VALUES ($1, $2, $3, $4, $5)";
    /// Keeps the `$3` latest transitions of zone `$2` of region `$1`.
    TRIM_ZONE_HISTORY = "DELETE FROM zone_state_history WHERE region = $1 AND zone = $2
               AND n NOT IN (SELECT n FROM zone_state_history WHERE region = $1 AND zone = $2
                             ORDER BY n DESC LIMIT $3)";
    /// Gives the turn at job `$1` to holder `$2` until `$3 + $4`: taken when no one holds it,
    /// when its holder's lease ran out by `$3`, or kept (renewed) by its holder.
    TAKE_TURN = "INSERT INTO turns (job, holder, until)
             VALUES ($1, $2, CAST($3 AS BIGINT) + CAST($4 AS BIGINT))
             ON CONFLICT (job) DO UPDATE SET holder = EXCLUDED.holder, until = EXCLUDED.until
             WHERE turns.until <= $3 OR turns.holder = EXCLUDED.holder";
    /// Every zone's state, by region and zone.
    ZONE_STATES = "SELECT region, zone, health, reason, since FROM zone_states
             ORDER BY region, zone";
    /// The `$3` latest transitions of zone `$2` of region `$1`, newest first.
    ZONE_HISTORY = "SELECT region, zone, health, reason, since FROM zone_state_history
             WHERE region = $1 AND zone = $2 ORDER BY since DESC, n DESC LIMIT $3";
    /// The `$2` oldest unanswered requests of each zone (of tenant `$1` when not `NULL`), with
    /// their zone's total.
    UNANSWERED_SUMMARIES = concat!(
        "SELECT ", summary_columns!(), ", total FROM (
             SELECT ", summary_columns!(), ", seq,
                 ROW_NUMBER() OVER (PARTITION BY region, zone ORDER BY seq) AS n,
                 COUNT(*) OVER (PARTITION BY region, zone) AS total
             FROM requests
             WHERE state IN ('queued', 'sent')
               AND (CAST($1 AS TEXT) IS NULL OR tenant = $1)
         ) AS t WHERE n <= $2 ORDER BY region, zone, seq"
    );
    /// The `$3` latest failed requests of each zone finished at or after `$2` (of tenant `$1`
    /// when not `NULL`), with their zone's total in that window.
    RECENT_FAILURES = concat!(
        "SELECT ", summary_columns!(), ", total FROM (
             SELECT ", summary_columns!(), ", seq,
                 ROW_NUMBER() OVER (PARTITION BY region, zone
                                    ORDER BY completed_at DESC, seq DESC) AS n,
                 COUNT(*) OVER (PARTITION BY region, zone) AS total
             FROM requests
             WHERE error IS NOT NULL AND completed_at >= $2
               AND (CAST($1 AS TEXT) IS NULL OR tenant = $1)
         ) AS t WHERE n <= $3 ORDER BY region, zone, completed_at DESC, seq DESC"
    );
    /// Stores progress line `$3` of request `$1` in slot `$2` (at `$4`, stage `$5`, detail
    /// `$6`), replacing the slot's older line, only while the request is unanswered in zone
    /// `$8` of region `$7`.
    ADD_PROGRESS = "INSERT INTO request_progress (id, slot, n, at, stage, detail)
             SELECT $1, $2, $3, $4, $5, $6
             WHERE EXISTS (SELECT 1 FROM requests WHERE id = $1 AND region = $7
                             AND COALESCE(zone, '') = $8 AND state IN ('queued', 'sent'))
             ON CONFLICT (id, slot) DO UPDATE SET n = EXCLUDED.n, at = EXCLUDED.at,
               stage = EXCLUDED.stage, detail = EXCLUDED.detail";
    /// The progress lines of request `$1`, oldest first.
    PROGRESS = "SELECT at, stage, detail FROM request_progress WHERE id = $1 ORDER BY at, n";
    /// Deletes the progress lines of the finished requests completed before `$1` (before
    /// [`super::PRUNE_REQUESTS`] deletes the requests).
    PRUNE_PROGRESS = "DELETE FROM request_progress WHERE id IN (
             SELECT id FROM requests WHERE state IN ('done', 'cancelled') AND completed_at < $1)";
}
