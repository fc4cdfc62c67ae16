//! Tenants, tenant tokens, caps, projects, quotas and status-page sessions.
//!
//! Left in the adapters, because the dialects do them differently: the tables' column types,
//! PostgreSQL's lock on the tenant's row (it adds `FOR UPDATE` to [`TENANT_EXISTS`]) where
//! SQLite's single connection already serialises, creating a project (PostgreSQL inserts first, SQLite checks first), and listing
//! projects (PostgreSQL needs the type of a parameter that may be `NULL`: `$1::TEXT`).

statements! {
    /// Creates tenant `$1` at `$2`; nothing when it exists.
    CREATE_TENANT = "INSERT INTO tenants (name, created_at) VALUES ($1, $2)
                     ON CONFLICT (name) DO NOTHING";
    /// A row when tenant `$1` exists.
    TENANT_EXISTS = "SELECT 1 FROM tenants WHERE name = $1";
    /// Tenant `$1` (name, created at).
    TENANT = "SELECT name, created_at FROM tenants WHERE name = $1";
    /// Every tenant (name, created at), by name.
    TENANTS = "SELECT name, created_at FROM tenants ORDER BY name";
    /// Tenant `$1`'s caps (region, quota JSON), by region.
    TENANT_CAPS = "SELECT region, quota FROM tenant_caps WHERE tenant = $1 ORDER BY region";
    /// Tenant `$1`'s cap in region `$2` (quota JSON).
    TENANT_CAP = "SELECT quota FROM tenant_caps WHERE tenant = $1 AND region = $2";
    /// Sets tenant `$1`'s cap in region `$2` to `$3` (quota JSON).
    SET_TENANT_CAP = "INSERT INTO tenant_caps (tenant, region, quota) VALUES ($1, $2, $3)
             ON CONFLICT (tenant, region) DO UPDATE SET quota = EXCLUDED.quota";
    /// What tenant `$1`'s projects are granted in region `$2` (project, quota JSON), by project.
    REGION_GRANTS = "SELECT project, quota FROM project_quotas WHERE tenant = $1 AND region = $2 ORDER BY project";
    /// Stores token `$1` of tenant `$2` (hash `$3`, created at `$4`, expiring at `$5`, revoked
    /// at `$6`) if the tenant exists; nothing when the id is taken.
    ADD_TENANT_TOKEN = "INSERT INTO tenant_tokens (id, tenant, hash, created_at, expires_at, revoked_at)
                     SELECT $1, name, $3, $4, $5, $6 FROM tenants WHERE name = $2
                     ON CONFLICT (id) DO NOTHING";
    /// Tenant token `$1` (the columns of a `TenantTokenRecord`).
    TENANT_TOKEN = "SELECT id, tenant, hash, created_at, expires_at, revoked_at FROM tenant_tokens
                 WHERE id = $1";
    /// Revokes token `$2` of tenant `$1` at `$3`, unless it already is.
    REVOKE_TENANT_TOKEN = "UPDATE tenant_tokens SET revoked_at = $3
                     WHERE tenant = $1 AND id = $2 AND revoked_at IS NULL";
    /// A row when tenant `$1` has project `$2`.
    PROJECT_EXISTS = "SELECT 1 FROM projects WHERE tenant = $1 AND project = $2";
    /// Who holds namespace `$1`, as `tenant/project`.
    NAMESPACE_OWNER = "SELECT tenant || '/' || project FROM projects WHERE namespace = $1";
    /// Project `$2` of tenant `$1` (tenant, project, namespace, created at).
    PROJECT = "SELECT tenant, project, namespace, created_at FROM projects
                     WHERE tenant = $1 AND project = $2";
    /// Project `$2` of tenant `$1`'s quotas (region, quota JSON), by region.
    PROJECT_QUOTAS = "SELECT region, quota FROM project_quotas WHERE tenant = $1 AND project = $2
             ORDER BY region";
    /// The quotas (JSON) tenant `$1`'s projects other than `$3` hold in region `$2`.
    OTHER_PROJECT_QUOTAS = "SELECT quota FROM project_quotas WHERE tenant = $1 AND region = $2 AND project <> $3";
    /// Sets project `$2` of tenant `$1`'s quota in region `$3` to `$4` (quota JSON).
    SET_PROJECT_QUOTA = "INSERT INTO project_quotas (tenant, project, region, quota) VALUES ($1, $2, $3, $4)
             ON CONFLICT (tenant, project, region) DO UPDATE SET quota = EXCLUDED.quota";
    /// Stores a status-page session: its hash `$1`, tenant `$2`, token id `$3`, credential hash
    /// `$4`, created at `$5`, expiring at `$6`.
    OPEN_PAGE_SESSION = "INSERT INTO page_sessions (hash, tenant, token_id, credential, created_at, expires_at)
                 VALUES ($1, $2, $3, $4, $5, $6)";
    /// Status-page session `$1` (tenant, token id, credential, created at, expires at).
    PAGE_SESSION = "SELECT tenant, token_id, credential, created_at, expires_at FROM page_sessions
                     WHERE hash = $1";
    /// Deletes the status-page sessions that expired before `$1`.
    PRUNE_PAGE_SESSIONS = "DELETE FROM page_sessions WHERE expires_at < $1";
    /// Deletes status-page session `$1`.
    END_PAGE_SESSION = "DELETE FROM page_sessions WHERE hash = $1";
}
