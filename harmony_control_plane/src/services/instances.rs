//! Service instances: create (placed by [`super::placement`], dispatched now or queued until
//! its region advertises the type), list, delete (cancel a queued create, forget a create that
//! never reached a provider, or ask the provider), and the agents' `instance` status frames.
//! Creates and deletes travel as durable requests ([`super::instance_requests`]).

use harmony_agent_protocol::{InstanceState, InstanceStatus};
use harmony_types::Dns1123Label;
use serde_json::{Map, Value};
use std::collections::HashMap;
use std::time::Duration;

use super::instance_ids::{self, MAX_TENANT_ID_CHARS};
use super::instance_requests::{self, Answer, Verb};
use super::placement::{self, Placement, RegionOffers};
use super::{ControlPlane, requests};
use crate::store::{Outcome, ServiceRecord, StoreError, now_ms};

/// How long a create or delete waits for the agent's first answer before answering "accepted".
pub const ANSWER_WAIT: Duration = Duration::from_secs(5);

/// Why a service-instance operation was refused.
#[derive(Debug, thiserror::Error)]
pub enum InstanceError {
    /// A field is invalid.
    #[error("{field}: {reason}")]
    Invalid {
        /// The field.
        field: &'static str,
        /// What is wrong and the fix.
        reason: String,
    },
    /// The id is taken.
    #[error("id: {0}")]
    Exists(String),
    /// The named region does not exist.
    #[error(
        "region: no region \"{0}\"; create it with POST /v1/admin/regions or omit region to let the control plane choose"
    )]
    UnknownRegion(String),
    /// A child named another region than its parent's (422 `containment`).
    #[error(
        "containment: service instance \"{child}\" belongs to parent \"{parent}\" in region \"{parent_region}\", but region \"{child_region}\" was asked; a child lives in its parent's region: omit region or name \"{parent_region}\""
    )]
    Containment {
        /// The child's id.
        child: String,
        /// The parent's id.
        parent: String,
        /// The region asked for the child.
        child_region: String,
        /// The parent's region.
        parent_region: String,
    },
    /// The named region is decommissioned.
    #[error(
        "region: region \"{0}\" is decommissioned; name another region or omit region to let the control plane choose"
    )]
    Decommissioned(String),
    /// No region can take the type now.
    #[error("{message}")]
    Unavailable {
        /// What is wrong and where the type is available.
        message: String,
        /// Regions advertising the type now.
        available_in: Vec<String>,
        /// Regions holding it degraded now.
        degraded_in: Vec<String>,
    },
    /// No such instance.
    #[error("no service instance \"{0}\"; list them with GET /v1/services")]
    NotFound(String),
    /// The record kept changing under a delete.
    #[error(
        "service instance \"{0}\" kept changing state while being deleted; retry DELETE /v1/services/{0}"
    )]
    Busy(String),
    /// The state database failed.
    #[error(transparent)]
    Store(#[from] StoreError),
    /// No randomness.
    #[error("internal error: {0}")]
    Internal(String),
}

/// A create as the caller asked for it.
#[derive(Debug, Clone)]
pub struct NewInstance {
    /// The service type.
    pub service_type: String,
    /// The provider-specific spec (`None`: `{}`).
    pub spec: Option<Value>,
    /// The region; the control plane chooses when `None`.
    pub region: Option<String>,
    /// The id, in the owner's tenant (see [`super::instance_ids`]); `svc-` and 16 random hex
    /// digits when `None`.
    pub id: Option<String>,
    /// The tenant and project owning it (checked by the caller).
    pub owner: Option<crate::store::Owner>,
    /// The instance it belongs to, by its id in the owner's tenant: placed in its parent's
    /// region and zone.
    pub parent: Option<String>,
}

/// A create's result: the record, and whether its provider already answered.
#[derive(Debug, Clone)]
pub struct Created {
    /// The record as it stands now (`None`: its provider reported it deleted at once).
    pub record: Option<ServiceRecord>,
    /// The instance's stored id.
    pub id: String,
    /// Whether the provider answered within [`ANSWER_WAIT`] (otherwise it is pending or queued).
    pub settled: bool,
}

/// What a delete did.
#[derive(Debug, Clone, PartialEq)]
pub enum Deleted {
    /// A queued create was cancelled before it was sent.
    Cancelled,
    /// The record is gone; `detail` says why when it was forgotten rather than deleted.
    Gone(Option<String>),
    /// The provider is still deleting it.
    Deleting(Box<ServiceRecord>),
}

/// The id is taken in the caller's own tenant (`id` as the caller named it).
fn exists(id: &str, rec: &ServiceRecord) -> InstanceError {
    InstanceError::Exists(format!(
        "service instance \"{id}\" already exists in region \"{}\" (state {}); choose another id, or delete it first with DELETE /v1/services/{id}",
        rec.region, rec.state
    ))
}

/// The id as the caller gave it (or a random one) and the spec, checked.
fn checked(new: NewInstance) -> Result<(String, Value), InstanceError> {
    let invalid = |field, reason: String| InstanceError::Invalid { field, reason };
    Dns1123Label::parse(&new.service_type).map_err(|e| invalid("type", e.to_string()))?;
    let spec = match new.spec {
        None | Some(Value::Null) => Value::Object(Map::new()),
        Some(v @ Value::Object(_)) => v,
        Some(_) => {
            return Err(invalid(
                "spec",
                "must be a JSON object (the provider-specific spec), e.g. {\"image\": \"nginx:1.27\"}; omit it for {}".into(),
            ));
        }
    };
    let id = match new.id {
        Some(id) => {
            Dns1123Label::parse(&id).map_err(|e| invalid("id", e.to_string()))?;
            if new.owner.is_some() && id.len() > MAX_TENANT_ID_CHARS {
                return Err(invalid(
                    "id",
                    format!(
                        "a project's instance id is at most {MAX_TENANT_ID_CHARS} characters (its agent knows it with 11 more: a hash of the tenant); shorten it, or omit it to let the control plane choose"
                    ),
                ));
            }
            id
        }
        None => format!(
            "svc-{}",
            super::random_hex(8).map_err(|e| InstanceError::Internal(e.to_string()))?
        ),
    };
    Ok((id, spec))
}

/// Validates, places and dispatches (or queues) a create.
pub async fn create(cp: &ControlPlane, new: NewInstance) -> Result<Created, InstanceError> {
    let t = new.service_type.clone();
    let mut named = new.region.clone();
    let owner = new.owner.clone();
    let tenant = owner.as_ref().map(|o| o.tenant.clone());
    let tenant = tenant.as_deref();
    let asked_parent = new.parent.clone();
    let (name, spec) = checked(new)?;
    let id = instance_ids::stored_id(tenant, &name);
    // The parent is named in the owner's tenant: another tenant's is not found, like a
    // missing one.
    let (parent, pin) = match &asked_parent {
        Some(p) => {
            let Some(p_rec) = instance_ids::find(cp, p, tenant).await? else {
                return Err(InstanceError::Invalid {
                    field: "parent",
                    reason: format!(
                        "no service instance \"{p}\"; create the parent first or omit parent"
                    ),
                });
            };
            let (region, zone) = parent_place(&name, p, &p_rec, named.as_deref())?;
            named = Some(region.clone());
            (Some(p_rec.id), Some((region, zone)))
        }
        None => (None, None),
    };
    if let Some(existing) = instance_ids::find(cp, &name, tenant).await? {
        return Err(exists(&name, &existing));
    }
    let offers =
        super::zones::region_offers(cp, pin.as_ref().map(|(r, z)| (r.as_str(), z.as_str())))
            .await?;
    let zone_of = |region: &str| {
        offers
            .iter()
            .find(|o| o.name == region)
            .map(|o| o.zone.clone())
            .unwrap_or_default()
    };
    let now = now_ms();
    let record = |region: &str, state, detail: String, attempts| ServiceRecord {
        id: id.clone(),
        service_type: t.clone(),
        region: region.to_string(),
        zone: zone_of(region),
        parent: parent.clone(),
        state,
        detail,
        provider: None,
        outputs: Map::new(),
        spec: spec.clone(),
        created_at: now,
        updated_at: now,
        attempts,
        owner: owner.clone(),
    };
    match placement::place(&t, named.as_deref(), &offers) {
        Placement::Dispatch(region) => {
            let rec = record(
                &region,
                InstanceState::Pending,
                format!("sent to region \"{region}\"; waiting for its agent's answer"),
                1,
            );
            insert(cp, &rec, &name).await?;
            log::info!("service instance {id} ({t}): placed in region {region}, dispatching");
            let answered = match instance_requests::send_or_fail(cp, &rec, Verb::Create).await? {
                Some(accepted) => match requests::wait_answer(cp, &accepted, ANSWER_WAIT).await {
                    Ok(res) => {
                        instance_requests::apply(cp, &rec, Verb::Create, Answer::Res(res)).await?;
                        true
                    }
                    Err(_) => false,
                },
                None => true,
            };
            let record = cp.store.service(&id).await?;
            let settled = answered
                && record.as_ref().is_some_and(|r| {
                    !matches!(r.state, InstanceState::Pending | InstanceState::Queued)
                });
            Ok(Created {
                record,
                id,
                settled,
            })
        }
        Placement::Queue { region, why } => {
            let detail = instance_requests::queued_detail(&why, &name, &region, &t);
            let rec = record(&region, InstanceState::Queued, detail, 0);
            insert(cp, &rec, &name).await?;
            log::info!("service instance {id} ({t}): queued for region {region}: {why}");
            Ok(Created {
                record: Some(rec),
                id,
                settled: false,
            })
        }
        Placement::UnknownRegion(region) => Err(InstanceError::UnknownRegion(region)),
        Placement::Decommissioned(region) => Err(InstanceError::Decommissioned(region)),
        Placement::Unavailable {
            message,
            available_in,
            degraded_in,
        } => Err(InstanceError::Unavailable {
            message,
            available_in,
            degraded_in,
        }),
    }
}

/// Where a child goes: its parent's region and zone (`child` and `parent` as the caller named
/// them); naming another region is a containment error.
fn parent_place(
    child: &str,
    parent: &str,
    p: &ServiceRecord,
    named: Option<&str>,
) -> Result<(String, String), InstanceError> {
    if let Some(region) = named.filter(|r| *r != p.region) {
        return Err(InstanceError::Containment {
            child: child.to_string(),
            parent: parent.to_string(),
            child_region: region.to_string(),
            parent_region: p.region.clone(),
        });
    }
    Ok((p.region.clone(), p.zone.clone()))
}

/// Stores a new record (`name`: its id as the caller gave it).
async fn insert(cp: &ControlPlane, rec: &ServiceRecord, name: &str) -> Result<(), InstanceError> {
    if cp.store.insert_service(rec).await? {
        return Ok(());
    }
    match cp.store.service(&rec.id).await? {
        Some(existing) => Err(exists(name, &existing)),
        None => Err(InstanceError::Exists(format!(
            "service instance \"{name}\" was created and removed concurrently; retry"
        ))),
    }
}

/// Whether `viewer` (a tenant; `None`: the admin) may see `rec`.
pub fn visible(rec: &ServiceRecord, viewer: Option<&str>) -> bool {
    viewer.is_none() || rec.owner.as_ref().map(|o| o.tenant.as_str()) == viewer
}

/// Every instance `viewer` may see, oldest first.
pub async fn list(
    cp: &ControlPlane,
    viewer: Option<&str>,
) -> Result<Vec<ServiceRecord>, InstanceError> {
    let mut all = cp.store.services().await?;
    all.retain(|r| visible(r, viewer));
    Ok(all)
}

/// One instance by the id `viewer` knows it by (a tenant: the id it gave; the admin: the stored
/// id); another tenant's does not exist for it.
pub async fn one(
    cp: &ControlPlane,
    id: &str,
    viewer: Option<&str>,
) -> Result<ServiceRecord, InstanceError> {
    instance_ids::find(cp, id, viewer)
        .await?
        .ok_or_else(|| InstanceError::NotFound(id.to_string()))
}

/// Cancels a queued create, forgets a create that never reached a provider (or one in a
/// decommissioned region), or asks the provider to delete the instance.
pub async fn delete(cp: &ControlPlane, id: &str) -> Result<Deleted, InstanceError> {
    // Each round reads the record and tries one compare-and-set; a lost race re-reads.
    for round in 0..8 {
        let Some(rec) = cp.store.service(id).await? else {
            return if round == 0 {
                Err(InstanceError::NotFound(id.to_string()))
            } else {
                Ok(Deleted::Gone(None))
            };
        };
        let at = (rec.state, rec.attempts);
        match rec.state {
            InstanceState::Queued => {
                if cp.store.cancel_queued(id).await? {
                    log::info!("service instance {id}: queued create cancelled");
                    return Ok(Deleted::Cancelled);
                }
            }
            InstanceState::Failed if rec.provider.is_none() => {
                if cp.store.remove_service_if(id, at).await? {
                    log::info!("service instance {id}: failed create forgotten");
                    return Ok(Deleted::Gone(None));
                }
            }
            _ => {
                let decommissioned = cp
                    .store
                    .region(&rec.region)
                    .await?
                    .is_none_or(|r| r.decommissioned_at.is_some());
                if decommissioned {
                    if cp.store.remove_service_if(id, at).await? {
                        log::warn!(
                            "service instance {id}: region {} is decommissioned; forgotten without deleting it",
                            rec.region
                        );
                        return Ok(Deleted::Gone(Some(format!(
                            "region \"{}\" is decommissioned: the instance was forgotten; its resources there, if any, were not deleted",
                            rec.region
                        ))));
                    }
                    continue;
                }
                let detail = format!(
                    "service_delete sent to region \"{}\"; waiting for its agent's answer",
                    rec.region
                );
                if let Some(claimed) = cp
                    .store
                    .next_attempt(id, at, InstanceState::Deleting, &detail)
                    .await?
                {
                    log::info!("service instance {id}: deleting in region {}", rec.region);
                    if let Some(accepted) =
                        instance_requests::send_or_fail(cp, &claimed, Verb::Delete).await?
                        && let Ok(res) = requests::wait_answer(cp, &accepted, ANSWER_WAIT).await
                    {
                        instance_requests::apply(cp, &claimed, Verb::Delete, Answer::Res(res))
                            .await?;
                    }
                    return Ok(match cp.store.service(id).await? {
                        None => Deleted::Gone(None),
                        Some(rec) => Deleted::Deleting(Box::new(rec)),
                    });
                }
            }
        }
    }
    Err(InstanceError::Busy(id.to_string()))
}

/// Sends the queued creates (of region `only`, or all) whose region advertises their type now;
/// fails those whose region was decommissioned. Safe on every replica at once: claiming a
/// queued create is a compare-and-set, so each is sent once.
pub async fn dispatch_queued(cp: &ControlPlane, only: Option<&str>) -> Result<(), StoreError> {
    let queued: Vec<ServiceRecord> = cp
        .store
        .services_in_state(InstanceState::Queued)
        .await?
        .into_iter()
        .filter(|r| only.is_none_or(|o| o == r.region))
        .collect();
    if queued.is_empty() {
        return Ok(());
    }
    let offers: HashMap<String, RegionOffers> = super::zones::region_offers(cp, None)
        .await?
        .into_iter()
        .map(|o| (o.name.clone(), o))
        .collect();
    for rec in queued {
        let offer = offers.get(&rec.region);
        if offer.is_none_or(|o| o.decommissioned) {
            let outcome = Outcome {
                state: InstanceState::Failed,
                detail: format!(
                    "region \"{}\" was decommissioned while this create was queued; delete it and create it in another region",
                    rec.region
                ),
                provider: None,
                outputs: None,
            };
            cp.store
                .settle(&rec.id, (InstanceState::Queued, rec.attempts), &outcome)
                .await?;
            continue;
        }
        if !offer.is_some_and(|o| o.advertises(&rec.service_type)) {
            continue;
        }
        let detail = format!(
            "sent to region \"{}\" (it advertises \"{}\" now); waiting for its agent's answer",
            rec.region, rec.service_type
        );
        // Cancelled (or claimed) meanwhile: the compare-and-set keeps it from being sent.
        if let Some(claimed) = cp.store.claim_queued(&rec.id, &detail).await? {
            log::info!(
                "service instance {}: region {} advertises {} now, dispatching the queued create",
                rec.id,
                rec.region,
                rec.service_type
            );
            instance_requests::send_or_fail(cp, &claimed, Verb::Create).await?;
        }
    }
    Ok(())
}

/// Applies the answers of every running create and delete that are stored but not yet applied
/// (their `RequestDone` event was missed, or a replica stopped): the safety net of
/// [`on_request_done`].
pub async fn reconcile(cp: &ControlPlane) -> Result<(), StoreError> {
    for state in [InstanceState::Pending, InstanceState::Deleting] {
        for rec in cp.store.services_in_state(state).await? {
            instance_requests::settle_if_answered(cp, &rec).await?;
        }
    }
    Ok(())
}

/// Applies the answer of request `id` if it is an instance's running create or delete.
pub async fn on_request_done(cp: &ControlPlane, id: &str) -> Result<(), StoreError> {
    let Some((instance, verb, attempt)) = instance_requests::parse_request_id(id) else {
        return Ok(());
    };
    if let Some(rec) = cp.store.service(instance).await?
        && rec.state == verb.state()
        && rec.attempts == attempt
    {
        instance_requests::settle_if_answered(cp, &rec).await?;
    }
    Ok(())
}

/// Applies an `instance` frame of `region`'s zone `zone` to the record of that id.
pub async fn apply_instance(
    cp: &ControlPlane,
    region: &str,
    zone: &str,
    status: InstanceStatus,
) -> Result<(), StoreError> {
    let id = status.instance_id.clone();
    let Some(rec) = cp.store.service(&id).await? else {
        log::info!(
            "region {region}: status of unknown service instance {id} ({}), ignored",
            status.state
        );
        return Ok(());
    };
    if rec.region != region || (!rec.zone.is_empty() && rec.zone != zone) {
        log::warn!(
            "region {region}: status of service instance {id}, which is placed in region {}; ignored",
            rec.region
        );
        return Ok(());
    }
    if status.state == InstanceState::Deleted {
        cp.store.remove_service(&id, region).await?;
        log::info!("service instance {id} in region {region}: deleted");
        return Ok(());
    }
    let stale = match rec.state {
        // A queued create is not at the agent; a status would stop the queue from sending it.
        InstanceState::Queued => true,
        // A status polled before the delete must not bring the instance back to life.
        InstanceState::Deleting => !matches!(
            status.state,
            InstanceState::Deleting | InstanceState::Failed
        ),
        _ => false,
    };
    if stale {
        log::debug!(
            "region {region}: status {} of service instance {id} ignored while it is {}",
            status.state,
            rec.state
        );
        return Ok(());
    }
    let outcome = Outcome {
        state: status.state,
        detail: status.detail,
        provider: Some(status.provider),
        outputs: Some(status.outputs),
    };
    if cp
        .store
        .settle(&id, (rec.state, rec.attempts), &outcome)
        .await?
    {
        log::info!(
            "service instance {id} in region {region}: {}{}",
            outcome.state,
            if outcome.detail.is_empty() {
                String::new()
            } else {
                format!(" ({})", outcome.detail)
            }
        );
    } else {
        log::debug!("service instance {id}: status raced another change; ignored");
    }
    Ok(())
}
