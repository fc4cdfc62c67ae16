//! Agent credentials: the bootstrap exchange (repeatable while its identity was never used, so a
//! lost `welcome` is recoverable), identities that expire and are renewed with an overlap, and
//! revocation, which closes the region's connection on whichever replica holds it.

use harmony_agent_protocol::{IDENTITY_PREFIX, SecretString, close};
use std::time::Duration;

use super::{ControlPlane, dispatch};
use crate::store::{Credential, Event, Exchange, Refusal, StoreError, now_ms};
use crate::tokens;

/// Why an agent was not let in.
#[derive(Debug, thiserror::Error)]
pub enum AuthError {
    /// No `Authorization` header.
    #[error("no credential: send `Authorization: Bearer <bootstrap token or identity>`")]
    NoCredential,
    /// The store refused the credential (`bootstrap`: it was a bootstrap token).
    #[error("{}", refusal_message(*refusal, *bootstrap))]
    Refused {
        /// Why.
        refusal: Refusal,
        /// Whether a bootstrap token (rather than an identity) was presented.
        bootstrap: bool,
    },
    /// The credential belongs to another region or zone.
    #[error(
        "credential is for {region}/{zone}, hello says {hello_region}/{hello_zone}; fix --region/--zone"
    )]
    Mismatch {
        /// The credential's region.
        region: String,
        /// The credential's zone.
        zone: String,
        /// What the hello said.
        hello_region: String,
        /// What the hello said.
        hello_zone: String,
    },
    /// The state database failed.
    #[error(transparent)]
    Store(#[from] StoreError),
    /// No randomness.
    #[error("internal error: {0}")]
    Internal(String),
}

/// Why a credential was refused, for the agent's log; each fits a WebSocket close reason.
pub fn refusal_message(r: Refusal, bootstrap: bool) -> &'static str {
    match r {
        Refusal::Unknown => {
            "unknown or superseded token; use the bootstrap token from POST /v1/admin/regions"
        }
        Refusal::Used => "bootstrap token already used; start the agent with its stored identity",
        Refusal::Expired if bootstrap => {
            "bootstrap token expired; mint one: POST /v1/admin/regions/<region>/bootstrap-token"
        }
        Refusal::Expired => {
            "identity expired; admin: POST /v1/admin/regions/<region>/bootstrap-token {\"zone\"}, zone and queue are kept"
        }
        Refusal::Revoked => {
            "identity revoked: the region is decommissioned; re-create it and bootstrap a new agent"
        }
    }
}

/// An agent let in.
#[derive(Debug, Clone)]
pub struct Authenticated {
    /// Its region.
    pub region: String,
    /// Its zone.
    pub zone: String,
    /// The identity to hand out in `welcome` (after a bootstrap exchange), never logged.
    pub issued: Option<SecretString>,
    /// The hash of the identity in use (the one presented or the one issued).
    pub identity_hash: [u8; 32],
    /// When that identity stops being accepted (`None`: never).
    pub expires_at: Option<i64>,
    /// A bootstrap exchange whose identity is not yet known to have arrived: the agent's first
    /// frame after `welcome` proves it did (see [`confirm`]).
    pub unconfirmed: bool,
}

/// Checks a presented credential against the hello's region and zone; a bootstrap token is
/// exchanged for its derived identity (the same one again if its `welcome` was lost).
pub async fn authenticate(
    cp: &ControlPlane,
    credential: Option<&SecretString>,
    region: &str,
    zone: &str,
) -> Result<Authenticated, AuthError> {
    let credential = credential.ok_or(AuthError::NoCredential)?;
    let presented = tokens::hash(credential.expose());
    let bootstrap = credential
        .expose()
        .starts_with(harmony_agent_protocol::BOOTSTRAP_PREFIX);
    let now = now_ms();
    let checked = cp
        .store
        .check(&presented, now)
        .await?
        .map_err(|refusal| AuthError::Refused { refusal, bootstrap })?;
    let (cred_region, cred_zone) = match &checked {
        Credential::Bootstrap { region, zone, .. } | Credential::Identity { region, zone, .. } => {
            (region.clone(), zone.clone())
        }
    };
    if cred_region != region || cred_zone != zone {
        return Err(AuthError::Mismatch {
            region: cred_region,
            zone: cred_zone,
            hello_region: region.to_string(),
            hello_zone: zone.to_string(),
        });
    }
    match checked {
        Credential::Identity {
            expires_at, used, ..
        } => {
            // Its first use is recorded once; a reconnect writes nothing (at 100,000 agents
            // reconnecting, that statement was one per agent and changed no row).
            if !used {
                cp.store.mark_identity_used(&presented, now).await?;
            }
            Ok(Authenticated {
                region: cred_region,
                zone: cred_zone,
                issued: None,
                identity_hash: presented,
                expires_at,
                unconfirmed: false,
            })
        }
        Credential::Bootstrap { id, salt, .. } => {
            let identity = tokens::derive_identity(credential.expose(), &salt);
            let hash = tokens::hash(identity.expose());
            let wanted = now + cp.settings.identity_ttl.as_millis() as i64;
            let expires_at = match cp.store.exchange(id, region, &hash, wanted).await? {
                Exchange::Issued => {
                    log::info!(
                        "region {region}: bootstrap token exchanged for identity {}",
                        tokens::fingerprint(identity.expose())
                    );
                    Some(wanted)
                }
                Exchange::AlreadyIssuedUnused { expires_at } => {
                    log::info!(
                        "region {region}: bootstrap token presented again before its identity {} was used (a lost welcome); handing out the same identity",
                        tokens::fingerprint(identity.expose())
                    );
                    expires_at
                }
                Exchange::Used => {
                    return Err(AuthError::Refused {
                        refusal: Refusal::Used,
                        bootstrap: true,
                    });
                }
            };
            Ok(Authenticated {
                region: cred_region,
                zone: cred_zone,
                issued: Some(identity),
                identity_hash: hash,
                expires_at,
                unconfirmed: true,
            })
        }
    }
}

/// Records that the agent received its identity (it spoke after `welcome`): from now on its
/// bootstrap token cannot be exchanged again.
pub async fn confirm(cp: &ControlPlane, identity_hash: &[u8; 32]) -> Result<(), StoreError> {
    cp.store.mark_identity_used(identity_hash, now_ms()).await
}

/// Why a renewal was refused.
#[derive(Debug, thiserror::Error)]
pub enum RenewError {
    /// The identity in use is not valid any more (revoked, expired, or already rotated).
    #[error(
        "the identity in use is not valid any more (revoked, expired or already renewed); reconnect with the newest identity"
    )]
    NotValid,
    /// The state database failed.
    #[error(transparent)]
    Store(#[from] StoreError),
    /// No randomness.
    #[error("internal error: {0}")]
    Internal(String),
}

/// A renewed identity.
#[derive(Debug, Clone)]
pub struct Renewed {
    /// The new identity (never logged).
    pub identity: SecretString,
    /// Its hash.
    pub hash: [u8; 32],
    /// Its expiry (ms since epoch).
    pub expires_at: i64,
}

/// The renewal timings: (new identity's expiry, old identity's end of validity).
pub fn renewal_times(now: i64, ttl: Duration, overlap: Duration) -> (i64, i64) {
    (
        now + ttl.as_millis() as i64,
        now + overlap.as_millis() as i64,
    )
}

/// Issues `region` a fresh identity in place of `current`, which stays valid for the overlap.
pub async fn renew(
    cp: &ControlPlane,
    region: &str,
    current: &[u8; 32],
) -> Result<Renewed, RenewError> {
    let identity = tokens::mint(IDENTITY_PREFIX)
        .map_err(|e| RenewError::Internal(format!("no randomness: {e}")))?;
    let hash = tokens::hash(identity.expose());
    let now = now_ms();
    let s = &cp.settings;
    let (expires_at, old_until) = renewal_times(now, s.identity_ttl, s.identity_overlap);
    if !cp
        .store
        .rotate_identity(region, current, &hash, now, expires_at, old_until)
        .await?
    {
        return Err(RenewError::NotValid);
    }
    log::info!(
        "region {region}: identity renewed as {} (valid until {expires_at} ms); the previous one stays valid until {old_until} ms",
        tokens::fingerprint(identity.expose())
    );
    Ok(Renewed {
        identity,
        hash,
        expires_at,
    })
}

/// The close reason of a revoked connection.
pub const REVOKED_REASON: &str = "identity revoked: the region was decommissioned";

/// Decommissions `region`: revokes its identities and tokens, drops its unanswered requests and
/// closes its agent's connection on whichever replica holds it. `Ok(false)` when there is no
/// such region. Decommissioning twice is harmless.
pub async fn revoke(cp: &ControlPlane, region: &str) -> Result<bool, StoreError> {
    let Some(record) = cp.store.region(region).await? else {
        return Ok(false);
    };
    if record.decommissioned_at.is_none() {
        cp.store.decommission(region).await?;
    }
    let close = Event::CloseRegion {
        region: region.to_string(),
        zone: None,
        code: close::REVOKED,
        reason: REVOKED_REASON.into(),
        conn: None,
    };
    cp.store.publish(&close).await?;
    let mut dropped = 0;
    for z in cp
        .store
        .zones()
        .await?
        .iter()
        .filter(|z| z.region == region)
    {
        super::zone_states::refresh(cp, region, &z.zone).await;
        dropped += dispatch::cancel_unanswered(
            cp,
            region,
            &z.zone,
            &format!("region {region} was decommissioned before its agent answered"),
        )
        .await?;
    }
    log::info!(
        "region {region} decommissioned; its identities and tokens are revoked, {dropped} unanswered request(s) dropped"
    );
    Ok(true)
}

/// The close reason of a connection of a decommissioned zone.
pub const ZONE_REVOKED_REASON: &str = "identity revoked: the zone was decommissioned";

/// Decommissions zone `zone` of `region`: revokes its identities and tokens, drops its
/// unanswered requests and closes its agent's connection; the region's other zones go on.
/// `Ok(false)` when there is no such zone. Decommissioning twice is harmless.
pub async fn revoke_zone(cp: &ControlPlane, region: &str, zone: &str) -> Result<bool, StoreError> {
    let known = cp
        .store
        .zones()
        .await?
        .into_iter()
        .any(|z| z.region == region && z.zone == zone);
    if !known {
        return Ok(false);
    }
    cp.store.decommission_zone(region, zone).await?;
    super::zone_states::refresh(cp, region, zone).await;
    let close = Event::CloseRegion {
        region: region.to_string(),
        zone: Some(zone.to_string()),
        code: close::REVOKED,
        reason: ZONE_REVOKED_REASON.into(),
        conn: None,
    };
    cp.store.publish(&close).await?;
    let dropped = dispatch::cancel_unanswered(
        cp,
        region,
        zone,
        &format!("zone {zone} of region {region} was decommissioned before its agent answered"),
    )
    .await?;
    log::info!(
        "zone {zone} of region {region} decommissioned; its identities and tokens are revoked, {dropped} unanswered request(s) dropped"
    );
    Ok(true)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn refusals_fit_a_websocket_close_reason() {
        for r in [
            Refusal::Unknown,
            Refusal::Used,
            Refusal::Expired,
            Refusal::Revoked,
        ] {
            for bootstrap in [true, false] {
                let m = refusal_message(r, bootstrap);
                assert!(m.len() <= 123, "{m}");
            }
        }
        // The end-to-end tests look for these words in the agent's log.
        assert!(refusal_message(Refusal::Used, true).contains("bootstrap token already used"));
        assert!(refusal_message(Refusal::Unknown, true).contains("unknown or superseded token"));
        assert!(refusal_message(Refusal::Revoked, false).contains("identity revoked"));
        assert!(refusal_message(Refusal::Expired, true).contains("bootstrap token expired"));
        assert!(refusal_message(Refusal::Expired, false).starts_with("identity expired"));
    }

    #[test]
    fn a_renewed_identity_outlives_the_overlap_of_the_old_one() {
        let (new_expiry, old_until) = renewal_times(
            1_000,
            Duration::from_secs(30 * 86_400),
            Duration::from_secs(3600),
        );
        assert_eq!(old_until, 1_000 + 3_600_000);
        assert_eq!(new_expiry, 1_000 + 30 * 86_400_000);
    }
}
