use serde::{Deserialize, Serialize};
use std::fmt;

use crate::InvalidValue;

const EXPECTED: &str = "a Kubernetes quantity such as \"10Gi\", \"500m\", \"1.5\" or \"2e3\" (suffixes: m, k, M, G, T, P, E, Ki, Mi, Gi, Ti, Pi, Ei)";

/// A Kubernetes resource quantity (`10Gi`, `500m`), checked against the API server's grammar.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
#[serde(try_from = "String", into = "String")]
pub struct Quantity(String);

const SUFFIXES: &[&str] = &[
    "", "n", "u", "m", "k", "M", "G", "T", "P", "E", "Ki", "Mi", "Gi", "Ti", "Pi", "Ei",
];

impl Quantity {
    /// Validates `s` as `<sign?><digits>[.<digits>]<suffix>` with a binary, decimal or exponent suffix.
    pub fn parse(s: &str) -> Result<Self, InvalidValue> {
        let fail = |reason: &str| Err(InvalidValue::new("quantity", s, reason, EXPECTED));
        let unsigned = s.strip_prefix(['+', '-']).unwrap_or(s);
        let number_end = unsigned
            .find(|c: char| !(c.is_ascii_digit() || c == '.'))
            .unwrap_or(unsigned.len());
        let (number, suffix) = unsigned.split_at(number_end);
        let digits: Vec<&str> = number.split('.').collect();
        if number.is_empty() || digits.len() > 2 || digits.iter().all(|d| d.is_empty()) {
            return fail("it does not start with a number");
        }
        let exponent_ok = suffix
            .strip_prefix(['e', 'E'])
            .map(|e| e.strip_prefix(['+', '-']).unwrap_or(e))
            .is_some_and(|e| !e.is_empty() && e.chars().all(|c| c.is_ascii_digit()));
        if !(SUFFIXES.contains(&suffix) || exponent_ok) {
            return fail(&format!("unknown suffix {suffix:?}"));
        }
        Ok(Self(s.to_string()))
    }

    /// The quantity as written.
    pub fn as_str(&self) -> &str {
        &self.0
    }

    /// Its value in base units (`500m` is 0.5, `1Ki` is 1024), to compare or add quantities.
    pub fn value(&self) -> f64 {
        let unsigned = self.0.trim_start_matches(['+', '-']);
        let negative = self.0.starts_with('-');
        let end = unsigned
            .find(|c: char| !(c.is_ascii_digit() || c == '.'))
            .unwrap_or(unsigned.len());
        let (number, suffix) = unsigned.split_at(end);
        let n: f64 = number.parse().unwrap_or(0.0);
        let factor = match suffix {
            "n" => 1e-9,
            "u" => 1e-6,
            "m" => 1e-3,
            "k" => 1e3,
            "M" => 1e6,
            "G" => 1e9,
            "T" => 1e12,
            "P" => 1e15,
            "E" => 1e18,
            "Ki" => 1024f64,
            "Mi" => 1024f64.powi(2),
            "Gi" => 1024f64.powi(3),
            "Ti" => 1024f64.powi(4),
            "Pi" => 1024f64.powi(5),
            "Ei" => 1024f64.powi(6),
            // Validated: empty, or an exponent such as `e3`.
            e => e
                .get(1..)
                .and_then(|x| x.parse().ok())
                .map_or(1.0, |x| 10f64.powi(x)),
        };
        if negative { -n * factor } else { n * factor }
    }
}

impl fmt::Display for Quantity {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}
crate::string_value!(Quantity);

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn accepts_kubernetes_quantities() {
        for ok in [
            "10Gi", "500m", "1", "1.5", ".5", "2e3", "1E-2", "+3Mi", "0", "100k",
        ] {
            assert_eq!(Quantity::parse(ok).unwrap().as_str(), ok);
        }
    }

    #[test]
    fn rejects_what_the_api_server_would() {
        for bad in ["", "Gi", "10GB", "10 Gi", "1.2.3", "ten", "5mi", "1e", "."] {
            let err = Quantity::parse(bad).unwrap_err();
            assert_eq!(err.kind, "quantity");
            assert!(err.to_string().contains(&format!("{bad:?}")), "{err}");
        }
    }

    #[test]
    fn values_in_base_units() {
        let v = |s: &str| Quantity::parse(s).unwrap().value();
        assert_eq!(v("500m"), 0.5);
        assert_eq!(v("1Ki"), 1024.0);
        assert_eq!(v("2Gi"), 2.0 * 1024f64.powi(3));
        assert_eq!(v("1.5"), 1.5);
        assert_eq!(v("2e3"), 2000.0);
        assert_eq!(v("-1k"), -1000.0);
    }

    #[test]
    fn serde_round_trips_and_refuses_bad_input() {
        let q: Quantity = serde_json::from_str("\"1Gi\"").unwrap();
        assert_eq!(serde_json::to_string(&q).unwrap(), "\"1Gi\"");
        assert!(serde_json::from_str::<Quantity>("\"1GB\"").is_err());
    }
}
