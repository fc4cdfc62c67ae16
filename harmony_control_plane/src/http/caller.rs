//! Who is calling: the scope a bearer token proved, put in the request's extensions by the
//! authentication layer and read by handlers.

use axum::extract::FromRequestParts;
use axum::http::StatusCode;
use axum::http::request::Parts;

use super::Failure;

/// The scope of the caller's token.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Caller {
    /// The admin token: every route, every tenant, admin fields.
    Admin,
    /// A tenant token: only that tenant's projects, requests and services; no admin fields.
    Tenant {
        /// The tenant's name.
        tenant: String,
    },
}

impl Caller {
    /// Whether the caller is the admin.
    pub fn is_admin(&self) -> bool {
        matches!(self, Caller::Admin)
    }

    /// The tenant, for a tenant caller.
    pub fn tenant(&self) -> Option<&str> {
        match self {
            Caller::Admin => None,
            Caller::Tenant { tenant } => Some(tenant),
        }
    }
}

impl<S: Send + Sync> FromRequestParts<S> for Caller {
    type Rejection = Failure;

    async fn from_request_parts(parts: &mut Parts, _: &S) -> Result<Self, Failure> {
        parts.extensions.get::<Caller>().cloned().ok_or_else(|| {
            Failure::new(
                StatusCode::UNAUTHORIZED,
                "missing or wrong token; send `Authorization: Bearer <token>`",
            )
        })
    }
}
