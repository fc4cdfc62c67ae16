//! Asking the operator: confirmations and choices, or a refusal when nobody can answer.
//!
//! The command line provides an implementation that prompts on a terminal; `--yes` confirms
//! without asking. Without a terminal nothing ever waits for an answer.

use std::fmt;
use std::sync::Arc;

/// The operator could not be asked, or did not answer.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum OperatorError {
    /// No terminal to ask on, and no flag given that answers for the operator.
    #[error(
        "{question:?} needs an answer but there is no terminal to ask on; re-run with {flag} (or on a terminal)"
    )]
    NoTerminal {
        /// The question that could not be asked.
        question: String,
        /// The flag that answers it without a terminal (`--yes`, `--roles FILE`).
        flag: String,
    },
    /// The operator cancelled (Esc or Ctrl-C).
    #[error("cancelled by the operator at {question:?}")]
    Cancelled {
        /// The question.
        question: String,
    },
    /// The terminal failed.
    #[error("cannot ask {question:?}: {reason}")]
    Prompt {
        /// The question.
        question: String,
        /// Why.
        reason: String,
    },
}

/// Someone (or something) that answers questions during a run.
pub trait Operator: Send + Sync {
    /// `--yes` was given: every confirmation is answered yes without asking.
    fn assumes_yes(&self) -> bool;

    /// A person can be asked (a terminal is attached).
    fn can_prompt(&self) -> bool;

    /// Asks a yes/no question (default no). With `--yes`, answers yes without asking.
    fn confirm(&self, question: &str) -> Result<bool, OperatorError>;

    /// Asks to pick exactly `count` of `options`; returns their indices in option order.
    fn choose(
        &self,
        question: &str,
        options: &[String],
        count: usize,
    ) -> Result<Vec<usize>, OperatorError>;
}

/// Nobody at a terminal: confirmations are yes only with `--yes`, choices cannot be made.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Unattended {
    /// `--yes` was given.
    pub assume_yes: bool,
}

impl Operator for Unattended {
    fn assumes_yes(&self) -> bool {
        self.assume_yes
    }

    fn can_prompt(&self) -> bool {
        false
    }

    fn confirm(&self, question: &str) -> Result<bool, OperatorError> {
        if self.assume_yes {
            return Ok(true);
        }
        Err(OperatorError::NoTerminal {
            question: question.to_string(),
            flag: "--yes".into(),
        })
    }

    fn choose(
        &self,
        question: &str,
        _options: &[String],
        _count: usize,
    ) -> Result<Vec<usize>, OperatorError> {
        Err(OperatorError::NoTerminal {
            question: question.to_string(),
            flag: "--assign ROLE=RULE or --roles FILE".into(),
        })
    }
}

/// A shared operator, carried in the run context to topologies that ask questions.
#[derive(Clone)]
pub struct OperatorHandle(Arc<dyn Operator>);

impl OperatorHandle {
    /// Wraps an operator.
    pub fn new(operator: impl Operator + 'static) -> Self {
        Self(Arc::new(operator))
    }

    /// The operator.
    pub fn get(&self) -> &dyn Operator {
        self.0.as_ref()
    }
}

impl Default for OperatorHandle {
    fn default() -> Self {
        Self::new(Unattended::default())
    }
}

impl fmt::Debug for OperatorHandle {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("OperatorHandle")
            .field("assumes_yes", &self.0.assumes_yes())
            .field("can_prompt", &self.0.can_prompt())
            .finish()
    }
}

impl PartialEq for OperatorHandle {
    fn eq(&self, other: &Self) -> bool {
        self.0.assumes_yes() == other.0.assumes_yes() && self.0.can_prompt() == other.0.can_prompt()
    }
}

impl Eq for OperatorHandle {}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn unattended_confirms_only_with_yes_and_never_chooses() {
        let err = Unattended::default().confirm("Reboot?").unwrap_err();
        assert!(err.to_string().contains("--yes"), "{err}");
        assert_eq!(Unattended { assume_yes: true }.confirm("Reboot?"), Ok(true));
        let err = Unattended { assume_yes: true }
            .choose("Which?", &["a".into()], 1)
            .unwrap_err();
        assert!(err.to_string().contains("--roles"), "{err}");
    }
}
