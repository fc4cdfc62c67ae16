//! What every JSON body must be before a handler sees it: an object, at most
//! [`MAX_DEPTH`] levels deep, keys of at most [`MAX_KEY_BYTES`] and strings of at most
//! [`MAX_STRING_BYTES`] (the body limit; `params` included), only the fields its type knows (each body type
//! denies unknown fields), and numbers inside each field's documented range ([`seconds`]).
//! A body that breaks a rule is a 400 naming the field and the fix; nothing was touched.

use axum::body::Bytes;
use axum::extract::{FromRequest, Request};
use axum::http::StatusCode;
use harmony_agent_protocol::code;
use serde::de::DeserializeOwned;
use serde_json::Value;

use super::{Failure, MAX_BODY_BYTES};

/// The deepest nesting of objects and arrays a body may have (Kubernetes manifests in `params`
/// rarely pass 20).
pub const MAX_DEPTH: usize = 64;
/// The longest key of any object in a body, in bytes.
pub const MAX_KEY_BYTES: usize = 256;
/// The longest string value in a body, in bytes: the body limit itself. A ConfigMap's data may
/// be as large as a frame, and a request too large for its agent must reach the handler to be
/// refused with 413 and the agent's limit.
pub const MAX_STRING_BYTES: usize = MAX_BODY_BYTES;

/// The longest lifetime a caller may ask for a token (`ttl_s`, `bootstrap_ttl_s`): ten years.
pub const MAX_TTL_S: f64 = 315_360_000.0;
/// The longest wait a caller may ask for (`timeout_s`): one day (the server's
/// `--max-request-wait-s` caps it further).
pub const MAX_WAIT_S: f64 = 86_400.0;

/// A JSON request body, checked as the module says; a body over [`MAX_BODY_BYTES`] is a 413
/// naming the limit.
pub struct Body<T>(pub T);

impl<S: Send + Sync, T: DeserializeOwned> FromRequest<S> for Body<T> {
    type Rejection = Failure;

    async fn from_request(req: Request, state: &S) -> Result<Self, Failure> {
        let what = format!("{} {}", req.method(), req.uri().path());
        let bytes = Bytes::from_request(req, state).await.map_err(|e| {
            if e.status() == StatusCode::PAYLOAD_TOO_LARGE {
                let mut f = Failure::new(
                    StatusCode::PAYLOAD_TOO_LARGE,
                    format!("{what}: the body is over the {MAX_BODY_BYTES}-byte limit; send fewer or smaller manifests per request"),
                )
                .code(code::TOO_LARGE);
                f.1.limit_bytes = Some(MAX_BODY_BYTES as u64);
                f
            } else {
                Failure::new(e.status(), format!("{what}: the body is unreadable: {e}"))
            }
        })?;
        parse(&bytes)
            .map(Body)
            .map_err(|e| Failure::new(StatusCode::BAD_REQUEST, format!("{what}: {e}")))
    }
}

/// Parses `bytes` as a body of type `T` under the module's rules; the error names the field.
pub fn parse<T: DeserializeOwned>(bytes: &[u8]) -> Result<T, String> {
    // serde_json stops at 128 levels on its own; the scan below refuses past MAX_DEPTH first
    // so that the message names the limit.
    shape(bytes)?;
    let value: Value = serde_json::from_slice(bytes).map_err(|e| e.to_string())?;
    if !value.is_object() {
        return Err(format!(
            "the body must be a JSON object ({{...}}), not {}; send the fields of this endpoint",
            kind(&value)
        ));
    }
    check(&value, "")?;
    serde_json::from_value(value).map_err(|e| e.to_string())
}

fn kind(v: &Value) -> &'static str {
    match v {
        Value::Null => "null",
        Value::Bool(_) => "a boolean",
        Value::Number(_) => "a number",
        Value::String(_) => "a string",
        Value::Array(_) => "an array",
        Value::Object(_) => "an object",
    }
}

/// Refuses nesting deeper than [`MAX_DEPTH`] by scanning the text (outside strings), before
/// any recursive parse.
fn shape(bytes: &[u8]) -> Result<(), String> {
    let (mut depth, mut in_string, mut escaped) = (0usize, false, false);
    for &b in bytes {
        if in_string {
            match (escaped, b) {
                (true, _) => escaped = false,
                (false, b'\\') => escaped = true,
                (false, b'"') => in_string = false,
                _ => {}
            }
            continue;
        }
        match b {
            b'"' => in_string = true,
            b'{' | b'[' => {
                depth += 1;
                if depth > MAX_DEPTH {
                    return Err(format!(
                        "the body nests objects and arrays deeper than {MAX_DEPTH} levels; flatten it"
                    ));
                }
            }
            b'}' | b']' => depth = depth.saturating_sub(1),
            _ => {}
        }
    }
    Ok(())
}

/// Checks key and string lengths everywhere, naming the path of the first one too long.
fn check(v: &Value, path: &str) -> Result<(), String> {
    match v {
        Value::String(s) if s.len() > MAX_STRING_BYTES => Err(format!(
            "{}: a string of {} bytes, over the {MAX_STRING_BYTES}-byte limit; send less",
            field(path),
            s.len()
        )),
        Value::Array(items) => items
            .iter()
            .enumerate()
            .try_for_each(|(i, item)| check(item, &format!("{path}[{i}]"))),
        Value::Object(map) => map.iter().try_for_each(|(k, item)| {
            if k.len() > MAX_KEY_BYTES {
                let shown: String = k.chars().take(40).collect();
                return Err(format!(
                    "{}: a key of {} bytes ({shown:?}...), over the {MAX_KEY_BYTES}-byte limit",
                    field(path),
                    k.len()
                ));
            }
            let sub = if path.is_empty() {
                k.clone()
            } else {
                format!("{path}.{k}")
            };
            check(item, &sub)
        }),
        _ => Ok(()),
    }
}

fn field(path: &str) -> &str {
    if path.is_empty() { "the body" } else { path }
}

/// A duration field in seconds, checked against its documented range: absent stays absent; a
/// value outside `min..=max` (or not finite) is an error naming the field, the range and the
/// fix (answered 400 with [`bad_request`]).
pub fn seconds(
    field: &str,
    value: Option<f64>,
    min: f64,
    max: f64,
    fix: &str,
) -> Result<Option<f64>, String> {
    match value {
        None => Ok(None),
        Some(v) if v.is_finite() && (min..=max).contains(&v) => Ok(Some(v)),
        Some(v) => Err(format!(
            "{field}: {v} is outside {min}..={max} seconds; {fix}"
        )),
    }
}

/// A 400 with `message`.
pub fn bad_request(message: String) -> Failure {
    Failure::new(StatusCode::BAD_REQUEST, message)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[derive(Debug, serde::Deserialize)]
    #[serde(deny_unknown_fields)]
    struct Probe {
        #[allow(dead_code, reason = "only parsed")]
        name: String,
        #[serde(default)]
        #[allow(dead_code, reason = "only parsed")]
        params: Option<Value>,
    }

    #[test]
    fn bodies_are_objects_of_known_fields_bounded_in_depth_and_length() {
        assert!(parse::<Probe>(br#"{"name":"a","params":{"x":[1,2]}}"#).is_ok());
        for (body, says) in [
            ("[]".to_string(), "must be a JSON object"),
            ("\"x\"".to_string(), "not a string"),
            ("null".to_string(), "not null"),
            (
                r#"{"name":"a","nmae":"b"}"#.to_string(),
                "unknown field `nmae`",
            ),
            (
                format!(
                    r#"{{"name":"a","params":{}{}}}"#,
                    "[".repeat(20_000),
                    "]".repeat(20_000)
                ),
                "deeper than 64 levels",
            ),
            (
                format!(
                    r#"{{"name":"a","params":{{"data":"{}"}}}}"#,
                    "x".repeat(MAX_STRING_BYTES + 1)
                ),
                "params.data: a string of 8388609 bytes",
            ),
            (
                format!(r#"{{"name":"a","params":{{"{}":1}}}}"#, "k".repeat(300)),
                "params: a key of 300 bytes",
            ),
        ] {
            let e = parse::<Probe>(body.as_bytes()).unwrap_err();
            assert!(e.contains(says), "{}: {e}", &body[..body.len().min(60)]);
        }
        // Depth is counted outside strings only.
        let quoted = format!(r#"{{"name":"{}"}}"#, "[".repeat(200));
        assert!(parse::<Probe>(quoted.as_bytes()).is_ok());
        let at_limit = format!(
            r#"{{"name":"a","params":{}{}}}"#,
            "[".repeat(63),
            "]".repeat(63)
        );
        assert!(parse::<Probe>(at_limit.as_bytes()).is_ok());
    }

    #[test]
    fn seconds_are_finite_and_in_range() {
        let s = |v| seconds("ttl_s", Some(v), 1.0, 100.0, "fix it");
        assert_eq!(s(1.0).unwrap(), Some(1.0));
        for bad in [0.5, 101.0, 1e300, f64::INFINITY, f64::NAN, -1.0] {
            let e = s(bad).unwrap_err();
            assert!(e.starts_with("ttl_s: "), "{e}");
        }
        assert_eq!(seconds("x", None, 1.0, 2.0, "").unwrap(), None);
    }
}
