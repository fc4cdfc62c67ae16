use serde::{Deserialize, Serialize};
use std::fmt;

use crate::InvalidValue;

const EXPECTED: &str = "1 to 128 characters of letters, digits, '.', '_' or '-'";

/// Opaque identifier of an inventory item, a run or a region object.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
#[serde(try_from = "String", into = "String")]
pub struct Id(String);

impl Id {
    /// Validates `s` as an identifier.
    pub fn parse(s: &str) -> Result<Self, InvalidValue> {
        if s.is_empty() || s.len() > 128 {
            return Err(InvalidValue::new(
                "id",
                s,
                "length must be 1..=128",
                EXPECTED,
            ));
        }
        if let Some(c) = s
            .chars()
            .find(|c| !(c.is_ascii_alphanumeric() || matches!(c, '.' | '_' | '-')))
        {
            return Err(InvalidValue::new(
                "id",
                s,
                format!("character {c:?} is not allowed"),
                EXPECTED,
            ));
        }
        Ok(Self(s.to_string()))
    }

    /// The identifier as a string slice.
    pub fn as_str(&self) -> &str {
        &self.0
    }
}

impl fmt::Display for Id {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

crate::string_value!(Id);

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn accepts_and_rejects() {
        assert_eq!(
            Id::parse("host-01.rack_2").unwrap().as_str(),
            "host-01.rack_2"
        );
        assert!(Id::parse("").is_err());
        let err = Id::parse("a b").unwrap_err();
        assert!(err.to_string().contains("\"a b\""), "{err}");
        assert!(Id::parse(&"x".repeat(129)).is_err());
    }
}
