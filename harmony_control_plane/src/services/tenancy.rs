//! Tenants, their tokens and projects, caps and quotas (the admin's half), and who a bearer
//! token proves the caller to be. Tenant tokens are `htt_<id>_<secret>`: looked up by id, their
//! SHA-256 compared in constant time; only the hash is stored, and no token is ever logged.

use harmony_agent_protocol::tenancy::ProjectQuota;
use harmony_api::TENANT_TOKEN_PREFIX;
use harmony_types::Dns1123Label;

use super::{ControlPlane, random_hex};
use crate::store::{
    CapExceeded, CapSet, ProjectCreated, ProjectRecord, QuotaSet, StoreError, TenantRecord,
    TenantTokenRecord, now_ms, tenancy::check_quantities,
};
use crate::tokens;

/// Why a tenancy operation was refused.
#[derive(Debug, thiserror::Error)]
pub enum TenancyError {
    /// A field is invalid.
    #[error("{field}: {reason}")]
    Invalid {
        /// The field.
        field: &'static str,
        /// What is wrong and the fix.
        reason: String,
    },
    /// No such tenant.
    #[error("no tenant \"{0}\"; create it with POST /v1/admin/tenants")]
    UnknownTenant(String),
    /// No such project (for a tenant caller, also another tenant's).
    #[error(
        "project: tenant \"{tenant}\" has no project \"{project}\"; list them with GET /v1/projects or create it with POST /v1/admin/tenants/{tenant}/projects"
    )]
    UnknownProject {
        /// The tenant.
        tenant: String,
        /// The project.
        project: String,
    },
    /// No such token.
    #[error("tenant \"{tenant}\" has no active token \"{id}\"")]
    UnknownToken {
        /// The tenant.
        tenant: String,
        /// The token id.
        id: String,
    },
    /// The name is taken.
    #[error("{0}")]
    Exists(String),
    /// The quota would exceed the tenant's cap.
    #[error(
        "quota: {resource} over tenant \"{tenant}\"'s cap in region \"{region}\": the cap is {cap}, its other projects' quotas take {others} and this one asks {asked}; lower this quota or raise the cap with PUT /v1/admin/tenants/{tenant}/caps/{region}",
        resource = over.resource, cap = over.cap, others = over.others, asked = over.asked
    )]
    OverCap {
        /// The tenant.
        tenant: String,
        /// The region.
        region: String,
        /// What exceeds what.
        over: Box<CapExceeded>,
    },
    /// The cap is below what the tenant's projects already hold in the region.
    #[error(
        "cap: {grants}; a cap may not be lowered below the quotas already granted in region \"{region}\": lower those projects' quotas first (PUT /v1/admin/tenants/{tenant}/projects/{{project}}/quotas/{region}), then the cap"
    )]
    CapBelowGrants {
        /// The tenant.
        tenant: String,
        /// The region.
        region: String,
        /// What the projects hold, in words.
        grants: String,
    },
    /// The state database failed.
    #[error(transparent)]
    Store(#[from] StoreError),
    /// No randomness.
    #[error("internal error: {0}")]
    Internal(String),
}

/// Checks a name is a DNS-1123 label.
pub fn label(field: &'static str, value: &str) -> Result<(), TenancyError> {
    Dns1123Label::parse(value)
        .map(|_| ())
        .map_err(|e| TenancyError::Invalid {
            field,
            reason: e.to_string(),
        })
}

/// Creates a tenant.
pub async fn create_tenant(cp: &ControlPlane, name: &str) -> Result<TenantRecord, TenancyError> {
    label("tenant", name)?;
    if !cp.store.create_tenant(name, now_ms()).await? {
        return Err(TenancyError::Exists(format!(
            "tenant: \"{name}\" already exists; list tenants with GET /v1/admin/tenants"
        )));
    }
    log::info!("tenant {name} created");
    tenant(cp, name).await
}

/// Every tenant, by name.
pub async fn tenants(cp: &ControlPlane) -> Result<Vec<TenantRecord>, TenancyError> {
    Ok(cp.store.tenants().await?)
}

/// The projects of `tenant` (every tenant's for `None`: the admin), by tenant and name.
pub async fn projects(
    cp: &ControlPlane,
    tenant: Option<&str>,
) -> Result<Vec<ProjectRecord>, TenancyError> {
    Ok(cp.store.projects(tenant).await?)
}

/// `Ok` when `tenant` has `project`; `UnknownProject` otherwise (exactly as for a project of
/// another tenant).
pub async fn require_project(
    cp: &ControlPlane,
    tenant: &str,
    project: &str,
) -> Result<(), TenancyError> {
    match cp.store.project(tenant, project).await? {
        Some(_) => Ok(()),
        None => Err(TenancyError::UnknownProject {
            tenant: tenant.to_string(),
            project: project.to_string(),
        }),
    }
}

/// One tenant.
pub async fn tenant(cp: &ControlPlane, name: &str) -> Result<TenantRecord, TenancyError> {
    cp.store
        .tenant(name)
        .await?
        .ok_or_else(|| TenancyError::UnknownTenant(name.to_string()))
}

/// A new tenant token (shown once), valid for `ttl_s` seconds or forever.
pub async fn mint_token(
    cp: &ControlPlane,
    tenant: &str,
    ttl_s: Option<f64>,
) -> Result<(TenantTokenRecord, harmony_agent_protocol::SecretString), TenancyError> {
    let now = now_ms();
    let expires_at = match ttl_s {
        None => None,
        // `as` saturates: no overflow whatever the number.
        Some(t) if t.is_finite() && t > 0.0 => Some(now.saturating_add((t * 1000.0) as i64)),
        Some(_) => {
            return Err(TenancyError::Invalid {
                field: "ttl_s",
                reason:
                    "must be a positive number of seconds; omit it for a token that never expires"
                        .into(),
            });
        }
    };
    let internal = |e: getrandom::Error| TenancyError::Internal(e.to_string());
    let id = random_hex(8).map_err(internal)?;
    let secret = tokens::mint("").map_err(internal)?;
    let token = harmony_agent_protocol::SecretString::new(format!(
        "{TENANT_TOKEN_PREFIX}{id}_{}",
        secret.expose()
    ));
    let record = TenantTokenRecord {
        id,
        tenant: tenant.to_string(),
        hash: tokens::hash(token.expose()),
        created_at: now,
        expires_at,
        revoked_at: None,
    };
    if !cp.store.add_tenant_token(&record).await? {
        return Err(TenancyError::UnknownTenant(tenant.to_string()));
    }
    log::info!("tenant {tenant}: token {} issued", record.id);
    Ok((record, token))
}

/// Revokes a tenant token.
pub async fn revoke_token(cp: &ControlPlane, tenant: &str, id: &str) -> Result<(), TenancyError> {
    if !cp.store.revoke_tenant_token(tenant, id, now_ms()).await? {
        return Err(TenancyError::UnknownToken {
            tenant: tenant.to_string(),
            id: id.to_string(),
        });
    }
    log::info!("tenant {tenant}: token {id} revoked");
    Ok(())
}

/// The tenant a presented tenant token acts for: `None` when it is not a well-formed, known,
/// unrevoked, unexpired tenant token.
pub async fn authenticate(cp: &ControlPlane, token: &str) -> Result<Option<String>, StoreError> {
    Ok(authenticate_token(cp, token)
        .await?
        .map(|(tenant, _)| tenant))
}

/// Like [`authenticate`], also giving the token's id.
pub async fn authenticate_token(
    cp: &ControlPlane,
    token: &str,
) -> Result<Option<(String, String)>, StoreError> {
    let Some(rest) = token.strip_prefix(TENANT_TOKEN_PREFIX) else {
        return Ok(None);
    };
    let Some((id, _)) = rest.split_once('_') else {
        return Ok(None);
    };
    if id.is_empty() || id.len() > 64 || !id.bytes().all(|b| b.is_ascii_hexdigit()) {
        return Ok(None);
    }
    let Some(stored) = cp.store.tenant_token(id).await? else {
        return Ok(None);
    };
    let now = now_ms();
    let valid = tokens::same(&tokens::hash(token), &stored.hash)
        && stored.revoked_at.is_none()
        && stored.expires_at.is_none_or(|t| t > now);
    Ok(valid.then(|| (stored.tenant, id.to_string())))
}

/// Sets a tenant's cap in a region.
pub async fn set_cap(
    cp: &ControlPlane,
    tenant: &str,
    region: &str,
    cap: &ProjectQuota,
) -> Result<TenantRecord, TenancyError> {
    label("region", region)?;
    check_quantities(cap).map_err(|reason| TenancyError::Invalid {
        field: "cap",
        reason,
    })?;
    match cp.store.set_tenant_cap(tenant, region, cap).await? {
        CapSet::Set => {}
        CapSet::NoTenant => return Err(TenancyError::UnknownTenant(tenant.to_string())),
        CapSet::BelowGrants(grants) => {
            return Err(TenancyError::CapBelowGrants {
                tenant: tenant.to_string(),
                region: region.to_string(),
                grants,
            });
        }
        CapSet::Invalid(reason) => {
            return Err(TenancyError::Invalid {
                field: "cap",
                reason,
            });
        }
    }
    log::info!("tenant {tenant}: cap in region {region} set");
    self::tenant(cp, tenant).await
}

/// Creates a project (namespace `<tenant>-<project>` unless given).
pub async fn create_project(
    cp: &ControlPlane,
    tenant: &str,
    project: &str,
    namespace: Option<&str>,
) -> Result<ProjectRecord, TenancyError> {
    label("project", project)?;
    let namespace = namespace
        .map(str::to_string)
        .unwrap_or_else(|| format!("{tenant}-{project}"));
    label("namespace", &namespace).map_err(|e| match namespace {
        _ if namespace.len() > 63 => TenancyError::Invalid {
            field: "namespace",
            reason: format!(
                "\"{namespace}\" is {} characters, over the 63 a namespace may have; give a shorter one in namespace",
                namespace.len()
            ),
        },
        _ => e,
    })?;
    let record = ProjectRecord {
        tenant: tenant.to_string(),
        project: project.to_string(),
        namespace: namespace.clone(),
        created_at: now_ms(),
        quotas: Default::default(),
    };
    match cp.store.create_project(&record).await? {
        ProjectCreated::Created => {}
        ProjectCreated::NoTenant => return Err(TenancyError::UnknownTenant(tenant.into())),
        ProjectCreated::Exists => {
            return Err(TenancyError::Exists(format!(
                "project: tenant \"{tenant}\" already has project \"{project}\""
            )));
        }
        ProjectCreated::NamespaceTaken(owner) => {
            return Err(TenancyError::Exists(format!(
                "namespace: \"{namespace}\" belongs to project {owner}; give another in namespace"
            )));
        }
    }
    log::info!("tenant {tenant}: project {project} created (namespace {namespace})");
    Ok(record)
}

/// Sets a project's quota in a region, within the tenant's cap there.
pub async fn set_quota(
    cp: &ControlPlane,
    tenant: &str,
    project: &str,
    region: &str,
    quota: &ProjectQuota,
) -> Result<ProjectRecord, TenancyError> {
    label("region", region)?;
    let unknown = || TenancyError::UnknownProject {
        tenant: tenant.to_string(),
        project: project.to_string(),
    };
    match cp
        .store
        .set_project_quota(tenant, project, region, quota)
        .await?
    {
        QuotaSet::Set => {}
        QuotaSet::NoProject => return Err(unknown()),
        QuotaSet::Invalid(reason) => {
            return Err(TenancyError::Invalid {
                field: "quota",
                reason,
            });
        }
        QuotaSet::OverCap(over) => {
            return Err(TenancyError::OverCap {
                tenant: tenant.to_string(),
                region: region.to_string(),
                over: Box::new(over),
            });
        }
    }
    log::info!("tenant {tenant}: project {project}'s quota in region {region} set");
    cp.store.project(tenant, project).await?.ok_or_else(unknown)
}
