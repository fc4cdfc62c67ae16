//! Tenants, tenant tokens, caps, projects and quotas in SQLite. The single connection serialises
//! every transaction, so the cap check and the quota write cannot interleave with another's.

use harmony_agent_protocol::tenancy::ProjectQuota;
use rusqlite::{Connection, OptionalExtension, Row, params};
use std::collections::BTreeMap;

use super::conversion;
use crate::store::tenancy::{CapSet, decide_cap, decide_quota, quota_json, quota_of};
use crate::store::{
    PageSession, ProjectCreated, ProjectRecord, QuotaSet, StoreError, TenantRecord,
    TenantTokenRecord,
};

/// The tenancy tables (schema version 2).
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
    let mut stmt =
        c.prepare("SELECT region, quota FROM tenant_caps WHERE tenant = ?1 ORDER BY region")?;
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
    let n = c.execute(
        "INSERT INTO tenants (name, created_at) VALUES (?1, ?2) ON CONFLICT(name) DO NOTHING",
        params![name, now],
    )?;
    Ok(n == 1)
}

pub(super) fn tenant(c: &Connection, name: &str) -> rusqlite::Result<Option<TenantRecord>> {
    c.query_row(
        "SELECT name, created_at FROM tenants WHERE name = ?1",
        [name],
        |r| tenant_row(c, r),
    )
    .optional()
}

pub(super) fn tenants(c: &Connection) -> rusqlite::Result<Vec<TenantRecord>> {
    let mut stmt = c.prepare("SELECT name, created_at FROM tenants ORDER BY name")?;
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
        .query_row(
            "SELECT 1 FROM tenants WHERE name = ?1",
            [tenant],
            |_| Ok(()),
        )
        .optional()?
        .is_none()
    {
        return Ok(CapSet::NoTenant);
    }
    let grants = {
        let mut stmt = tx.prepare(
            "SELECT project, quota FROM project_quotas WHERE tenant = ?1 AND region = ?2 ORDER BY project",
        )?;
        let rows = stmt.query_map([tenant, region], |r| {
            Ok((r.get::<_, String>(0)?, quota(1, &r.get::<_, String>(1)?)?))
        })?;
        rows.collect::<rusqlite::Result<Vec<_>>>()?
    };
    let outcome = decide_cap(cap, &grants);
    if outcome == CapSet::Set {
        tx.execute(
            "INSERT INTO tenant_caps (tenant, region, quota) VALUES (?1, ?2, ?3)
             ON CONFLICT(tenant, region) DO UPDATE SET quota = excluded.quota",
            params![tenant, region, quota_json(cap)],
        )?;
    }
    tx.commit()?;
    Ok(outcome)
}

pub(super) fn add_token(c: &Connection, t: &TenantTokenRecord) -> rusqlite::Result<bool> {
    let n = c.execute(
        "INSERT INTO tenant_tokens (id, tenant, hash, created_at, expires_at, revoked_at)
         SELECT ?1, name, ?3, ?4, ?5, ?6 FROM tenants WHERE name = ?2
         ON CONFLICT(id) DO NOTHING",
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
    c.query_row(
        "SELECT id, tenant, hash, created_at, expires_at, revoked_at FROM tenant_tokens
         WHERE id = ?1",
        [id],
        |r| {
            let hash: Vec<u8> = r.get(2)?;
            Ok(TenantTokenRecord {
                id: r.get(0)?,
                tenant: r.get(1)?,
                hash: hash
                    .try_into()
                    .map_err(|_| conversion(2, "a tenant token hash is not 32 bytes".into()))?,
                created_at: r.get(3)?,
                expires_at: r.get(4)?,
                revoked_at: r.get(5)?,
            })
        },
    )
    .optional()
}

pub(super) fn revoke_token(
    c: &Connection,
    tenant: &str,
    id: &str,
    now: i64,
) -> rusqlite::Result<bool> {
    let n = c.execute(
        "UPDATE tenant_tokens SET revoked_at = ?3
         WHERE tenant = ?1 AND id = ?2 AND revoked_at IS NULL",
        params![tenant, id, now],
    )?;
    Ok(n == 1)
}

pub(super) fn create_project(
    c: &mut Connection,
    p: &ProjectRecord,
) -> rusqlite::Result<ProjectCreated> {
    let tx = c.transaction()?;
    let known: bool = tx
        .query_row("SELECT 1 FROM tenants WHERE name = ?1", [&p.tenant], |_| {
            Ok(true)
        })
        .optional()?
        .unwrap_or(false);
    let outcome = if !known {
        ProjectCreated::NoTenant
    } else if tx
        .query_row(
            "SELECT 1 FROM projects WHERE tenant = ?1 AND project = ?2",
            [&p.tenant, &p.project],
            |_| Ok(()),
        )
        .optional()?
        .is_some()
    {
        ProjectCreated::Exists
    } else if let Some(owner) = tx
        .query_row(
            "SELECT tenant || '/' || project FROM projects WHERE namespace = ?1",
            [&p.namespace],
            |r| r.get::<_, String>(0),
        )
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
    let mut stmt = c.prepare(
        "SELECT region, quota FROM project_quotas WHERE tenant = ?1 AND project = ?2
         ORDER BY region",
    )?;
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
    c.query_row(
        "SELECT tenant, project, namespace, created_at FROM projects
         WHERE tenant = ?1 AND project = ?2",
        [tenant, project],
        |r| project_row(c, r),
    )
    .optional()
}

pub(super) fn projects(
    c: &Connection,
    tenant: Option<&str>,
) -> rusqlite::Result<Vec<ProjectRecord>> {
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
        .query_row(
            "SELECT 1 FROM projects WHERE tenant = ?1 AND project = ?2",
            [tenant, project],
            |_| Ok(()),
        )
        .optional()?
        .is_none()
    {
        return Ok(QuotaSet::NoProject);
    }
    let cap = tx
        .query_row(
            "SELECT quota FROM tenant_caps WHERE tenant = ?1 AND region = ?2",
            [tenant, region],
            |r| quota(0, &r.get::<_, String>(0)?),
        )
        .optional()?;
    let others = {
        let mut stmt = tx.prepare(
            "SELECT quota FROM project_quotas WHERE tenant = ?1 AND region = ?2 AND project <> ?3",
        )?;
        let rows = stmt.query_map([tenant, region, project], |r| {
            quota(0, &r.get::<_, String>(0)?)
        })?;
        rows.collect::<rusqlite::Result<Vec<_>>>()?
    };
    let outcome = decide_quota(cap, &others, asked);
    if outcome == QuotaSet::Set {
        tx.execute(
            "INSERT INTO project_quotas (tenant, project, region, quota) VALUES (?1, ?2, ?3, ?4)
             ON CONFLICT(tenant, project, region) DO UPDATE SET quota = excluded.quota",
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
                "INSERT INTO page_sessions (hash, tenant, token_id, credential, created_at, expires_at)
                 VALUES (?1, ?2, ?3, ?4, ?5, ?6)",
                params![&s.hash[..], s.tenant, s.token_id, &s.credential[..], s.created_at, s.expires_at],
            )
            .map(|_| ())
        })
        .await
    }

    async fn page_session(&self, hash: &[u8; 32]) -> Result<Option<PageSession>, StoreError> {
        let hash = *hash;
        self.run("read a status-page session", move |c| {
            c.query_row(
                "SELECT tenant, token_id, credential, created_at, expires_at FROM page_sessions
                 WHERE hash = ?1",
                params![&hash[..]],
                |r| {
                    let credential: Vec<u8> = r.get(2)?;
                    Ok(PageSession {
                        hash,
                        tenant: r.get(0)?,
                        token_id: r.get(1)?,
                        credential: credential.try_into().map_err(|_| {
                            conversion(2, "a credential hash is not 32 bytes".into())
                        })?,
                        created_at: r.get(3)?,
                        expires_at: r.get(4)?,
                    })
                },
            )
            .optional()
        })
        .await
    }

    async fn end_page_session(&self, hash: &[u8; 32], before: i64) -> Result<bool, StoreError> {
        let hash = *hash;
        self.run("end a status-page session", move |c| {
            c.execute(
                "DELETE FROM page_sessions WHERE expires_at < ?1",
                params![before],
            )?;
            c.execute(
                "DELETE FROM page_sessions WHERE hash = ?1",
                params![&hash[..]],
            )
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
