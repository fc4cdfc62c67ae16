//! Durable requests in PostgreSQL. The statements SQLite shares are in [`crate::store::sql`];
//! the batched forms are PostgreSQL's own.

use super::cached::Cached;
use deadpool_postgres::Client;
use std::collections::HashMap;
use tokio_postgres::Row;

use super::Error;
use crate::store::sql::{self, REQUEST_COLUMNS as COLUMNS};
use crate::store::{NewRequest, RequestRecord, RequestState, Submitted, classify};

fn row(r: &Row) -> Result<RequestRecord, Error> {
    let hash: Vec<u8> = r.try_get(4)?;
    let state: String = r.try_get(5)?;
    Ok(RequestRecord {
        id: r.try_get(0)?,
        region: r.try_get(1)?,
        op: r.try_get(2)?,
        params: r.try_get(3)?,
        body_hash: hash
            .try_into()
            .map_err(|_| Error::Data("a request body hash is not 32 bytes".into()))?,
        state: RequestState::parse(&state)
            .ok_or_else(|| Error::Data(format!("unknown request state {state:?}")))?,
        res: r.try_get(6)?,
        seq: r.try_get(7)?,
        created_at: r.try_get(8)?,
        sent_at: r.try_get(9)?,
        completed_at: r.try_get(10)?,
        deliveries: u32::try_from(r.try_get::<_, i64>(11)?).unwrap_or(u32::MAX),
        scope: crate::store::tenancy::scope_of(r.try_get(12)?, r.try_get(13)?, r.try_get(14)?),
        zone: r.try_get::<_, Option<String>>(15)?.unwrap_or_default(),
    })
}

pub(super) async fn one(c: &Client, id: &str) -> Result<Option<RequestRecord>, Error> {
    let r = c.query_opt_cached(sql::REQUEST.postgres, &[&id]).await?;
    r.as_ref().map(row).transpose()
}

/// Insert-or-nothing, then classify what holds the id. The stored row can vanish in between
/// only if it was pruned; then the insert is tried again.
pub(super) async fn submit(c: &Client, r: &NewRequest) -> Result<Submitted, Error> {
    for _ in 0..3 {
        let n = c
            .execute_cached(
                sql::SUBMIT_REQUEST.postgres,
                &[
                    &r.id,
                    &r.region,
                    &r.op,
                    &r.params,
                    &&r.body_hash[..],
                    &r.created_at,
                    &r.scope.as_ref().map(|s| &s.tenant),
                    &r.scope.as_ref().map(|s| &s.project),
                    &r.scope.as_ref().map(|s| &s.project_json),
                    &r.zone,
                ],
            )
            .await?;
        if n == 1 {
            return Ok(Submitted::Created);
        }
        if let Some(stored) = one(c, &r.id).await? {
            return Ok(classify(r, stored));
        }
    }
    Err(Error::Data(format!(
        "request {} kept disappearing while being submitted (pruned concurrently)",
        r.id
    )))
}

/// `state` is `done` or `cancelled`: only an unanswered request takes it.
pub(super) async fn finish(
    c: &Client,
    id: &str,
    state: RequestState,
    res_json: &str,
    now: i64,
) -> Result<bool, Error> {
    let error = crate::store::status::failure_of(res_json);
    let n = c
        .execute_cached(
            sql::FINISH_REQUEST.postgres,
            &[&id, &state.as_str(), &res_json, &now, &error],
        )
        .await?;
    Ok(n == 1)
}

pub(super) async fn prune(c: &Client, older_than: i64) -> Result<u64, Error> {
    c.execute_cached(sql::PRUNE_PROGRESS.postgres, &[&older_than])
        .await?;
    let n = c
        .execute_cached(sql::PRUNE_REQUESTS.postgres, &[&older_than])
        .await?;
    Ok(n)
}

pub(super) async fn unanswered_counts(c: &Client) -> Result<HashMap<(String, String), u64>, Error> {
    let rows = c.query_cached(sql::UNANSWERED_COUNTS.postgres, &[]).await?;
    rows.iter()
        .map(|r| {
            Ok((
                (r.try_get(0)?, r.try_get(1)?),
                r.try_get::<_, i64>(2)?.max(0) as u64,
            ))
        })
        .collect()
}

/// PostgreSQL's own: the `ORDER BY` of a `DISTINCT` names its output columns (SQLite's names
/// the table's).
pub(super) async fn queued_zones(c: &Client) -> Result<Vec<(String, String)>, Error> {
    let rows = c
        .query_cached(
            "SELECT DISTINCT region, COALESCE(zone, '') FROM requests WHERE state = 'queued'
             ORDER BY 1, 2",
            &[],
        )
        .await?;
    rows.iter()
        .map(|r| Ok((r.try_get(0)?, r.try_get(1)?)))
        .collect()
}

// --- batched forms (see `combine`): one statement for many calls ------------------------------

/// [`submit`] for many requests at once: one INSERT for all; each request not inserted (its id
/// was taken, or repeated earlier in the batch) is classified against what holds its id.
pub(super) async fn submit_many(c: &Client, rs: &[NewRequest]) -> Result<Vec<Submitted>, Error> {
    // Only the first of a repeated id goes into the statement; the others are compared with
    // whatever holds the id afterwards, exactly as if they had come one after the other.
    let mut first = std::collections::HashSet::new();
    let fresh: Vec<&NewRequest> = rs.iter().filter(|r| first.insert(r.id.as_str())).collect();
    let col = |f: fn(&NewRequest) -> &str| fresh.iter().map(|r| f(r)).collect::<Vec<&str>>();
    let scope = |f: fn(&crate::store::RequestScope) -> &str| {
        fresh
            .iter()
            .map(|r| r.scope.as_ref().map(f))
            .collect::<Vec<Option<&str>>>()
    };
    let hashes: Vec<&[u8]> = fresh.iter().map(|r| &r.body_hash[..]).collect();
    let created: Vec<i64> = fresh.iter().map(|r| r.created_at).collect();
    let rows = c
        .query_cached(
            "INSERT INTO requests (id, region, op, params, body_hash, state, created_at,
                 tenant, project, project_json, zone)
             SELECT t.id, t.region, t.op, t.params, t.hash, 'queued', t.created_at,
                 t.tenant, t.project, t.project_json,
                 COALESCE(NULLIF(t.zone, ''), (SELECT zone FROM regions WHERE name = t.region), '')
             FROM unnest($1::text[], $2::text[], $3::text[], $4::text[], $5::bytea[], $6::int8[],
                         $7::text[], $8::text[], $9::text[], $10::text[])
                 AS t(id, region, op, params, hash, created_at, tenant, project, project_json, zone)
             ON CONFLICT (id) DO NOTHING
             RETURNING id",
            &[
                &col(|r| &r.id),
                &col(|r| &r.region),
                &col(|r| &r.op),
                &col(|r| &r.params),
                &hashes,
                &created,
                &scope(|s| &s.tenant),
                &scope(|s| &s.project),
                &scope(|s| &s.project_json),
                &col(|r| &r.zone),
            ],
        )
        .await?;
    let mut inserted = std::collections::HashSet::new();
    for row in &rows {
        inserted.insert(row.try_get::<_, String>(0)?);
    }
    let mut answers = Vec::with_capacity(rs.len());
    for r in rs {
        // The first call of an inserted id created it; a repeat of it, or an id already taken,
        // meets the stored request.
        if inserted.remove(&r.id) {
            answers.push(Submitted::Created);
        } else {
            answers.push(submit(c, r).await?);
        }
    }
    Ok(answers)
}

/// [`one`] for many ids at once.
pub(super) async fn many(
    c: &Client,
    ids: &[String],
) -> Result<HashMap<String, RequestRecord>, Error> {
    let rows = c
        .query_cached(
            &format!("SELECT {COLUMNS} FROM requests WHERE id = ANY($1)"),
            &[&ids],
        )
        .await?;
    let mut out = HashMap::with_capacity(rows.len());
    for r in &rows {
        let record = row(r)?;
        out.insert(record.id.clone(), record);
    }
    Ok(out)
}

/// The states of a request not answered yet, passed as a parameter to the writes that find
/// rows by id. Written as constants (`state IN ('queued', 'sent')`), they let the planner use
/// the partial indexes on those states with no key at all: a generic plan made while
/// `requests` was nearly empty joined the ids with a scan of the whole
/// `requests_unanswered_by_zone` index, which keeps the entries of answered requests until a
/// vacuum (ADR 0034). A parameter proves nothing about those indexes, so the primary key is
/// the only way in.
const UNANSWERED: [&str; 2] = ["queued", "sent"];

/// Marks many requests sent (a delivery more each), unless answered meanwhile: the ids marked.
pub(super) async fn mark_sent_many(
    c: &Client,
    sent: &[(String, i64)],
) -> Result<std::collections::HashSet<String>, Error> {
    let ids: Vec<&str> = sent.iter().map(|(id, _)| id.as_str()).collect();
    let at: Vec<i64> = sent.iter().map(|(_, now)| *now).collect();
    // Rows found by key only (see `UNANSWERED`); a repeated id takes its first time.
    let rows = c
        .query_cached(
            "UPDATE requests r SET state = 'sent',
                 sent_at = ($2::int8[])[array_position($1::text[], r.id)],
                 deliveries = r.deliveries + 1
             WHERE r.id = ANY($1::text[]) AND r.state = ANY($3::text[])
             RETURNING r.id",
            &[&ids, &at, &&UNANSWERED[..]],
        )
        .await?;
    rows.iter()
        .map(|r| r.try_get::<_, String>(0).map_err(Error::from))
        .collect()
}

/// One answer to store: id, `done` or `cancelled`, the result's JSON, when.
pub(super) type Finish = (String, RequestState, String, i64);

/// [`finish`] for many answers at once: for each, whether it was the one stored (the first
/// answer of an unanswered request; a later answer to the same id in the batch loses).
pub(super) async fn finish_many(c: &Client, answers: &[Finish]) -> Result<Vec<bool>, Error> {
    let mut first = std::collections::HashSet::new();
    let fresh: Vec<&Finish> = answers
        .iter()
        .filter(|a| first.insert(a.0.as_str()))
        .collect();
    let ids: Vec<&str> = fresh.iter().map(|a| a.0.as_str()).collect();
    let states: Vec<&str> = fresh.iter().map(|a| a.1.as_str()).collect();
    let res: Vec<&str> = fresh.iter().map(|a| a.2.as_str()).collect();
    let at: Vec<i64> = fresh.iter().map(|a| a.3).collect();
    let errors: Vec<Option<String>> = fresh
        .iter()
        .map(|a| crate::store::status::failure_of(&a.2))
        .collect();
    // Rows found by key only (see `UNANSWERED`); each id's values by its place in `$1`.
    let rows = c
        .query_cached(
            "UPDATE requests r SET
                 state = ($2::text[])[array_position($1::text[], r.id)],
                 res = ($3::text[])[array_position($1::text[], r.id)],
                 completed_at = ($4::int8[])[array_position($1::text[], r.id)],
                 error = ($5::text[])[array_position($1::text[], r.id)]
             WHERE r.id = ANY($1::text[]) AND r.state = ANY($6::text[])
             RETURNING r.id",
            &[&ids, &states, &res, &at, &errors, &&UNANSWERED[..]],
        )
        .await?;
    let mut stored = std::collections::HashSet::new();
    for r in &rows {
        stored.insert(r.try_get::<_, String>(0)?);
    }
    // Only the first answer of an id can have been stored; `remove` leaves later ones false.
    Ok(answers.iter().map(|a| stored.remove(&a.0)).collect())
}

/// The unanswered requests of each (region, zone) pair, each pair's in submit order (one
/// statement for a batch of reads, see `combine`).
pub(super) async fn unanswered_many(
    c: &Client,
    keys: &[(String, String)],
) -> Result<HashMap<(String, String), Vec<RequestRecord>>, Error> {
    let regions: Vec<&str> = keys.iter().map(|k| k.0.as_str()).collect();
    let zones: Vec<&str> = keys.iter().map(|k| k.1.as_str()).collect();
    // One index lookup per zone, whatever plan the connection keeps: `OFFSET 0` keeps the
    // lateral subquery from being flattened into a join, which a generic plan made while the
    // table was nearly empty ran as one scan of the whole `requests_unanswered_by_zone` index
    // per call. Its entries for answered requests stay until a vacuum, so that scan grew with
    // every request (7,500 entries a scan on average over 8 bursts of 1,000, ADR 0034).
    let rows = c
        .query_cached(
            &format!(
                "SELECT r.* FROM (SELECT DISTINCT region, zone
                                  FROM unnest($1::text[], $2::text[]) AS k(region, zone)) AS k
                 CROSS JOIN LATERAL (SELECT {COLUMNS} FROM requests
                     WHERE region = k.region AND zone = k.zone AND state IN ('queued', 'sent')
                     OFFSET 0) AS r
                 ORDER BY r.seq"
            ),
            &[&regions, &zones],
        )
        .await?;
    let mut out: HashMap<(String, String), Vec<RequestRecord>> = HashMap::new();
    for r in &rows {
        let rec = row(r)?;
        out.entry((rec.region.clone(), rec.zone.clone()))
            .or_default()
            .push(rec);
    }
    Ok(out)
}
