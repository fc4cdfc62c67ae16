use serde::{Deserialize, Serialize};
use std::fmt;

use crate::InvalidValue;

const LABEL_EXPECTED: &str = "at most 63 lower-case letters, digits or '-', starting and ending with a letter or digit (e.g. \"my-app\")";
const SUBDOMAIN_EXPECTED: &str =
    "at most 253 characters: DNS-1123 labels joined by '.' (e.g. \"web.example-1\")";
const HOST_EXPECTED: &str = "an RFC 1123 host name of at most 253 characters, labels of letters, digits and '-' joined by '.' (e.g. \"cp0.okd.example.com\")";

/// Checks one DNS label; `lower_only` enforces Kubernetes' lower-case rule.
fn check_label(label: &str, lower_only: bool) -> Result<(), String> {
    if label.is_empty() {
        return Err("empty label (two dots in a row, or a leading/trailing dot)".into());
    }
    if label.len() > 63 {
        return Err(format!("label {label:?} is longer than 63 characters"));
    }
    if let Some(c) = label.chars().find(|c| {
        !(c.is_ascii_digit()
            || *c == '-'
            || c.is_ascii_lowercase()
            || (!lower_only && c.is_ascii_uppercase()))
    }) {
        let why = if c.is_ascii_uppercase() {
            " (use lower case)"
        } else {
            ""
        };
        return Err(format!("character {c:?} is not allowed{why}"));
    }
    if label.starts_with('-') || label.ends_with('-') {
        return Err(format!(
            "label {label:?} must start and end with a letter or digit"
        ));
    }
    Ok(())
}

fn check_dotted(s: &str, lower_only: bool) -> Result<(), String> {
    if s.len() > 253 {
        return Err("longer than 253 characters".into());
    }
    s.split('.').try_for_each(|l| check_label(l, lower_only))
}

/// A Kubernetes DNS-1123 label: namespace names, Service names, label-like identifiers.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
#[serde(try_from = "String", into = "String")]
pub struct Dns1123Label(String);

impl Dns1123Label {
    /// Validates `s` as a DNS-1123 label.
    pub fn parse(s: &str) -> Result<Self, InvalidValue> {
        check_label(s, true)
            .map_err(|r| InvalidValue::new("DNS-1123 label", s, r, LABEL_EXPECTED))?;
        Ok(Self(s.to_string()))
    }

    /// The label as a string slice.
    pub fn as_str(&self) -> &str {
        &self.0
    }
}

/// A Kubernetes DNS-1123 subdomain: the name of most Kubernetes objects.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
#[serde(try_from = "String", into = "String")]
pub struct Dns1123Subdomain(String);

impl Dns1123Subdomain {
    /// Validates `s` as a DNS-1123 subdomain.
    pub fn parse(s: &str) -> Result<Self, InvalidValue> {
        check_dotted(s, true)
            .map_err(|r| InvalidValue::new("DNS-1123 subdomain", s, r, SUBDOMAIN_EXPECTED))?;
        Ok(Self(s.to_string()))
    }

    /// The name as a string slice.
    pub fn as_str(&self) -> &str {
        &self.0
    }
}

/// A host name (RFC 1123), normalised to lower case since DNS compares case-insensitively.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
#[serde(try_from = "String", into = "String")]
pub struct HostName(String);

impl HostName {
    /// Validates `s` as a host name; a single trailing dot (fully qualified form) is accepted.
    pub fn parse(s: &str) -> Result<Self, InvalidValue> {
        let body = s.strip_suffix('.').unwrap_or(s);
        check_dotted(body, false)
            .map_err(|r| InvalidValue::new("host name", s, r, HOST_EXPECTED))?;
        Ok(Self(body.to_ascii_lowercase()))
    }

    /// The name as a string slice.
    pub fn as_str(&self) -> &str {
        &self.0
    }

    /// The first label (`cp0` of `cp0.okd.example.com`).
    pub fn short_name(&self) -> &str {
        self.0.split('.').next().unwrap_or(&self.0)
    }
}

macro_rules! display_as_str {
    ($($ty:ty),*) => {$(
        impl fmt::Display for $ty {
            fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                f.write_str(&self.0)
            }
        }
        crate::string_value!($ty);
    )*};
}
display_as_str!(Dns1123Label, Dns1123Subdomain, HostName);

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn label_rules() {
        assert!(Dns1123Label::parse("web-1").is_ok());
        assert!(Dns1123Label::parse("a").is_ok());
        assert!(Dns1123Label::parse(&"a".repeat(63)).is_ok());
        for bad in ["", "Web", "web_1", "-web", "web-", "a.b", &"a".repeat(64)] {
            let err = Dns1123Label::parse(bad).unwrap_err();
            assert_eq!(err.kind, "DNS-1123 label");
            assert!(err.to_string().contains(&format!("{bad:?}")), "{err}");
        }
        assert!(
            Dns1123Label::parse("Web")
                .unwrap_err()
                .reason
                .contains("use lower case")
        );
    }

    #[test]
    fn subdomain_rules() {
        assert!(Dns1123Subdomain::parse("a.b-c.d").is_ok());
        for bad in ["", "a..b", ".a", "a.", "A.b", "a_b", &"a.".repeat(127)] {
            assert!(Dns1123Subdomain::parse(bad).is_err(), "{bad}");
        }
    }

    #[test]
    fn host_names_normalise() {
        let h = HostName::parse("CP0.okd.Example.com.").unwrap();
        assert_eq!(h.as_str(), "cp0.okd.example.com");
        assert_eq!(h.short_name(), "cp0");
        for bad in ["", "cp0..example", "cp_0", "-cp0", "cp0 .x"] {
            let err = HostName::parse(bad).unwrap_err();
            assert_eq!(err.kind, "host name");
        }
    }

    #[test]
    fn serde_round_trip() {
        let l = Dns1123Label::parse("tenant-a").unwrap();
        assert_eq!(
            serde_json::from_str::<Dns1123Label>(&serde_json::to_string(&l).unwrap()).unwrap(),
            l
        );
        assert!(serde_json::from_str::<Dns1123Label>("\"Tenant\"").is_err());
        let h = HostName::parse("a.b").unwrap();
        assert_eq!(
            serde_json::from_str::<HostName>(&serde_json::to_string(&h).unwrap()).unwrap(),
            h
        );
    }
}
