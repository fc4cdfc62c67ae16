//! Logging for the agent and control-plane binaries: env_logger behind a filter that scrubs
//! token-shaped strings from every line and drops frame dumps of the WebSocket library (which
//! print payloads, identities included, as hex at trace level).

use log::{Log, Metadata, Record};

/// Targets whose trace/debug output dumps raw frames.
const PAYLOAD_DUMPERS: [&str; 2] = ["tungstenite", "tokio_tungstenite"];

struct Scrubbing {
    inner: env_logger::Logger,
}

fn dumps_payloads(target: &str) -> bool {
    PAYLOAD_DUMPERS
        .iter()
        .any(|p| target == *p || target.starts_with(&format!("{p}::")))
}

impl Log for Scrubbing {
    fn enabled(&self, metadata: &Metadata<'_>) -> bool {
        if dumps_payloads(metadata.target()) && metadata.level() > log::Level::Info {
            return false;
        }
        self.inner.enabled(metadata)
    }

    fn log(&self, record: &Record<'_>) {
        if !self.enabled(record.metadata()) {
            return;
        }
        let text = record.args().to_string();
        let clean = crate::secret::scrub(&text);
        self.inner.log(
            &Record::builder()
                .args(format_args!("{clean}"))
                .metadata(record.metadata().clone())
                .module_path(record.module_path())
                .file(record.file())
                .line(record.line())
                .build(),
        );
    }

    fn flush(&self) {
        self.inner.flush();
    }
}

/// Installs the logger: `RUST_LOG` when set, else info, debug (`-v`) or trace (`-vv` and up).
/// Lines go to stderr. Calling it twice is harmless.
pub fn init(verbosity: u8) {
    let default = match verbosity {
        0 => "info",
        1 => "debug",
        _ => "trace",
    };
    let inner =
        env_logger::Builder::from_env(env_logger::Env::default().default_filter_or(default))
            .build();
    let max = inner.filter();
    if log::set_boxed_logger(Box::new(Scrubbing { inner })).is_ok() {
        log::set_max_level(max);
    }
}
