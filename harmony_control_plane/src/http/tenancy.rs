//! `/v1/admin/tenants...` (admin token only) and `/v1/projects` (a tenant sees its own).

use axum::Json;
use axum::extract::{Path, State};
use axum::http::StatusCode;
use harmony_api::{
    CreateProject, CreateTenant, CreateTenantToken, Project, ProjectList, ProjectQuota, Tenant,
    TenantCaps, TenantList, TenantToken, TokenRevoked,
};

use super::{AppState, Body, Caller, Failure};
use crate::services::tenancy;
use crate::store::{ProjectRecord, TenantRecord};

fn tenant_view(r: TenantRecord) -> Tenant {
    Tenant {
        tenant: r.name,
        created_at: r.created_at,
        caps: r.caps,
    }
}

/// The API view of a stored project.
pub fn project_view(r: ProjectRecord) -> Project {
    Project {
        tenant: r.tenant,
        project: r.project,
        namespace: r.namespace,
        quotas: r.quotas,
        created_at: r.created_at,
    }
}

/// `POST /v1/admin/tenants`: 201, 409 when it exists.
pub async fn create_tenant(
    State(s): State<AppState>,
    Body(body): Body<CreateTenant>,
) -> Result<(StatusCode, Json<Tenant>), Failure> {
    let r = tenancy::create_tenant(&s.cp, &body.tenant).await?;
    Ok((StatusCode::CREATED, Json(tenant_view(r))))
}

/// `GET /v1/admin/tenants`.
pub async fn list_tenants(State(s): State<AppState>) -> Result<Json<TenantList>, Failure> {
    let tenants = tenancy::tenants(&s.cp).await?;
    Ok(Json(TenantList {
        tenants: tenants.into_iter().map(tenant_view).collect(),
    }))
}

/// `POST /v1/admin/tenants/{tenant}/tokens`: 201 with the token, shown once.
pub async fn create_token(
    State(s): State<AppState>,
    Path(tenant): Path<String>,
    Body(body): Body<CreateTenantToken>,
) -> Result<(StatusCode, Json<TenantToken>), Failure> {
    let ttl_s = super::body::seconds(
        "ttl_s",
        body.ttl_s,
        0.001,
        super::body::MAX_TTL_S,
        "omit it for a token that never expires, or give at most ten years",
    )
    .map_err(super::body::bad_request)?;
    let (record, token) = tenancy::mint_token(&s.cp, &tenant, ttl_s).await?;
    Ok((
        StatusCode::CREATED,
        Json(TenantToken {
            tenant: record.tenant,
            id: record.id,
            token,
            expires_at: record.expires_at,
        }),
    ))
}

/// `DELETE /v1/admin/tenants/{tenant}/tokens/{id}`.
pub async fn revoke_token(
    State(s): State<AppState>,
    Path((tenant, id)): Path<(String, String)>,
) -> Result<Json<TokenRevoked>, Failure> {
    tenancy::revoke_token(&s.cp, &tenant, &id).await?;
    Ok(Json(TokenRevoked { id, revoked: true }))
}

/// `PUT /v1/admin/tenants/{tenant}/caps/{region}`: the tenant's caps after the change.
pub async fn set_cap(
    State(s): State<AppState>,
    Path((tenant, region)): Path<(String, String)>,
    Body(cap): Body<ProjectQuota>,
) -> Result<Json<TenantCaps>, Failure> {
    Ok(Json(
        tenancy::set_cap(&s.cp, &tenant, &region, &cap).await?.caps,
    ))
}

/// `POST /v1/admin/tenants/{tenant}/projects`: 201, 409 when the name or namespace is taken.
pub async fn create_project(
    State(s): State<AppState>,
    Path(tenant): Path<String>,
    Body(body): Body<CreateProject>,
) -> Result<(StatusCode, Json<Project>), Failure> {
    let r =
        tenancy::create_project(&s.cp, &tenant, &body.project, body.namespace.as_deref()).await?;
    Ok((StatusCode::CREATED, Json(project_view(r))))
}

/// `PUT /v1/admin/tenants/{tenant}/projects/{project}/quotas/{region}`: 422 over the cap.
pub async fn set_quota(
    State(s): State<AppState>,
    Path((tenant, project, region)): Path<(String, String, String)>,
    Body(quota): Body<ProjectQuota>,
) -> Result<Json<Project>, Failure> {
    let r = tenancy::set_quota(&s.cp, &tenant, &project, &region, &quota).await?;
    Ok(Json(project_view(r)))
}

/// `GET /v1/projects`: the caller's tenant's projects (the admin: every tenant's).
pub async fn list_projects(
    State(s): State<AppState>,
    caller: Caller,
) -> Result<Json<ProjectList>, Failure> {
    let projects = tenancy::projects(&s.cp, caller.tenant()).await?;
    Ok(Json(ProjectList {
        projects: projects.into_iter().map(project_view).collect(),
    }))
}
