use serde::{Deserialize, Serialize};
use std::fmt;

use crate::InvalidValue;

const EXPECTED: &str = "an absolute URL with a host, such as https://cp.example.com:443/path";

/// An absolute URL with a host (http, https, ws, wss, tftp, ...).
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
#[serde(try_from = "String", into = "String")]
pub struct Url(url::Url);

impl Url {
    /// Parses an absolute URL and requires a host.
    pub fn parse(s: &str) -> Result<Self, InvalidValue> {
        let u =
            url::Url::parse(s).map_err(|e| InvalidValue::new("URL", s, e.to_string(), EXPECTED))?;
        if u.host_str().is_none_or(str::is_empty) {
            return Err(InvalidValue::new("URL", s, "it has no host", EXPECTED));
        }
        Ok(Self(u))
    }

    /// The scheme, lower case.
    pub fn scheme(&self) -> &str {
        self.0.scheme()
    }

    /// The host.
    pub fn host(&self) -> &str {
        self.0.host_str().unwrap_or_default()
    }

    /// The explicit port or the scheme's default.
    pub fn port(&self) -> Option<u16> {
        self.0.port_or_known_default()
    }

    /// The URL as a string slice.
    pub fn as_str(&self) -> &str {
        self.0.as_str()
    }

    /// Resolves `path` against this URL (`base.join("boot/x.ipxe")`).
    pub fn join(&self, path: &str) -> Result<Self, InvalidValue> {
        self.0
            .join(path)
            .map(Self)
            .map_err(|e| InvalidValue::new("URL path", path, e.to_string(), "a relative path"))
    }
}

impl fmt::Display for Url {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.0.as_str())
    }
}

crate::string_value!(Url);

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_and_rejects() {
        let u = Url::parse("wss://cp.example.com/v1/agent").unwrap();
        assert_eq!(
            (u.scheme(), u.host(), u.port()),
            ("wss", "cp.example.com", Some(443))
        );
        assert_eq!(u.join("x").unwrap().as_str(), "wss://cp.example.com/v1/x");
        for bad in [
            "",
            "cp.example.com",
            "http://",
            "mailto:a@b",
            "https://exa mple.com",
        ] {
            let err = Url::parse(bad).unwrap_err();
            assert!(err.to_string().contains(&format!("{bad:?}")), "{err}");
        }
        let json = serde_json::to_string(&u).unwrap();
        assert_eq!(serde_json::from_str::<Url>(&json).unwrap(), u);
    }
}
