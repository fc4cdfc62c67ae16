//! The request record that makes a request id's effect exactly-once across agent restarts: one
//! ConfigMap per recent effectful request in the agent's namespace, created (`started`) before
//! the op runs and completed with the raw `res` once it is done. This module holds the record's
//! shape and the decisions taken from it; [`super::record_store`] talks to the API server.
//!
//! ```text
//! ConfigMap harmony-req-<sha256(id) hex, 32 chars>
//!   labels: app.kubernetes.io/managed-by=harmony-agent, app.kubernetes.io/component=request-record
//!   data:   id, op, params-sha256, started-at           (written before the op runs)
//!           res | res-too-large                          (added once it is done)
//!   annotations: harmony.io/finished-at                  (idem; pruning reads only metadata)
//! ```

use harmony_agent_protocol::{ErrorBody, Op, RawJson, Req, Res, code};
use k8s_openapi::api::core::v1::ConfigMap;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{ObjectMeta, Time};
use serde::{Deserialize, Serialize};
use sha2::{Digest, Sha256};
use std::collections::BTreeMap;

use crate::providers::{MANAGED_BY, MANAGED_BY_LABEL};

/// Prefix of every record's name.
pub const NAME_PREFIX: &str = "harmony-req-";
/// Label telling request records apart from other objects the agent manages.
pub const COMPONENT_LABEL: &str = "app.kubernetes.io/component";
/// Value of [`COMPONENT_LABEL`] on request records.
pub const COMPONENT: &str = "request-record";
/// The largest `res` a record keeps (a ConfigMap holds at most 1 MiB); a larger result is
/// recorded as `res-too-large` and a redelivery is answered with `result_too_large`.
pub const RESULT_LIMIT: usize = 900 * 1024;

/// Annotation holding when a record was completed (RFC 3339, the agent's clock).
pub const FINISHED_AT: &str = "harmony.io/finished-at";

/// The label selector of every request record.
pub fn selector() -> String {
    format!("{MANAGED_BY_LABEL}={MANAGED_BY},{COMPONENT_LABEL}={COMPONENT}")
}

fn hex(bytes: &[u8]) -> String {
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}

/// The record's name for request `id`: any id (up to the control plane's limits, any bytes)
/// maps to a valid, fixed-length object name; 128 bits make collisions a non-issue.
pub fn record_name(id: &str) -> String {
    let digest = Sha256::digest(id.as_bytes());
    format!("{NAME_PREFIX}{}", hex(&digest[..16]))
}

/// The SHA-256 of the params' exact bytes (they travel byte-stable, so a redelivery has the same).
pub fn params_digest(params: &RawJson) -> String {
    hex(&Sha256::digest(params.get().as_bytes()))
}

/// Whether `op` changes something, and so needs a record. Reads (`get_objects`,
/// `get_inventory`, `service_status`) are answered from the in-memory window only: running
/// one twice has no effect.
pub fn has_effect(op: Op) -> bool {
    matches!(
        op,
        Op::ApplyManifests | Op::DeleteManifests | Op::ServiceCreate | Op::ServiceDelete
    )
}

/// How a recorded request ended.
#[derive(Debug, Clone, PartialEq)]
pub enum Outcome {
    /// The `res` sent the first time.
    Res(Res),
    /// The result was too large to keep in the record.
    TooLarge {
        /// Its size, encoded.
        size_bytes: u64,
        /// What a record keeps.
        limit_bytes: u64,
    },
}

#[derive(Serialize, Deserialize)]
struct TooLargeMarker {
    size_bytes: u64,
    limit_bytes: u64,
}

/// A request record as read back from the cluster.
#[derive(Debug, Clone, PartialEq)]
pub struct Record {
    /// The request id.
    pub id: String,
    /// The op name.
    pub op: String,
    /// [`params_digest`] of its params.
    pub params_sha256: String,
    /// When the record was created (the API server's clock), i.e. just before the op started.
    pub created: Option<Time>,
    /// How it ended; `None` while started (or when the agent died before it finished).
    pub outcome: Option<Outcome>,
}

fn now_text() -> String {
    k8s_openapi::jiff::Timestamp::now().to_string()
}

/// The `started` record of `req`, to create in `namespace` before the op runs.
pub fn started(namespace: &str, req: &Req) -> ConfigMap {
    let labels = BTreeMap::from([
        (MANAGED_BY_LABEL.to_string(), MANAGED_BY.to_string()),
        (COMPONENT_LABEL.to_string(), COMPONENT.to_string()),
    ]);
    let data = BTreeMap::from([
        ("id".to_string(), req.id.clone()),
        ("op".to_string(), req.op.clone()),
        ("params-sha256".to_string(), params_digest(&req.params)),
        ("started-at".to_string(), now_text()),
    ]);
    ConfigMap {
        metadata: ObjectMeta {
            name: Some(record_name(&req.id)),
            namespace: Some(namespace.to_string()),
            labels: Some(labels),
            ..ObjectMeta::default()
        },
        data: Some(data),
        ..ConfigMap::default()
    }
}

/// Reads a record; `Err` says which key is missing.
pub fn parse(cm: &ConfigMap) -> Result<Record, String> {
    let name = cm.metadata.name.as_deref().unwrap_or("?");
    let empty = BTreeMap::new();
    let data = cm.data.as_ref().unwrap_or(&empty);
    let get = |key: &str| {
        data.get(key)
            .cloned()
            .ok_or_else(|| format!("request record {name} has no data.{key}"))
    };
    let outcome = if let Some(text) = data.get("res") {
        match serde_json::from_str::<Res>(text) {
            Ok(res) => Some(Outcome::Res(res)),
            // A record cut short is one not finished: the op is resumed as after a crash.
            Err(e) => {
                log::warn!("request record {name}: data.res is unreadable ({e}); resuming the op");
                None
            }
        }
    } else if let Some(text) = data.get("res-too-large") {
        serde_json::from_str::<TooLargeMarker>(text)
            .ok()
            .map(|m| Outcome::TooLarge {
                size_bytes: m.size_bytes,
                limit_bytes: m.limit_bytes,
            })
    } else {
        None
    };
    Ok(Record {
        id: get("id")?,
        op: get("op")?,
        params_sha256: get("params-sha256")?,
        created: cm.metadata.creation_timestamp.clone(),
        outcome,
    })
}

/// The merge patch completing a record with `res` (or with the too-large marker).
pub fn finished_patch(res: &Res) -> serde_json::Value {
    let text = serde_json::to_string(res).unwrap_or_default();
    let mut data = serde_json::Map::new();
    if text.len() > RESULT_LIMIT || text.is_empty() {
        let marker = TooLargeMarker {
            size_bytes: text.len() as u64,
            limit_bytes: RESULT_LIMIT as u64,
        };
        data.insert(
            "res-too-large".into(),
            serde_json::to_string(&marker).unwrap_or_default().into(),
        );
    } else {
        data.insert("res".into(), text.into());
    }
    serde_json::json!({
        "metadata": {"annotations": {FINISHED_AT: now_text()}},
        "data": data,
    })
}

/// How to resume a request whose record was started but never finished (the agent died
/// mid-op, or was rescheduled).
#[derive(Debug, Clone, PartialEq)]
pub enum Resume {
    /// `apply_manifests`: apply again (idempotent) and report what the FIRST execution did:
    /// objects created (or changed by the agent) since `since` are reported as such, not as
    /// `unchanged`.
    Reapply {
        /// The record's creation time.
        since: Time,
    },
    /// `service_create`: never create twice; answer with the instance's status instead.
    StatusInsteadOfCreate,
    /// Idempotent ops: run again.
    Rerun,
}

/// What to do with a request whose record already exists.
#[derive(Debug, Clone, PartialEq)]
pub enum Decision {
    /// It finished: answer with this (the first result, or `result_too_large`).
    Answer(Res),
    /// It started and never finished.
    Resume(Resume),
    /// The id was used for another request.
    Refuse(ErrorBody),
}

/// Decides how to answer `req` (of `op`) given its existing `record`.
pub fn decide(record: &Record, req: &Req, op: Op) -> Decision {
    if record.id != req.id {
        return Decision::Refuse(ErrorBody::new(
            code::INTERNAL,
            format!(
                "request record {} belongs to request {:?}, not {:?}; delete the ConfigMap to reuse the name",
                record_name(&req.id),
                record.id,
                req.id
            ),
        ));
    }
    if record.op != req.op || record.params_sha256 != params_digest(&req.params) {
        return Decision::Refuse(ErrorBody::new(
            code::DUPLICATE_ID,
            format!(
                "request id {} was already executed by this agent as op {} with other params; an id names one request: submit a different request under a new id",
                req.id, record.op
            ),
        ));
    }
    match &record.outcome {
        Some(Outcome::Res(res)) => {
            let mut res = res.clone();
            res.id = req.id.clone();
            Decision::Answer(res)
        }
        Some(Outcome::TooLarge {
            size_bytes,
            limit_bytes,
        }) => Decision::Answer(Res::err(
            &req.id,
            ErrorBody::new(
                code::RESULT_TOO_LARGE,
                format!(
                    "request {} was executed once; its result ({size_bytes} bytes) is larger than the {limit_bytes} bytes a request record keeps, so this redelivery cannot repeat it; read the objects back (get_objects) to see the outcome",
                    req.id
                ),
            ),
        )),
        None => Decision::Resume(match (op, &record.created) {
            (Op::ApplyManifests, Some(since)) => Resume::Reapply {
                since: since.clone(),
            },
            (Op::ServiceCreate, _) => Resume::StatusInsteadOfCreate,
            _ => Resume::Rerun,
        }),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn req(id: &str, op: &str, params: serde_json::Value) -> Req {
        Req::new(id, op, &params).unwrap()
    }

    fn time(text: &str) -> Time {
        serde_json::from_value(json!(text)).unwrap()
    }

    fn read_back(cm: &ConfigMap, created: &str, patch: Option<serde_json::Value>) -> Record {
        let mut cm = cm.clone();
        cm.metadata.creation_timestamp = Some(time(created));
        if let Some(patch) = patch {
            for (k, v) in patch["data"].as_object().unwrap() {
                cm.data
                    .as_mut()
                    .unwrap()
                    .insert(k.clone(), v.as_str().unwrap().to_string());
            }
        }
        parse(&cm).unwrap()
    }

    #[test]
    fn names_are_valid_fixed_length_and_labelled() {
        let name = record_name("any id / with spaces and UTF-8 é");
        assert_eq!(name.len(), NAME_PREFIX.len() + 32);
        assert!(harmony::types::Dns1123Label::parse(&name).is_ok(), "{name}");
        assert_eq!(name, record_name("any id / with spaces and UTF-8 é"));
        assert_ne!(name, record_name("another"));
        let cm = started("harmony-agent", &req("r1", "apply_manifests", json!({})));
        let labels = cm.metadata.labels.unwrap();
        assert_eq!(labels[MANAGED_BY_LABEL], "harmony-agent");
        assert_eq!(labels[COMPONENT_LABEL], COMPONENT);
        assert_eq!(
            selector(),
            "app.kubernetes.io/managed-by=harmony-agent,app.kubernetes.io/component=request-record"
        );
        assert!(has_effect(Op::ServiceCreate) && !has_effect(Op::GetObjects));
    }

    #[test]
    fn a_finished_record_answers_with_the_first_res_byte_for_byte() {
        let r = req("r1", "apply_manifests", json!({"manifests": [], "n": 1e2}));
        let cm = started("ns", &r);
        let first = Res::ok_raw(
            "r1",
            RawJson::from_string(r#"{"changes": [], "n": 1e2}"#.into()).unwrap(),
        );
        let patch = finished_patch(&first);
        assert!(patch["metadata"]["annotations"][FINISHED_AT].is_string());
        let record = read_back(&cm, "2025-01-01T00:00:00Z", Some(patch));
        match decide(&record, &r, Op::ApplyManifests) {
            Decision::Answer(res) => {
                assert_eq!(res, first);
                assert_eq!(res.result.unwrap().get(), r#"{"changes": [], "n": 1e2}"#);
            }
            d => panic!("{d:?}"),
        }
    }

    #[test]
    fn an_unfinished_record_resumes_by_op() {
        let apply = req("a", "apply_manifests", json!({"manifests": []}));
        let record = read_back(&started("ns", &apply), "2025-01-01T00:00:00Z", None);
        assert_eq!(
            decide(&record, &apply, Op::ApplyManifests),
            Decision::Resume(Resume::Reapply {
                since: time("2025-01-01T00:00:00Z")
            })
        );
        let create = req(
            "c",
            "service_create",
            json!({"instance_id": "i1", "service_type": "queue"}),
        );
        let record = read_back(&started("ns", &create), "2025-01-01T00:00:00Z", None);
        assert_eq!(
            decide(&record, &create, Op::ServiceCreate),
            Decision::Resume(Resume::StatusInsteadOfCreate)
        );
        let delete = req("d", "delete_manifests", json!({"objects": []}));
        let record = read_back(&started("ns", &delete), "2025-01-01T00:00:00Z", None);
        assert_eq!(
            decide(&record, &delete, Op::DeleteManifests),
            Decision::Resume(Resume::Rerun)
        );
    }

    #[test]
    fn the_same_id_with_another_op_or_params_is_refused() {
        let first = req("r1", "apply_manifests", json!({"manifests": [1]}));
        let record = read_back(&started("ns", &first), "2025-01-01T00:00:00Z", None);
        for other in [
            req("r1", "delete_manifests", json!({"manifests": [1]})),
            req("r1", "apply_manifests", json!({"manifests": [2]})),
        ] {
            match decide(&record, &other, Op::parse(&other.op).unwrap()) {
                Decision::Refuse(e) => {
                    assert_eq!(e.code, code::DUPLICATE_ID);
                    assert!(
                        e.message.contains("r1") && e.message.contains("new id"),
                        "{}",
                        e.message
                    );
                }
                d => panic!("{d:?}"),
            }
        }
    }

    #[test]
    fn a_result_too_large_for_a_record_is_marked_and_answered_as_such() {
        let r = req("big", "apply_manifests", json!({}));
        let res = Res::ok("big", json!({"blob": "x".repeat(RESULT_LIMIT)}));
        let patch = finished_patch(&res);
        assert!(patch["data"].get("res").is_none());
        let record = read_back(&started("ns", &r), "2025-01-01T00:00:00Z", Some(patch));
        match decide(&record, &r, Op::ApplyManifests) {
            Decision::Answer(res) => {
                let e = res.error.unwrap();
                assert_eq!(e.code, code::RESULT_TOO_LARGE);
                assert!(
                    e.message.contains(&RESULT_LIMIT.to_string()),
                    "{}",
                    e.message
                );
            }
            d => panic!("{d:?}"),
        }
    }
}
