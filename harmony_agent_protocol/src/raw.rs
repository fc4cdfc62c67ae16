//! Raw JSON that travels byte-stable: parsed once where it is used, never re-encoded on the way.
//!
//! A request's params and a result pass through the request API, the store and one or two
//! WebSocket hops. Re-encoding a `serde_json::Value` at each hop changes the bytes (`1e2` becomes
//! `100.0`) and can grow a frame past a limit it fitted when submitted, so the protocol carries
//! them as [`RawJson`]: the exact text the caller sent, validated as JSON, compared by text.

use serde::de::DeserializeOwned;
use serde::{Deserialize, Deserializer, Serialize, Serializer};
use serde_json::value::RawValue;
use std::fmt;

/// A JSON value kept as the exact text it arrived as.
///
/// ```
/// use harmony_agent_protocol::RawJson;
/// let raw = RawJson::from_string(r#"{"n": 1e2}"#.to_string()).unwrap();
/// assert_eq!(raw.get(), r#"{"n": 1e2}"#); // not re-encoded as 100.0
/// let v: serde_json::Value = raw.parse().unwrap();
/// assert_eq!(v["n"], 100.0);
/// ```
#[derive(Clone)]
pub struct RawJson(Box<RawValue>);

impl RawJson {
    /// `null`.
    pub fn null() -> Self {
        Self(RawValue::NULL.to_owned())
    }

    /// Validates `text` as one JSON value and keeps it as is.
    pub fn from_string(text: String) -> Result<Self, serde_json::Error> {
        RawValue::from_string(text).map(Self)
    }

    /// Serializes `value` once.
    pub fn from_serialize<T: Serialize + ?Sized>(value: &T) -> Result<Self, serde_json::Error> {
        serde_json::value::to_raw_value(value).map(Self)
    }

    /// The JSON text, exactly as received.
    pub fn get(&self) -> &str {
        self.0.get()
    }

    /// Its length in bytes.
    pub fn len(&self) -> usize {
        self.0.get().len()
    }

    /// Whether the text is empty (never true for valid JSON; here for clippy's sake).
    pub fn is_empty(&self) -> bool {
        self.0.get().is_empty()
    }

    /// Whether the value is JSON `null`.
    pub fn is_null(&self) -> bool {
        self.0.get().trim() == "null"
    }

    /// Parses the text into `T`.
    pub fn parse<T: DeserializeOwned>(&self) -> Result<T, serde_json::Error> {
        serde_json::from_str(self.0.get())
    }
}

impl Default for RawJson {
    fn default() -> Self {
        Self::null()
    }
}

impl PartialEq for RawJson {
    fn eq(&self, other: &Self) -> bool {
        self.get() == other.get()
    }
}

impl Eq for RawJson {}

/// Params and results may hold manifests with Secret data: `Debug` shows the size only.
impl fmt::Debug for RawJson {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "RawJson(<{} bytes>)", self.len())
    }
}

impl Serialize for RawJson {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        self.0.serialize(serializer)
    }
}

impl<'de> Deserialize<'de> for RawJson {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        Box::<RawValue>::deserialize(deserializer).map(Self)
    }
}

impl From<Box<RawValue>> for RawJson {
    fn from(raw: Box<RawValue>) -> Self {
        Self(raw)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn text_survives_a_round_trip_through_a_struct() {
        #[derive(Serialize, Deserialize)]
        struct Carrier {
            params: RawJson,
        }
        let text = r#"{"params":{"a":1e2,"b":[1.50, "x"]}}"#;
        let c: Carrier = serde_json::from_str(text).unwrap();
        assert_eq!(c.params.get(), r#"{"a":1e2,"b":[1.50, "x"]}"#);
        assert_eq!(serde_json::to_string(&c).unwrap(), text);
    }

    #[test]
    fn debug_never_prints_the_content() {
        let raw = RawJson::from_string(r#"{"password":"hunter2"}"#.into()).unwrap();
        assert!(!format!("{raw:?}").contains("hunter2"));
        assert!(RawJson::from_string("{".into()).is_err());
        assert!(RawJson::default().is_null());
    }
}
