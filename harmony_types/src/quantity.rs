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

impl Quantity {
    /// Its exact value in thousandths of the base unit (millicores, millibytes), to add and
    /// compare quantities without rounding: a part below a thousandth rounds up, as Kubernetes
    /// rounds; `None` when it does not fit in an `i128` or its exponent is beyond ±30.
    pub fn milli(&self) -> Option<i128> {
        let negative = self.0.starts_with('-');
        let unsigned = self.0.trim_start_matches(['+', '-']);
        let end = unsigned
            .find(|c: char| !(c.is_ascii_digit() || c == '.'))
            .unwrap_or(unsigned.len());
        let (number, suffix) = unsigned.split_at(end);
        // (multiplier, power of ten) of the suffix, relative to thousandths.
        let (mult, exp10): (i128, i32) = match suffix {
            "" => (1, 3),
            "n" => (1, -6),
            "u" => (1, -3),
            "m" => (1, 0),
            "k" => (1, 6),
            "M" => (1, 9),
            "G" => (1, 12),
            "T" => (1, 15),
            "P" => (1, 18),
            "E" => (1, 21),
            "Ki" => (1 << 10, 3),
            "Mi" => (1 << 20, 3),
            "Gi" => (1 << 30, 3),
            "Ti" => (1 << 40, 3),
            "Pi" => (1 << 50, 3),
            "Ei" => (1 << 60, 3),
            e => {
                let e: i32 = e.get(1..)?.parse().ok()?;
                if !(-30..=30).contains(&e) {
                    return None;
                }
                (1, 3 + e)
            }
        };
        let (int, frac) = number.split_once('.').unwrap_or((number, ""));
        if int.len() + frac.len() > 30 {
            return None;
        }
        let digits: i128 = format!("{int}{frac}").parse().ok()?;
        let exp = exp10 - i32::try_from(frac.len()).ok()?;
        let magnitude = if exp >= 0 {
            digits
                .checked_mul(10i128.checked_pow(exp.unsigned_abs())?)?
                .checked_mul(mult)?
        } else {
            let div = 10i128.checked_pow(exp.unsigned_abs())?;
            let v = digits.checked_mul(mult)?;
            v / div + i128::from(v % div != 0)
        };
        Some(if negative { -magnitude } else { magnitude })
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
    fn exact_thousandths() {
        let m = |s: &str| Quantity::parse(s).unwrap().milli();
        assert_eq!(m("500m"), Some(500));
        assert_eq!(m("4"), Some(4000));
        assert_eq!(m("1.5"), Some(1500));
        assert_eq!(m("2k"), Some(2_000_000));
        assert_eq!(m("1Gi"), Some((1i128 << 30) * 1000));
        assert_eq!(m("1G"), Some(1_000_000_000_000));
        assert_eq!(m("0.5Gi"), Some((1i128 << 29) * 1000));
        assert_eq!(m("1e3"), Some(1_000_000));
        assert_eq!(m("0.0001"), Some(1), "below a thousandth rounds up");
        assert_eq!(m("1n"), Some(1));
        assert_eq!(m("-1k"), Some(-1_000_000));
        assert_eq!(m("1e31"), None);
        assert!(m("1Gi") > m("1G"));
    }

    #[test]
    fn serde_round_trips_and_refuses_bad_input() {
        let q: Quantity = serde_json::from_str("\"1Gi\"").unwrap();
        assert_eq!(serde_json::to_string(&q).unwrap(), "\"1Gi\"");
        assert!(serde_json::from_str::<Quantity>("\"1GB\"").is_err());
    }
}
