//! `/v1/services...`: service instances.

use axum::Json;
use axum::extract::{Path, State};
use axum::http::StatusCode;
use harmony_api::{CreateService, ServiceInstance, ServiceList};
use serde_json::{Map, Value};

use super::{AppState, Body, Failure};
use crate::services::instances::{self, Deleted, NewInstance};
use crate::store::ServiceRecord;

/// The API view of a stored instance.
pub fn instance(r: ServiceRecord) -> ServiceInstance {
    ServiceInstance {
        id: r.id,
        service_type: r.service_type,
        region: r.region,
        zone: (!r.zone.is_empty()).then_some(r.zone),
        parent: r.parent,
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

/// `POST /v1/services`: 201 once its provider answered, 202 while pending or queued.
pub async fn create(
    State(s): State<AppState>,
    Body(body): Body<CreateService>,
) -> Result<(StatusCode, Json<ServiceInstance>), Failure> {
    let created = instances::create(
        &s.cp,
        NewInstance {
            service_type: body.service_type,
            spec: body.spec,
            region: body.region,
            id: body.id,
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
        Some(r) => (status, Json(instance(r))),
        // Its provider reported it deleted before it could be read back.
        None => (
            StatusCode::ACCEPTED,
            Json(ended(&created.id, "deleted", None)),
        ),
    })
}

/// `GET /v1/services`.
pub async fn list(State(s): State<AppState>) -> Result<Json<ServiceList>, Failure> {
    let services = instances::list(&s.cp).await?;
    Ok(Json(ServiceList {
        services: services.into_iter().map(instance).collect(),
    }))
}

/// `GET /v1/services/{id}`.
pub async fn one(
    State(s): State<AppState>,
    Path(id): Path<String>,
) -> Result<Json<ServiceInstance>, Failure> {
    Ok(Json(instance(instances::one(&s.cp, &id).await?)))
}

/// `DELETE /v1/services/{id}`: 200 `cancelled` or `deleted`, 202 while the provider deletes.
pub async fn delete(
    State(s): State<AppState>,
    Path(id): Path<String>,
) -> Result<(StatusCode, Json<ServiceInstance>), Failure> {
    Ok(match instances::delete(&s.cp, &id).await? {
        Deleted::Cancelled => (StatusCode::OK, Json(ended(&id, "cancelled", None))),
        Deleted::Gone(detail) => (StatusCode::OK, Json(ended(&id, "deleted", detail))),
        Deleted::Deleting(r) => (StatusCode::ACCEPTED, Json(instance(*r))),
    })
}
