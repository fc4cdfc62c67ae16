//! What every Interpret of this crate shares: its reported version and how a capability error
//! becomes an [`InterpretError`](harmony::domain::InterpretError) that keeps what was applied.

/// Maps a capability error met while doing `action` to an Interpret error carrying `applied`.
pub(crate) fn capability_error<'a, A: Into<String>>(
    action: A,
    applied: &'a [harmony::domain::ObjectChange],
) -> impl FnOnce(harmony::domain::capability::CapabilityError) -> harmony::domain::InterpretError
+ use<'a, A> {
    // The changes are copied only when the error is built: callers make one of these per
    // capability call, and copying thousands of changes each time made renders quadratic.
    move |source| harmony::domain::InterpretError::Capability {
        action: action.into(),
        applied: applied.to_vec(),
        source,
    }
}

/// The version every Interpret of this crate reports: the crate's own.
pub(crate) fn version() -> harmony_types::Version {
    harmony_types::Version::parse(env!("CARGO_PKG_VERSION"))
        .unwrap_or_else(|_| harmony_types::Version::new(0, 0, 0))
}

/// Bytes for people, in binary units with one decimal: `48.0 MiB`.
#[cfg(any(feature = "okd", feature = "postgresql"))]
pub(crate) fn human(bytes: u64) -> String {
    const UNITS: [&str; 5] = ["B", "KiB", "MiB", "GiB", "TiB"];
    let mut value = bytes as f64;
    let mut unit = 0;
    while value >= 1024.0 && unit + 1 < UNITS.len() {
        value /= 1024.0;
        unit += 1;
    }
    if unit == 0 {
        format!("{bytes} B")
    } else {
        format!("{value:.1} {}", UNITS[unit])
    }
}
