//! Kubernetes quantities (`"500m"`, `"4"`, `"8Gi"`, `"1.5G"`, `"1e3"`) as the tenancy store adds
//! and compares them: exact thousandths of the base unit ([`harmony_types::Quantity::milli`]),
//! never negative.

use harmony_types::Quantity;

/// A quantity in thousandths of its base unit.
pub type Milli = i128;

/// Parses a Kubernetes quantity; the error names the value and the accepted forms.
pub fn parse(text: &str) -> Result<Milli, String> {
    Quantity::parse(text.trim())
        .ok()
        .and_then(|q| q.milli())
        .filter(|m| *m >= 0)
        .ok_or_else(|| {
            format!(
                "{text:?} is not a Kubernetes quantity; write a number with an optional suffix (m, k, M, G, T, P, E, Ki, Mi, Gi, Ti, Pi, Ei), e.g. \"500m\", \"4\", \"8Gi\""
            )
        })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn quantities_parse_to_thousandths_and_never_negative() {
        assert_eq!(parse("500m").unwrap(), 500);
        assert_eq!(parse(" 8Gi ").unwrap(), (8i128 << 30) * 1000);
        for bad in ["", "Gi", "-1", "1 Gi", "1gi", "1.2.3", "x", "1Zi", "1e31"] {
            let e = parse(bad).unwrap_err();
            assert!(e.contains("not a Kubernetes quantity"), "{bad}: {e}");
        }
    }
}
