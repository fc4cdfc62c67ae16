//! How every service error becomes an HTTP status and an [`ApiError`] body.

use axum::Json;
use axum::http::header::RETRY_AFTER;
use axum::http::{HeaderValue, StatusCode};
use axum::response::{IntoResponse, Response};
use harmony_agent_protocol::code;
use harmony_api::ApiError;

use crate::services::instances::InstanceError;
use crate::services::regions::RegionError;
use crate::services::requests::RequestError;
use crate::services::scope::ScopeError;
use crate::services::tenancy::TenancyError;
use crate::store::StoreError;

/// An error answer: a status and its body.
#[derive(Debug, Clone, PartialEq)]
pub struct Failure(pub StatusCode, pub ApiError);

impl Failure {
    /// A failure with a message only.
    pub fn new(status: StatusCode, message: impl Into<String>) -> Self {
        Self(status, ApiError::new(message))
    }

    /// The same failure with a machine-readable code.
    pub fn code(mut self, c: &str) -> Self {
        self.1 = self.1.with_code(c);
        self
    }
}

/// Seconds an overloaded control plane asks callers to wait before retrying (`Retry-After`).
pub const RETRY_AFTER_S: u64 = 1;

impl IntoResponse for Failure {
    fn into_response(self) -> Response {
        let overloaded = self.0 == StatusCode::SERVICE_UNAVAILABLE;
        let mut r = (self.0, Json(self.1)).into_response();
        if overloaded {
            r.headers_mut()
                .insert(RETRY_AFTER, HeaderValue::from(RETRY_AFTER_S));
        }
        r
    }
}

fn internal(e: impl std::fmt::Display) -> Failure {
    log::error!("{e}");
    Failure::new(StatusCode::INTERNAL_SERVER_ERROR, e.to_string())
}

/// A store failure: 503 with `Retry-After` when the database was only busy (no pooled
/// connection free in time) or unreachable or restarting (retrying later succeeds), else 500.
fn store(e: &StoreError) -> Failure {
    if e.overloaded {
        log::warn!("{e}");
        Failure::new(StatusCode::SERVICE_UNAVAILABLE, e.to_string()).code(code::OVERLOADED)
    } else if e.unavailable {
        log::warn!("{e}");
        Failure::new(StatusCode::SERVICE_UNAVAILABLE, e.to_string()).code(code::STORE_UNAVAILABLE)
    } else {
        internal(e)
    }
}

impl From<StoreError> for Failure {
    fn from(e: StoreError) -> Self {
        store(&e)
    }
}

impl From<RegionError> for Failure {
    fn from(e: RegionError) -> Self {
        let status = match &e {
            RegionError::Invalid { .. } => StatusCode::BAD_REQUEST,
            RegionError::Exists(_)
            | RegionError::AlreadyBootstrapped(..)
            | RegionError::ZoneExists { .. } => StatusCode::CONFLICT,
            RegionError::Unknown(_) | RegionError::UnknownZone { .. } => StatusCode::NOT_FOUND,
            RegionError::Decommissioned(_) | RegionError::ZoneDecommissioned { .. } => {
                StatusCode::GONE
            }
            RegionError::Store(s) => return store(s),
            RegionError::Internal(_) => return internal(e),
        };
        Failure::new(status, e.to_string())
    }
}

impl From<RequestError> for Failure {
    fn from(e: RequestError) -> Self {
        let message = e.to_string();
        match e {
            RequestError::InvalidId | RequestError::InvalidOp => {
                Failure::new(StatusCode::BAD_REQUEST, message)
            }
            RequestError::UnknownRegion(_) | RequestError::UnknownZone { .. } => {
                Failure::new(StatusCode::NOT_FOUND, message).code(code::NOT_FOUND)
            }
            RequestError::Containment(_) => {
                Failure::new(StatusCode::UNPROCESSABLE_ENTITY, message).code(code::CONTAINMENT)
            }
            RequestError::NotFound(_) => {
                Failure::new(StatusCode::NOT_FOUND, message).code(code::NOT_FOUND)
            }
            RequestError::Decommissioned(_) | RequestError::Cancelled { .. } => {
                Failure::new(StatusCode::GONE, message)
            }
            RequestError::TooLarge { size, limit, .. } => {
                let mut f =
                    Failure::new(StatusCode::PAYLOAD_TOO_LARGE, message).code(code::TOO_LARGE);
                f.1.limit_bytes = Some(limit);
                f.1.size_bytes = Some(size);
                f
            }
            RequestError::DuplicateId { .. } => {
                Failure::new(StatusCode::CONFLICT, message).code(code::DUPLICATE_ID)
            }
            RequestError::Timeout { .. } => {
                Failure::new(StatusCode::GATEWAY_TIMEOUT, message).code(code::TIMEOUT)
            }
            RequestError::Scope(e) => Failure::from(e),
            RequestError::IdTaken(_) => {
                Failure::new(StatusCode::CONFLICT, message).code(code::DUPLICATE_ID)
            }
            RequestError::Store(e) => store(&e),
            RequestError::Internal(_) => internal(message),
        }
    }
}

impl From<ScopeError> for Failure {
    fn from(e: ScopeError) -> Self {
        let message = e.to_string();
        match e {
            ScopeError::Invalid { .. } => Failure::new(StatusCode::BAD_REQUEST, message),
            ScopeError::Forbidden(_) => {
                Failure::new(StatusCode::FORBIDDEN, message).code(code::FORBIDDEN)
            }
            ScopeError::UnknownProject { .. } => {
                Failure::new(StatusCode::NOT_FOUND, message).code(code::NOT_FOUND)
            }
            ScopeError::NoQuota { .. } => Failure::new(StatusCode::UNPROCESSABLE_ENTITY, message),
            ScopeError::ClusterScoped(..) => {
                Failure::new(StatusCode::UNPROCESSABLE_ENTITY, message).code(code::CONTAINMENT)
            }
            ScopeError::Store(e) => store(&e),
        }
    }
}

impl From<TenancyError> for Failure {
    fn from(e: TenancyError) -> Self {
        let message = e.to_string();
        match e {
            TenancyError::Invalid { .. } => Failure::new(StatusCode::BAD_REQUEST, message),
            TenancyError::UnknownTenant(_)
            | TenancyError::UnknownProject { .. }
            | TenancyError::UnknownToken { .. } => Failure::new(StatusCode::NOT_FOUND, message),
            TenancyError::Exists(_) | TenancyError::CapBelowGrants { .. } => {
                Failure::new(StatusCode::CONFLICT, message)
            }
            TenancyError::OverCap { .. } => {
                Failure::new(StatusCode::UNPROCESSABLE_ENTITY, message).code(code::QUOTA_EXCEEDED)
            }
            TenancyError::Store(e) => store(&e),
            TenancyError::Internal(_) => internal(message),
        }
    }
}

impl From<InstanceError> for Failure {
    fn from(e: InstanceError) -> Self {
        let message = e.to_string();
        match e {
            InstanceError::Invalid { .. } => Failure::new(StatusCode::BAD_REQUEST, message),
            InstanceError::Exists(_) | InstanceError::Busy(_) => {
                Failure::new(StatusCode::CONFLICT, message)
            }
            InstanceError::UnknownRegion(_) | InstanceError::NotFound(_) => {
                Failure::new(StatusCode::NOT_FOUND, message)
            }
            InstanceError::Decommissioned(_) => Failure::new(StatusCode::GONE, message),
            InstanceError::Containment { .. } => {
                Failure::new(StatusCode::UNPROCESSABLE_ENTITY, message).code(code::CONTAINMENT)
            }
            InstanceError::Unavailable {
                available_in,
                degraded_in,
                ..
            } => {
                let mut f = Failure::new(StatusCode::CONFLICT, message);
                f.1.available_in = Some(available_in);
                f.1.degraded_in = Some(degraded_in);
                f
            }
            InstanceError::Store(e) => store(&e),
            InstanceError::Internal(_) => internal(message),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn request_refusals_carry_their_code_and_numbers() {
        let f = Failure::from(RequestError::TooLarge {
            id: "r".into(),
            region: "eu".into(),
            size: 5000,
            limit: 4096,
        });
        assert_eq!(f.0, StatusCode::PAYLOAD_TOO_LARGE);
        assert_eq!(f.1.code.as_deref(), Some("too_large"));
        assert_eq!((f.1.limit_bytes, f.1.size_bytes), (Some(4096), Some(5000)));
        let f = Failure::from(RequestError::DuplicateId {
            id: "r".into(),
            region: "eu".into(),
            op: "get_inventory".into(),
        });
        assert_eq!(f.0, StatusCode::CONFLICT);
        assert_eq!(f.1.code.as_deref(), Some("duplicate_id"));
        assert!(
            f.1.error.starts_with("id: request r already exists"),
            "{}",
            f.1.error
        );
        let json = serde_json::to_value(&f.1).unwrap();
        assert!(json.get("limit_bytes").is_none(), "{json}");
    }

    #[test]
    fn a_busy_pool_or_a_lost_database_is_503_with_retry_after_and_a_failed_statement_500() {
        let busy = StoreError::overloaded(
            "postgres",
            "submit a request",
            std::time::Duration::from_secs(10),
        );
        let f = Failure::from(RequestError::Store(busy.clone()));
        assert_eq!(f.0, StatusCode::SERVICE_UNAVAILABLE);
        assert_eq!(f.1.code.as_deref(), Some(code::OVERLOADED));
        assert!(
            f.1.error.starts_with("the control plane is overloaded")
                && f.1
                    .error
                    .contains("no database connection was free within 10 s"),
            "{}",
            f.1.error
        );
        let r = f.into_response();
        assert_eq!(r.status(), StatusCode::SERVICE_UNAVAILABLE);
        assert_eq!(r.headers().get(RETRY_AFTER).unwrap(), "1");
        for f in [
            Failure::from(RegionError::Store(busy.clone())),
            Failure::from(ScopeError::Store(busy.clone())),
            Failure::from(TenancyError::Store(busy.clone())),
            Failure::from(InstanceError::Store(busy.clone())),
            Failure::from(busy),
        ] {
            assert_eq!(f.0, StatusCode::SERVICE_UNAVAILABLE, "{}", f.1.error);
        }
        let broken = StoreError::new("postgres", "submit a request", "syntax error");
        let r = Failure::from(RequestError::Store(broken.clone())).into_response();
        assert_eq!(r.status(), StatusCode::INTERNAL_SERVER_ERROR);
        assert!(r.headers().get(RETRY_AFTER).is_none());
        // Unreachable or restarting: retryable, on every route.
        let down = broken.unavailable();
        for f in [
            Failure::from(RequestError::Store(down.clone())),
            Failure::from(RegionError::Store(down.clone())),
            Failure::from(TenancyError::Store(down.clone())),
            Failure::from(down),
        ] {
            assert_eq!(f.1.code.as_deref(), Some(code::STORE_UNAVAILABLE));
            assert!(f.1.error.contains("is unavailable"), "{}", f.1.error);
            let r = f.into_response();
            assert_eq!(r.status(), StatusCode::SERVICE_UNAVAILABLE);
            assert_eq!(r.headers().get(RETRY_AFTER).unwrap(), "1");
        }
    }

    #[test]
    fn every_concern_maps_onto_the_documented_statuses() {
        assert_eq!(
            Failure::from(RegionError::Exists("eu".into())).0,
            StatusCode::CONFLICT
        );
        assert_eq!(
            Failure::from(RegionError::Decommissioned("eu".into())).0,
            StatusCode::GONE
        );
        let f = Failure::from(InstanceError::Unavailable {
            message: "no region advertises".into(),
            available_in: vec![],
            degraded_in: vec!["b".into()],
        });
        assert_eq!(f.0, StatusCode::CONFLICT);
        assert_eq!(f.1.available_in, Some(vec![]));
        assert_eq!(
            Failure::from(InstanceError::NotFound("x".into())).0,
            StatusCode::NOT_FOUND
        );
        assert_eq!(
            Failure::from(RequestError::Cancelled {
                id: "r".into(),
                region: "eu".into(),
                message: "decommissioned".into()
            })
            .0,
            StatusCode::GONE
        );
    }

    #[test]
    fn tenancy_refusals_map_onto_403_404_409_and_422() {
        use crate::store::CapExceeded;
        let f = Failure::from(TenancyError::OverCap {
            tenant: "acme".into(),
            region: "eu".into(),
            over: Box::new(CapExceeded {
                resource: "cpu".into(),
                cap: "4".into(),
                others: "3".into(),
                asked: "2".into(),
            }),
        });
        assert_eq!(f.0, StatusCode::UNPROCESSABLE_ENTITY);
        assert_eq!(f.1.code.as_deref(), Some(code::QUOTA_EXCEEDED));
        assert!(
            f.1.error.contains("cap is 4") && f.1.error.contains("take 3"),
            "{}",
            f.1.error
        );
        let f = Failure::from(RequestError::Scope(ScopeError::Forbidden("op: no".into())));
        assert_eq!(
            (f.0, f.1.code.as_deref()),
            (StatusCode::FORBIDDEN, Some(code::FORBIDDEN))
        );
        let f = Failure::from(ScopeError::NoQuota {
            tenant: "acme".into(),
            project: "web".into(),
            region: "eu".into(),
        });
        assert_eq!(f.0, StatusCode::UNPROCESSABLE_ENTITY);
        assert_eq!(
            Failure::from(TenancyError::Exists("tenant: taken".into())).0,
            StatusCode::CONFLICT
        );
        assert_eq!(
            Failure::from(RequestError::IdTaken("r".into())).0,
            StatusCode::CONFLICT
        );
    }
}
