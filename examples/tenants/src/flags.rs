//! The example's own flags, parsed with the `harmony_cli` flags by `harmony_cli::parse_args`:
//! `--control-plane URL`, `--admin-token-file FILE`, `--ca-file FILE`, `--regions LIST`.

use clap::builder::TypedValueParser as _;
use std::fmt;
use std::path::PathBuf;

use harmony_types::RegionId;

use crate::{DEFAULT_REGIONS, parse_regions};

/// Environment variable read when `--control-plane` is not given (named in `Flags`' attribute too).
pub const ENV_CONTROL_PLANE: &str = "HARMONY_CP_URL";
/// Environment variable read when `--admin-token-file` is not given.
pub const ENV_ADMIN_TOKEN_FILE: &str = "HARMONY_ADMIN_TOKEN_FILE";

/// A flag with a bad value (or none): the flag, what is wrong, and how to fix it. Never holds a
/// token, only file names.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct FlagError {
    /// The flag, e.g. `--regions`.
    pub flag: &'static str,
    /// What is wrong.
    pub problem: String,
    /// How to fix it.
    pub fix: String,
}

impl fmt::Display for FlagError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}: {}; {}", self.flag, self.problem, self.fix)
    }
}

impl std::error::Error for FlagError {}

/// The example's flags (`clap` reads the environment fallbacks; an empty variable counts as
/// unset).
#[derive(Debug, Clone, clap::Args)]
#[command(
    about = "Declare tenant `acme` (a cap per region) and its projects `shop` and `analytics` (a quota per region) on a Harmony control plane with TenantScore.",
    long_about = "Declare tenant `acme` (a cap per region) and its projects `shop` and `analytics` (a quota per region) on a Harmony control plane with TenantScore.\n\nWithout a control plane it prints the declaration (as the `Tenant` resource the operator reconciles) and sends nothing. With one, --plan shows what would change and --yes applies."
)]
pub struct Flags {
    /// The control plane, https://host:port; without one the declaration is printed.
    #[arg(long, value_name = "URL", env = "HARMONY_CP_URL")]
    pub control_plane: Option<String>,
    /// File whose first line is the admin token.
    // An empty value gets through clap (which refuses an empty path) so that an empty
    // variable counts as unset.
    #[arg(
        long,
        value_name = "FILE",
        env = "HARMONY_ADMIN_TOKEN_FILE",
        value_parser = clap::builder::OsStringValueParser::new().map(PathBuf::from)
    )]
    pub admin_token_file: Option<PathBuf>,
    /// CA bundle (PEM) of the control plane's certificate (system roots otherwise).
    #[arg(long, value_name = "FILE")]
    pub ca_file: Option<PathBuf>,
    /// Regions, comma-separated: caps and `shop` in each, `analytics` in the first.
    #[arg(long, value_name = "LIST", default_value = DEFAULT_REGIONS, value_parser = Regions::parse)]
    pub regions: Regions,
}

/// The `--regions` value: region names, at least one, each once.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Regions(pub Vec<RegionId>);

impl Regions {
    fn parse(value: &str) -> Result<Self, FlagError> {
        parse_regions(value).map(Regions)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use clap::{FromArgMatches, Parser};

    #[derive(Parser)]
    struct Cli {
        #[command(flatten)]
        flags: Flags,
    }

    #[test]
    fn a_bad_region_is_refused_naming_the_flag() {
        let e = Cli::try_parse_from(["prog", "--regions", "eu_west"])
            .err()
            .unwrap()
            .to_string();
        assert!(e.contains("--regions") && e.contains("eu_west"), "{e}");
        let cli = Cli::try_parse_from(["prog", "--regions=eu-west,us-east"]).unwrap();
        assert_eq!(cli.flags.regions.0.len(), 2);
        let _ = Flags::from_arg_matches;
    }
}
