//! Why the control plane could not start: the crate's one error, below everything that
//! returns it.

use std::net::SocketAddr;

use crate::store;

/// Why the control plane could not start.
#[derive(Debug, thiserror::Error)]
pub enum CpError {
    /// TLS material is unusable.
    #[error("TLS {path}: {reason}")]
    Tls {
        /// The file at fault.
        path: String,
        /// What is wrong and what to give instead.
        reason: String,
    },
    /// The admin token file is unusable.
    #[error("admin token file {path}: {reason}")]
    AdminToken {
        /// The file.
        path: String,
        /// What is wrong.
        reason: String,
    },
    /// The state database failed.
    #[error(transparent)]
    Store(#[from] store::StoreError),
    /// The listen address is unusable.
    #[error("cannot listen on {addr}: {source}; pick a free address with --listen")]
    Listen {
        /// The address.
        addr: SocketAddr,
        /// The OS error.
        #[source]
        source: std::io::Error,
    },
    /// Flags contradict each other.
    #[error("{field}: {problem}")]
    Config {
        /// The flag.
        field: &'static str,
        /// What is wrong and the fix.
        problem: String,
    },
}
