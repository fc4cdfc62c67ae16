//! Service instances: placement on a region that advertises the type, the queue of creates
//! waiting for a degraded type, and dispatch of `service_*` ops to the agents.
//!
//! Every state change of a record is a compare-and-set on its stored (state, attempt) pair, so
//! a cancel, a delete and a late answer can never overwrite each other: a cancelled create is
//! never sent, and an answer to an old attempt is ignored.

use harmony_agent_protocol::{
    InstanceState, InstanceStatus, Op, Req, Res, ServiceCreateParams, ServiceRef, Services, code,
};
use harmony_types::Dns1123Label;
use serde::{Deserialize, Serialize};
use serde_json::{Map, Value, json};
use std::collections::HashMap;
use std::sync::Arc;
use std::time::Duration;
use tokio::sync::oneshot;

use crate::App;
use crate::hub::{self, Health};
use crate::store::{Outcome, StoreError, now_ms};

/// How long `POST` and `DELETE /v1/services...` wait for the agent's first answer before
/// answering 202.
pub const ANSWER_WAIT: Duration = Duration::from_secs(5);

/// A service instance as stored and as the API shows it.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct ServiceRecord {
    /// The instance id (a DNS-1123 label).
    pub id: String,
    /// The service type.
    #[serde(rename = "type")]
    pub service_type: String,
    /// The region it was placed in.
    pub region: String,
    /// Its state.
    pub state: InstanceState,
    /// Why it is in that state.
    pub detail: String,
    /// The provider serving it, once an agent named it.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub provider: Option<String>,
    /// What a consumer needs to use it (never secret values).
    pub outputs: Map<String, Value>,
    /// The provider-specific spec it was created with.
    pub spec: Value,
    /// Creation time (ms since epoch).
    pub created_at: i64,
    /// Last change (ms since epoch).
    pub updated_at: i64,
    /// Dispatch attempts so far (creates and deletes); numbers the request ids.
    #[serde(skip)]
    pub attempts: u32,
}

/// What placement knows of one region.
#[derive(Debug, Clone)]
pub struct RegionOffers {
    /// The region.
    pub name: String,
    /// Whether it was decommissioned (never a placement target).
    pub decommissioned: bool,
    /// Its live health.
    pub health: Health,
    /// The latest `services` frame of its agent.
    pub services: Services,
    /// Instances placed there that are neither failed nor being deleted.
    pub live_instances: usize,
}

impl RegionOffers {
    fn advertises(&self, service_type: &str) -> bool {
        !self.decommissioned && hub::advertises(self.health, &self.services, service_type)
    }

    fn degraded(&self, service_type: &str) -> bool {
        !self.decommissioned && hub::holds_degraded(self.health, &self.services, service_type)
    }

    fn why_degraded(&self, service_type: &str) -> String {
        if self.health != Health::Healthy {
            return format!("region \"{}\" is {}", self.name, health_word(self.health));
        }
        match self
            .services
            .offers
            .iter()
            .find(|o| o.service_type == service_type)
        {
            Some(o) if o.detail.is_empty() => format!(
                "provider \"{}\" of service type \"{service_type}\" in region \"{}\" is {}",
                o.provider, self.name, o.health
            ),
            Some(o) => format!(
                "provider \"{}\" of service type \"{service_type}\" in region \"{}\" is {}: {}",
                o.provider, self.name, o.health, o.detail
            ),
            None => format!(
                "region \"{}\" does not advertise service type \"{service_type}\" now",
                self.name
            ),
        }
    }
}

fn health_word(h: Health) -> &'static str {
    match h {
        Health::Healthy => "healthy",
        Health::Unhealthy => "unhealthy",
        Health::Unavailable => "unavailable",
    }
}

/// Where a create goes.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Placement {
    /// Send it to this region now.
    Dispatch(String),
    /// Queue it for this region until it advertises the type.
    Queue {
        /// The region.
        region: String,
        /// Why it is not advertised now.
        why: String,
    },
    /// The named region does not exist.
    UnknownRegion(String),
    /// The named region is decommissioned.
    Decommissioned(String),
    /// No suitable region: refused.
    Unavailable {
        /// For people: what is wrong and where the type is available.
        message: String,
        /// Regions advertising the type now.
        available_in: Vec<String>,
        /// Regions holding it degraded now.
        degraded_in: Vec<String>,
    },
}

/// Chooses where a create of `service_type` goes, in the region `named` or, when `None`, the
/// advertising region with the fewest live instances (ties broken by name).
pub fn place(service_type: &str, named: Option<&str>, regions: &[RegionOffers]) -> Placement {
    let mut regions: Vec<&RegionOffers> = regions.iter().collect();
    regions.sort_by(|a, b| a.name.cmp(&b.name));
    let available_in: Vec<String> = regions
        .iter()
        .filter(|r| r.advertises(service_type))
        .map(|r| r.name.clone())
        .collect();
    let degraded_in: Vec<String> = regions
        .iter()
        .filter(|r| r.degraded(service_type))
        .map(|r| r.name.clone())
        .collect();
    let fewest = |pred: &dyn Fn(&RegionOffers) -> bool| {
        regions
            .iter()
            .filter(|r| pred(r))
            .min_by(|a, b| {
                a.live_instances
                    .cmp(&b.live_instances)
                    .then_with(|| a.name.cmp(&b.name))
            })
            .copied()
    };
    match named {
        Some(name) => {
            let Some(r) = regions.iter().find(|r| r.name == name) else {
                return Placement::UnknownRegion(name.to_string());
            };
            if r.decommissioned {
                return Placement::Decommissioned(name.to_string());
            }
            if r.advertises(service_type) {
                return Placement::Dispatch(name.to_string());
            }
            if r.degraded(service_type) {
                return Placement::Queue {
                    region: name.to_string(),
                    why: r.why_degraded(service_type),
                };
            }
            let elsewhere = if available_in.is_empty() {
                "it is available in no region now".to_string()
            } else {
                format!("it is available in: {}", available_in.join(", "))
            };
            Placement::Unavailable {
                message: format!(
                    "service type \"{service_type}\" is not available in region \"{name}\"; {elsewhere}"
                ),
                available_in,
                degraded_in,
            }
        }
        None => {
            if let Some(r) = fewest(&|r| r.advertises(service_type)) {
                return Placement::Dispatch(r.name.clone());
            }
            if let Some(r) = fewest(&|r| r.degraded(service_type)) {
                return Placement::Queue {
                    region: r.name.clone(),
                    why: r.why_degraded(service_type),
                };
            }
            let listed: Vec<String> = regions
                .iter()
                .filter(|r| !r.decommissioned)
                .map(|r| {
                    format!(
                        "{}: [{}]",
                        r.name,
                        hub::advertised_types(r.health, &r.services).join(", ")
                    )
                })
                .collect();
            let listed = if listed.is_empty() {
                "none (no region exists; create one with POST /v1/admin/regions)".to_string()
            } else {
                listed.join(", ")
            };
            Placement::Unavailable {
                message: format!(
                    "no region advertises service type \"{service_type}\" now; advertised types: {listed}"
                ),
                available_in,
                degraded_in,
            }
        }
    }
}

/// An HTTP answer: status and JSON body.
#[derive(Debug, Clone, PartialEq)]
pub struct Answer {
    /// The HTTP status.
    pub status: u16,
    /// The JSON body.
    pub body: Value,
}

fn answer(status: u16, body: Value) -> Answer {
    Answer { status, body }
}

fn refuse(status: u16, message: impl Into<String>) -> Answer {
    answer(status, json!({ "error": message.into() }))
}

fn internal(e: StoreError) -> Answer {
    log::error!("{e}");
    refuse(500, e.to_string())
}

fn record_json(rec: &ServiceRecord) -> Value {
    serde_json::to_value(rec).unwrap_or(Value::Null)
}

/// `POST /v1/services` body.
#[derive(Debug, Clone, Deserialize)]
pub struct CreateRequest {
    /// The service type.
    #[serde(rename = "type")]
    pub service_type: String,
    /// The provider-specific spec (a JSON object; `{}` when absent).
    #[serde(default)]
    pub spec: Option<Value>,
    /// The region to place it in; the control plane chooses when absent.
    #[serde(default)]
    pub region: Option<String>,
    /// The instance id; `svc-` and 10 random hex digits when absent.
    #[serde(default)]
    pub id: Option<String>,
}

fn random_id() -> Result<String, Answer> {
    let mut b = [0u8; 5];
    getrandom::fill(&mut b).map_err(|e| {
        log::error!("no randomness for an instance id: {e}");
        refuse(500, "internal error: no randomness for an instance id")
    })?;
    Ok(format!(
        "svc-{}",
        b.iter().map(|x| format!("{x:02x}")).collect::<String>()
    ))
}

fn already_exists(rec: &ServiceRecord) -> Answer {
    refuse(
        409,
        format!(
            "id: service instance \"{}\" already exists in region \"{}\" (state {}); choose another id, or delete it first with DELETE /v1/services/{}",
            rec.id, rec.region, rec.state, rec.id
        ),
    )
}

fn queued_detail(why: &str, id: &str, region: &str, service_type: &str) -> String {
    format!(
        "queued: {why}; it is sent to region \"{region}\" once the region advertises \"{service_type}\" again. DELETE /v1/services/{id} cancels it"
    )
}

/// What placement needs to know of every region now.
fn region_offers(app: &App) -> Result<Vec<RegionOffers>, StoreError> {
    let counts = app.store.live_services_by_region()?;
    Ok(app
        .store
        .regions()?
        .into_iter()
        .map(|r| {
            let (health, services) = app.hub.services(&r.name);
            RegionOffers {
                live_instances: counts.get(&r.name).copied().unwrap_or(0),
                decommissioned: r.decommissioned_at.is_some(),
                name: r.name,
                health,
                services,
            }
        })
        .collect())
}

/// Validates, places and dispatches (or queues) a create; both arms are HTTP answers.
pub async fn create(app: &Arc<App>, body: CreateRequest) -> Result<Answer, Answer> {
    Dns1123Label::parse(&body.service_type).map_err(|e| refuse(400, format!("type: {e}")))?;
    let spec = match body.spec {
        None | Some(Value::Null) => Value::Object(Map::new()),
        Some(v @ Value::Object(_)) => v,
        Some(_) => {
            return Err(refuse(
                400,
                "spec: must be a JSON object (the provider-specific spec), e.g. {\"image\": \"nginx:1.27\"}; omit it for {}",
            ));
        }
    };
    let id = match body.id {
        Some(id) => {
            Dns1123Label::parse(&id).map_err(|e| refuse(400, format!("id: {e}")))?;
            id
        }
        None => random_id()?,
    };
    if let Some(existing) = app.store.service(&id).map_err(internal)? {
        return Err(already_exists(&existing));
    }
    let regions = region_offers(app).map_err(internal)?;
    let t = body.service_type;
    let now = now_ms();
    let record = |region: &str, state, detail: String, attempts| ServiceRecord {
        id: id.clone(),
        service_type: t.clone(),
        region: region.to_string(),
        state,
        detail,
        provider: None,
        outputs: Map::new(),
        spec: spec.clone(),
        created_at: now,
        updated_at: now,
        attempts,
    };
    match place(&t, body.region.as_deref(), &regions) {
        Placement::Dispatch(region) => {
            let rec = record(
                &region,
                InstanceState::Pending,
                format!("sent to region \"{region}\"; waiting for its agent's answer"),
                1,
            );
            insert(app, &rec)?;
            log::info!("service instance {id} ({t}): placed in region {region}, dispatching");
            let answered = tokio::time::timeout(ANSWER_WAIT, dispatch_create(app, rec))
                .await
                .is_ok_and(|r| r.is_ok());
            match app.store.service(&id).map_err(internal)? {
                Some(rec) => {
                    let settled =
                        !matches!(rec.state, InstanceState::Pending | InstanceState::Queued);
                    let status = if answered && settled { 201 } else { 202 };
                    Ok(answer(status, record_json(&rec)))
                }
                // Its provider reported it deleted before we could read it back.
                None => Ok(answer(202, json!({"id": id, "state": "deleted"}))),
            }
        }
        Placement::Queue { region, why } => {
            let rec = record(
                &region,
                InstanceState::Queued,
                queued_detail(&why, &id, &region, &t),
                0,
            );
            insert(app, &rec)?;
            log::info!("service instance {id} ({t}): queued for region {region}: {why}");
            Ok(answer(202, record_json(&rec)))
        }
        Placement::UnknownRegion(region) => Err(refuse(
            404,
            format!(
                "region: no region \"{region}\"; create it with POST /v1/admin/regions or omit region to let the control plane choose"
            ),
        )),
        Placement::Decommissioned(region) => Err(refuse(
            410,
            format!(
                "region: region \"{region}\" is decommissioned; name another region or omit region to let the control plane choose"
            ),
        )),
        Placement::Unavailable {
            message,
            available_in,
            degraded_in,
        } => Err(answer(
            409,
            json!({"error": message, "available_in": available_in, "degraded_in": degraded_in}),
        )),
    }
}

fn insert(app: &App, rec: &ServiceRecord) -> Result<(), Answer> {
    if app.store.insert_service(rec).map_err(internal)? {
        return Ok(());
    }
    match app.store.service(&rec.id).map_err(internal)? {
        Some(existing) => Err(already_exists(&existing)),
        None => Err(refuse(
            409,
            format!(
                "id: service instance \"{}\" was created and removed concurrently; retry",
                rec.id
            ),
        )),
    }
}

/// `GET /v1/services`.
pub fn list(app: &App) -> Result<Answer, Answer> {
    let all = app.store.services().map_err(internal)?;
    let items: Vec<Value> = all.iter().map(record_json).collect();
    Ok(answer(200, json!({ "services": items })))
}

/// `GET /v1/services/{id}`.
pub fn one(app: &App, id: &str) -> Result<Answer, Answer> {
    match app.store.service(id).map_err(internal)? {
        Some(rec) => Ok(answer(200, record_json(&rec))),
        None => Err(unknown(id)),
    }
}

fn unknown(id: &str) -> Answer {
    refuse(
        404,
        format!("no service instance \"{id}\"; list them with GET /v1/services"),
    )
}

/// `DELETE /v1/services/{id}`: cancels a queued create, forgets a create that never reached a
/// provider, or asks the provider to delete the instance.
pub async fn delete(app: &Arc<App>, id: &str) -> Result<Answer, Answer> {
    let gone = || answer(200, json!({"id": id, "state": "deleted"}));
    // Each round reads the record and tries one compare-and-set; a lost race re-reads.
    for round in 0..8 {
        let Some(rec) = app.store.service(id).map_err(internal)? else {
            return if round == 0 {
                Err(unknown(id))
            } else {
                Ok(gone())
            };
        };
        let at = (rec.state, rec.attempts);
        match rec.state {
            InstanceState::Queued => {
                if app.store.cancel_queued(id).map_err(internal)? {
                    log::info!("service instance {id}: queued create cancelled");
                    return Ok(answer(200, json!({"id": id, "state": "cancelled"})));
                }
            }
            InstanceState::Failed if rec.provider.is_none() => {
                if app.store.remove_service_if(id, at).map_err(internal)? {
                    log::info!("service instance {id}: failed create forgotten");
                    return Ok(gone());
                }
            }
            _ => {
                let decommissioned = app
                    .store
                    .region(&rec.region)
                    .map_err(internal)?
                    .is_none_or(|r| r.decommissioned_at.is_some());
                if decommissioned {
                    if app.store.remove_service_if(id, at).map_err(internal)? {
                        log::warn!(
                            "service instance {id}: region {} is decommissioned; forgotten without deleting it",
                            rec.region
                        );
                        return Ok(answer(
                            200,
                            json!({"id": id, "state": "deleted", "detail": format!(
                                "region \"{}\" is decommissioned: the instance was forgotten; its resources there, if any, were not deleted",
                                rec.region
                            )}),
                        ));
                    }
                    continue;
                }
                let detail = format!(
                    "service_delete sent to region \"{}\"; waiting for its agent's answer",
                    rec.region
                );
                if let Some(claimed) = app
                    .store
                    .next_attempt(id, at, InstanceState::Deleting, &detail)
                    .map_err(internal)?
                {
                    log::info!("service instance {id}: deleting in region {}", rec.region);
                    let _ = tokio::time::timeout(ANSWER_WAIT, dispatch_delete(app, claimed)).await;
                    return match app.store.service(id).map_err(internal)? {
                        None => Ok(gone()),
                        Some(rec) => Ok(answer(202, record_json(&rec))),
                    };
                }
            }
        }
    }
    Err(refuse(
        409,
        format!(
            "service instance \"{id}\" kept changing state while being deleted; retry DELETE /v1/services/{id}"
        ),
    ))
}

/// What to do with the answer to a `service_create` attempt.
#[derive(Debug, Clone, PartialEq)]
enum CreateAction {
    Settle(Outcome),
    Requeue(String),
}

fn failed(detail: String) -> Outcome {
    Outcome {
        state: InstanceState::Failed,
        detail,
        provider: None,
        outputs: None,
    }
}

fn read_status(rec: &ServiceRecord, op: Op, res: &Res) -> Result<InstanceStatus, String> {
    serde_json::from_value(res.result.clone().unwrap_or(Value::Null)).map_err(|e| {
        format!(
            "the agent of region \"{}\" answered {op} with an unreadable result ({e}); upgrade the agent to this control plane's protocol",
            rec.region
        )
    })
}

fn error_message(res: &Res, op: Op) -> (String, String) {
    match &res.error {
        Some(e) => (e.code.clone(), e.message.clone()),
        None => (
            code::INTERNAL.to_string(),
            format!("the agent failed {op} without saying why"),
        ),
    }
}

fn create_action(rec: &ServiceRecord, res: Option<Res>) -> CreateAction {
    let Some(res) = res else {
        return CreateAction::Settle(failed(format!(
            "region \"{}\" was decommissioned before its agent answered",
            rec.region
        )));
    };
    if !res.ok {
        let (code, message) = error_message(&res, Op::ServiceCreate);
        if code == code::PROVIDER_UNAVAILABLE {
            return CreateAction::Requeue(queued_detail(
                &format!("region \"{}\" answered: {message}", rec.region),
                &rec.id,
                &rec.region,
                &rec.service_type,
            ));
        }
        return CreateAction::Settle(failed(message));
    }
    match read_status(rec, Op::ServiceCreate, &res) {
        Err(why) => CreateAction::Settle(failed(why)),
        Ok(st) if st.state == InstanceState::Deleted => CreateAction::Settle(Outcome {
            state: InstanceState::Failed,
            detail: format!(
                "provider \"{}\" reports no such instance right after creating it; delete it and create it again",
                st.provider
            ),
            provider: Some(st.provider),
            outputs: Some(st.outputs),
        }),
        Ok(st) => CreateAction::Settle(Outcome {
            state: st.state,
            detail: st.detail,
            provider: Some(st.provider),
            outputs: Some(st.outputs),
        }),
    }
}

/// Sends attempt `rec.attempts` of `op` (named `verb` in the request id) to the record's
/// region and lets `settle` record the answer when it comes (`None` when the region was
/// decommissioned first); the receiver fires once it is recorded.
fn dispatch(
    app: &Arc<App>,
    rec: ServiceRecord,
    op: Op,
    verb: &'static str,
    params: Value,
    settle: impl FnOnce(&App, &ServiceRecord, Option<Res>) -> Result<bool, StoreError> + Send + 'static,
) -> oneshot::Receiver<()> {
    let req = Req {
        id: format!("{}.{verb}.{}", rec.id, rec.attempts),
        op: op.as_str().into(),
        params,
    };
    let rx = app.hub.submit(&rec.region, req);
    let (done, answered) = oneshot::channel();
    let app = app.clone();
    tokio::spawn(async move {
        let result = settle(&app, &rec, rx.await.ok());
        log_settled(result, &rec, verb);
        let _ = done.send(());
    });
    answered
}

/// Sends attempt `rec.attempts` of the create (the record must be `pending` at that attempt)
/// and applies the answer when it comes; the receiver fires once it is applied.
pub fn dispatch_create(app: &Arc<App>, rec: ServiceRecord) -> oneshot::Receiver<()> {
    let params = ServiceCreateParams {
        instance_id: rec.id.clone(),
        service_type: rec.service_type.clone(),
        spec: rec.spec.clone(),
    };
    let params = serde_json::to_value(&params).unwrap_or_default();
    dispatch(
        app,
        rec,
        Op::ServiceCreate,
        "create",
        params,
        |app, rec, res| {
            let from = (InstanceState::Pending, rec.attempts);
            match create_action(rec, res) {
                CreateAction::Settle(outcome) => {
                    log::info!(
                        "service instance {} in region {}: {}{}",
                        rec.id,
                        rec.region,
                        outcome.state,
                        if outcome.detail.is_empty() {
                            String::new()
                        } else {
                            format!(" ({})", outcome.detail)
                        }
                    );
                    app.store.settle(&rec.id, from, &outcome)
                }
                CreateAction::Requeue(detail) => {
                    log::info!("service instance {}: {detail}", rec.id);
                    let outcome = Outcome {
                        state: InstanceState::Queued,
                        detail,
                        provider: None,
                        outputs: None,
                    };
                    app.store.settle(&rec.id, from, &outcome)
                }
            }
        },
    )
}

/// Logs what became of an attempt's answer (a stale answer is ignored by compare-and-set).
fn log_settled(result: Result<bool, StoreError>, rec: &ServiceRecord, op: &str) {
    match result {
        Ok(true) => {}
        Ok(false) => log::debug!(
            "service instance {}: answer to {op} attempt {} ignored, the record changed meanwhile",
            rec.id,
            rec.attempts
        ),
        Err(e) => log::error!("{e}"),
    }
}

/// What to do with the answer to a `service_delete` attempt.
#[derive(Debug, Clone, PartialEq)]
enum DeleteAction {
    Remove,
    Settle(Outcome),
}

fn delete_action(rec: &ServiceRecord, res: Option<Res>) -> DeleteAction {
    let retry = format!("retry with DELETE /v1/services/{}", rec.id);
    let Some(res) = res else {
        return DeleteAction::Settle(failed(format!(
            "region \"{}\" was decommissioned before its agent confirmed the delete",
            rec.region
        )));
    };
    if !res.ok {
        let (_, message) = error_message(&res, Op::ServiceDelete);
        return DeleteAction::Settle(failed(format!("deleting failed: {message}; {retry}")));
    }
    match read_status(rec, Op::ServiceDelete, &res) {
        Err(why) => DeleteAction::Settle(failed(format!("{why}; {retry}"))),
        Ok(st) if st.state == InstanceState::Deleted => DeleteAction::Remove,
        Ok(st) => DeleteAction::Settle(Outcome {
            state: st.state,
            detail: st.detail,
            provider: Some(st.provider),
            outputs: Some(st.outputs),
        }),
    }
}

/// Sends attempt `rec.attempts` of the delete (the record must be `deleting` at that attempt)
/// and applies the answer when it comes; the receiver fires once it is applied.
pub fn dispatch_delete(app: &Arc<App>, rec: ServiceRecord) -> oneshot::Receiver<()> {
    let params = ServiceRef {
        instance_id: rec.id.clone(),
        service_type: rec.service_type.clone(),
    };
    let params = serde_json::to_value(&params).unwrap_or_default();
    dispatch(
        app,
        rec,
        Op::ServiceDelete,
        "delete",
        params,
        |app, rec, res| {
            let from = (InstanceState::Deleting, rec.attempts);
            match delete_action(rec, res) {
                DeleteAction::Remove => {
                    log::info!(
                        "service instance {} deleted in region {}",
                        rec.id,
                        rec.region
                    );
                    app.store.remove_service_if(&rec.id, from)
                }
                DeleteAction::Settle(outcome) => {
                    log::info!(
                        "service instance {} in region {}: {} {}",
                        rec.id,
                        rec.region,
                        outcome.state,
                        outcome.detail
                    );
                    app.store.settle(&rec.id, from, &outcome)
                }
            }
        },
    )
}

/// Dispatches the queued creates (of `only` region, or all) whose region advertises their
/// type now; fails those whose region was decommissioned.
pub fn dispatch_queued(app: &Arc<App>, only: Option<&str>) {
    let queued = match app.store.services_in_state(InstanceState::Queued) {
        Ok(q) => q,
        Err(e) => {
            log::error!("{e}");
            return;
        }
    };
    let mut decommissioned: HashMap<String, bool> = HashMap::new();
    for rec in queued {
        if only.is_some_and(|r| r != rec.region) {
            continue;
        }
        let gone = match decommissioned.get(&rec.region) {
            Some(d) => *d,
            None => {
                let d = match app.store.region(&rec.region) {
                    Ok(r) => r.is_none_or(|r| r.decommissioned_at.is_some()),
                    Err(e) => {
                        log::error!("{e}");
                        continue;
                    }
                };
                decommissioned.insert(rec.region.clone(), d);
                d
            }
        };
        if gone {
            let outcome = failed(format!(
                "region \"{}\" was decommissioned while this create was queued; delete it and create it in another region",
                rec.region
            ));
            if let Err(e) =
                app.store
                    .settle(&rec.id, (InstanceState::Queued, rec.attempts), &outcome)
            {
                log::error!("{e}");
            }
            continue;
        }
        if !app.hub.advertised(&rec.region, &rec.service_type) {
            continue;
        }
        let detail = format!(
            "sent to region \"{}\" (it advertises \"{}\" now); waiting for its agent's answer",
            rec.region, rec.service_type
        );
        match app.store.claim_queued(&rec.id, &detail) {
            Ok(Some(claimed)) => {
                log::info!(
                    "service instance {}: region {} advertises {} now, dispatching the queued create",
                    rec.id,
                    rec.region,
                    rec.service_type
                );
                drop(dispatch_create(app, claimed));
            }
            // Cancelled (or claimed) meanwhile: the compare-and-set keeps it from being sent.
            Ok(None) => {}
            Err(e) => log::error!("{e}"),
        }
    }
}

/// Re-sends, as new attempts, the creates and deletes that were in flight when the control
/// plane stopped (their requests lived only in memory).
pub fn recover(app: &Arc<App>) {
    for (state, what) in [
        (InstanceState::Pending, "create"),
        (InstanceState::Deleting, "delete"),
    ] {
        let records = match app.store.services_in_state(state) {
            Ok(r) => r,
            Err(e) => {
                log::error!("{e}");
                continue;
            }
        };
        for rec in records {
            let detail = format!(
                "{what} re-sent to region \"{}\" after a control plane restart; waiting for its agent's answer",
                rec.region
            );
            match app
                .store
                .next_attempt(&rec.id, (state, rec.attempts), state, &detail)
            {
                Ok(Some(claimed)) => {
                    log::info!("service instance {}: re-sending its {what}", rec.id);
                    let done = match state {
                        InstanceState::Pending => dispatch_create(app, claimed),
                        _ => dispatch_delete(app, claimed),
                    };
                    drop(done);
                }
                Ok(None) => {}
                Err(e) => log::error!("{e}"),
            }
        }
    }
}

/// Dispatches queued creates every heartbeat interval, so a region that turns healthy without
/// sending a new `services` frame still gets them.
pub async fn run_dispatcher(app: Arc<App>) {
    let mut tick = tokio::time::interval(app.hub.policy().heartbeat);
    tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    loop {
        tick.tick().await;
        dispatch_queued(&app, None);
    }
}

/// Applies an `instance` frame of `region` to the record of that id.
pub fn apply_instance(app: &App, region: &str, status: InstanceStatus) {
    let id = status.instance_id.clone();
    let rec = match app.store.service(&id) {
        Ok(Some(rec)) => rec,
        Ok(None) => {
            log::info!(
                "region {region}: status of unknown service instance {id} ({}), ignored",
                status.state
            );
            return;
        }
        Err(e) => {
            log::error!("{e}");
            return;
        }
    };
    if rec.region != region {
        log::warn!(
            "region {region}: status of service instance {id}, which is placed in region {}; ignored",
            rec.region
        );
        return;
    }
    if status.state == InstanceState::Deleted {
        match app.store.remove_service(&id, region) {
            Ok(_) => log::info!("service instance {id} in region {region}: deleted"),
            Err(e) => log::error!("{e}"),
        }
        return;
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
        return;
    }
    let outcome = Outcome {
        state: status.state,
        detail: status.detail,
        provider: Some(status.provider),
        outputs: Some(status.outputs),
    };
    match app.store.settle(&id, (rec.state, rec.attempts), &outcome) {
        Ok(true) => log::info!(
            "service instance {id} in region {region}: {}{}",
            outcome.state,
            if outcome.detail.is_empty() {
                String::new()
            } else {
                format!(" ({})", outcome.detail)
            }
        ),
        Ok(false) => log::debug!("service instance {id}: status raced another change; ignored"),
        Err(e) => log::error!("{e}"),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::hub::{HealthPolicy, Hub, Outgoing};
    use crate::store::Store;
    use harmony_agent_protocol::{AgentStatus, Frame, Hello, ProviderHealth, ServiceOffer};
    use tokio::sync::mpsc;

    fn offer(t: &str, health: ProviderHealth) -> ServiceOffer {
        ServiceOffer {
            service_type: t.into(),
            provider: format!("{t}-provider"),
            builtin: false,
            health,
            detail: String::new(),
        }
    }

    fn region(name: &str, health: Health, offers: Vec<ServiceOffer>, live: usize) -> RegionOffers {
        RegionOffers {
            name: name.into(),
            decommissioned: false,
            health,
            services: Services { offers },
            live_instances: live,
        }
    }

    #[test]
    fn placement_prefers_the_advertising_region_with_fewest_instances() {
        let healthy = |t| offer(t, ProviderHealth::Healthy);
        let regions = vec![
            region("c", Health::Healthy, vec![healthy("queue")], 1),
            region("b", Health::Healthy, vec![healthy("queue")], 1),
            region("a", Health::Healthy, vec![healthy("queue")], 2),
        ];
        // Fewest live instances wins; the tie between b and c goes by name.
        assert_eq!(
            place("queue", None, &regions),
            Placement::Dispatch("b".into())
        );
        // A named region that advertises the type gets it even with more instances.
        assert_eq!(
            place("queue", Some("a"), &regions),
            Placement::Dispatch("a".into())
        );
    }

    #[test]
    fn degraded_types_are_queued_and_missing_ones_refused_with_where_they_are() {
        let regions = vec![
            region(
                "a",
                Health::Healthy,
                vec![
                    offer("container", ProviderHealth::Healthy),
                    offer("queue", ProviderHealth::Unhealthy),
                ],
                0,
            ),
            region(
                "b",
                Health::Unhealthy,
                vec![offer("container", ProviderHealth::Healthy)],
                0,
            ),
            region(
                "c",
                Health::Unavailable,
                vec![offer("db", ProviderHealth::Healthy)],
                0,
            ),
        ];
        // Unhealthy offer in a healthy region: queued there, with the reason.
        match place("queue", None, &regions) {
            Placement::Queue { region, why } => {
                assert_eq!(region, "a");
                assert!(
                    why.contains("unhealthy") && why.contains("queue-provider"),
                    "{why}"
                );
            }
            other => panic!("{other:?}"),
        }
        // Healthy offer in an unhealthy region: degraded, so a named create is queued.
        match place("container", Some("b"), &regions) {
            Placement::Queue { region, why } => {
                assert_eq!(region, "b");
                assert!(why.contains("region \"b\" is unhealthy"), "{why}");
            }
            other => panic!("{other:?}"),
        }
        // Unnamed: the advertising region wins over the degraded one.
        assert_eq!(
            place("container", None, &regions),
            Placement::Dispatch("a".into())
        );
        // A region without the type: refused, listing where it is available.
        match place("container", Some("c"), &regions) {
            Placement::Unavailable {
                message,
                available_in,
                degraded_in,
            } => {
                assert_eq!(
                    message,
                    "service type \"container\" is not available in region \"c\"; it is available in: a"
                );
                assert_eq!(available_in, vec!["a".to_string()]);
                assert_eq!(degraded_in, vec!["b".to_string()]);
            }
            other => panic!("{other:?}"),
        }
        // An unavailable region's offers count for nothing.
        match place("db", None, &regions) {
            Placement::Unavailable {
                message,
                available_in,
                ..
            } => {
                assert_eq!(
                    message,
                    "no region advertises service type \"db\" now; advertised types: a: [container], b: [], c: []"
                );
                assert!(available_in.is_empty());
            }
            other => panic!("{other:?}"),
        }
        match place("db", Some("a"), &regions) {
            Placement::Unavailable { message, .. } => {
                assert!(
                    message.ends_with("it is available in no region now"),
                    "{message}"
                )
            }
            other => panic!("{other:?}"),
        }
    }

    #[test]
    fn unknown_and_decommissioned_regions_are_refused() {
        let mut gone = region(
            "old",
            Health::Healthy,
            vec![offer("queue", ProviderHealth::Healthy)],
            0,
        );
        gone.decommissioned = true;
        let regions = vec![gone];
        assert_eq!(
            place("queue", Some("nowhere"), &regions),
            Placement::UnknownRegion("nowhere".into())
        );
        assert_eq!(
            place("queue", Some("old"), &regions),
            Placement::Decommissioned("old".into())
        );
        assert!(matches!(
            place("queue", None, &regions),
            Placement::Unavailable { .. }
        ));
    }

    fn test_app(dir: &std::path::Path) -> Arc<App> {
        Arc::new(App {
            store: Store::open(&dir.join("cp.sqlite")).unwrap(),
            hub: Hub::new(HealthPolicy {
                heartbeat: Duration::from_millis(100),
                unhealthy_after: Duration::from_secs(30),
                unavailable_after: Duration::from_secs(60),
            }),
            admin_hash: [0; 32],
            bootstrap_ttl: Duration::from_secs(60),
            max_request_wait: Duration::from_secs(60),
            ws_buffer_bytes: 4096,
        })
    }

    fn connect(app: &App, name: &str) -> mpsc::UnboundedReceiver<Outgoing> {
        app.store.create_region(name, "z").unwrap();
        let (tx, rx) = mpsc::unbounded_channel();
        app.hub.connect(
            name,
            Hello {
                agent_version: "0.1.0".into(),
                region: name.into(),
                zone: "z".into(),
                ops: vec![],
                protocol: 1,
            },
            tx,
        );
        app.hub.heartbeat(
            name,
            AgentStatus {
                k8s_reachable: true,
                ..AgentStatus::default()
            },
        );
        rx
    }

    fn next_req(rx: &mut mpsc::UnboundedReceiver<Outgoing>) -> Option<Req> {
        match rx.try_recv() {
            Ok(Outgoing::Frame(Frame::Req(r))) => Some(r),
            _ => None,
        }
    }

    fn create_body(t: &str, id: &str) -> CreateRequest {
        CreateRequest {
            service_type: t.into(),
            spec: Some(json!({"size": 1})),
            region: None,
            id: Some(id.into()),
        }
    }

    #[tokio::test]
    async fn a_cancelled_queued_create_is_never_sent_and_a_queued_one_is_sent_once_advertised() {
        let dir = tempfile::tempdir().unwrap();
        let app = test_app(dir.path());
        let mut rx = connect(&app, "a");
        app.hub.set_services(
            "a",
            Services {
                offers: vec![offer("queue", ProviderHealth::Unhealthy)],
            },
        );
        let queued = create(&app, create_body("queue", "q1")).await.unwrap();
        assert_eq!(queued.status, 202);
        assert_eq!(queued.body["state"], "queued");
        assert!(
            queued.body["detail"]
                .as_str()
                .unwrap()
                .contains("DELETE /v1/services/q1")
        );
        let waiting = create(&app, create_body("queue", "q2")).await.unwrap();
        assert_eq!(waiting.body["state"], "queued");
        let cancelled = delete(&app, "q1").await.unwrap();
        assert_eq!(
            cancelled,
            answer(200, json!({"id": "q1", "state": "cancelled"}))
        );
        assert_eq!(delete(&app, "q1").await.unwrap_err().status, 404);

        app.hub.set_services(
            "a",
            Services {
                offers: vec![offer("queue", ProviderHealth::Healthy)],
            },
        );
        dispatch_queued(&app, None);
        let req = next_req(&mut rx).expect("the queued create is sent");
        assert_eq!(req.id, "q2.create.1");
        assert_eq!(req.op, "service_create");
        assert_eq!(req.params["instance_id"], "q2");
        assert!(next_req(&mut rx).is_none(), "the cancelled create was sent");
        // Claimed once: another tick sends nothing more.
        dispatch_queued(&app, None);
        assert!(next_req(&mut rx).is_none());

        // The provider is unavailable after all: back to the queue, then a new attempt id.
        let res = Res::err(
            "q2.create.1",
            harmony_agent_protocol::ErrorBody::new(code::PROVIDER_UNAVAILABLE, "q is unhealthy"),
        );
        assert!(app.hub.resolve("a", res));
        for _ in 0..100 {
            if app.store.service("q2").unwrap().unwrap().state == InstanceState::Queued {
                break;
            }
            tokio::time::sleep(Duration::from_millis(10)).await;
        }
        assert_eq!(
            app.store.service("q2").unwrap().unwrap().state,
            InstanceState::Queued
        );
        dispatch_queued(&app, Some("a"));
        assert_eq!(next_req(&mut rx).unwrap().id, "q2.create.2");
    }

    #[tokio::test]
    async fn create_answers_201_with_the_provider_status_and_instance_frames_update_it() {
        let dir = tempfile::tempdir().unwrap();
        let app = test_app(dir.path());
        let mut rx = connect(&app, "a");
        app.hub.set_services(
            "a",
            Services {
                offers: vec![offer("queue", ProviderHealth::Healthy)],
            },
        );
        let responder = {
            let app = app.clone();
            tokio::spawn(async move {
                loop {
                    if let Some(req) = next_req(&mut rx) {
                        let status = InstanceStatus {
                            instance_id: req.params["instance_id"].as_str().unwrap().into(),
                            service_type: "queue".into(),
                            provider: "q".into(),
                            state: if req.op == "service_create" {
                                InstanceState::Provisioning
                            } else {
                                InstanceState::Deleted
                            },
                            detail: String::new(),
                            outputs: Map::new(),
                        };
                        app.hub
                            .resolve("a", Res::ok(req.id, serde_json::to_value(status).unwrap()));
                    }
                    tokio::time::sleep(Duration::from_millis(5)).await;
                }
            })
        };
        let created = create(&app, create_body("queue", "i1")).await.unwrap();
        assert_eq!(created.status, 201, "{:?}", created.body);
        assert_eq!(created.body["state"], "provisioning");
        assert_eq!(created.body["provider"], "q");
        assert_eq!(created.body["type"], "queue");
        assert_eq!(created.body["spec"], json!({"size": 1}));
        // A second create with the same id is a conflict naming the id.
        let again = create(&app, create_body("queue", "i1")).await.unwrap_err();
        assert_eq!(again.status, 409);
        // Frames from another region are ignored; the placed region's frames apply.
        let frame = |state| InstanceStatus {
            instance_id: "i1".into(),
            service_type: "queue".into(),
            provider: "q".into(),
            state,
            detail: String::new(),
            outputs: [("url".to_string(), json!("queue://i1"))]
                .into_iter()
                .collect(),
        };
        apply_instance(&app, "b", frame(InstanceState::Ready));
        assert_eq!(
            app.store.service("i1").unwrap().unwrap().state,
            InstanceState::Provisioning
        );
        apply_instance(&app, "a", frame(InstanceState::Ready));
        let rec = app.store.service("i1").unwrap().unwrap();
        assert_eq!(rec.state, InstanceState::Ready);
        assert_eq!(rec.outputs["url"], "queue://i1");
        // Delete: the provider answers deleted, the record goes.
        let gone = delete(&app, "i1").await.unwrap();
        assert_eq!(gone, answer(200, json!({"id": "i1", "state": "deleted"})));
        assert!(app.store.service("i1").unwrap().is_none());
        responder.abort();
    }

    #[tokio::test]
    async fn bad_input_is_refused_naming_the_field() {
        let dir = tempfile::tempdir().unwrap();
        let app = test_app(dir.path());
        let e = create(&app, create_body("Queue", "i1")).await.unwrap_err();
        assert_eq!(e.status, 400);
        assert!(e.body["error"].as_str().unwrap().starts_with("type: "));
        let e = create(&app, create_body("queue", "I_1")).await.unwrap_err();
        assert!(e.body["error"].as_str().unwrap().starts_with("id: "));
        let mut body = create_body("queue", "i1");
        body.spec = Some(json!([1]));
        let e = create(&app, body).await.unwrap_err();
        assert!(e.body["error"].as_str().unwrap().starts_with("spec: "));
        let e = create(&app, create_body("queue", "i1")).await.unwrap_err();
        assert_eq!(e.status, 409);
        assert_eq!(e.body["available_in"], json!([]));
        let mut body = create_body("queue", "i1");
        body.id = None;
        body.region = Some("nowhere".into());
        let e = create(&app, body).await.unwrap_err();
        assert_eq!(e.status, 404);
        let id = random_id().unwrap();
        assert!(id.starts_with("svc-") && id.len() == 14 && Dns1123Label::parse(&id).is_ok());
    }
}
