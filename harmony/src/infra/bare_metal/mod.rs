//! Helpers shared by the bare-metal service backends (dnsmasq, haproxy, HTTP boot): files in
//! a folder Harmony owns, written only when their bytes differ, and daemons Harmony starts.

mod daemon;
mod files;

pub use daemon::{Daemon, DaemonError};
pub use files::{FileSync, io_error};

/// What a backend does with what it is asked to ensure.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ServiceMode {
    /// Write the files only; run nothing.
    Render,
    /// Compare with the files already there; write and run nothing.
    Plan,
    /// Write the files, check them with the service's own checker, and reload the service.
    Apply,
}

impl ServiceMode {
    /// Whether files are written in this mode.
    pub fn writes(self) -> bool {
        self != ServiceMode::Plan
    }
}
