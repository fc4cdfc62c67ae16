//! Status-page sessions (ADR 0023): signing in with an API token opens a session whose random
//! id is the cookie (the token never is); the store keeps the id's SHA-256, who signed in, the
//! token's id and hash, and the expiry, so every replica sees it. A session ends on logout, at
//! its expiry, when its tenant token is revoked or expires, or when the admin token changes.

use harmony_agent_protocol::SecretString;
use std::time::Duration;

use super::{ControlPlane, tenancy};
use crate::store::{PageSession, StoreError, now_ms};
use crate::tokens;

/// How long a session lasts.
pub const SESSION_TTL: Duration = Duration::from_secs(8 * 3600);

/// Who a session is for: `None` the admin, else the tenant.
pub type Viewer = Option<String>;

/// Opens a session for `token` when it is the admin token (`admin_hash`) or a valid tenant
/// token: the session id (shown once, for the cookie) and who it is for. `None`: not a valid
/// token.
pub async fn open(
    cp: &ControlPlane,
    token: &SecretString,
    admin_hash: &[u8; 32],
) -> Result<Option<(SecretString, Viewer)>, StoreError> {
    let credential = tokens::hash(token.expose());
    let (tenant, token_id) = if tokens::same(&credential, admin_hash) {
        (None, None)
    } else {
        match tenancy::authenticate_token(cp, token.expose()).await? {
            Some((tenant, id)) => (Some(tenant), Some(id)),
            None => return Ok(None),
        }
    };
    let id = tokens::mint("hps_")
        .map_err(|e| StoreError::new("randomness", "open a status-page session", e))?;
    let now = now_ms();
    cp.store
        .open_page_session(&PageSession {
            hash: tokens::hash(id.expose()),
            tenant: tenant.clone(),
            token_id,
            credential,
            created_at: now,
            expires_at: now.saturating_add(SESSION_TTL.as_millis() as i64),
        })
        .await?;
    Ok(Some((id, tenant)))
}

/// Who the session `id` is for, when it is open: not expired, and the token it was opened with
/// still valid (a tenant token neither revoked nor expired; for the admin, the current admin
/// token). `None` otherwise: the caller signs in again.
pub async fn viewer(
    cp: &ControlPlane,
    id: &str,
    admin_hash: &[u8; 32],
) -> Result<Option<Viewer>, StoreError> {
    let Some(s) = cp.store.page_session(&tokens::hash(id)).await? else {
        return Ok(None);
    };
    let now = now_ms();
    if s.expires_at <= now {
        return Ok(None);
    }
    let valid = match (&s.tenant, &s.token_id) {
        (None, _) => tokens::same(&s.credential, admin_hash),
        (Some(tenant), Some(token_id)) => cp.store.tenant_token(token_id).await?.is_some_and(|t| {
            t.tenant == *tenant
                && tokens::same(&t.hash, &s.credential)
                && t.revoked_at.is_none()
                && t.expires_at.is_none_or(|e| e > now)
        }),
        (Some(_), None) => false,
    };
    Ok(valid.then_some(s.tenant))
}

/// Ends the session `id` (logout) on every replica; `false` when there was none.
pub async fn end(cp: &ControlPlane, id: &str) -> Result<bool, StoreError> {
    cp.store.end_page_session(&tokens::hash(id), now_ms()).await
}
