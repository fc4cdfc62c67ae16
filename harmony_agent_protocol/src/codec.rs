//! Decoding and encoding frames: size limit first, then the tag, then the tagged struct.

use serde::Deserialize;
use serde_json::Value;

use crate::{Frame, MAX_FRAME_BYTES, code};

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
        "unknown frame type {type_name:?}; v1 types are hello, welcome, ping, req, res, progress, error, services, instance, renew, identity"
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

/// Decodes one text frame of at most [`MAX_FRAME_BYTES`]. Never panics, whatever the input.
pub fn decode(text: &str) -> Result<Frame, DecodeError> {
    decode_with_limit(text, MAX_FRAME_BYTES)
}

/// Only the tag of a frame; every other field is skipped (and validated as JSON) unparsed.
#[derive(Deserialize)]
struct Tag<'a> {
    #[serde(rename = "type", borrow)]
    type_name: Option<std::borrow::Cow<'a, str>>,
}

/// Decodes one text frame of at most `max` bytes. Never panics, whatever the input.
///
/// The frame is read in two passes, the tag and then the body as the tag's struct, because
/// [`RawJson`] fields cannot be read through serde's buffering of internally tagged enums.
pub fn decode_with_limit(text: &str, max: usize) -> Result<Frame, DecodeError> {
    if text.len() > max {
        return Err(DecodeError::TooLarge {
            size: text.len(),
            max,
        });
    }
    if !text.trim_start().starts_with('{') {
        return Err(DecodeError::NotJson {
            reason: "top level is not an object".into(),
        });
    }
    let tag: Tag = match serde_json::from_str(text) {
        Ok(tag) => tag,
        Err(e) if e.is_data() => {
            return Err(match serde_json::from_str::<Value>(text) {
                Ok(Value::Object(o)) if o.get("type").is_some_and(|t| !t.is_string()) => {
                    DecodeError::NoType
                }
                _ => DecodeError::NotJson {
                    reason: "top level is not an object".into(),
                },
            });
        }
        Err(e) => {
            return Err(DecodeError::NotJson {
                reason: describe_serde(&e),
            });
        }
    };
    let type_name = tag.type_name.ok_or(DecodeError::NoType)?;
    fn body<T: for<'de> Deserialize<'de>>(text: &str, type_name: &str) -> Result<T, DecodeError> {
        serde_json::from_str(text).map_err(|e| DecodeError::Malformed {
            type_name: type_name.to_string(),
            reason: describe_serde(&e),
        })
    }
    let t = type_name.as_ref();
    Ok(match t {
        "hello" => Frame::Hello(body(text, t)?),
        "welcome" => Frame::Welcome(body(text, t)?),
        "ping" => Frame::Ping(body(text, t)?),
        "req" => Frame::Req(body(text, t)?),
        "res" => Frame::Res(body(text, t)?),
        "progress" => Frame::Progress(body(text, t)?),
        "error" => Frame::Error(body(text, t)?),
        "services" => Frame::Services(body(text, t)?),
        "instance" => Frame::Instance(body(text, t)?),
        "renew" => Frame::Renew(body(text, t)?),
        "identity" => Frame::Identity(body(text, t)?),
        other => {
            return Err(DecodeError::UnknownType {
                type_name: other.chars().take(64).collect(),
            });
        }
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

/// The size in bytes of `frame` once encoded, to check it against a receiver's limit.
pub fn encoded_len(frame: &Frame) -> usize {
    encode(frame).len()
}

/// Encodes a frame as JSON text.
pub fn encode(frame: &Frame) -> String {
    // Serializing these types cannot fail: every map key is a string.
    serde_json::to_string(frame).unwrap_or_else(|e| {
        format!(r#"{{"type":"error","code":"internal","message":"encoding failed: {e}"}}"#)
    })
}
