use serde::{Deserialize, Serialize};
use std::fmt;

use crate::InvalidValue;

const EXPECTED: &str = "six hexadecimal octets such as 52:54:00:12:34:56 (':' or '-' separated, or Cisco aabb.ccdd.eeff)";

/// An EUI-48 MAC address, displayed in lower-case colon form (`52:54:00:12:34:56`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
#[serde(try_from = "String", into = "String")]
pub struct MacAddress([u8; 6]);

impl MacAddress {
    /// Parses `aa:bb:cc:dd:ee:ff`, `AA-BB-CC-DD-EE-FF` or `aabb.ccdd.eeff`.
    pub fn parse(s: &str) -> Result<Self, InvalidValue> {
        let trimmed = s.trim();
        let hex: String = if trimmed.contains('.') {
            let groups: Vec<&str> = trimmed.split('.').collect();
            if groups.len() != 3 || groups.iter().any(|g| g.len() != 4) {
                return Err(InvalidValue::new(
                    "MAC address",
                    s,
                    "dotted form needs three groups of four hex digits",
                    EXPECTED,
                ));
            }
            groups.concat()
        } else {
            let sep = if trimmed.contains('-') { '-' } else { ':' };
            let octets: Vec<&str> = trimmed.split(sep).collect();
            if octets.len() != 6 {
                return Err(InvalidValue::new(
                    "MAC address",
                    s,
                    format!("found {} octet(s), need 6", octets.len()),
                    EXPECTED,
                ));
            }
            if let Some(bad) = octets.iter().find(|o| o.len() != 2) {
                return Err(InvalidValue::new(
                    "MAC address",
                    s,
                    format!("octet {bad:?} is not two hex digits"),
                    EXPECTED,
                ));
            }
            octets.concat()
        };
        if let Some(c) = hex.chars().find(|c| !c.is_ascii_hexdigit()) {
            return Err(InvalidValue::new(
                "MAC address",
                s,
                format!("{c:?} is not a hexadecimal digit"),
                EXPECTED,
            ));
        }
        let mut bytes = [0u8; 6];
        for (i, byte) in bytes.iter_mut().enumerate() {
            let pair = &hex[i * 2..i * 2 + 2];
            *byte = u8::from_str_radix(pair, 16).map_err(|_| {
                InvalidValue::new(
                    "MAC address",
                    s,
                    format!("{pair:?} is not hexadecimal"),
                    EXPECTED,
                )
            })?;
        }
        Ok(Self(bytes))
    }

    /// The six octets.
    pub fn octets(&self) -> [u8; 6] {
        self.0
    }

    /// Lower-case hyphenated form, as iPXE `${mac:hexhyp}` prints it (used in per-MAC file names).
    pub fn to_hyphenated(&self) -> String {
        self.to_string().replace(':', "-")
    }
}

impl fmt::Display for MacAddress {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let [a, b, c, d, e, g] = self.0;
        write!(f, "{a:02x}:{b:02x}:{c:02x}:{d:02x}:{e:02x}:{g:02x}")
    }
}

crate::string_value!(MacAddress);

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn normalises_every_accepted_form() {
        for input in [
            "52:54:00:AB:cd:0f",
            "52-54-00-ab-CD-0F",
            "5254.00ab.cd0f",
            " 52:54:00:ab:cd:0f ",
        ] {
            assert_eq!(
                MacAddress::parse(input).unwrap().to_string(),
                "52:54:00:ab:cd:0f",
                "{input}"
            );
        }
        assert_eq!(
            MacAddress::parse("52:54:00:ab:cd:0f")
                .unwrap()
                .to_hyphenated(),
            "52-54-00-ab-cd-0f"
        );
    }

    #[test]
    fn rejects_malformed_and_names_the_input() {
        for input in [
            "",
            "52:54:00:ab:cd",
            "52:54:00:ab:cd:0f:11",
            "52:54:00:ab:cd:0g",
            "5254:00:ab:cd:0f:1",
            "52:54:00:ab:cd:f",
            "5254.00ab.cd0",
            "+2:54:00:ab:cd:0f",
        ] {
            let err = MacAddress::parse(input).unwrap_err();
            assert_eq!(err.input, input);
            assert!(err.to_string().contains("MAC address"), "{err}");
            assert!(err.to_string().contains(&format!("{input:?}")), "{err}");
        }
    }

    #[test]
    fn serde_round_trip_and_rejection() {
        let mac = MacAddress::parse("aa:bb:cc:dd:ee:ff").unwrap();
        let json = serde_json::to_string(&mac).unwrap();
        assert_eq!(json, "\"aa:bb:cc:dd:ee:ff\"");
        assert_eq!(serde_json::from_str::<MacAddress>(&json).unwrap(), mac);
        let err = serde_json::from_str::<MacAddress>("\"nope\"").unwrap_err();
        assert!(
            err.to_string().contains("invalid MAC address \"nope\""),
            "{err}"
        );
    }
}
