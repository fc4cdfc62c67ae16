//! Agent protocol v1: JSON text frames between a region agent and the control plane.
//!
//! ```text
//! hello    agent -> cp   {type:"hello", agent_version, region, zone, ops:[...], protocol:1}
//! welcome  cp -> agent   {type:"welcome", heartbeat_s, identity?}
//! ping     agent -> cp   {type:"ping", seq, status:{k8s_reachable, detail?}}
//! req      cp -> agent   {type:"req", id, op, params}
//! res      agent -> cp   {type:"res", id, ok, result? | error:{code,message}}
//! progress agent -> cp   {type:"progress", id, stage, detail}
//! error    either way    {type:"error", code, message, id?}
//! services agent -> cp   {type:"services", offers:[{service_type, provider, builtin, health, detail?}]}
//! instance agent -> cp   {type:"instance", instance_id, service_type, provider, state, detail?, outputs?}
//! ```
//!
//! Decoding never panics: a frame too large, not JSON, of an unknown `type` or missing a field
//! is a [`DecodeError`] that the receiver answers with an `error` frame. Unknown fields are
//! ignored so later minor additions stay readable by v1 peers.

pub mod ops;
pub mod secret;
pub mod services;

#[cfg(feature = "logging")]
pub mod logging;

use serde::{Deserialize, Serialize};
use serde_json::Value;

pub use ops::{Op, WireChange, WireFieldChange, WireObjectRef};
pub use secret::{SecretString, scrub};
pub use services::{
    InstanceState, InstanceStatus, ProviderHealth, ServiceCreateParams, ServiceOffer, ServiceRef,
    Services,
};

/// The protocol version this crate speaks.
pub const PROTOCOL_VERSION: u32 = 1;

/// The largest text frame either side accepts (4 MiB): enough for hundreds of manifests.
pub const MAX_FRAME_BYTES: usize = 4 * 1024 * 1024;

/// The HTTP path agents upgrade to WebSocket on.
pub const AGENT_PATH: &str = "/v1/agent";

/// Prefix of one-time bootstrap tokens.
pub const BOOTSTRAP_PREFIX: &str = "hbt_";

/// Prefix of long-lived agent identities.
pub const IDENTITY_PREFIX: &str = "hid_";

/// WebSocket close codes the control plane uses to refuse or end a connection (private range).
pub mod close {
    /// The hello was missing, malformed or spoke another protocol version.
    pub const PROTOCOL: u16 = 4000;
    /// No credential, or one the control plane does not know.
    pub const UNAUTHORIZED: u16 = 4001;
    /// The bootstrap token was already exchanged for an identity.
    pub const BOOTSTRAP_USED: u16 = 4002;
    /// The bootstrap token's expiry has passed.
    pub const BOOTSTRAP_EXPIRED: u16 = 4003;
    /// The identity was revoked: the region is decommissioned.
    pub const REVOKED: u16 = 4004;
    /// The hello names a region or zone other than the credential's.
    pub const REGION_MISMATCH: u16 = 4005;
    /// A newer connection for the same region replaced this one.
    pub const REPLACED: u16 = 4008;

    /// Whether an agent should stop instead of retrying after this close code.
    pub fn is_fatal(code: u16) -> bool {
        matches!(
            code,
            PROTOCOL
                | UNAUTHORIZED
                | BOOTSTRAP_USED
                | BOOTSTRAP_EXPIRED
                | REVOKED
                | REGION_MISMATCH
        )
    }
}

/// Error codes carried in `res` and `error` frames.
pub mod code {
    /// The op is not one this agent executes.
    pub const UNSUPPORTED_OP: &str = "unsupported_op";
    /// The frame `type` is unknown.
    pub const UNKNOWN_FRAME: &str = "unknown_frame";
    /// The frame is not valid JSON or lacks a field.
    pub const MALFORMED_FRAME: &str = "malformed_frame";
    /// The frame exceeds [`super::MAX_FRAME_BYTES`].
    pub const FRAME_TOO_LARGE: &str = "frame_too_large";
    /// The op's params do not match its schema.
    pub const INVALID_PARAMS: &str = "invalid_params";
    /// A manifest lacks apiVersion, kind or name.
    pub const INVALID_OBJECT: &str = "invalid_object";
    /// The Kubernetes API server refused an object.
    pub const REJECTED: &str = "rejected";
    /// The API server has no such kind.
    pub const UNKNOWN_KIND: &str = "unknown_kind";
    /// Another field manager owns the fields.
    pub const CONFLICT: &str = "conflict";
    /// The agent cannot reach its Kubernetes API server.
    pub const UNREACHABLE: &str = "unreachable";
    /// Something timed out.
    pub const TIMEOUT: &str = "timeout";
    /// Not supported in this mode or backend.
    pub const UNSUPPORTED: &str = "unsupported";
    /// No provider of this agent holds the service type.
    pub const NO_PROVIDER: &str = "no_provider";
    /// The type's provider is not healthy now; retry when it is.
    pub const PROVIDER_UNAVAILABLE: &str = "provider_unavailable";
    /// The provider refused the request or answered something unreadable.
    pub const PROVIDER_ERROR: &str = "provider_error";
    /// Anything else.
    pub const INTERNAL: &str = "internal";
}

/// Every v1 frame.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(tag = "type", rename_all = "snake_case")]
pub enum Frame {
    /// The agent introduces itself.
    Hello(Hello),
    /// The control plane accepts the agent.
    Welcome(Welcome),
    /// The agent's heartbeat.
    Ping(Ping),
    /// A request for the agent.
    Req(Req),
    /// The agent's answer to a request.
    Res(Res),
    /// Advisory progress of a request.
    Progress(Progress),
    /// A frame could not be handled.
    Error(ErrorFrame),
    /// The service types the agent holds now.
    Services(Services),
    /// The status of one service instance changed.
    Instance(InstanceStatus),
}

/// `hello`: the first frame an agent sends.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Hello {
    /// The agent's version (semver).
    pub agent_version: String,
    /// The region the agent serves.
    pub region: String,
    /// The zone (cluster) the agent runs in.
    pub zone: String,
    /// The ops this agent executes.
    pub ops: Vec<String>,
    /// Protocol version; must be [`PROTOCOL_VERSION`].
    pub protocol: u32,
}

/// `welcome`: the control plane's answer to a valid hello.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Welcome {
    /// How often to send `ping`, in seconds (fractions allowed).
    pub heartbeat_s: f64,
    /// The long-lived identity, only after a bootstrap exchange. Never log it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub identity: Option<SecretString>,
    /// Protocol version the control plane speaks.
    #[serde(default = "protocol_v1")]
    pub protocol: u32,
}

fn protocol_v1() -> u32 {
    PROTOCOL_VERSION
}

/// `ping`: a heartbeat with health inputs.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Ping {
    /// Increments by one per heartbeat of a connection.
    pub seq: u64,
    /// What the agent observes.
    pub status: AgentStatus,
}

/// Health inputs an agent reports.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct AgentStatus {
    /// Whether the agent's Kubernetes API server answered its last probe.
    pub k8s_reachable: bool,
    /// Why it is not reachable, or the server version.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub detail: Option<String>,
    /// Requests executing now.
    #[serde(default)]
    pub in_flight: u32,
}

/// `req`: an op for the agent to execute.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Req {
    /// Unique per request; redeliveries reuse it.
    pub id: String,
    /// The op name ([`Op`]); unknown names are answered with `unsupported_op`.
    pub op: String,
    /// The op's parameters.
    #[serde(default)]
    pub params: Value,
}

/// `res`: the outcome of a request.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Res {
    /// The request's id.
    pub id: String,
    /// Whether the op succeeded.
    pub ok: bool,
    /// The op's result when `ok`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub result: Option<Value>,
    /// Why it failed when not `ok`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub error: Option<ErrorBody>,
}

impl Res {
    /// A successful result.
    pub fn ok(id: impl Into<String>, result: Value) -> Self {
        Self {
            id: id.into(),
            ok: true,
            result: Some(result),
            error: None,
        }
    }

    /// A failure.
    pub fn err(id: impl Into<String>, error: ErrorBody) -> Self {
        Self {
            id: id.into(),
            ok: false,
            result: None,
            error: Some(error),
        }
    }
}

/// A machine-readable code and a message for people (never secret values).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ErrorBody {
    /// One of [`code`].
    pub code: String,
    /// What went wrong and what to do.
    pub message: String,
    /// Changes made before the failure (apply ops).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub applied: Vec<WireChange>,
}

impl ErrorBody {
    /// An error with no partial changes.
    pub fn new(code: &str, message: impl Into<String>) -> Self {
        Self {
            code: code.into(),
            message: message.into(),
            applied: Vec::new(),
        }
    }
}

/// `progress`: advisory progress of a request.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Progress {
    /// The request's id.
    pub id: String,
    /// A short stage name (`started`, `applying`, `done`).
    pub stage: String,
    /// Detail for people.
    #[serde(default)]
    pub detail: String,
}

/// `error`: a frame could not be handled.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ErrorFrame {
    /// One of [`code`].
    pub code: String,
    /// What was wrong.
    pub message: String,
    /// The request id, when the frame had one.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub id: Option<String>,
}

impl ErrorFrame {
    /// An error frame for a decode failure.
    pub fn from_decode(e: &DecodeError) -> Self {
        Self {
            code: e.code().into(),
            message: e.to_string(),
            id: None,
        }
    }
}

/// Why a text frame could not be decoded.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum DecodeError {
    /// Larger than [`MAX_FRAME_BYTES`].
    #[error("frame of {size} bytes exceeds the {max}-byte limit; send fewer manifests per request")]
    TooLarge {
        /// The frame's size.
        size: usize,
        /// The limit.
        max: usize,
    },
    /// Not a JSON object.
    #[error("frame is not a JSON object: {reason}")]
    NotJson {
        /// The parser's message.
        reason: String,
    },
    /// No string field `type`.
    #[error("frame has no string field \"type\"; every v1 frame names its type")]
    NoType,
    /// A `type` v1 does not define.
    #[error(
        "unknown frame type {type_name:?}; v1 types are hello, welcome, ping, req, res, progress, error, services, instance"
    )]
    UnknownType {
        /// The type as sent (truncated to 64 characters).
        type_name: String,
    },
    /// A known type with missing or mistyped fields.
    #[error("{type_name} frame is malformed: {reason}")]
    Malformed {
        /// The frame type.
        type_name: String,
        /// The parser's message (field names, never values).
        reason: String,
    },
}

impl DecodeError {
    /// The error code to answer with.
    pub fn code(&self) -> &'static str {
        match self {
            DecodeError::TooLarge { .. } => code::FRAME_TOO_LARGE,
            DecodeError::UnknownType { .. } => code::UNKNOWN_FRAME,
            _ => code::MALFORMED_FRAME,
        }
    }
}

const TYPES: [&str; 9] = [
    "hello", "welcome", "ping", "req", "res", "progress", "error", "services", "instance",
];

/// Decodes one text frame. Never panics, whatever the input.
pub fn decode(text: &str) -> Result<Frame, DecodeError> {
    if text.len() > MAX_FRAME_BYTES {
        return Err(DecodeError::TooLarge {
            size: text.len(),
            max: MAX_FRAME_BYTES,
        });
    }
    let value: Value = serde_json::from_str(text).map_err(|e| DecodeError::NotJson {
        reason: describe_serde(&e),
    })?;
    let Some(object) = value.as_object() else {
        return Err(DecodeError::NotJson {
            reason: "top level is not an object".into(),
        });
    };
    let type_name = object
        .get("type")
        .and_then(Value::as_str)
        .ok_or(DecodeError::NoType)?;
    if !TYPES.contains(&type_name) {
        return Err(DecodeError::UnknownType {
            type_name: type_name.chars().take(64).collect(),
        });
    }
    let type_name = type_name.to_string();
    serde_json::from_value(value).map_err(|e| DecodeError::Malformed {
        type_name,
        reason: describe_serde(&e),
    })
}

/// serde_json messages name fields and types; strip any quoted input echo to be safe.
fn describe_serde(e: &serde_json::Error) -> String {
    let text = e.to_string();
    // "invalid type: string \"...\", expected u64" echoes input: keep only the expectation.
    match text.find("invalid type: string \"") {
        Some(_) => match text.rfind("expected") {
            Some(i) => format!("invalid type: {}", &text[i..]),
            None => "invalid type".into(),
        },
        None => text.chars().take(200).collect(),
    }
}

/// Encodes a frame as JSON text.
pub fn encode(frame: &Frame) -> String {
    // Serializing these types cannot fail: every map key is a string.
    serde_json::to_string(frame).unwrap_or_else(|e| {
        format!(r#"{{"type":"error","code":"internal","message":"encoding failed: {e}"}}"#)
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn frames_round_trip_with_the_documented_shape() {
        let hello = Frame::Hello(Hello {
            agent_version: "0.1.0".into(),
            region: "eu-west".into(),
            zone: "paris-1".into(),
            ops: vec!["apply_manifests".into()],
            protocol: 1,
        });
        let text = encode(&hello);
        let v: Value = serde_json::from_str(&text).unwrap();
        assert_eq!(v["type"], "hello");
        assert_eq!(v["protocol"], 1);
        assert_eq!(decode(&text).unwrap(), hello);
        let res = Frame::Res(Res::err(
            "r1",
            ErrorBody::new(code::UNSUPPORTED_OP, "no such op"),
        ));
        let v: Value = serde_json::from_str(&encode(&res)).unwrap();
        assert_eq!(
            v,
            json!({"type": "res", "id": "r1", "ok": false, "error": {"code": "unsupported_op", "message": "no such op"}})
        );
    }

    #[test]
    fn unknown_fields_are_ignored_and_unknown_types_are_errors() {
        let f = decode(
            r#"{"type":"ping","seq":3,"status":{"k8s_reachable":true,"gpu":"x"},"extra":[1]}"#,
        )
        .unwrap();
        assert!(matches!(f, Frame::Ping(Ping { seq: 3, .. })));
        let e = decode(r#"{"type":"teleport","to":"mars"}"#).unwrap_err();
        assert_eq!(e.code(), code::UNKNOWN_FRAME);
        assert!(e.to_string().contains("teleport"), "{e}");
        let e = decode(r#"{"type":"req","id":7}"#).unwrap_err();
        assert_eq!(e.code(), code::MALFORMED_FRAME);
        assert!(e.to_string().starts_with("req frame is malformed"), "{e}");
        assert_eq!(decode("[]").unwrap_err().code(), code::MALFORMED_FRAME);
        assert_eq!(decode("{").unwrap_err().code(), code::MALFORMED_FRAME);
        assert_eq!(decode(r#"{"seq":1}"#).unwrap_err(), DecodeError::NoType);
    }

    #[test]
    fn oversized_frames_are_refused_before_parsing() {
        let big = format!(
            r#"{{"type":"progress","id":"x","stage":"s","detail":"{}"}}"#,
            "a".repeat(MAX_FRAME_BYTES)
        );
        assert!(matches!(
            decode(&big).unwrap_err(),
            DecodeError::TooLarge { .. }
        ));
    }

    #[test]
    fn a_welcome_identity_is_not_in_debug_output() {
        let w = Welcome {
            heartbeat_s: 5.0,
            identity: Some(SecretString::new("hid_supersecretvalue")),
            protocol: 1,
        };
        assert!(!format!("{w:?}").contains("supersecret"));
        assert!(encode(&Frame::Welcome(w)).contains("hid_supersecretvalue"));
    }

    /// A small deterministic generator (xorshift64*) so the fuzz test needs no dependency.
    struct Rng(u64);
    impl Rng {
        fn next(&mut self) -> u64 {
            self.0 ^= self.0 >> 12;
            self.0 ^= self.0 << 25;
            self.0 ^= self.0 >> 27;
            self.0.wrapping_mul(0x2545_F491_4F6C_DD1D)
        }
        fn below(&mut self, n: usize) -> usize {
            (self.next() % n.max(1) as u64) as usize
        }
    }

    fn seeds() -> Vec<String> {
        vec![
            encode(&Frame::Hello(Hello {
                agent_version: "1.0.0".into(),
                region: "r".into(),
                zone: "z".into(),
                ops: vec!["apply_manifests".into(), "get_inventory".into()],
                protocol: 1,
            })),
            encode(&Frame::Ping(Ping {
                seq: 9,
                status: AgentStatus {
                    k8s_reachable: true,
                    detail: Some("v1.35".into()),
                    in_flight: 2,
                },
            })),
            encode(&Frame::Req(Req {
                id: "abc".into(),
                op: "apply_manifests".into(),
                params: json!({"manifests": [{"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "x"}}]}),
            })),
            encode(&Frame::Res(Res::ok("abc", json!({"changes": []})))),
            encode(&Frame::Progress(Progress {
                id: "abc".into(),
                stage: "applying".into(),
                detail: "1 of 2".into(),
            })),
            encode(&Frame::Welcome(Welcome {
                heartbeat_s: 0.2,
                identity: None,
                protocol: 1,
            })),
            encode(&Frame::Services(Services {
                offers: vec![ServiceOffer {
                    service_type: "queue".into(),
                    provider: "q".into(),
                    builtin: false,
                    health: ProviderHealth::Healthy,
                    detail: "ok".into(),
                }],
            })),
            encode(&Frame::Instance(InstanceStatus {
                instance_id: "i".into(),
                service_type: "queue".into(),
                provider: "q".into(),
                state: InstanceState::Ready,
                detail: String::new(),
                outputs: serde_json::Map::new(),
            })),
        ]
    }

    /// Property: for any byte mutation, truncation, splice or random input, `decode` returns
    /// (never panics), and whatever it accepts re-encodes to a frame that decodes to itself.
    #[test]
    fn decoder_survives_random_and_mutated_input() {
        let seeds = seeds();
        let alphabet: &[u8] = b"{}[]\":,0123456789.-+eE truefalsnul\\/\x00\x7fabcXYZtypeidopreq";
        let mut rng = Rng(0x9E37_79B9_7F4A_7C15);
        let mut accepted = 0;
        for round in 0..60_000 {
            let base = &seeds[rng.below(seeds.len())];
            let mut bytes = base.as_bytes().to_vec();
            match round % 5 {
                0 => {
                    for _ in 0..=rng.below(8) {
                        let i = rng.below(bytes.len());
                        bytes[i] = alphabet[rng.below(alphabet.len())];
                    }
                }
                1 => bytes.truncate(rng.below(bytes.len())),
                2 => {
                    let other = seeds[rng.below(seeds.len())].as_bytes();
                    let cut = rng.below(bytes.len());
                    let from = rng.below(other.len());
                    bytes.truncate(cut);
                    bytes.extend_from_slice(&other[from..]);
                }
                3 => {
                    let i = rng.below(bytes.len());
                    let n = rng.below(6);
                    let junk: Vec<u8> = (0..n)
                        .map(|_| alphabet[rng.below(alphabet.len())])
                        .collect();
                    bytes.splice(i..i, junk);
                }
                _ => {
                    bytes = (0..rng.below(64))
                        .map(|_| alphabet[rng.below(alphabet.len())])
                        .collect();
                }
            }
            let text = String::from_utf8_lossy(&bytes);
            if let Ok(frame) = decode(&text) {
                accepted += 1;
                assert_eq!(decode(&encode(&frame)).as_ref(), Ok(&frame), "{text}");
            }
        }
        // The mutations must exercise both paths, or the test proves little.
        assert!(accepted > 100, "only {accepted} mutated frames decoded");
    }

    #[test]
    fn deeply_nested_input_is_an_error_not_a_stack_overflow() {
        let deep = format!(
            r#"{{"type":"req","id":"x","op":"y","params":{}{}}}"#,
            "[".repeat(100_000),
            "]".repeat(100_000)
        );
        assert!(decode(&deep).is_err());
    }
}
