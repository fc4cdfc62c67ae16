//! Secret values (tokens) that must never reach a log line, an error or a report.

use serde::{Deserialize, Serialize};
use std::borrow::Cow;
use std::fmt;

/// A secret string: `Debug` and `Display` print `<redacted>`; read it with [`Self::expose`].
#[derive(Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(transparent)]
pub struct SecretString(String);

impl SecretString {
    /// Wraps a secret.
    pub fn new(value: impl Into<String>) -> Self {
        Self(value.into())
    }

    /// The secret itself: only for the wire, a hash or a file written with mode 0600.
    pub fn expose(&self) -> &str {
        &self.0
    }
}

impl fmt::Debug for SecretString {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("<redacted>")
    }
}

impl fmt::Display for SecretString {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("<redacted>")
    }
}

/// Replaces every bootstrap (`hbt_...`) or identity (`hid_...`) token in `text` by its prefix
/// and `<redacted>`. A last line of defence for log lines; code never formats tokens anyway.
pub fn scrub(text: &str) -> Cow<'_, str> {
    let prefixes = [crate::BOOTSTRAP_PREFIX, crate::IDENTITY_PREFIX];
    if !prefixes.iter().any(|p| text.contains(p)) {
        return Cow::Borrowed(text);
    }
    let mut out = String::with_capacity(text.len());
    let mut rest = text;
    loop {
        let next = prefixes
            .iter()
            .filter_map(|p| rest.find(p).map(|i| (i, p.len())))
            .min();
        let Some((i, plen)) = next else {
            out.push_str(rest);
            break;
        };
        out.push_str(&rest[..i + plen]);
        let tail = &rest[i + plen..];
        let end = tail
            .find(|c: char| !(c.is_ascii_alphanumeric() || c == '-' || c == '_'))
            .unwrap_or(tail.len());
        if end > 0 {
            out.push_str("<redacted>");
        }
        rest = &tail[end..];
    }
    Cow::Owned(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn tokens_are_scrubbed_wherever_they_appear() {
        assert_eq!(scrub("nothing here"), "nothing here");
        assert_eq!(
            scrub("Authorization: Bearer hid_AbC-12_x, then hbt_zz."),
            "Authorization: Bearer hid_<redacted>, then hbt_<redacted>."
        );
        assert_eq!(format!("{:?}", SecretString::new("hid_x")), "<redacted>");
    }
}
