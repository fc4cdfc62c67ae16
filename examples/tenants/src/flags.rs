//! The example's own flags, split from the `harmony_cli` flags (which `harmony_cli::run_with`
//! parses): `--control-plane URL`, `--admin-token-file FILE`, `--ca-file FILE`, `--regions LIST`.

use std::fmt;
use std::path::PathBuf;

use harmony_types::RegionId;

use crate::{DEFAULT_REGIONS, parse_regions};

/// Environment variable read when `--control-plane` is not given.
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

/// The example's flags, with their environment fallbacks applied.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Flags {
    /// The control plane (`--control-plane` or `HARMONY_CP_URL`); `None`: print the declaration.
    pub control_plane: Option<String>,
    /// File whose first line is the admin token (`--admin-token-file` or
    /// `HARMONY_ADMIN_TOKEN_FILE`).
    pub admin_token_file: Option<PathBuf>,
    /// CA bundle (PEM) that signs the control plane's certificate; system roots otherwise.
    pub ca_file: Option<PathBuf>,
    /// The regions (`--regions`, default `eu-west`).
    pub regions: Vec<RegionId>,
    /// `-h`/`--help` was given (it is also passed on, for the `harmony_cli` flags' help).
    pub help: bool,
}

/// Help for the example's own flags, printed before the `harmony_cli` flags' help.
pub const HELP: &str = "\
Declare tenant `acme` (a cap per region) and its projects `shop` and `analytics` (a quota per
region) on a Harmony control plane with TenantScore.

Without a control plane it prints the declaration (as the `Tenant` resource the operator
reconciles) and sends nothing. With one, --plan shows what would change and --yes applies.

Example flags:
      --control-plane <URL>       The control plane, https://host:port [env: HARMONY_CP_URL]
      --admin-token-file <FILE>   File whose first line is the admin token [env: HARMONY_ADMIN_TOKEN_FILE]
      --ca-file <FILE>            CA bundle (PEM) of the control plane's certificate (system roots otherwise)
      --regions <LIST>            Regions, comma-separated: caps and `shop` in each, `analytics` in the first [default: eu-west]

";

/// Splits the example's flags off `args` (the program name first), reading `env` for the
/// fallbacks (an empty variable counts as unset); the rest is for `harmony_cli`.
pub fn split_flags(
    args: Vec<String>,
    env: impl Fn(&str) -> Option<String>,
) -> Result<(Flags, Vec<String>), FlagError> {
    let mut control_plane = None;
    let mut admin_token_file = None;
    let mut ca_file = None;
    let mut regions = None;
    let mut help = false;
    let mut rest = Vec::with_capacity(args.len());
    let mut it = args.into_iter();
    while let Some(arg) = it.next() {
        let (name, inline) = match arg.split_once('=') {
            Some((n, v)) if n.starts_with("--") => (n.to_string(), Some(v.to_string())),
            _ => (arg.clone(), None),
        };
        let flag: &'static str = match name.as_str() {
            "--control-plane" => "--control-plane",
            "--admin-token-file" => "--admin-token-file",
            "--ca-file" => "--ca-file",
            "--regions" => "--regions",
            "-h" | "--help" => {
                help = true;
                rest.push(arg);
                continue;
            }
            _ => {
                rest.push(arg);
                continue;
            }
        };
        let value = match inline.or_else(|| it.next()) {
            Some(v) if !v.is_empty() => v,
            _ => {
                return Err(FlagError {
                    flag,
                    problem: "needs a value".into(),
                    fix: format!("write {flag} VALUE (see --help)"),
                });
            }
        };
        match flag {
            "--control-plane" => control_plane = Some(value),
            "--admin-token-file" => admin_token_file = Some(PathBuf::from(value)),
            "--ca-file" => ca_file = Some(PathBuf::from(value)),
            _ => regions = Some(value),
        }
    }
    let env = |name: &str| env(name).filter(|v| !v.is_empty());
    let flags = Flags {
        control_plane: control_plane.or_else(|| env(ENV_CONTROL_PLANE)),
        admin_token_file: admin_token_file.or_else(|| env(ENV_ADMIN_TOKEN_FILE).map(PathBuf::from)),
        ca_file,
        regions: parse_regions(regions.as_deref().unwrap_or(DEFAULT_REGIONS))?,
        help,
    };
    Ok((flags, rest))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn args(v: &[&str]) -> Vec<String> {
        v.iter().map(|s| s.to_string()).collect()
    }

    fn no_env(_: &str) -> Option<String> {
        None
    }

    #[test]
    fn example_flags_are_split_off_and_the_rest_is_passed_on() {
        let (f, rest) = split_flags(
            args(&[
                "prog",
                "--control-plane",
                "https://cp:8443",
                "--yes",
                "--admin-token-file=admin-token",
                "--ca-file",
                "ca.pem",
                "--regions=eu-west,us-east",
                "--output",
                "json",
            ]),
            no_env,
        )
        .unwrap();
        assert_eq!(rest, args(&["prog", "--yes", "--output", "json"]));
        assert_eq!(f.control_plane.as_deref(), Some("https://cp:8443"));
        assert_eq!(f.admin_token_file, Some(PathBuf::from("admin-token")));
        assert_eq!(f.ca_file, Some(PathBuf::from("ca.pem")));
        assert_eq!(f.regions.len(), 2);
        assert!(!f.help);
    }

    #[test]
    fn environment_fallbacks_apply_only_when_the_flag_is_absent() {
        let env = |name: &str| match name {
            ENV_CONTROL_PLANE => Some("https://from-env".to_string()),
            ENV_ADMIN_TOKEN_FILE => Some("env-token".to_string()),
            _ => None,
        };
        let (f, _) = split_flags(args(&["prog"]), env).unwrap();
        assert_eq!(f.control_plane.as_deref(), Some("https://from-env"));
        assert_eq!(f.admin_token_file, Some(PathBuf::from("env-token")));
        assert_eq!(f.regions[0].as_str(), "eu-west");
        let (f, _) = split_flags(args(&["prog", "--control-plane", "https://flag"]), env).unwrap();
        assert_eq!(f.control_plane.as_deref(), Some("https://flag"));
        let empty = |_: &str| Some(String::new());
        let (f, _) = split_flags(args(&["prog"]), empty).unwrap();
        assert_eq!((f.control_plane, f.admin_token_file), (None, None));
    }

    #[test]
    fn a_flag_without_a_value_or_a_bad_region_is_named() {
        let e = split_flags(args(&["prog", "--admin-token-file"]), no_env).unwrap_err();
        assert_eq!(e.flag, "--admin-token-file");
        let e = split_flags(args(&["prog", "--control-plane="]), no_env).unwrap_err();
        assert_eq!(e.flag, "--control-plane");
        let e = split_flags(args(&["prog", "--regions", "eu_west"]), no_env).unwrap_err();
        assert_eq!(e.flag, "--regions");
        assert!(e.problem.contains("eu_west"), "{e}");
    }
}
