//! Why the agent stopped or could not start: the crate's one error, below everything that
//! returns it.

/// Why the agent stopped or could not start.
#[derive(Debug, thiserror::Error)]
pub enum AgentError {
    /// A flag is wrong.
    #[error("{field}: {problem}")]
    Config {
        /// The flag.
        field: &'static str,
        /// What is wrong and the fix.
        problem: String,
    },
    /// The identity could not be read or stored.
    #[error("{store}: {reason}")]
    Identity {
        /// The file or Secret.
        store: String,
        /// Why.
        reason: String,
    },
    /// The control plane refused the agent for good (revoked, used or expired token...).
    #[error("the control plane refused this agent (close code {code}): {reason}")]
    Refused {
        /// The WebSocket close code.
        code: u16,
        /// The control plane's reason.
        reason: String,
    },
}

impl AgentError {
    /// The process exit code: 3 when refused by the control plane, 2 otherwise.
    pub fn exit_code(&self) -> i32 {
        match self {
            AgentError::Refused { .. } => 3,
            _ => 2,
        }
    }
}
