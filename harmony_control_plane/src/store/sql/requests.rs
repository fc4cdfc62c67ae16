//! What the agents' work leaves in the store: durable requests, service instances and session
//! rows.
//!
//! Left in the adapters, because the dialects do them differently: inserting a service instance
//! (`INSERT OR IGNORE` in SQLite, `ON CONFLICT (id) DO NOTHING` in PostgreSQL), the `RETURNING`
//! PostgreSQL adds to [`CLAIM_QUEUED`] and [`NEXT_ATTEMPT`] (SQLite reads the row again), the
//! zones with queued requests (PostgreSQL orders a `DISTINCT` by its output columns), heartbeats
//! (`MAX`, one statement a beat, in SQLite; `GREATEST` over `unnest` in PostgreSQL), and
//! PostgreSQL's batched forms.

/// The columns of a `RequestRecord`, in its order.
macro_rules! request_columns {
    () => {
        "id, region, op, params, body_hash, state, res, seq, created_at, sent_at, \
     completed_at, deliveries, tenant, project, project_json, zone"
    };
}

/// The columns of a `ServiceRecord`, in its order.
macro_rules! service_columns {
    () => {
        "id, service_type, region, state, detail, provider, outputs, spec, attempts, \
     created_at, updated_at, tenant, project, zone, parent"
    };
}

/// The columns of a `SessionRecord`, in its order.
macro_rules! session_columns {
    () => {
        "region, zone, replica, conn, connected, connected_at, disconnected_at, \
     last_heartbeat_at, hello_json, status_json, services_json, max_frame_bytes"
    };
}

/// The columns of a `RequestRecord`, in its order.
pub(crate) const REQUEST_COLUMNS: &str = request_columns!();
/// The columns of a `ServiceRecord`, in its order.
pub(crate) const SERVICE_COLUMNS: &str = service_columns!();
/// The columns of a `SessionRecord`, in its order.
pub(crate) const SESSION_COLUMNS: &str = session_columns!();

statements! {
    /// Request `$1`.
    REQUEST = concat!("SELECT ", request_columns!(), " FROM requests WHERE id = $1");
    /// Queues request `$1` for region `$2` (op `$3`, params `$4`, body hash `$5`, submitted at
    /// `$6`, tenant/project scope `$7`..`$9`) in zone `$10`, or the region's first zone when
    /// `$10` is empty; nothing when the id is taken.
    SUBMIT_REQUEST = "INSERT INTO requests (id, region, op, params, body_hash, state, created_at,
                     tenant, project, project_json, zone)
                 VALUES ($1, $2, $3, $4, $5, 'queued', $6, $7, $8, $9,
                     COALESCE(NULLIF($10, ''), (SELECT zone FROM regions WHERE name = $2), ''))
                 ON CONFLICT (id) DO NOTHING";
    /// Stores result `$3` of request `$1` with state `$2` (`done` or `cancelled`) at `$4` and
    /// its failure `$5` (`NULL` when it succeeded), only if it is still unanswered.
    FINISH_REQUEST = "UPDATE requests SET state = $2, res = $3, completed_at = $4, error = $5
             WHERE id = $1 AND state IN ('queued', 'sent')";
    /// Deletes the finished requests completed before `$1`.
    PRUNE_REQUESTS =
        "DELETE FROM requests WHERE state IN ('done', 'cancelled') AND completed_at < $1";
    /// How many unanswered requests each (region, zone) has.
    UNANSWERED_COUNTS = "SELECT region, COALESCE(zone, ''), COUNT(*) FROM requests
             WHERE state IN ('queued', 'sent') GROUP BY region, zone";

    /// Service instance `$1`.
    SERVICE = concat!("SELECT ", service_columns!(), " FROM service_instances WHERE id = $1");
    /// Every service instance, oldest first.
    SERVICES = concat!(
        "SELECT ",
        service_columns!(),
        " FROM service_instances ORDER BY created_at, id"
    );
    /// The service instances in state `$1`, oldest first.
    SERVICES_IN_STATE = concat!(
        "SELECT ",
        service_columns!(),
        " FROM service_instances WHERE state = $1 ORDER BY created_at, id"
    );
    /// How many live instances (neither failed nor being deleted) each region has.
    LIVE_SERVICES_BY_REGION = "SELECT region, COUNT(*) FROM service_instances
             WHERE state NOT IN ('failed', 'deleting') GROUP BY region";
    /// Moves queued instance `$1` to `pending` with detail `$2` at `$3`, counting an attempt.
    CLAIM_QUEUED = "UPDATE service_instances SET state = 'pending', attempts = attempts + 1,
                 detail = $2, updated_at = $3 WHERE id = $1 AND state = 'queued'";
    /// Deletes instance `$1` if it is still queued.
    CANCEL_QUEUED = "DELETE FROM service_instances WHERE id = $1 AND state = 'queued'";
    /// Moves instance `$1`, if still in state `$2` after `$3` attempts, to state `$4` with
    /// detail `$5` at `$6`, counting an attempt.
    NEXT_ATTEMPT = "UPDATE service_instances SET state = $4, attempts = attempts + 1, detail = $5,
                 updated_at = $6 WHERE id = $1 AND state = $2 AND attempts = $3";
    /// Writes an outcome (state `$4`, detail `$5`, provider `$6` and outputs `$7` when given) at
    /// `$8` to instance `$1`, if still in state `$2` after `$3` attempts.
    SETTLE = "UPDATE service_instances SET state = $4, detail = $5,
             provider = COALESCE($6, provider), outputs = COALESCE($7, outputs), updated_at = $8
             WHERE id = $1 AND state = $2 AND attempts = $3";
    /// Deletes instance `$1` if still in state `$2` after `$3` attempts.
    REMOVE_SERVICE_IF =
        "DELETE FROM service_instances WHERE id = $1 AND state = $2 AND attempts = $3";
    /// Deletes instance `$1` of region `$2`, whatever its state.
    REMOVE_SERVICE = "DELETE FROM service_instances WHERE id = $1 AND region = $2";

    /// Stores a session row (`$1`..`$12`, in [`SESSION_COLUMNS`]' order), replacing the one of
    /// its region and zone unless that one's connection was opened later.
    OPEN_SESSION = concat!(
        "INSERT INTO sessions (",
        session_columns!(),
        ") VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12)
             ON CONFLICT (region, zone) DO UPDATE SET replica = EXCLUDED.replica, conn = EXCLUDED.conn,
               connected = EXCLUDED.connected, connected_at = EXCLUDED.connected_at,
               disconnected_at = EXCLUDED.disconnected_at,
               last_heartbeat_at = EXCLUDED.last_heartbeat_at, hello_json = EXCLUDED.hello_json,
               status_json = EXCLUDED.status_json, services_json = EXCLUDED.services_json,
               max_frame_bytes = EXCLUDED.max_frame_bytes
             WHERE sessions.connected_at <= EXCLUDED.connected_at"
    );
    /// Stores services `$3` advertised on connection `$2` of region `$1`, if it is connected.
    SESSION_SERVICES =
        "UPDATE sessions SET services_json = $3 WHERE region = $1 AND conn = $2 AND connected";
    /// Marks connection `$2` of region `$1` disconnected at `$3`, if it is connected.
    CLOSE_SESSION = "UPDATE sessions SET connected = FALSE, disconnected_at = $3
             WHERE region = $1 AND conn = $2 AND connected";
    /// Marks every connected session of replica `$1` disconnected at `$2`.
    CLOSE_REPLICA_SESSIONS = "UPDATE sessions SET connected = FALSE, disconnected_at = $2
             WHERE replica = $1 AND connected";
    /// Every session row, by region and zone.
    SESSIONS = concat!("SELECT ", session_columns!(), " FROM sessions ORDER BY region, zone");
}
