use std::io::{IsTerminal, Write};
use std::sync::{Arc, Mutex};

/// A writer shared between the report, progress subscribers and prompts.
pub(crate) type SharedWriter = Arc<Mutex<dyn Write + Send>>;

/// Where the CLI writes, and whether a person is there to answer prompts.
#[derive(Clone)]
pub struct Console {
    /// Both standard input and standard error are terminals: prompts and spinners are allowed.
    pub interactive: bool,
    /// The report goes here (standard output).
    pub out: SharedWriter,
    /// Progress, warnings and errors go here (standard error).
    pub err: SharedWriter,
}

impl Console {
    /// The process's standard streams; interactive only when stdin and stderr are terminals.
    pub fn stdio() -> Self {
        Self {
            interactive: std::io::stdin().is_terminal() && std::io::stderr().is_terminal(),
            out: Arc::new(Mutex::new(std::io::stdout())),
            err: Arc::new(Mutex::new(std::io::stderr())),
        }
    }

    pub(crate) fn write_out(&self, text: &str) {
        if let Ok(mut w) = self.out.lock() {
            let _ = w.write_all(text.as_bytes());
            let _ = w.flush();
        }
    }

    pub(crate) fn write_err(&self, text: &str) {
        if let Ok(mut w) = self.err.lock() {
            let _ = w.write_all(text.as_bytes());
            let _ = w.flush();
        }
    }
}
