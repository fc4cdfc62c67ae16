//! Session rows (one per region and zone) in PostgreSQL. The statements SQLite shares are in
//! [`crate::store::sql`]; the batched forms are PostgreSQL's own.

use super::cached::Cached;
use deadpool_postgres::Client;
use tokio_postgres::Row;

use super::Error;
use crate::store::sql::{self, SESSION_COLUMNS as COLUMNS};
use crate::store::{Heartbeat, SessionRecord, merge_heartbeats};

fn row(r: &Row) -> Result<SessionRecord, Error> {
    Ok(SessionRecord {
        region: r.try_get(0)?,
        zone: r.try_get(1)?,
        replica: r.try_get(2)?,
        conn: r.try_get(3)?,
        connected: r.try_get(4)?,
        connected_at: r.try_get(5)?,
        disconnected_at: r.try_get(6)?,
        last_heartbeat_at: r.try_get(7)?,
        hello_json: r.try_get(8)?,
        status_json: r.try_get(9)?,
        services_json: r.try_get(10)?,
        max_frame_bytes: r.try_get::<_, i64>(11)?.max(0) as u64,
    })
}

pub(super) async fn open(c: &Client, s: &SessionRecord) -> Result<bool, Error> {
    let max_frame = i64::try_from(s.max_frame_bytes).unwrap_or(i64::MAX);
    let n = c
        .execute_cached(
            sql::OPEN_SESSION.postgres,
            &[
                &s.region,
                &s.zone,
                &s.replica,
                &s.conn,
                &s.connected,
                &s.connected_at,
                &s.disconnected_at,
                &s.last_heartbeat_at,
                &s.hello_json,
                &s.status_json,
                &s.services_json,
                &max_frame,
            ],
        )
        .await?;
    Ok(n == 1)
}

/// One statement for the whole batch (arrays unnested into rows); beats of one connection are
/// merged first, since a statement updates a row once.
pub(super) async fn heartbeats(c: &Client, beats: &[Heartbeat]) -> Result<u64, Error> {
    let merged = merge_heartbeats(beats);
    let regions: Vec<&str> = merged.iter().map(|b| b.region.as_str()).collect();
    let conns: Vec<&str> = merged.iter().map(|b| b.conn.as_str()).collect();
    let ats: Vec<i64> = merged.iter().map(|b| b.at).collect();
    let statuses: Vec<Option<&str>> = merged.iter().map(|b| b.status_json.as_deref()).collect();
    let n = c
        .execute_cached(
            "UPDATE sessions s SET last_heartbeat_at = GREATEST(s.last_heartbeat_at, b.at),
                 status_json = COALESCE(b.status, s.status_json)
             FROM unnest($1::text[], $2::text[], $3::int8[], $4::text[]) AS b(region, conn, at, status)
             WHERE s.region = b.region AND s.conn = b.conn AND s.connected",
            &[&regions, &conns, &ats, &statuses],
        )
        .await?;
    Ok(n)
}

pub(super) async fn services(
    c: &Client,
    region: &str,
    conn: &str,
    services_json: &str,
) -> Result<bool, Error> {
    let n = c
        .execute_cached(
            sql::SESSION_SERVICES.postgres,
            &[&region, &conn, &services_json],
        )
        .await?;
    Ok(n == 1)
}

pub(super) async fn close(c: &Client, region: &str, conn: &str, now: i64) -> Result<bool, Error> {
    let n = c
        .execute_cached(sql::CLOSE_SESSION.postgres, &[&region, &conn, &now])
        .await?;
    Ok(n == 1)
}

pub(super) async fn close_replica(c: &Client, replica: &str, now: i64) -> Result<u64, Error> {
    let n = c
        .execute_cached(sql::CLOSE_REPLICA_SESSIONS.postgres, &[&replica, &now])
        .await?;
    Ok(n)
}

pub(super) async fn all(c: &Client) -> Result<Vec<SessionRecord>, Error> {
    let rows = c.query_cached(sql::SESSIONS.postgres, &[]).await?;
    rows.iter().map(row).collect()
}

/// The sessions of each region named, by zone (one statement for a batch of reads, see
/// `combine`).
pub(super) async fn of_regions(
    c: &Client,
    regions: &[String],
) -> Result<std::collections::HashMap<String, Vec<SessionRecord>>, Error> {
    let rows = c
        .query_cached(
            &format!("SELECT {COLUMNS} FROM sessions WHERE region = ANY($1) ORDER BY region, zone"),
            &[&regions],
        )
        .await?;
    let mut out: std::collections::HashMap<String, Vec<SessionRecord>> = Default::default();
    for r in &rows {
        let s = row(r)?;
        out.entry(s.region.clone()).or_default().push(s);
    }
    Ok(out)
}

/// The session of each (region, zone) pair that has one.
pub(super) async fn many(
    c: &Client,
    keys: &[(String, String)],
) -> Result<std::collections::HashMap<(String, String), SessionRecord>, Error> {
    let regions: Vec<&str> = keys.iter().map(|k| k.0.as_str()).collect();
    let zones: Vec<&str> = keys.iter().map(|k| k.1.as_str()).collect();
    let rows = c
        .query_cached(
            &format!(
                "SELECT {COLUMNS} FROM sessions
                 WHERE (region, zone) IN (SELECT * FROM unnest($1::text[], $2::text[]))"
            ),
            &[&regions, &zones],
        )
        .await?;
    let mut out = std::collections::HashMap::with_capacity(rows.len());
    for r in &rows {
        let s = row(r)?;
        out.insert((s.region.clone(), s.zone.clone()), s);
    }
    Ok(out)
}
