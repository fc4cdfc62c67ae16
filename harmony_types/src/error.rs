use std::fmt;

/// A value that failed validation: what kind of value, the input as given, why, and how to fix it.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub struct InvalidValue {
    /// Kind of value, e.g. "MAC address".
    pub kind: &'static str,
    /// The rejected input, verbatim.
    pub input: String,
    /// What is wrong with it.
    pub reason: String,
    /// What a valid value looks like.
    pub expected: &'static str,
}

impl InvalidValue {
    pub(crate) fn new(
        kind: &'static str,
        input: &str,
        reason: impl Into<String>,
        expected: &'static str,
    ) -> Self {
        Self {
            kind,
            input: input.to_string(),
            reason: reason.into(),
            expected,
        }
    }
}

impl fmt::Display for InvalidValue {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "invalid {} {:?}: {}; expected {}",
            self.kind, self.input, self.reason, self.expected
        )
    }
}
