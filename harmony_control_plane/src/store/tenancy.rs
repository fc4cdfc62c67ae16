//! Tenants, tenant tokens (hashes only), per-region tenant caps, projects and their per-region
//! quotas: the [`TenancyStore`] half of the [`Store`](super::Store), and the cap rule both
//! adapters apply inside the transaction that sets a quota ([`check_cap`]).

use async_trait::async_trait;
use harmony_agent_protocol::tenancy::ProjectQuota;
use std::collections::BTreeMap;

use super::StoreError;
use super::quantity;

/// A tenant as stored.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TenantRecord {
    /// Its name.
    pub name: String,
    /// Creation time (ms).
    pub created_at: i64,
    /// Its caps by region.
    pub caps: BTreeMap<String, ProjectQuota>,
}

/// A tenant token as stored: its id and the SHA-256 of the whole token.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TenantTokenRecord {
    /// The id (the part of the token between `htt_` and the next `_`).
    pub id: String,
    /// The tenant it acts for.
    pub tenant: String,
    /// SHA-256 of the token.
    pub hash: [u8; 32],
    /// Creation time (ms).
    pub created_at: i64,
    /// Expiry (ms); never when `None`.
    pub expires_at: Option<i64>,
    /// When it was revoked.
    pub revoked_at: Option<i64>,
}

/// A project as stored, with its quotas.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ProjectRecord {
    /// Its tenant.
    pub tenant: String,
    /// Its name.
    pub project: String,
    /// Its namespace (unique across tenants).
    pub namespace: String,
    /// Creation time (ms).
    pub created_at: i64,
    /// Its quota by region.
    pub quotas: BTreeMap<String, ProjectQuota>,
}

/// What [`TenancyStore::create_project`] did.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ProjectCreated {
    /// Stored.
    Created,
    /// No such tenant.
    NoTenant,
    /// The tenant already has a project of that name.
    Exists,
    /// Another project (named here as `tenant/project`) has the namespace.
    NamespaceTaken(String),
}

/// A quota that would take a tenant's projects past its cap in a region.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CapExceeded {
    /// The resource (`cpu`, `memory`, `storage`, `objects.<kind>`).
    pub resource: String,
    /// The cap, as written.
    pub cap: String,
    /// What the other projects' quotas already take, in the cap's units when whole numbers.
    pub others: String,
    /// What this project's quota asks for (`unlimited` when it sets none).
    pub asked: String,
}

/// What [`TenancyStore::set_project_quota`] did.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum QuotaSet {
    /// Stored.
    Set,
    /// No such project.
    NoProject,
    /// Refused: over the tenant's cap in that region.
    OverCap(CapExceeded),
    /// A quantity in the quota (or the stored cap) does not parse.
    Invalid(String),
}

/// What [`TenancyStore::set_tenant_cap`] did.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum CapSet {
    /// Stored.
    Set,
    /// No such tenant.
    NoTenant,
    /// Refused: the tenant's projects already hold more than the cap in that region (or hold
    /// an unlimited quota of what it limits); the grants, in words.
    BelowGrants(String),
    /// A quantity in a stored quota does not parse.
    Invalid(String),
}

/// Whether `cap` holds every quota already granted to the tenant's projects in the region
/// (`grants`, by project): `Ok(None)` when it does, else the first resource it does not hold,
/// naming each project's grant. A cap may not be lowered below what is granted: lower the
/// projects' quotas first.
pub fn cap_below_grants(
    cap: &ProjectQuota,
    grants: &[(String, ProjectQuota)],
) -> Result<Option<String>, String> {
    for (resource, get) in QUANTITIES {
        let Some(limit) = get(cap) else { continue };
        let limit_m = quantity::parse(&limit).map_err(|e| format!("cap {resource}: {e}"))?;
        let unlimited = grants.iter().any(|(_, q)| get(q).is_none());
        let granted =
            sum(grants.iter().map(|(_, q)| get(q))).map_err(|e| format!("{resource}: {e}"))?;
        if unlimited || granted > limit_m {
            return Ok(Some(format!(
                "{resource}: the cap {limit} is below what the projects hold ({}{})",
                listed(grants, get),
                if unlimited {
                    String::new()
                } else {
                    format!("; {} in all", show(granted))
                }
            )));
        }
    }
    for (kind, limit) in &cap.objects {
        let unlimited = grants.iter().any(|(_, q)| !q.objects.contains_key(kind));
        let granted = grants
            .iter()
            .filter_map(|(_, q)| q.objects.get(kind))
            .fold(0u64, |a, b| a.saturating_add(*b));
        if unlimited || granted > *limit {
            return Ok(Some(format!(
                "objects.{kind}: the cap {limit} is below what the projects hold ({})",
                listed(grants, |q| q.objects.get(kind).map(u64::to_string))
            )));
        }
    }
    Ok(None)
}

/// The adapters' shared decision once they read the grants.
pub(crate) fn decide_cap(cap: &ProjectQuota, grants: &[(String, ProjectQuota)]) -> CapSet {
    match cap_below_grants(cap, grants) {
        Ok(None) => CapSet::Set,
        Ok(Some(why)) => CapSet::BelowGrants(why),
        Err(e) => CapSet::Invalid(e),
    }
}

/// A status-page session: the cookie carries a random id, the store its SHA-256 only, with who
/// signed in and with what, so that logout, token revocation and expiry end it on every
/// replica.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PageSession {
    /// SHA-256 of the session id.
    pub hash: [u8; 32],
    /// The tenant, or `None` for the admin.
    pub tenant: Option<String>,
    /// The tenant token's id it was opened with (its revocation ends the session).
    pub token_id: Option<String>,
    /// SHA-256 of the token it was opened with (the admin token changing ends admin sessions).
    pub credential: [u8; 32],
    /// Opened (ms since epoch).
    pub created_at: i64,
    /// Ends (ms since epoch).
    pub expires_at: i64,
}

/// Tenancy state; every method is one atomic step.
#[async_trait]
pub trait TenancyStore: Send + Sync {
    /// Creates tenant `name`; `Ok(false)` if it exists.
    async fn create_tenant(&self, name: &str, now: i64) -> Result<bool, StoreError>;
    /// One tenant, with its caps.
    async fn tenant(&self, name: &str) -> Result<Option<TenantRecord>, StoreError>;
    /// Every tenant, by name, with its caps.
    async fn tenants(&self) -> Result<Vec<TenantRecord>, StoreError>;
    /// Sets (replaces) the cap of `tenant` in `region`, unless the tenant's projects' quotas in
    /// that region already exceed it (checked in the same transaction as quotas are set).
    async fn set_tenant_cap(
        &self,
        tenant: &str,
        region: &str,
        cap: &ProjectQuota,
    ) -> Result<CapSet, StoreError>;
    /// Stores a tenant token (its hash); `Ok(false)` when there is no tenant or the id is taken.
    async fn add_tenant_token(&self, t: &TenantTokenRecord) -> Result<bool, StoreError>;
    /// The token with id `id`, revoked or expired ones included (the caller decides).
    async fn tenant_token(&self, id: &str) -> Result<Option<TenantTokenRecord>, StoreError>;
    /// Revokes token `id` of `tenant`; `Ok(false)` when unknown or already revoked.
    async fn revoke_tenant_token(
        &self,
        tenant: &str,
        id: &str,
        now: i64,
    ) -> Result<bool, StoreError>;
    /// Creates a project (its `quotas` are ignored: set them with
    /// [`TenancyStore::set_project_quota`]).
    async fn create_project(&self, p: &ProjectRecord) -> Result<ProjectCreated, StoreError>;
    /// One project with its quotas.
    async fn project(
        &self,
        tenant: &str,
        project: &str,
    ) -> Result<Option<ProjectRecord>, StoreError>;
    /// The projects of `tenant` (every tenant's when `None`), by tenant then name.
    async fn projects(&self, tenant: Option<&str>) -> Result<Vec<ProjectRecord>, StoreError>;
    /// Stores a status-page session.
    async fn open_page_session(&self, s: &PageSession) -> Result<(), StoreError>;
    /// The session whose id hashes to `hash`, expired ones included (the caller decides).
    async fn page_session(&self, hash: &[u8; 32]) -> Result<Option<PageSession>, StoreError>;
    /// Ends the session (logout); `Ok(false)` when there was none. Expired sessions older than
    /// `before` are removed too.
    async fn end_page_session(&self, hash: &[u8; 32], before: i64) -> Result<bool, StoreError>;
    /// Sets the quota of a project in `region`, unless the tenant's projects' quotas in that
    /// region would then exceed its cap there ([`check_cap`], decided in the same transaction
    /// as the write, so concurrent replicas cannot both squeeze under the cap).
    async fn set_project_quota(
        &self,
        tenant: &str,
        project: &str,
        region: &str,
        quota: &ProjectQuota,
    ) -> Result<QuotaSet, StoreError>;
}

/// The scope of a request row from its three nullable columns (all set, or none).
pub(crate) fn scope_of(
    tenant: Option<String>,
    project: Option<String>,
    project_json: Option<String>,
) -> Option<super::RequestScope> {
    Some(super::RequestScope {
        tenant: tenant?,
        project: project?,
        project_json: project_json?,
    })
}

/// The owner of a service-instance row from its two nullable columns.
pub(crate) fn owner_of(tenant: Option<String>, project: Option<String>) -> Option<super::Owner> {
    Some(super::Owner {
        tenant: tenant?,
        project: project?,
    })
}

/// Encodes a quota for a JSON column.
pub(crate) fn quota_json(q: &ProjectQuota) -> String {
    serde_json::to_string(q).unwrap_or_else(|_| "{}".into())
}

/// Decodes a quota column.
pub(crate) fn quota_of(json: &str) -> Result<ProjectQuota, String> {
    serde_json::from_str(json).map_err(|e| format!("a stored quota is not valid JSON: {e}"))
}

/// The sum of quantities, checked: a total past what a quantity can hold is an error, never a
/// wrapped or panicking sum (in every build profile).
fn sum(values: impl Iterator<Item = Option<String>>) -> Result<quantity::Milli, String> {
    let mut total: quantity::Milli = 0;
    for v in values.flatten() {
        total = total
            .checked_add(quantity::parse(&v)?)
            .ok_or_else(|| "the quotas add up past the largest quantity".to_string())?;
    }
    Ok(total)
}

fn show(m: quantity::Milli) -> String {
    if m % 1000 == 0 {
        (m / 1000).to_string()
    } else {
        format!("{m}m")
    }
}

/// Reads one quantity of a quota.
type Getter = fn(&ProjectQuota) -> Option<String>;

/// The quantities of a quota, by name.
const QUANTITIES: [(&str, Getter); 3] = [
    ("cpu", |q| q.cpu.clone()),
    ("memory", |q| q.memory.clone()),
    ("storage", |q| q.storage.clone()),
];

/// Each project's grant of one resource (`api 5, web unlimited`).
fn listed(
    grants: &[(String, ProjectQuota)],
    get: impl Fn(&ProjectQuota) -> Option<String>,
) -> String {
    grants
        .iter()
        .map(|(p, q)| format!("{p} {}", get(q).unwrap_or_else(|| "unlimited".into())))
        .collect::<Vec<_>>()
        .join(", ")
}

/// Whether `asked` (a project's new quota) fits under `cap` beside `others` (the tenant's other
/// projects' quotas in the same region). A resource the cap limits must be limited by the
/// quota too. `Ok(Some(_))`: over the cap, naming the first resource over it; `Err`: a quantity
/// that does not parse.
pub fn check_cap(
    cap: &ProjectQuota,
    others: &[ProjectQuota],
    asked: &ProjectQuota,
) -> Result<Option<CapExceeded>, String> {
    for (resource, get) in QUANTITIES {
        let Some(limit) = get(cap) else { continue };
        let limit_m = quantity::parse(&limit).map_err(|e| format!("cap {resource}: {e}"))?;
        let taken = sum(others.iter().map(get)).map_err(|e| format!("{resource}: {e}"))?;
        let over = |asked: String| CapExceeded {
            resource: resource.to_string(),
            cap: limit.clone(),
            others: show(taken),
            asked,
        };
        match get(asked) {
            None => return Ok(Some(over("unlimited".into()))),
            Some(a) => {
                let a_m = quantity::parse(&a).map_err(|e| format!("{resource}: {e}"))?;
                if taken.checked_add(a_m).is_none_or(|t| t > limit_m) {
                    return Ok(Some(over(a)));
                }
            }
        }
    }
    for (kind, limit) in &cap.objects {
        let taken: u64 = others
            .iter()
            .filter_map(|q| q.objects.get(kind))
            .fold(0u64, |a, b| a.saturating_add(*b));
        let over = |asked: String| CapExceeded {
            resource: format!("objects.{kind}"),
            cap: limit.to_string(),
            others: taken.to_string(),
            asked,
        };
        match asked.objects.get(kind) {
            None => return Ok(Some(over("unlimited".into()))),
            Some(a) if taken.saturating_add(*a) > *limit => return Ok(Some(over(a.to_string()))),
            Some(_) => {}
        }
    }
    Ok(None)
}

/// Checks every quantity of a quota parses (the error names the field).
pub fn check_quantities(q: &ProjectQuota) -> Result<(), String> {
    for (field, get) in QUANTITIES {
        if let Some(v) = get(q) {
            quantity::parse(&v).map_err(|e| format!("{field}: {e}"))?;
        }
    }
    Ok(())
}

/// The adapters' shared decision once they read the cap and the other quotas.
pub(crate) fn decide_quota(
    cap: Option<ProjectQuota>,
    others: &[ProjectQuota],
    asked: &ProjectQuota,
) -> QuotaSet {
    if let Err(e) = check_quantities(asked) {
        return QuotaSet::Invalid(e);
    }
    match cap.map(|c| check_cap(&c, others, asked)) {
        None | Some(Ok(None)) => QuotaSet::Set,
        Some(Ok(Some(over))) => QuotaSet::OverCap(over),
        Some(Err(e)) => QuotaSet::Invalid(e),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn q(cpu: Option<&str>, memory: Option<&str>, pods: Option<u64>) -> ProjectQuota {
        ProjectQuota {
            cpu: cpu.map(str::to_string),
            memory: memory.map(str::to_string),
            storage: None,
            objects: pods
                .map(|n| [("pods".to_string(), n)].into())
                .unwrap_or_default(),
        }
    }

    #[test]
    fn quotas_add_up_under_the_cap_in_their_units() {
        let cap = q(Some("4"), Some("8Gi"), Some(10));
        let others = [q(Some("1500m"), Some("4Gi"), Some(5))];
        // 1.5 + 2.5 = 4 cpus, 4Gi + 4096Mi = 8Gi: exactly at the cap is fine.
        let fits = q(Some("2.5"), Some("4096Mi"), Some(5));
        assert_eq!(check_cap(&cap, &others, &fits).unwrap(), None);
        let over = check_cap(&cap, &others, &q(Some("2600m"), Some("1Gi"), Some(1)))
            .unwrap()
            .unwrap();
        assert_eq!(
            (
                over.resource.as_str(),
                over.cap.as_str(),
                over.others.as_str(),
                over.asked.as_str()
            ),
            ("cpu", "4", "1500m", "2600m")
        );
        let over = check_cap(&cap, &others, &q(Some("1"), Some("5Gi"), Some(1)))
            .unwrap()
            .unwrap();
        assert_eq!(over.resource, "memory");
        let over = check_cap(&cap, &others, &q(Some("1"), Some("1Gi"), Some(6)))
            .unwrap()
            .unwrap();
        assert_eq!(
            (over.resource.as_str(), over.others.as_str()),
            ("objects.pods", "5")
        );
        // What the cap limits, the quota must limit too.
        let over = check_cap(&cap, &[], &q(None, Some("1Gi"), Some(1)))
            .unwrap()
            .unwrap();
        assert_eq!(
            (over.resource.as_str(), over.asked.as_str()),
            ("cpu", "unlimited")
        );
        // No cap: anything goes; a bad quantity is named.
        assert_eq!(
            decide_quota(None, &others, &q(Some("100"), None, None)),
            QuotaSet::Set
        );
        match decide_quota(None, &[], &q(Some("lots"), None, None)) {
            QuotaSet::Invalid(e) => assert!(e.starts_with("cpu: "), "{e}"),
            other => panic!("{other:?}"),
        }
    }
}
