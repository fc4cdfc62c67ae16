//! Service instances' `service_create` / `service_delete` requests and what their answers do to
//! the instance record. The requests are ordinary durable requests with ids
//! `<instance>.<create|delete>.<attempt>`; their answers are applied with a compare-and-set on
//! the record's (state, attempt), so a cancel, a delete and a late answer can never overwrite
//! each other, whichever replica applies them and however often.

use harmony_agent_protocol::{
    InstanceState, InstanceStatus, Op, RawJson, Res, ServiceCreateParams, ServiceRef, code,
};

use super::ControlPlane;
use super::requests::{self, Accepted, RequestError, Submission};
use crate::store::{Outcome, RequestState, ServiceRecord, StoreError};

/// Which op an attempt sends.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Verb {
    /// `service_create`; the record is `pending` while it runs.
    Create,
    /// `service_delete`; the record is `deleting` while it runs.
    Delete,
}

impl Verb {
    fn word(self) -> &'static str {
        match self {
            Verb::Create => "create",
            Verb::Delete => "delete",
        }
    }

    fn op(self) -> Op {
        match self {
            Verb::Create => Op::ServiceCreate,
            Verb::Delete => Op::ServiceDelete,
        }
    }

    /// The record state while an attempt of this verb runs.
    pub fn state(self) -> InstanceState {
        match self {
            Verb::Create => InstanceState::Pending,
            Verb::Delete => InstanceState::Deleting,
        }
    }

    /// The verb whose attempt runs while a record is in `state`.
    pub fn of(state: InstanceState) -> Option<Self> {
        match state {
            InstanceState::Pending => Some(Verb::Create),
            InstanceState::Deleting => Some(Verb::Delete),
            _ => None,
        }
    }
}

/// The request id of attempt `rec.attempts` of `verb`.
pub fn request_id(rec: &ServiceRecord, verb: Verb) -> String {
    format!("{}.{}.{}", rec.id, verb.word(), rec.attempts)
}

/// The instance id, verb and attempt a request id names, if it is an instance request's.
pub fn parse_request_id(id: &str) -> Option<(&str, Verb, u32)> {
    let mut parts = id.rsplitn(3, '.');
    let attempt = parts.next()?.parse().ok()?;
    let verb = match parts.next()? {
        "create" => Verb::Create,
        "delete" => Verb::Delete,
        _ => return None,
    };
    Some((parts.next()?, verb, attempt))
}

/// Submits attempt `rec.attempts` of `verb` as a durable request to the record's region.
pub async fn send(
    cp: &ControlPlane,
    rec: &ServiceRecord,
    verb: Verb,
) -> Result<Accepted, RequestError> {
    let params = match verb {
        Verb::Create => RawJson::from_serialize(&ServiceCreateParams {
            instance_id: rec.id.clone(),
            service_type: rec.service_type.clone(),
            spec: rec.spec.clone(),
        }),
        Verb::Delete => RawJson::from_serialize(&ServiceRef {
            instance_id: rec.id.clone(),
            service_type: rec.service_type.clone(),
        }),
    }
    .map_err(|e| RequestError::Internal(format!("encoding the {} params: {e}", verb.word())))?;
    let op = verb.op().as_str().to_string();
    // A project's instance runs in its project: the agent makes the project present in the
    // region (namespace, quota) and keeps the instance in its namespace, as for its requests.
    let scope = match &rec.owner {
        Some(owner) => {
            let asked = super::scope::Asked {
                caller: None,
                tenant: Some(&owner.tenant),
                project: Some(&owner.project),
            };
            super::scope::request_scope(cp, asked, &rec.region, &op, &params).await?
        }
        None => None,
    };
    let sub = Submission {
        id: None,
        op,
        params,
        scope,
        zone: (!rec.zone.is_empty()).then(|| rec.zone.clone()),
        by_admin: false,
    };
    // Not a caller's id: submitted unscoped, where no tenant's id can reach (theirs are
    // `<tenant>@...`), so no tenant can take it first.
    let id = request_id(rec, verb);
    requests::submit_as(cp, &rec.region, id.clone(), id, sub).await
}

/// Sends an attempt; when the request cannot even be queued, the attempt fails at once.
pub async fn send_or_fail(
    cp: &ControlPlane,
    rec: &ServiceRecord,
    verb: Verb,
) -> Result<Option<Accepted>, StoreError> {
    match send(cp, rec, verb).await {
        Ok(a) => Ok(Some(a)),
        Err(RequestError::Store(e)) => Err(e),
        Err(e) => {
            let why = match e {
                RequestError::Decommissioned(_) | RequestError::UnknownRegion(_) => None,
                other => Some(other.to_string()),
            };
            apply(cp, rec, verb, Answer::NotSent(why)).await?;
            Ok(None)
        }
    }
}

/// What became of an attempt's request.
#[derive(Debug)]
pub enum Answer {
    /// The agent answered.
    Res(Res),
    /// The request was dropped (its region was decommissioned) or never sent (`Some`: why).
    NotSent(Option<String>),
}

/// Applies the answer to attempt `rec.attempts` of `verb`, if the record is still at that
/// attempt; `Ok(false)` when it moved on meanwhile (the answer is stale).
pub async fn apply(
    cp: &ControlPlane,
    rec: &ServiceRecord,
    verb: Verb,
    answer: Answer,
) -> Result<bool, StoreError> {
    let from = (verb.state(), rec.attempts);
    let (outcome, remove) = match verb {
        Verb::Create => (create_outcome(rec, answer), false),
        Verb::Delete => match delete_outcome(rec, answer) {
            None => (None, true),
            Some(o) => (Some(o), false),
        },
    };
    let applied = match (&outcome, remove) {
        (_, true) => cp.store.remove_service_if(&rec.id, from).await?,
        (Some(o), _) => cp.store.settle(&rec.id, from, o).await?,
        (None, false) => false,
    };
    if applied {
        match &outcome {
            None => log::info!(
                "service instance {} deleted in region {}",
                rec.id,
                rec.region
            ),
            Some(o) => log::info!(
                "service instance {} in region {}: {}{}",
                rec.id,
                rec.region,
                o.state,
                if o.detail.is_empty() {
                    String::new()
                } else {
                    format!(" ({})", o.detail)
                }
            ),
        }
    } else {
        log::debug!(
            "service instance {}: answer to {} attempt {} ignored, the record changed meanwhile",
            rec.id,
            verb.word(),
            rec.attempts
        );
    }
    Ok(applied)
}

/// Applies the stored answer of the record's running attempt, if there is one; re-sends the
/// attempt when its request is missing (the replica stopped between the record and the request).
pub async fn settle_if_answered(cp: &ControlPlane, rec: &ServiceRecord) -> Result<(), StoreError> {
    let Some(verb) = Verb::of(rec.state) else {
        return Ok(());
    };
    match cp.store.request(&request_id(rec, verb)).await? {
        None => {
            send_or_fail(cp, rec, verb).await?;
        }
        Some(r) if r.state.is_finished() => {
            let res = r
                .res
                .as_deref()
                .and_then(|j| serde_json::from_str::<Res>(j).ok());
            let answer = match (r.state, res) {
                (RequestState::Done, Some(res)) => Answer::Res(res),
                (RequestState::Done, None) => Answer::NotSent(Some(format!(
                    "the stored answer of request {} is unreadable",
                    r.id
                ))),
                _ => Answer::NotSent(None),
            };
            apply(cp, rec, verb, answer).await?;
        }
        Some(_) => {}
    }
    Ok(())
}

fn failed(detail: String) -> Outcome {
    Outcome {
        state: InstanceState::Failed,
        detail,
        provider: None,
        outputs: None,
    }
}

/// The detail of a queued create.
pub fn queued_detail(why: &str, id: &str, region: &str, service_type: &str) -> String {
    format!(
        "queued: {why}; it is sent to region \"{region}\" once the region advertises \"{service_type}\" again. DELETE /v1/services/{id} cancels it"
    )
}

fn read_status(rec: &ServiceRecord, op: Op, res: &Res) -> Result<InstanceStatus, String> {
    res.result_as::<InstanceStatus>().map_err(|e| {
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

fn from_status(st: InstanceStatus) -> Outcome {
    Outcome {
        state: st.state,
        detail: st.detail,
        provider: Some(st.provider),
        outputs: Some(st.outputs),
    }
}

/// The new record of a create attempt, given its answer.
pub fn create_outcome(rec: &ServiceRecord, answer: Answer) -> Option<Outcome> {
    let res = match answer {
        Answer::Res(res) => res,
        Answer::NotSent(why) => {
            return Some(failed(why.unwrap_or_else(|| {
                format!(
                    "region \"{}\" was decommissioned before its agent answered",
                    rec.region
                )
            })));
        }
    };
    if !res.ok {
        let (code, message) = error_message(&res, Op::ServiceCreate);
        if code == code::PROVIDER_UNAVAILABLE {
            return Some(Outcome {
                state: InstanceState::Queued,
                detail: queued_detail(
                    &format!("region \"{}\" answered: {message}", rec.region),
                    &rec.id,
                    &rec.region,
                    &rec.service_type,
                ),
                provider: None,
                outputs: None,
            });
        }
        return Some(failed(message));
    }
    Some(match read_status(rec, Op::ServiceCreate, &res) {
        Err(why) => failed(why),
        Ok(st) if st.state == InstanceState::Deleted => Outcome {
            state: InstanceState::Failed,
            detail: format!(
                "provider \"{}\" reports no such instance right after creating it; delete it and create it again",
                st.provider
            ),
            provider: Some(st.provider),
            outputs: Some(st.outputs),
        },
        Ok(st) => from_status(st),
    })
}

/// The new record of a delete attempt, given its answer; `None` removes the record.
pub fn delete_outcome(rec: &ServiceRecord, answer: Answer) -> Option<Outcome> {
    let retry = format!("retry with DELETE /v1/services/{}", rec.id);
    let res = match answer {
        Answer::Res(res) => res,
        Answer::NotSent(why) => {
            return Some(failed(why.map_or_else(
                || {
                    format!(
                        "region \"{}\" was decommissioned before its agent confirmed the delete",
                        rec.region
                    )
                },
                |w| format!("{w}; {retry}"),
            )));
        }
    };
    if !res.ok {
        let (_, message) = error_message(&res, Op::ServiceDelete);
        return Some(failed(format!("deleting failed: {message}; {retry}")));
    }
    match read_status(rec, Op::ServiceDelete, &res) {
        Err(why) => Some(failed(format!("{why}; {retry}"))),
        Ok(st) if st.state == InstanceState::Deleted => None,
        Ok(st) => Some(from_status(st)),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use harmony_agent_protocol::ErrorBody;
    use serde_json::{Map, json};

    fn rec(state: InstanceState, attempts: u32) -> ServiceRecord {
        ServiceRecord {
            id: "q1".into(),
            service_type: "queue".into(),
            region: "eu".into(),
            zone: "z1".into(),
            parent: None,
            state,
            detail: String::new(),
            provider: None,
            outputs: Map::new(),
            spec: json!({"size": 1}),
            created_at: 1,
            updated_at: 1,
            attempts,
            owner: None,
        }
    }

    fn status(state: InstanceState) -> Res {
        Res::ok(
            "q1.create.1",
            InstanceStatus {
                instance_id: "q1".into(),
                service_type: "queue".into(),
                provider: "q".into(),
                state,
                detail: String::new(),
                outputs: Map::new(),
            },
        )
    }

    #[test]
    fn request_ids_name_instance_verb_and_attempt() {
        let r = rec(InstanceState::Pending, 2);
        assert_eq!(request_id(&r, Verb::Create), "q1.create.2");
        assert_eq!(
            parse_request_id("q1.create.2"),
            Some(("q1", Verb::Create, 2))
        );
        assert_eq!(
            parse_request_id("a.b.delete.10"),
            Some(("a.b", Verb::Delete, 10))
        );
        assert_eq!(parse_request_id("q1.apply.2"), None);
        assert_eq!(parse_request_id("dedupe-1"), None);
        assert_eq!(parse_request_id("create.1"), None);
    }

    #[test]
    fn create_answers_settle_requeue_or_fail() {
        let r = rec(InstanceState::Pending, 1);
        let ok = create_outcome(&r, Answer::Res(status(InstanceState::Provisioning))).unwrap();
        assert_eq!(ok.state, InstanceState::Provisioning);
        assert_eq!(ok.provider.as_deref(), Some("q"));
        let unavailable = Res::err(
            "q1.create.1",
            ErrorBody::new(code::PROVIDER_UNAVAILABLE, "q is unhealthy"),
        );
        let requeued = create_outcome(&r, Answer::Res(unavailable)).unwrap();
        assert_eq!(requeued.state, InstanceState::Queued);
        assert!(
            requeued.detail.contains("q is unhealthy"),
            "{}",
            requeued.detail
        );
        let refused = Res::err(
            "q1.create.1",
            ErrorBody::new(code::PROVIDER_ERROR, "spec: image"),
        );
        assert_eq!(
            create_outcome(&r, Answer::Res(refused)).unwrap(),
            failed("spec: image".into())
        );
        let gone = create_outcome(&r, Answer::NotSent(None)).unwrap();
        assert!(gone.detail.contains("decommissioned"), "{}", gone.detail);
        let vanished = create_outcome(&r, Answer::Res(status(InstanceState::Deleted))).unwrap();
        assert_eq!(vanished.state, InstanceState::Failed);
        let unreadable = create_outcome(&r, Answer::Res(Res::ok("q1.create.1", 3))).unwrap();
        assert!(
            unreadable.detail.contains("unreadable"),
            "{}",
            unreadable.detail
        );
    }

    #[test]
    fn delete_answers_remove_or_fail_with_how_to_retry() {
        let r = rec(InstanceState::Deleting, 2);
        assert_eq!(
            delete_outcome(&r, Answer::Res(status(InstanceState::Deleted))),
            None
        );
        let still = delete_outcome(&r, Answer::Res(status(InstanceState::Deleting))).unwrap();
        assert_eq!(still.state, InstanceState::Deleting);
        let failed = delete_outcome(
            &r,
            Answer::Res(Res::err(
                "q1.delete.2",
                ErrorBody::new(code::PROVIDER_ERROR, "busy"),
            )),
        )
        .unwrap();
        assert!(
            failed.detail.contains("busy") && failed.detail.contains("DELETE /v1/services/q1"),
            "{}",
            failed.detail
        );
    }
}
