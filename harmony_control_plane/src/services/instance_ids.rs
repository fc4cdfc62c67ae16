//! Service-instance ids live in each tenant. A tenant's instance `db1` is stored (and known to
//! its agent and provider) as `db1-` and 10 hex digits of SHA-256 over the tenant and the id
//! ([`stored_id`]): unique across tenants, still a DNS-1123 label, and computed from what the
//! tenant sends, so a tenant finds its own instances by their ids and never another's. The
//! admin's own instances (no project) keep the id as given; the admin sees every instance by
//! its stored id, with its tenant and project.

use sha2::{Digest, Sha256};

use super::ControlPlane;
use crate::store::{ServiceRecord, StoreError};

/// The longest id a tenant may give an instance: its stored id adds 11 characters and must
/// stay a 63-character DNS label.
pub const MAX_TENANT_ID_CHARS: usize = 52;

/// Hex digits of the tenant hash in a stored id.
const HASH_HEX: usize = 10;

/// The stored id of instance `id` of `tenant` (`None`: the admin's own, stored as given).
pub fn stored_id(tenant: Option<&str>, id: &str) -> String {
    let Some(tenant) = tenant else {
        return id.to_string();
    };
    let mut h = Sha256::new();
    h.update(b"harmony-instance\0");
    h.update(tenant.as_bytes());
    h.update(b"\0");
    h.update(id.as_bytes());
    let hex: String = h.finalize().iter().map(|b| format!("{b:02x}")).collect();
    format!("{id}-{}", &hex[..HASH_HEX])
}

/// The id `tenant` knows the stored id `stored` by: the id it gave, or `stored` itself for an
/// instance stored before ids were scoped.
pub fn shown_id<'a>(tenant: &str, stored: &'a str) -> &'a str {
    stored
        .len()
        .checked_sub(HASH_HEX + 1)
        .and_then(|n| stored.get(..n))
        .filter(|id| stored_id(Some(tenant), id) == stored)
        .unwrap_or(stored)
}

/// The instance `viewer` names `id`: for a tenant, its own instance with that id (or one of its
/// instances stored before ids were scoped); another tenant's is `None`, exactly like a
/// missing one. The admin (`None`) names stored ids.
pub async fn find(
    cp: &ControlPlane,
    id: &str,
    viewer: Option<&str>,
) -> Result<Option<ServiceRecord>, StoreError> {
    let Some(tenant) = viewer else {
        return cp.store.service(id).await;
    };
    let mine = |r: &ServiceRecord| r.owner.as_ref().is_some_and(|o| o.tenant == tenant);
    if let Some(r) = cp.store.service(&stored_id(Some(tenant), id)).await?
        && mine(&r)
    {
        return Ok(Some(r));
    }
    Ok(cp.store.service(id).await?.filter(mine))
}

#[cfg(test)]
mod tests {
    use super::*;
    use harmony_types::Dns1123Label;

    #[test]
    fn stored_ids_differ_per_tenant_stay_labels_and_read_back() {
        let a = stored_id(Some("acme"), "db1");
        let b = stored_id(Some("beta"), "db1");
        assert_ne!(a, b);
        assert!(a.starts_with("db1-") && a.len() == 3 + 11, "{a}");
        assert_eq!(stored_id(None, "db1"), "db1");
        assert_eq!(shown_id("acme", &a), "db1");
        // Another tenant's stored id is not one of acme's: shown as stored.
        assert_eq!(shown_id("acme", &b), b);
        assert_eq!(shown_id("acme", "db1"), "db1");
        assert_eq!(shown_id("acme", ""), "");
        let longest = "a".repeat(MAX_TENANT_ID_CHARS);
        let stored = stored_id(Some("acme"), &longest);
        Dns1123Label::parse(&stored).unwrap();
        assert_eq!(shown_id("acme", &stored), longest);
    }

    #[test]
    fn a_tenant_id_cannot_reach_another_tenants_stored_id() {
        // A tenant that sends beta's stored id gets a stored id of its own.
        let b = stored_id(Some("beta"), "db1");
        assert_ne!(stored_id(Some("acme"), &b), b);
    }
}
