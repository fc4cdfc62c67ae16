use serde::{Deserialize, Serialize};
use std::cmp::Ordering;
use std::fmt;

use crate::InvalidValue;

const EXPECTED: &str = "1 to 3 dot-separated numbers with an optional leading 'v' and '-suffix' (e.g. \"17\", \"1.34.1\", \"v0.8.0-rc.1\")";

/// A version such as `17`, `17.2` or `v1.34.1-rc.1`; missing minor/patch compare as 0.
#[derive(Debug, Clone, Eq, Serialize, Deserialize)]
#[serde(try_from = "String", into = "String")]
pub struct Version {
    parts: Vec<u64>,
    suffix: Option<String>,
    had_v: bool,
}

impl Version {
    /// Parses a version string.
    pub fn parse(s: &str) -> Result<Self, InvalidValue> {
        let (had_v, body) = match s.strip_prefix('v') {
            Some(rest) => (true, rest),
            None => (false, s),
        };
        let (nums, suffix) = match body.split_once('-') {
            Some((n, suf)) if !suf.is_empty() => (n, Some(suf.to_string())),
            Some(_) => {
                return Err(InvalidValue::new(
                    "version",
                    s,
                    "empty suffix after '-'",
                    EXPECTED,
                ));
            }
            None => (body, None),
        };
        let parts = nums
            .split('.')
            .map(|p| {
                if p.is_empty() || !p.bytes().all(|b| b.is_ascii_digit()) {
                    Err(InvalidValue::new(
                        "version",
                        s,
                        format!("{p:?} is not a number"),
                        EXPECTED,
                    ))
                } else {
                    p.parse::<u64>()
                        .map_err(|e| InvalidValue::new("version", s, e.to_string(), EXPECTED))
                }
            })
            .collect::<Result<Vec<_>, _>>()?;
        if parts.len() > 3 {
            return Err(InvalidValue::new(
                "version",
                s,
                "more than three numbers",
                EXPECTED,
            ));
        }
        Ok(Self {
            parts,
            suffix,
            had_v,
        })
    }

    /// A plain `major.minor.patch` version.
    pub fn new(major: u64, minor: u64, patch: u64) -> Self {
        Self {
            parts: vec![major, minor, patch],
            suffix: None,
            had_v: false,
        }
    }

    /// The major number.
    pub fn major(&self) -> u64 {
        self.parts[0]
    }

    /// The minor number, 0 when absent.
    pub fn minor(&self) -> u64 {
        self.parts.get(1).copied().unwrap_or(0)
    }

    /// The patch number, 0 when absent.
    pub fn patch(&self) -> u64 {
        self.parts.get(2).copied().unwrap_or(0)
    }

    fn key(&self) -> [u64; 3] {
        [self.major(), self.minor(), self.patch()]
    }
}

impl std::hash::Hash for Version {
    /// Hashes what equality compares, so `17` and `17.0` hash alike.
    fn hash<H: std::hash::Hasher>(&self, state: &mut H) {
        self.key().hash(state);
        self.suffix.hash(state);
    }
}

impl PartialEq for Version {
    fn eq(&self, other: &Self) -> bool {
        self.cmp(other) == Ordering::Equal
    }
}

impl PartialOrd for Version {
    fn partial_cmp(&self, other: &Self) -> Option<Ordering> {
        Some(self.cmp(other))
    }
}

impl Ord for Version {
    /// Numbers first; a pre-release suffix sorts before the release, as in SemVer.
    fn cmp(&self, other: &Self) -> Ordering {
        self.key()
            .cmp(&other.key())
            .then_with(|| match (&self.suffix, &other.suffix) {
                (None, None) => Ordering::Equal,
                (None, Some(_)) => Ordering::Greater,
                (Some(_), None) => Ordering::Less,
                (Some(a), Some(b)) => a.cmp(b),
            })
    }
}

impl fmt::Display for Version {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        if self.had_v {
            f.write_str("v")?;
        }
        let nums: Vec<String> = self.parts.iter().map(u64::to_string).collect();
        f.write_str(&nums.join("."))?;
        if let Some(s) = &self.suffix {
            write!(f, "-{s}")?;
        }
        Ok(())
    }
}

crate::string_value!(Version);

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_orders_and_prints_back() {
        let v = Version::parse("v1.34.1").unwrap();
        assert_eq!((v.major(), v.minor(), v.patch()), (1, 34, 1));
        assert_eq!(v.to_string(), "v1.34.1");
        assert!(Version::parse("17").unwrap() >= Version::parse("17.0").unwrap());
        assert!(Version::parse("16.4").unwrap() < Version::parse("17").unwrap());
        assert!(Version::parse("1.0.0-rc.1").unwrap() < Version::parse("1.0.0").unwrap());
        assert_eq!(
            Version::parse("17.2-beta").unwrap().to_string(),
            "17.2-beta"
        );
    }

    #[test]
    fn rejects_with_input() {
        for bad in [
            "", "v", "17.", "1.2.3.4", "x17", "1.-2", "1.2-", "1..2", "+1",
        ] {
            let err = Version::parse(bad).unwrap_err();
            assert!(err.to_string().contains(&format!("{bad:?}")), "{err}");
        }
        let v: Version = serde_json::from_str("\"16\"").unwrap();
        assert_eq!(serde_json::to_string(&v).unwrap(), "\"16\"");
    }
}
