//! Parsing a program's command line: its own flags, the common ones and its topology's groups.

use clap::FromArgMatches;
use clap::error::{ContextKind, ContextValue, ErrorKind};
use std::ffi::OsString;
use std::path::Path;

use crate::args::Args;
use crate::console::Console;
use harmony::domain::flags::TopologyFlags;

use crate::flags::group_of;

/// Exit status of a usage error.
pub(crate) const EXIT_USAGE: u8 = 2;

/// Parses `argv` (program name first) into the `harmony_cli` flags that topology `T` offers and
/// the program's own flags `X`. `--help` prints the help to the console's output and returns
/// `Err(0)`; a bad flag, or one the topology does not read, prints an error naming it and
/// returns `Err(2)`.
pub fn parse_args<T, X, I, A>(argv: I, console: &Console) -> Result<(Args, X), u8>
where
    T: TopologyFlags + ?Sized,
    X: clap::Args + FromArgMatches,
    I: IntoIterator<Item = A>,
    A: Into<OsString> + Clone,
{
    let argv: Vec<OsString> = argv.into_iter().map(Into::into).collect();
    let name = argv
        .first()
        .and_then(|a| Path::new(a).file_name())
        .map(|n| n.to_string_lossy().into_owned())
        .unwrap_or_else(|| "harmony".into());
    let groups = T::FLAGS;
    let parsed = Args::command::<X>(&name, groups)
        .try_get_matches_from(&argv)
        .and_then(|m| Ok((Args::from_matches(&m, groups)?, X::from_arg_matches(&m)?)));
    match parsed {
        Ok(parsed) => Ok(parsed),
        Err(e) if !e.use_stderr() => {
            console.write_out(&e.render().to_string());
            Err(0)
        }
        Err(e) => {
            match not_offered(&e) {
                Some(msg) => console.write_err(&format!("error: {msg}\n")),
                None => console.write_err(&e.render().to_string()),
            }
            Err(EXIT_USAGE)
        }
    }
}

/// The explanation for a flag `harmony_cli` has but this program's topology does not read.
fn not_offered(e: &clap::Error) -> Option<String> {
    if e.kind() != ErrorKind::UnknownArgument {
        return None;
    }
    let Some(ContextValue::String(arg)) = e.get(ContextKind::InvalidArg) else {
        return None;
    };
    let flag = arg.split('=').next().unwrap_or(arg);
    let group = group_of(flag)?;
    Some(format!(
        "{flag} does not apply to this program: it is {group}, which this program's topology does not read; drop {flag} (--help lists the flags it takes)"
    ))
}
