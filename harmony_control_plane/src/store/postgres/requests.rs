//! Durable requests in PostgreSQL.

use deadpool_postgres::{Client, GenericClient};
use std::collections::HashMap;
use tokio_postgres::Row;

use super::Error;
use crate::store::{NewRequest, RequestRecord, RequestState, Submitted, classify};

const COLUMNS: &str = "id, region, op, params, body_hash, state, res, seq, created_at, sent_at, \
     completed_at, deliveries, tenant, project, project_json, zone";

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
    let r = c
        .query_opt(
            &format!("SELECT {COLUMNS} FROM requests WHERE id = $1"),
            &[&id],
        )
        .await?;
    r.as_ref().map(row).transpose()
}

/// Insert-or-nothing, then classify what holds the id. The stored row can vanish in between
/// only if it was pruned; then the insert is tried again.
pub(super) async fn submit(c: &Client, r: &NewRequest) -> Result<Submitted, Error> {
    for _ in 0..3 {
        let n = c
            .execute(
                "INSERT INTO requests (id, region, op, params, body_hash, state, created_at,
                     tenant, project, project_json, zone)
                 VALUES ($1, $2, $3, $4, $5, 'queued', $6, $7, $8, $9,
                     COALESCE(NULLIF($10, ''), (SELECT zone FROM regions WHERE name = $2), ''))
                 ON CONFLICT (id) DO NOTHING",
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

pub(super) async fn unanswered(
    c: &Client,
    region: &str,
    zone: &str,
) -> Result<Vec<RequestRecord>, Error> {
    let rows = c
        .query(
            &format!(
                "SELECT {COLUMNS} FROM requests WHERE region = $1 AND zone = $2
                   AND state IN ('queued', 'sent')
                 ORDER BY seq"
            ),
            &[&region, &zone],
        )
        .await?;
    rows.iter().map(row).collect()
}

pub(super) async fn mark_sent(c: &Client, id: &str, now: i64) -> Result<bool, Error> {
    let n = c
        .execute(
            "UPDATE requests SET state = 'sent', sent_at = $2, deliveries = deliveries + 1
             WHERE id = $1 AND state IN ('queued', 'sent')",
            &[&id, &now],
        )
        .await?;
    Ok(n == 1)
}

/// `state` is `done` or `cancelled`: only an unanswered request takes it.
pub(super) async fn finish(
    c: &Client,
    id: &str,
    state: RequestState,
    res_json: &str,
    now: i64,
) -> Result<bool, Error> {
    let n = c
        .execute(
            "UPDATE requests SET state = $2, res = $3, completed_at = $4
             WHERE id = $1 AND state IN ('queued', 'sent')",
            &[&id, &state.as_str(), &res_json, &now],
        )
        .await?;
    Ok(n == 1)
}

pub(super) async fn prune(c: &Client, older_than: i64) -> Result<u64, Error> {
    let n = c
        .execute(
            "DELETE FROM requests WHERE state IN ('done', 'cancelled') AND completed_at < $1",
            &[&older_than],
        )
        .await?;
    Ok(n)
}

pub(super) async fn unanswered_counts(c: &Client) -> Result<HashMap<(String, String), u64>, Error> {
    let rows = c
        .query(
            "SELECT region, COALESCE(zone, ''), COUNT(*) FROM requests
             WHERE state IN ('queued', 'sent') GROUP BY region, zone",
            &[],
        )
        .await?;
    rows.iter()
        .map(|r| {
            Ok((
                (r.try_get(0)?, r.try_get(1)?),
                r.try_get::<_, i64>(2)?.max(0) as u64,
            ))
        })
        .collect()
}

pub(super) async fn queued_zones(c: &Client) -> Result<Vec<(String, String)>, Error> {
    let rows = c
        .query(
            "SELECT DISTINCT region, COALESCE(zone, '') FROM requests WHERE state = 'queued'
             ORDER BY 1, 2",
            &[],
        )
        .await?;
    rows.iter()
        .map(|r| Ok((r.try_get(0)?, r.try_get(1)?)))
        .collect()
}
