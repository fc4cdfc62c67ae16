//! The credential rules, shared by both adapters: each reads the facts in one query and these
//! functions decide, so SQLite and PostgreSQL cannot disagree.

use super::{Credential, Heartbeat, NewRequest, Refusal, RequestRecord, Submitted};
use std::collections::HashMap;

/// What the store knows of an identity.
#[derive(Debug, Clone)]
pub(crate) struct IdentityFacts {
    pub region: String,
    pub zone: String,
    /// The identity is revoked or its region decommissioned.
    pub revoked: bool,
    pub expires_at: Option<i64>,
    /// End of the overlap after a rotation.
    pub valid_until: Option<i64>,
    /// Its first use is recorded.
    pub used: bool,
}

impl IdentityFacts {
    pub(crate) fn decide(self, now: i64) -> Result<Credential, Refusal> {
        if self.revoked {
            return Err(Refusal::Revoked);
        }
        let expires_at = match (self.expires_at, self.valid_until) {
            (Some(a), Some(b)) => Some(a.min(b)),
            (a, b) => a.or(b),
        };
        if expires_at.is_some_and(|t| t <= now) {
            return Err(Refusal::Expired);
        }
        Ok(Credential::Identity {
            region: self.region,
            zone: self.zone,
            expires_at,
            used: self.used,
        })
    }
}

/// What the store knows of a bootstrap token and the identity it was exchanged for.
pub(crate) struct BootstrapFacts {
    pub id: i64,
    pub region: String,
    pub zone: String,
    pub salt: [u8; 32],
    pub expires_at: i64,
    pub used: bool,
    /// A newer bootstrap token of the region replaced it.
    pub superseded: bool,
    pub decommissioned: bool,
    /// It was exchanged, and that identity was never used, revoked nor rotated.
    pub identity_unused: bool,
}

impl BootstrapFacts {
    pub(crate) fn decide(self, now: i64) -> Result<Credential, Refusal> {
        if self.decommissioned {
            return Err(Refusal::Revoked);
        }
        if self.used && (self.superseded || !self.identity_unused) {
            return Err(Refusal::Used);
        }
        if self.superseded {
            return Err(Refusal::Unknown);
        }
        if self.expires_at <= now {
            return Err(Refusal::Expired);
        }
        Ok(Credential::Bootstrap {
            id: self.id,
            region: self.region,
            zone: self.zone,
            salt: self.salt,
            expires_at: self.expires_at,
            issued: self.used,
        })
    }
}

/// Same id: the same request when region, op and body hash match (the caller joins it), else a
/// mismatch (409 `duplicate_id`).
pub(crate) fn classify(new: &NewRequest, stored: RequestRecord) -> Submitted {
    let owner =
        |s: &Option<super::RequestScope>| s.as_ref().map(|s| (s.tenant.clone(), s.project.clone()));
    if stored.region == new.region
        && stored.op == new.op
        && stored.body_hash == new.body_hash
        && owner(&stored.scope) == owner(&new.scope)
    {
        Submitted::Existing(stored)
    } else {
        Submitted::Mismatch(stored)
    }
}

/// One beat per (region, connection): the latest time and the latest status given. A batch
/// then updates each session row once, whichever backend applies it.
pub(crate) fn merge_heartbeats(beats: &[Heartbeat]) -> Vec<Heartbeat> {
    let mut merged: Vec<Heartbeat> = Vec::with_capacity(beats.len());
    let mut index: HashMap<(&str, &str), usize> = HashMap::with_capacity(beats.len());
    for b in beats {
        match index.get(&(b.region.as_str(), b.conn.as_str())) {
            Some(&i) => {
                let m = &mut merged[i];
                m.at = m.at.max(b.at);
                if b.status_json.is_some() {
                    m.status_json.clone_from(&b.status_json);
                }
            }
            None => {
                index.insert((b.region.as_str(), b.conn.as_str()), merged.len());
                merged.push(b.clone());
            }
        }
    }
    merged
}
