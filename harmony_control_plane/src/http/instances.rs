//! `/v1/services...`: service instances.

use axum::Json;
use axum::extract::{Path, State};
use axum::http::StatusCode;
use harmony_api::{CreateService, ServiceInstance, ServiceList};
use serde_json::{Map, Value};

use super::{AppState, Body, Caller, Failure};
use crate::services::instance_ids;
use crate::services::instances::{self, Deleted, InstanceError, NewInstance};
use crate::services::tenancy;
use crate::store::{Owner, ServiceRecord};

/// The API view of a stored instance for `viewer`: a tenant sees the ids it gave (its own and
/// its parent's); the admin sees stored ids with the tenant and project.
pub fn instance(r: ServiceRecord, viewer: Option<&str>) -> ServiceInstance {
    let (id, parent) = match viewer {
        Some(t) => (
            instance_ids::shown_id(t, &r.id).to_string(),
            r.parent
                .as_deref()
                .map(|p| instance_ids::shown_id(t, p).to_string()),
        ),
        None => (r.id.clone(), r.parent.clone()),
    };
    let (tenant, project) = match (viewer, r.owner) {
        (None, Some(o)) => (Some(o.tenant), Some(o.project)),
        _ => (None, None),
    };
    ServiceInstance {
        id,
        tenant,
        project,
        service_type: r.service_type,
        region: r.region,
        zone: (!r.zone.is_empty()).then_some(r.zone),
        parent,
        state: r.state.as_str().to_string(),
        detail: r.detail,
        provider: r.provider,
        outputs: r.outputs,
        spec: r.spec,
        created_at: r.created_at,
        updated_at: r.updated_at,
    }
}

/// An instance that no longer exists, in state `state` (`cancelled`, `deleted`).
fn ended(id: &str, state: &str, detail: Option<String>) -> ServiceInstance {
    ServiceInstance {
        id: id.to_string(),
        tenant: None,
        project: None,
        service_type: String::new(),
        region: String::new(),
        zone: None,
        parent: None,
        state: state.into(),
        detail: detail.unwrap_or_default(),
        provider: None,
        outputs: Map::new(),
        spec: Value::Null,
        created_at: 0,
        updated_at: 0,
    }
}

/// The owner a create names: a tenant token must name one of its projects; the admin may name
/// a tenant and project, or neither.
async fn owner(
    s: &AppState,
    caller: &Caller,
    body: &CreateService,
) -> Result<Option<Owner>, Failure> {
    let tenant = match (caller.tenant(), body.tenant.as_deref()) {
        (Some(mine), Some(named)) if mine != named => {
            return Err(Failure::new(
                StatusCode::FORBIDDEN,
                format!(
                    "tenant: your token is for tenant \"{mine}\", not \"{named}\"; omit tenant"
                ),
            )
            .code(harmony_agent_protocol::code::FORBIDDEN));
        }
        (Some(mine), _) => mine,
        (None, Some(named)) => named,
        (None, None) if body.project.is_none() => return Ok(None),
        (None, None) => {
            return Err(InstanceError::Invalid {
                field: "tenant",
                reason: "the admin token names the project's tenant too; add tenant".into(),
            }
            .into());
        }
    };
    let Some(project) = body.project.as_deref() else {
        return Err(InstanceError::Invalid {
            field: "project",
            reason: format!(
                "a service instance of tenant \"{tenant}\" belongs to one of its projects; add project (GET /v1/projects lists them)"
            ),
        }
        .into());
    };
    tenancy::require_project(&s.cp, tenant, project).await?;
    Ok(Some(Owner {
        tenant: tenant.to_string(),
        project: project.to_string(),
    }))
}

/// `POST /v1/services`: 201 once its provider answered, 202 while pending or queued.
pub async fn create(
    State(s): State<AppState>,
    caller: Caller,
    Body(body): Body<CreateService>,
) -> Result<(StatusCode, Json<ServiceInstance>), Failure> {
    let owner = owner(&s, &caller, &body).await?;
    let created = instances::create(
        &s.cp,
        NewInstance {
            service_type: body.service_type,
            spec: body.spec,
            region: body.region,
            id: body.id,
            owner,
            parent: body.parent,
        },
    )
    .await?;
    let status = if created.settled {
        StatusCode::CREATED
    } else {
        StatusCode::ACCEPTED
    };
    Ok(match created.record {
        Some(r) => (status, Json(instance(r, caller.tenant()))),
        // Its provider reported it deleted before it could be read back.
        None => (
            StatusCode::ACCEPTED,
            Json(ended(
                caller.tenant().map_or(created.id.as_str(), |t| {
                    instance_ids::shown_id(t, &created.id)
                }),
                "deleted",
                None,
            )),
        ),
    })
}

/// `GET /v1/services`: a tenant's own only.
pub async fn list(State(s): State<AppState>, caller: Caller) -> Result<Json<ServiceList>, Failure> {
    let services = instances::list(&s.cp, caller.tenant()).await?;
    Ok(Json(ServiceList {
        services: services
            .into_iter()
            .map(|r| instance(r, caller.tenant()))
            .collect(),
    }))
}

/// `GET /v1/services/{id}`: another tenant's is 404.
pub async fn one(
    State(s): State<AppState>,
    Path(id): Path<String>,
    caller: Caller,
) -> Result<Json<ServiceInstance>, Failure> {
    Ok(Json(instance(
        instances::one(&s.cp, &id, caller.tenant()).await?,
        caller.tenant(),
    )))
}

/// `DELETE /v1/services/{id}`: 200 `cancelled` or `deleted`, 202 while the provider deletes;
/// another tenant's is 404.
pub async fn delete(
    State(s): State<AppState>,
    Path(id): Path<String>,
    caller: Caller,
) -> Result<(StatusCode, Json<ServiceInstance>), Failure> {
    // A tenant deletes by the id it gave; the admin by the stored id.
    let stored = match caller.tenant() {
        Some(_) => instances::one(&s.cp, &id, caller.tenant()).await?.id,
        None => id.clone(),
    };
    Ok(match instances::delete(&s.cp, &stored).await? {
        Deleted::Cancelled => (StatusCode::OK, Json(ended(&id, "cancelled", None))),
        Deleted::Gone(detail) => (StatusCode::OK, Json(ended(&id, "deleted", detail))),
        Deleted::Deleting(r) => (StatusCode::ACCEPTED, Json(instance(*r, caller.tenant()))),
    })
}
