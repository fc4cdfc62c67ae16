//! The operator on the command line: inquire prompts on a terminal, `--yes` without asking,
//! and a refusal naming the flag when there is no terminal.

use harmony::domain::operator::{Operator, OperatorError, Unattended};

use crate::progress::{Spinners, suspended};

/// Answers questions asked during a run.
pub(crate) struct CliOperator {
    assume_yes: bool,
    interactive: bool,
    spinners: Spinners,
}

impl CliOperator {
    pub(crate) fn new(assume_yes: bool, interactive: bool, spinners: Spinners) -> Self {
        Self {
            assume_yes,
            interactive,
            spinners,
        }
    }
}

fn prompt_error(question: &str, e: inquire::InquireError) -> OperatorError {
    match e {
        inquire::InquireError::OperationCanceled | inquire::InquireError::OperationInterrupted => {
            OperatorError::Cancelled {
                question: question.to_string(),
            }
        }
        other => OperatorError::Prompt {
            question: question.to_string(),
            reason: other.to_string(),
        },
    }
}

impl Operator for CliOperator {
    fn assumes_yes(&self) -> bool {
        self.assume_yes
    }

    fn can_prompt(&self) -> bool {
        self.interactive
    }

    fn confirm(&self, question: &str) -> Result<bool, OperatorError> {
        if self.assume_yes || !self.interactive {
            return Unattended {
                assume_yes: self.assume_yes,
            }
            .confirm(question);
        }
        suspended(&self.spinners, || {
            inquire::Confirm::new(question)
                .with_default(false)
                .with_help_message("y: continue, n: stop here (re-run later to resume)")
                .prompt()
        })
        .map_err(|e| prompt_error(question, e))
    }

    fn choose(
        &self,
        question: &str,
        options: &[String],
        count: usize,
    ) -> Result<Vec<usize>, OperatorError> {
        if self.assume_yes || !self.interactive {
            return Unattended {
                assume_yes: self.assume_yes,
            }
            .choose(question, options, count);
        }
        let validator = move |chosen: &[inquire::list_option::ListOption<&String>]| {
            Ok(if chosen.len() == count {
                inquire::validator::Validation::Valid
            } else {
                inquire::validator::Validation::Invalid(
                    format!("choose exactly {count} (chosen: {})", chosen.len()).into(),
                )
            })
        };
        suspended(&self.spinners, || {
            inquire::MultiSelect::new(question, options.to_vec())
                .with_validator(validator)
                .with_help_message("space toggles, enter confirms")
                .raw_prompt()
        })
        .map(|chosen| {
            let mut idx: Vec<usize> = chosen.into_iter().map(|o| o.index).collect();
            idx.sort_unstable();
            idx
        })
        .map_err(|e| prompt_error(question, e))
    }
}
