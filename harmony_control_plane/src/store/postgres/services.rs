//! Service instances in PostgreSQL: every state change is one compare-and-set statement on
//! (state, attempts). The statements SQLite shares are in [`crate::store::sql`].

use super::cached::Cached;
use deadpool_postgres::Client;
use harmony_agent_protocol::InstanceState;
use serde_json::Value;
use std::collections::HashMap;
use tokio_postgres::Row;

use super::Error;
use crate::store::sql::{self, SERVICE_COLUMNS as COLUMNS};
use crate::store::{Outcome, ServiceRecord, now_ms};

fn row(r: &Row) -> Result<ServiceRecord, Error> {
    let state: String = r.try_get(3)?;
    let outputs: String = r.try_get(6)?;
    let spec: String = r.try_get(7)?;
    Ok(ServiceRecord {
        id: r.try_get(0)?,
        service_type: r.try_get(1)?,
        region: r.try_get(2)?,
        state: InstanceState::parse(&state)
            .ok_or_else(|| Error::Data(format!("unknown instance state {state:?}")))?,
        detail: r.try_get(4)?,
        provider: r.try_get(5)?,
        outputs: serde_json::from_str(&outputs)
            .map_err(|e| Error::Data(format!("stored outputs are not a JSON object: {e}")))?,
        spec: serde_json::from_str(&spec)
            .map_err(|e| Error::Data(format!("stored spec is not JSON: {e}")))?,
        attempts: u32::try_from(r.try_get::<_, i64>(8)?).unwrap_or(u32::MAX),
        created_at: r.try_get(9)?,
        updated_at: r.try_get(10)?,
        owner: crate::store::tenancy::owner_of(r.try_get(11)?, r.try_get(12)?),
        zone: r.try_get::<_, Option<String>>(13)?.unwrap_or_default(),
        parent: r.try_get(14)?,
    })
}

fn one_row(r: Option<Row>) -> Result<Option<ServiceRecord>, Error> {
    r.as_ref().map(row).transpose()
}

pub(super) async fn one(c: &Client, id: &str) -> Result<Option<ServiceRecord>, Error> {
    let r = c.query_opt_cached(sql::SERVICE.postgres, &[&id]).await?;
    one_row(r)
}

/// PostgreSQL's own `ON CONFLICT (id) DO NOTHING` (SQLite: `INSERT OR IGNORE`).
pub(super) async fn insert(c: &Client, rec: &ServiceRecord) -> Result<bool, Error> {
    let n = c
        .execute_cached(
            &format!(
                "INSERT INTO service_instances ({COLUMNS})
                 VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12, $13,
                     COALESCE(NULLIF($14, ''), (SELECT zone FROM regions WHERE name = $3), ''), $15)
                 ON CONFLICT (id) DO NOTHING"
            ),
            &[
                &rec.id,
                &rec.service_type,
                &rec.region,
                &rec.state.as_str(),
                &rec.detail,
                &rec.provider,
                &Value::Object(rec.outputs.clone()).to_string(),
                &rec.spec.to_string(),
                &i64::from(rec.attempts),
                &rec.created_at,
                &rec.updated_at,
                &rec.owner.as_ref().map(|o| &o.tenant),
                &rec.owner.as_ref().map(|o| &o.project),
                &rec.zone,
                &rec.parent,
            ],
        )
        .await?;
    Ok(n == 1)
}

pub(super) async fn all(c: &Client) -> Result<Vec<ServiceRecord>, Error> {
    let rows = c.query_cached(sql::SERVICES.postgres, &[]).await?;
    rows.iter().map(row).collect()
}

pub(super) async fn in_state(
    c: &Client,
    state: InstanceState,
) -> Result<Vec<ServiceRecord>, Error> {
    let rows = c
        .query_cached(sql::SERVICES_IN_STATE.postgres, &[&state.as_str()])
        .await?;
    rows.iter().map(row).collect()
}

pub(super) async fn live_by_region(c: &Client) -> Result<HashMap<String, usize>, Error> {
    let rows = c
        .query_cached(sql::LIVE_SERVICES_BY_REGION.postgres, &[])
        .await?;
    rows.iter()
        .map(|r| Ok((r.try_get(0)?, r.try_get::<_, i64>(1)?.max(0) as usize)))
        .collect()
}

pub(super) async fn claim_queued(
    c: &Client,
    id: &str,
    detail: &str,
) -> Result<Option<ServiceRecord>, Error> {
    let r = c
        .query_opt_cached(
            &format!("{} RETURNING {COLUMNS}", sql::CLAIM_QUEUED.postgres),
            &[&id, &detail, &now_ms()],
        )
        .await?;
    one_row(r)
}

pub(super) async fn cancel_queued(c: &Client, id: &str) -> Result<bool, Error> {
    let n = c
        .execute_cached(sql::CANCEL_QUEUED.postgres, &[&id])
        .await?;
    Ok(n == 1)
}

pub(super) async fn next_attempt(
    c: &Client,
    id: &str,
    from: (InstanceState, u32),
    to: InstanceState,
    detail: &str,
) -> Result<Option<ServiceRecord>, Error> {
    let r = c
        .query_opt_cached(
            &format!("{} RETURNING {COLUMNS}", sql::NEXT_ATTEMPT.postgres),
            &[
                &id,
                &from.0.as_str(),
                &i64::from(from.1),
                &to.as_str(),
                &detail,
                &now_ms(),
            ],
        )
        .await?;
    one_row(r)
}

pub(super) async fn settle(
    c: &Client,
    id: &str,
    from: (InstanceState, u32),
    outcome: &Outcome,
) -> Result<bool, Error> {
    let outputs = outcome
        .outputs
        .as_ref()
        .map(|o| Value::Object(o.clone()).to_string());
    let n = c
        .execute_cached(
            sql::SETTLE.postgres,
            &[
                &id,
                &from.0.as_str(),
                &i64::from(from.1),
                &outcome.state.as_str(),
                &outcome.detail,
                &outcome.provider,
                &outputs,
                &now_ms(),
            ],
        )
        .await?;
    Ok(n == 1)
}

pub(super) async fn remove_if(
    c: &Client,
    id: &str,
    from: (InstanceState, u32),
) -> Result<bool, Error> {
    let n = c
        .execute_cached(
            sql::REMOVE_SERVICE_IF.postgres,
            &[&id, &from.0.as_str(), &i64::from(from.1)],
        )
        .await?;
    Ok(n == 1)
}

pub(super) async fn remove(c: &Client, id: &str, region: &str) -> Result<bool, Error> {
    let n = c
        .execute_cached(sql::REMOVE_SERVICE.postgres, &[&id, &region])
        .await?;
    Ok(n == 1)
}
