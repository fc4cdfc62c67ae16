//! Kubernetes quantities (`"500m"`, `"4"`, `"8Gi"`, `"1.5G"`, `"1e3"`), parsed exactly enough to
//! add them up and compare them: a value in thousandths of the base unit (millicores, milli-
//! bytes), as an `i128` so that even exabytes add up without overflow.

/// A quantity in thousandths of its base unit.
pub type Milli = i128;

/// Parses a Kubernetes quantity; the error names the value and the accepted forms.
pub fn parse(text: &str) -> Result<Milli, String> {
    let bad = || {
        format!(
            "{text:?} is not a Kubernetes quantity; write a number with an optional suffix (m, k, M, G, T, P, E, Ki, Mi, Gi, Ti, Pi, Ei), e.g. \"500m\", \"4\", \"8Gi\""
        )
    };
    let t = text.trim();
    let split = t
        .find(|c: char| !(c.is_ascii_digit() || c == '.' || c == '+' || c == '-'))
        .unwrap_or(t.len());
    let (number, suffix) = t.split_at(split);
    if number.is_empty() || number.starts_with('-') {
        return Err(bad());
    }
    let number = number.strip_prefix('+').unwrap_or(number);
    // (numerator multiplier, power of ten) of the suffix, relative to thousandths.
    let (mult, exp10): (i128, i32) = match suffix {
        "" => (1, 3),
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
        s if s.starts_with(['e', 'E']) => {
            let e: i32 = s[1..].parse().map_err(|_| bad())?;
            if !(-30..=30).contains(&e) {
                return Err(bad());
            }
            (1, 3 + e)
        }
        _ => return Err(bad()),
    };
    let (int, frac) = number.split_once('.').unwrap_or((number, ""));
    if (int.is_empty() && frac.is_empty())
        || !int.bytes().all(|b| b.is_ascii_digit())
        || !frac.bytes().all(|b| b.is_ascii_digit())
        || int.len() + frac.len() > 30
    {
        return Err(bad());
    }
    let digits: i128 = format!("{int}{frac}").parse().unwrap_or(0);
    let exp = exp10 - frac.len() as i32;
    let value = if exp >= 0 {
        digits
            .checked_mul(10i128.pow(exp as u32))
            .and_then(|v| v.checked_mul(mult))
    } else {
        // Below a thousandth: round up, as Kubernetes does.
        let div = 10i128.pow((-exp) as u32);
        digits
            .checked_mul(mult)
            .map(|v| v / div + i128::from(v % div != 0))
    };
    value.ok_or_else(bad)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn quantities_parse_to_thousandths() {
        assert_eq!(parse("500m").unwrap(), 500);
        assert_eq!(parse("4").unwrap(), 4000);
        assert_eq!(parse("1.5").unwrap(), 1500);
        assert_eq!(parse("2k").unwrap(), 2_000_000);
        assert_eq!(parse("1Gi").unwrap(), (1i128 << 30) * 1000);
        assert_eq!(parse("1G").unwrap(), 1_000_000_000_000);
        assert_eq!(parse("0.5Gi").unwrap(), (1i128 << 29) * 1000);
        assert_eq!(parse("1e3").unwrap(), 1_000_000);
        assert_eq!(parse("0.0001").unwrap(), 1);
        assert!(parse("1Gi").unwrap() > parse("1G").unwrap());
        for bad in ["", "Gi", "-1", "1 Gi", "1gi", "1.2.3", "x", "1Zi"] {
            let e = parse(bad).unwrap_err();
            assert!(e.contains("not a Kubernetes quantity"), "{bad}: {e}");
        }
    }
}
