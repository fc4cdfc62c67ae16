//! Tenants, tenant tokens, caps, projects and quotas in PostgreSQL. Setting a quota locks the
//! tenant's row first, so two replicas setting quotas of one tenant at once take turns and the
//! cap check always sees the other's write. The statements SQLite shares are in
//! [`crate::store::sql`].

use super::cached::Cached;
use deadpool_postgres::{Client, GenericClient};
use harmony_agent_protocol::tenancy::ProjectQuota;
use std::collections::BTreeMap;
use tokio_postgres::Row;

use super::{Error, PostgresStore};
use crate::store::sql;
use crate::store::tenancy::{CapSet, decide_cap, decide_quota, quota_json, quota_of};
use crate::store::{
    PageSession, ProjectCreated, ProjectRecord, QuotaSet, StoreError, TenancyStore, TenantRecord,
    TenantTokenRecord,
};

/// The tenancy tables and the tenant/project columns (schema version 2), in PostgreSQL's column
/// types.
pub(super) const TABLES: &str = "
CREATE TABLE IF NOT EXISTS tenants (
    name TEXT PRIMARY KEY,
    created_at BIGINT NOT NULL
);
CREATE TABLE IF NOT EXISTS tenant_tokens (
    id TEXT PRIMARY KEY,
    tenant TEXT NOT NULL REFERENCES tenants(name),
    hash BYTEA NOT NULL,
    created_at BIGINT NOT NULL,
    expires_at BIGINT,
    revoked_at BIGINT
);
CREATE TABLE IF NOT EXISTS page_sessions (
    hash BYTEA PRIMARY KEY,
    tenant TEXT,
    token_id TEXT,
    credential BYTEA NOT NULL,
    created_at BIGINT NOT NULL,
    expires_at BIGINT NOT NULL
);
CREATE TABLE IF NOT EXISTS tenant_caps (
    tenant TEXT NOT NULL REFERENCES tenants(name),
    region TEXT NOT NULL,
    quota TEXT NOT NULL,
    PRIMARY KEY (tenant, region)
);
CREATE TABLE IF NOT EXISTS projects (
    tenant TEXT NOT NULL REFERENCES tenants(name),
    project TEXT NOT NULL,
    namespace TEXT NOT NULL UNIQUE,
    created_at BIGINT NOT NULL,
    PRIMARY KEY (tenant, project)
);
CREATE TABLE IF NOT EXISTS project_quotas (
    tenant TEXT NOT NULL,
    project TEXT NOT NULL,
    region TEXT NOT NULL,
    quota TEXT NOT NULL,
    PRIMARY KEY (tenant, project, region),
    FOREIGN KEY (tenant, project) REFERENCES projects(tenant, project)
);
ALTER TABLE requests ADD COLUMN IF NOT EXISTS tenant TEXT;
ALTER TABLE requests ADD COLUMN IF NOT EXISTS project TEXT;
ALTER TABLE requests ADD COLUMN IF NOT EXISTS project_json TEXT;
ALTER TABLE service_instances ADD COLUMN IF NOT EXISTS tenant TEXT;
ALTER TABLE service_instances ADD COLUMN IF NOT EXISTS project TEXT;
";

fn quota(json: &str) -> Result<ProjectQuota, Error> {
    quota_of(json).map_err(Error::Data)
}

async fn quota_map(
    c: &impl GenericClient,
    sql: &str,
    args: &[&(dyn tokio_postgres::types::ToSql + Sync)],
) -> Result<BTreeMap<String, ProjectQuota>, Error> {
    let rows = c.query_cached(sql, args).await?;
    rows.iter()
        .map(|r| Ok((r.try_get(0)?, quota(r.try_get(1)?)?)))
        .collect()
}

async fn tenant_of(c: &Client, r: &Row) -> Result<TenantRecord, Error> {
    let name: String = r.try_get(0)?;
    Ok(TenantRecord {
        caps: quota_map(c, sql::TENANT_CAPS.postgres, &[&name]).await?,
        name,
        created_at: r.try_get(1)?,
    })
}

async fn project_of(c: &Client, r: &Row) -> Result<ProjectRecord, Error> {
    let (tenant, project): (String, String) = (r.try_get(0)?, r.try_get(1)?);
    Ok(ProjectRecord {
        quotas: quota_map(c, sql::PROJECT_QUOTAS.postgres, &[&tenant, &project]).await?,
        tenant,
        project,
        namespace: r.try_get(2)?,
        created_at: r.try_get(3)?,
    })
}

fn token_of(r: &Row) -> Result<TenantTokenRecord, Error> {
    let hash: Vec<u8> = r.try_get(2)?;
    Ok(TenantTokenRecord {
        id: r.try_get(0)?,
        tenant: r.try_get(1)?,
        hash: hash
            .try_into()
            .map_err(|_| Error::Data("a tenant token hash is not 32 bytes".into()))?,
        created_at: r.try_get(3)?,
        expires_at: r.try_get(4)?,
        revoked_at: r.try_get(5)?,
    })
}

/// Locks tenant `name`'s row for the transaction, so that every write of one tenant's caps,
/// projects and quotas takes its turn (and the cap check sees the other's write); `false` when
/// there is no such tenant. PostgreSQL's own (SQLite's single connection serialises instead).
async fn lock_tenant(tx: &deadpool_postgres::Transaction<'_>, name: &str) -> Result<bool, Error> {
    let locking = format!("{} FOR UPDATE", sql::TENANT_EXISTS.postgres);
    Ok(tx.query_opt_cached(&locking, &[&name]).await?.is_some())
}

async fn create_project(c: &mut Client, p: &ProjectRecord) -> Result<ProjectCreated, Error> {
    let tx = c.transaction().await?;
    if !lock_tenant(&tx, &p.tenant).await? {
        return Ok(ProjectCreated::NoTenant);
    }
    // PostgreSQL's own: the insert first, then why it inserted nothing (SQLite checks first).
    let n = tx
        .execute_cached(
            "INSERT INTO projects (tenant, project, namespace, created_at)
             VALUES ($1, $2, $3, $4) ON CONFLICT DO NOTHING",
            &[&p.tenant, &p.project, &p.namespace, &p.created_at],
        )
        .await?;
    let outcome = if n == 1 {
        ProjectCreated::Created
    } else if tx
        .query_opt_cached(sql::PROJECT_EXISTS.postgres, &[&p.tenant, &p.project])
        .await?
        .is_some()
    {
        ProjectCreated::Exists
    } else {
        let owner = tx
            .query_opt_cached(sql::NAMESPACE_OWNER.postgres, &[&p.namespace])
            .await?
            .map(|r| r.try_get::<_, String>(0))
            .transpose()?
            .unwrap_or_default();
        ProjectCreated::NamespaceTaken(owner)
    };
    tx.commit().await?;
    Ok(outcome)
}

async fn set_quota(
    c: &mut Client,
    tenant: &str,
    project: &str,
    region: &str,
    asked: &ProjectQuota,
) -> Result<QuotaSet, Error> {
    let tx = c.transaction().await?;
    if !lock_tenant(&tx, tenant).await?
        || tx
            .query_opt_cached(sql::PROJECT_EXISTS.postgres, &[&tenant, &project])
            .await?
            .is_none()
    {
        return Ok(QuotaSet::NoProject);
    }
    let cap = tx
        .query_opt_cached(sql::TENANT_CAP.postgres, &[&tenant, &region])
        .await?
        .map(|r| quota(r.try_get(0)?))
        .transpose()?;
    let others = tx
        .query_cached(
            sql::OTHER_PROJECT_QUOTAS.postgres,
            &[&tenant, &region, &project],
        )
        .await?
        .iter()
        .map(|r| quota(r.try_get(0)?))
        .collect::<Result<Vec<_>, _>>()?;
    let outcome = decide_quota(cap, &others, asked);
    if outcome == QuotaSet::Set {
        tx.execute_cached(
            sql::SET_PROJECT_QUOTA.postgres,
            &[&tenant, &project, &region, &quota_json(asked)],
        )
        .await?;
    }
    tx.commit().await?;
    Ok(outcome)
}

/// Sets a cap unless the grants already exceed it; the tenant row is locked as
/// [`set_quota`] locks it, so a cap and a quota set at once are decided one after the other.
async fn set_cap(
    c: &mut Client,
    tenant: &str,
    region: &str,
    cap: &ProjectQuota,
) -> Result<CapSet, Error> {
    let tx = c.transaction().await?;
    if !lock_tenant(&tx, tenant).await? {
        return Ok(CapSet::NoTenant);
    }
    let grants = tx
        .query_cached(sql::REGION_GRANTS.postgres, &[&tenant, &region])
        .await?
        .iter()
        .map(|r| Ok((r.try_get::<_, String>(0)?, quota(r.try_get(1)?)?)))
        .collect::<Result<Vec<_>, Error>>()?;
    let outcome = decide_cap(cap, &grants);
    if outcome == CapSet::Set {
        tx.execute_cached(
            sql::SET_TENANT_CAP.postgres,
            &[&tenant, &region, &quota_json(cap)],
        )
        .await?;
    }
    tx.commit().await?;
    Ok(outcome)
}

/// Runs `$body` (a future using the pooled client `$c`) as operation `$op`.
macro_rules! with_client {
    ($self:ident, $op:literal, $c:ident => $body:expr) => {{
        #[allow(unused_mut, reason = "only some bodies need the client mutable")]
        let mut $c = $self.client($op).await?;
        $body.await.map_err(|e: Error| super::pg_error($op, e))
    }};
}

#[async_trait::async_trait]
impl TenancyStore for PostgresStore {
    async fn create_tenant(&self, name: &str, now: i64) -> Result<bool, StoreError> {
        with_client!(self, "create a tenant", c => async {
            let n = c
                .execute_cached(sql::CREATE_TENANT.postgres, &[&name, &now])
                .await?;
            Ok(n == 1)
        })
    }

    async fn tenant(&self, name: &str) -> Result<Option<TenantRecord>, StoreError> {
        with_client!(self, "read a tenant", c => async {
            match c
                .query_opt_cached(sql::TENANT.postgres, &[&name])
                .await?
            {
                Some(r) => Ok(Some(tenant_of(&c, &r).await?)),
                None => Ok(None),
            }
        })
    }

    async fn tenants(&self) -> Result<Vec<TenantRecord>, StoreError> {
        with_client!(self, "list tenants", c => async {
            let rows = c
                .query_cached(sql::TENANTS.postgres, &[])
                .await?;
            let mut out = Vec::with_capacity(rows.len());
            for r in &rows {
                out.push(tenant_of(&c, r).await?);
            }
            Ok(out)
        })
    }

    async fn set_tenant_cap(
        &self,
        tenant: &str,
        region: &str,
        cap: &ProjectQuota,
    ) -> Result<CapSet, StoreError> {
        with_client!(self, "set a tenant cap", c => set_cap(&mut c, tenant, region, cap))
    }

    async fn add_tenant_token(&self, t: &TenantTokenRecord) -> Result<bool, StoreError> {
        with_client!(self, "store a tenant token", c => async {
            let n = c
                .execute_cached(
                    sql::ADD_TENANT_TOKEN.postgres,
                    &[&t.id, &t.tenant, &&t.hash[..], &t.created_at, &t.expires_at, &t.revoked_at],
                )
                .await?;
            Ok(n == 1)
        })
    }

    async fn tenant_token(&self, id: &str) -> Result<Option<TenantTokenRecord>, StoreError> {
        with_client!(self, "read a tenant token", c => async {
            c.query_opt_cached(sql::TENANT_TOKEN.postgres, &[&id])
            .await?
            .as_ref()
            .map(token_of)
            .transpose()
        })
    }

    async fn revoke_tenant_token(
        &self,
        tenant: &str,
        id: &str,
        now: i64,
    ) -> Result<bool, StoreError> {
        with_client!(self, "revoke a tenant token", c => async {
            let n = c
                .execute_cached(sql::REVOKE_TENANT_TOKEN.postgres, &[&tenant, &id, &now])
                .await?;
            Ok(n == 1)
        })
    }

    async fn create_project(&self, p: &ProjectRecord) -> Result<ProjectCreated, StoreError> {
        with_client!(self, "create a project", c => create_project(&mut c, p))
    }

    async fn project(
        &self,
        tenant: &str,
        project: &str,
    ) -> Result<Option<ProjectRecord>, StoreError> {
        with_client!(self, "read a project", c => async {
            match c
                .query_opt_cached(sql::PROJECT.postgres, &[&tenant, &project])
                .await?
            {
                Some(r) => Ok(Some(project_of(&c, &r).await?)),
                None => Ok(None),
            }
        })
    }

    async fn projects(&self, tenant: Option<&str>) -> Result<Vec<ProjectRecord>, StoreError> {
        with_client!(self, "list projects", c => async {
            // PostgreSQL's own: a parameter that may be NULL needs its type (`$1::TEXT`).
            let rows = c
                .query_cached(
                    "SELECT tenant, project, namespace, created_at FROM projects
                     WHERE $1::TEXT IS NULL OR tenant = $1 ORDER BY tenant, project",
                    &[&tenant],
                )
                .await?;
            let mut out = Vec::with_capacity(rows.len());
            for r in &rows {
                out.push(project_of(&c, r).await?);
            }
            Ok(out)
        })
    }

    async fn open_page_session(&self, s: &PageSession) -> Result<(), StoreError> {
        with_client!(self, "open a status-page session", c => async {
            c.execute_cached(
                sql::OPEN_PAGE_SESSION.postgres,
                &[&&s.hash[..], &s.tenant, &s.token_id, &&s.credential[..], &s.created_at, &s.expires_at],
            )
            .await?;
            Ok(())
        })
    }

    async fn page_session(&self, hash: &[u8; 32]) -> Result<Option<PageSession>, StoreError> {
        with_client!(self, "read a status-page session", c => async {
            let Some(r) = c
                .query_opt_cached(sql::PAGE_SESSION.postgres, &[&&hash[..]])
                .await?
            else {
                return Ok(None);
            };
            let credential: Vec<u8> = r.try_get(2)?;
            Ok(Some(PageSession {
                hash: *hash,
                tenant: r.try_get(0)?,
                token_id: r.try_get(1)?,
                credential: credential
                    .try_into()
                    .map_err(|_| Error::Data("a credential hash is not 32 bytes".into()))?,
                created_at: r.try_get(3)?,
                expires_at: r.try_get(4)?,
            }))
        })
    }

    async fn end_page_session(&self, hash: &[u8; 32], before: i64) -> Result<bool, StoreError> {
        with_client!(self, "end a status-page session", c => async {
            c.execute_cached(sql::PRUNE_PAGE_SESSIONS.postgres, &[&before])
                .await?;
            let n = c
                .execute_cached(sql::END_PAGE_SESSION.postgres, &[&&hash[..]])
                .await?;
            Ok(n == 1)
        })
    }

    async fn set_project_quota(
        &self,
        tenant: &str,
        project: &str,
        region: &str,
        quota: &ProjectQuota,
    ) -> Result<QuotaSet, StoreError> {
        with_client!(self, "set a project quota", c =>
            set_quota(&mut c, tenant, project, region, quota))
    }
}
