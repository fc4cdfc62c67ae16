//! The error of a parameter that is wrong, shared by Scores, Interprets, outcomes and
//! capabilities (its own file, so none of them imports another for it).

/// A parameter is wrong: which field, what is wrong with it, and how to fix it.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error, derive_new::new)]
#[error("invalid {field}: {problem}; fix: {fix}")]
pub struct ValidationError {
    /// The offending field as the user wrote it (`resources[1].metadata.name`).
    #[new(into)]
    pub field: String,
    /// What is wrong.
    #[new(into)]
    pub problem: String,
    /// What to do instead.
    #[new(into)]
    pub fix: String,
}
