//! Tenants, tenant tokens, caps, projects and quotas in SQLite. The single connection serialises
//! every transaction, so the cap check and the quota write cannot interleave with another's
//! (PostgreSQL locks the tenant's row instead). The statements PostgreSQL shares are in
//! [`crate::store::sql`].

use harmony_agent_protocol::tenancy::ProjectQuota;
use rusqlite::{Connection, OptionalExtension, Row, params};
use std::collections::BTreeMap;

use super::{bytes32, conversion};
use crate::store::sql;
use crate::store::tenancy::{CapSet, decide_cap, decide_quota, quota_json, quota_of};
use crate::store::{
    PageSession, ProjectCreated, ProjectRecord, QuotaSet, StoreError, TenantRecord,
    TenantTokenRecord,
};

/// The tenancy tables (schema version 2), in SQLite's column types.
pub(super) const TABLES: &str = "
CREATE TABLE IF NOT EXISTS tenants (
    name TEXT PRIMARY KEY,
    created_at INTEGER NOT NULL
);
CREATE TABLE IF NOT EXISTS tenant_tokens (
    id TEXT PRIMARY KEY,
    tenant TEXT NOT NULL REFERENCES tenants(name),
    hash BLOB NOT NULL,
    created_at INTEGER NOT NULL,
    expires_at INTEGER,
    revoked_at INTEGER
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
    created_at INTEGER NOT NULL,
    PRIMARY KEY (tenant, project)
);
CREATE TABLE IF NOT EXISTS page_sessions (
    hash BLOB PRIMARY KEY,
    tenant TEXT,
    token_id TEXT,
    credential BLOB NOT NULL,
    created_at INTEGER NOT NULL,
    expires_at INTEGER NOT NULL
);
CREATE TABLE IF NOT EXISTS project_quotas (
    tenant TEXT NOT NULL,
    project TEXT NOT NULL,
    region TEXT NOT NULL,
    quota TEXT NOT NULL,
    PRIMARY KEY (tenant, project, region),
    FOREIGN KEY (tenant, project) REFERENCES projects(tenant, project)
);
";

fn quota(col: usize, json: &str) -> rusqlite::Result<ProjectQuota> {
    quota_of(json).map_err(|e| conversion(col, e))
}

fn caps(c: &Connection, tenant: &str) -> rusqlite::Result<BTreeMap<String, ProjectQuota>> {
    let mut stmt = c.prepare(sql::TENANT_CAPS.sqlite)?;
    let rows = stmt.query_map([tenant], |r| {
        Ok((r.get::<_, String>(0)?, quota(1, &r.get::<_, String>(1)?)?))
    })?;
    rows.collect()
}

fn tenant_row(c: &Connection, r: &Row<'_>) -> rusqlite::Result<TenantRecord> {
    let name: String = r.get(0)?;
    Ok(TenantRecord {
        caps: caps(c, &name)?,
        name,
        created_at: r.get(1)?,
    })
}

pub(super) fn create_tenant(c: &Connection, name: &str, now: i64) -> rusqlite::Result<bool> {
    let n = c.execute(sql::CREATE_TENANT.sqlite, params![name, now])?;
    Ok(n == 1)
}

pub(super) fn tenant(c: &Connection, name: &str) -> rusqlite::Result<Option<TenantRecord>> {
    c.query_row(sql::TENANT.sqlite, [name], |r| tenant_row(c, r))
        .optional()
}

pub(super) fn tenants(c: &Connection) -> rusqlite::Result<Vec<TenantRecord>> {
    let mut stmt = c.prepare(sql::TENANTS.sqlite)?;
    let rows = stmt.query_map([], |r| tenant_row(c, r))?;
    rows.collect()
}

pub(super) fn set_cap(
    c: &mut Connection,
    tenant: &str,
    region: &str,
    cap: &ProjectQuota,
) -> rusqlite::Result<CapSet> {
    let tx = c.transaction()?;
    if tx
        .query_row(sql::TENANT_EXISTS.sqlite, [tenant], |_| Ok(()))
        .optional()?
        .is_none()
    {
        return Ok(CapSet::NoTenant);
    }
    let grants = {
        let mut stmt = tx.prepare(sql::REGION_GRANTS.sqlite)?;
        let rows = stmt.query_map([tenant, region], |r| {
            Ok((r.get::<_, String>(0)?, quota(1, &r.get::<_, String>(1)?)?))
        })?;
        rows.collect::<rusqlite::Result<Vec<_>>>()?
    };
    let outcome = decide_cap(cap, &grants);
    if outcome == CapSet::Set {
        tx.execute(
            sql::SET_TENANT_CAP.sqlite,
            params![tenant, region, quota_json(cap)],
        )?;
    }
    tx.commit()?;
    Ok(outcome)
}

pub(super) fn add_token(c: &Connection, t: &TenantTokenRecord) -> rusqlite::Result<bool> {
    let n = c.execute(
        sql::ADD_TENANT_TOKEN.sqlite,
        params![
            t.id,
            t.tenant,
            &t.hash[..],
            t.created_at,
            t.expires_at,
            t.revoked_at
        ],
    )?;
    Ok(n == 1)
}

pub(super) fn token(c: &Connection, id: &str) -> rusqlite::Result<Option<TenantTokenRecord>> {
    c.query_row(sql::TENANT_TOKEN.sqlite, [id], |r| {
        Ok(TenantTokenRecord {
            id: r.get(0)?,
            tenant: r.get(1)?,
            hash: bytes32(r, 2, "a tenant token hash")?,
            created_at: r.get(3)?,
            expires_at: r.get(4)?,
            revoked_at: r.get(5)?,
        })
    })
    .optional()
}

pub(super) fn revoke_token(
    c: &Connection,
    tenant: &str,
    id: &str,
    now: i64,
) -> rusqlite::Result<bool> {
    let n = c.execute(sql::REVOKE_TENANT_TOKEN.sqlite, params![tenant, id, now])?;
    Ok(n == 1)
}

pub(super) fn create_project(
    c: &mut Connection,
    p: &ProjectRecord,
) -> rusqlite::Result<ProjectCreated> {
    // SQLite's own: every check first, then the insert (PostgreSQL inserts first).
    let tx = c.transaction()?;
    let known: bool = tx
        .query_row(sql::TENANT_EXISTS.sqlite, [&p.tenant], |_| Ok(true))
        .optional()?
        .unwrap_or(false);
    let outcome = if !known {
        ProjectCreated::NoTenant
    } else if tx
        .query_row(sql::PROJECT_EXISTS.sqlite, [&p.tenant, &p.project], |_| {
            Ok(())
        })
        .optional()?
        .is_some()
    {
        ProjectCreated::Exists
    } else if let Some(owner) = tx
        .query_row(sql::NAMESPACE_OWNER.sqlite, [&p.namespace], |r| {
            r.get::<_, String>(0)
        })
        .optional()?
    {
        ProjectCreated::NamespaceTaken(owner)
    } else {
        tx.execute(
            "INSERT INTO projects (tenant, project, namespace, created_at) VALUES (?1, ?2, ?3, ?4)",
            params![p.tenant, p.project, p.namespace, p.created_at],
        )?;
        ProjectCreated::Created
    };
    tx.commit()?;
    Ok(outcome)
}

fn quotas(
    c: &Connection,
    tenant: &str,
    project: &str,
) -> rusqlite::Result<BTreeMap<String, ProjectQuota>> {
    let mut stmt = c.prepare(sql::PROJECT_QUOTAS.sqlite)?;
    let rows = stmt.query_map([tenant, project], |r| {
        Ok((r.get::<_, String>(0)?, quota(1, &r.get::<_, String>(1)?)?))
    })?;
    rows.collect()
}

fn project_row(c: &Connection, r: &Row<'_>) -> rusqlite::Result<ProjectRecord> {
    let (tenant, project): (String, String) = (r.get(0)?, r.get(1)?);
    Ok(ProjectRecord {
        quotas: quotas(c, &tenant, &project)?,
        tenant,
        project,
        namespace: r.get(2)?,
        created_at: r.get(3)?,
    })
}

pub(super) fn project(
    c: &Connection,
    tenant: &str,
    project: &str,
) -> rusqlite::Result<Option<ProjectRecord>> {
    c.query_row(sql::PROJECT.sqlite, [tenant, project], |r| {
        project_row(c, r)
    })
    .optional()
}

pub(super) fn projects(
    c: &Connection,
    tenant: Option<&str>,
) -> rusqlite::Result<Vec<ProjectRecord>> {
    // SQLite's own: PostgreSQL types the parameter (`$1::TEXT IS NULL`).
    let mut stmt = c.prepare(
        "SELECT tenant, project, namespace, created_at FROM projects
         WHERE ?1 IS NULL OR tenant = ?1 ORDER BY tenant, project",
    )?;
    let rows = stmt.query_map([tenant], |r| project_row(c, r))?;
    rows.collect()
}

pub(super) fn set_quota(
    c: &mut Connection,
    tenant: &str,
    project: &str,
    region: &str,
    asked: &ProjectQuota,
) -> rusqlite::Result<QuotaSet> {
    let tx = c.transaction()?;
    if tx
        .query_row(sql::PROJECT_EXISTS.sqlite, [tenant, project], |_| Ok(()))
        .optional()?
        .is_none()
    {
        return Ok(QuotaSet::NoProject);
    }
    let cap = tx
        .query_row(sql::TENANT_CAP.sqlite, [tenant, region], |r| {
            quota(0, &r.get::<_, String>(0)?)
        })
        .optional()?;
    let others = {
        let mut stmt = tx.prepare(sql::OTHER_PROJECT_QUOTAS.sqlite)?;
        let rows = stmt.query_map([tenant, region, project], |r| {
            quota(0, &r.get::<_, String>(0)?)
        })?;
        rows.collect::<rusqlite::Result<Vec<_>>>()?
    };
    let outcome = decide_quota(cap, &others, asked);
    if outcome == QuotaSet::Set {
        tx.execute(
            sql::SET_PROJECT_QUOTA.sqlite,
            params![tenant, project, region, quota_json(asked)],
        )?;
    }
    tx.commit()?;
    Ok(outcome)
}

#[async_trait::async_trait]
impl crate::store::TenancyStore for super::SqliteStore {
    async fn create_tenant(&self, name: &str, now: i64) -> Result<bool, StoreError> {
        let name = name.to_owned();
        self.run("create a tenant", move |c| create_tenant(c, &name, now))
            .await
    }

    async fn tenant(&self, name: &str) -> Result<Option<TenantRecord>, StoreError> {
        let name = name.to_owned();
        self.run("read a tenant", move |c| tenant(c, &name)).await
    }

    async fn tenants(&self) -> Result<Vec<TenantRecord>, StoreError> {
        self.run("list tenants", |c| tenants(c)).await
    }

    async fn set_tenant_cap(
        &self,
        tenant: &str,
        region: &str,
        cap: &ProjectQuota,
    ) -> Result<CapSet, StoreError> {
        let (tenant, region, cap) = (tenant.to_owned(), region.to_owned(), cap.clone());
        self.run("set a tenant cap", move |c| {
            set_cap(c, &tenant, &region, &cap)
        })
        .await
    }

    async fn add_tenant_token(&self, t: &TenantTokenRecord) -> Result<bool, StoreError> {
        let t = t.clone();
        self.run("store a tenant token", move |c| add_token(c, &t))
            .await
    }

    async fn tenant_token(&self, id: &str) -> Result<Option<TenantTokenRecord>, StoreError> {
        let id = id.to_owned();
        self.run("read a tenant token", move |c| token(c, &id))
            .await
    }

    async fn revoke_tenant_token(
        &self,
        tenant: &str,
        id: &str,
        now: i64,
    ) -> Result<bool, StoreError> {
        let (tenant, id) = (tenant.to_owned(), id.to_owned());
        self.run("revoke a tenant token", move |c| {
            revoke_token(c, &tenant, &id, now)
        })
        .await
    }

    async fn create_project(&self, p: &ProjectRecord) -> Result<ProjectCreated, StoreError> {
        let p = p.clone();
        self.run("create a project", move |c| create_project(c, &p))
            .await
    }

    async fn project(&self, tenant: &str, name: &str) -> Result<Option<ProjectRecord>, StoreError> {
        let (tenant, name) = (tenant.to_owned(), name.to_owned());
        self.run("read a project", move |c| project(c, &tenant, &name))
            .await
    }

    async fn projects(&self, tenant: Option<&str>) -> Result<Vec<ProjectRecord>, StoreError> {
        let tenant = tenant.map(str::to_owned);
        self.run("list projects", move |c| projects(c, tenant.as_deref()))
            .await
    }

    async fn open_page_session(&self, s: &PageSession) -> Result<(), StoreError> {
        let s = s.clone();
        self.run("open a status-page session", move |c| {
            c.execute(
                sql::OPEN_PAGE_SESSION.sqlite,
                params![
                    &s.hash[..],
                    s.tenant,
                    s.token_id,
                    &s.credential[..],
                    s.created_at,
                    s.expires_at
                ],
            )
            .map(|_| ())
        })
        .await
    }

    async fn page_session(&self, hash: &[u8; 32]) -> Result<Option<PageSession>, StoreError> {
        let hash = *hash;
        self.run("read a status-page session", move |c| {
            c.query_row(sql::PAGE_SESSION.sqlite, params![&hash[..]], |r| {
                Ok(PageSession {
                    hash,
                    tenant: r.get(0)?,
                    token_id: r.get(1)?,
                    credential: bytes32(r, 2, "a credential hash")?,
                    created_at: r.get(3)?,
                    expires_at: r.get(4)?,
                })
            })
            .optional()
        })
        .await
    }

    async fn end_page_session(&self, hash: &[u8; 32], before: i64) -> Result<bool, StoreError> {
        let hash = *hash;
        self.run("end a status-page session", move |c| {
            c.execute(sql::PRUNE_PAGE_SESSIONS.sqlite, params![before])?;
            c.execute(sql::END_PAGE_SESSION.sqlite, params![&hash[..]])
                .map(|n| n == 1)
        })
        .await
    }

    async fn set_project_quota(
        &self,
        tenant: &str,
        project: &str,
        region: &str,
        quota: &ProjectQuota,
    ) -> Result<QuotaSet, StoreError> {
        let (tenant, project, region, quota) = (
            tenant.to_owned(),
            project.to_owned(),
            region.to_owned(),
            quota.clone(),
        );
        self.run("set a project quota", move |c| {
            set_quota(c, &tenant, &project, &region, &quota)
        })
        .await
    }
}
