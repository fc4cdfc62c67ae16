//! The program: without a control plane it prints what it would declare and sends nothing; with
//! one it runs `TenantScore` on a `TenantAdminTopology` through `harmony_cli` (`--plan`, `--yes`,
//! `--output json` as for every Harmony program). Exit 0 done (or printed), 1 the control plane
//! refused or failed, 2 bad flags (naming the flag) or nothing confirmed.

use std::convert::Infallible;
use std::path::Path;
use std::process::ExitCode;

use harmony::domain::{ExecutionMode, Inventory, RunContext, Score};
use harmony::infra::control_plane::{ControlPlaneClient, ControlPlaneError};
use harmony::infra::tenant_admin_topology::TenantAdminTopology;
use harmony_agent_protocol::SecretString;
use harmony_cli::{Args, Console, OutputFormat};

use crate::flags::{ENV_ADMIN_TOKEN_FILE, ENV_CONTROL_PLANE};
use crate::{FlagError, Flags, TENANT, acme, resource, score};

/// Exit status for bad flags: nothing was sent.
const EXIT_USAGE: u8 = 2;

/// The `example-tenants` program (its `main`), reading the process's arguments and environment.
pub async fn cli_main() -> ExitCode {
    ExitCode::from(run(std::env::args_os().collect()).await)
}

fn usage(e: impl std::fmt::Display) -> u8 {
    eprintln!("error: {e}");
    EXIT_USAGE
}

async fn run(argv: Vec<std::ffi::OsString>) -> u8 {
    let console = Console::stdio();
    // TenantAdminTopology reads no cluster or bare-metal flags, so harmony_cli refuses those.
    let (args, flags) =
        match harmony_cli::parse_args::<TenantAdminTopology, Flags, _, _>(argv, &console) {
            Ok(parsed) => parsed,
            Err(code) => return code,
        };
    // An empty environment variable counts as unset.
    let mut flags = flags;
    flags.control_plane = flags.control_plane.filter(|v| !v.is_empty());
    flags.admin_token_file = flags.admin_token_file.filter(|v| !v.as_os_str().is_empty());
    match flags.control_plane.clone() {
        None => print_declaration(&flags, &args),
        Some(url) => {
            let client = match client(&url, &flags) {
                Ok(c) => c,
                Err(e) => return usage(e),
            };
            let mode = if args.common.plan {
                ExecutionMode::Plan
            } else {
                ExecutionMode::Apply
            };
            let regions = flags.regions.0.clone();
            harmony_cli::run_args(args, console, Inventory::empty(), move |_: &RunContext| {
                let scores: Vec<Box<dyn Score<TenantAdminTopology>>> =
                    vec![Box::new(score(acme(&regions)))];
                Ok::<_, Infallible>((TenantAdminTopology::new(client).with_mode(mode), scores))
            })
            .await
        }
    }
}

/// No control plane: print the declaration, send nothing, and say so. `--plan` and `--yes`
/// need the control plane, so they are refused rather than pretended.
fn print_declaration(flags: &Flags, args: &Args) -> u8 {
    let no_cp = format!("no control plane given (--control-plane URL or {ENV_CONTROL_PLANE})");
    if args.common.plan || args.common.yes {
        let flag = if args.common.plan { "--plan" } else { "--yes" };
        let what = if args.common.plan {
            "compares the declaration with what the control plane holds"
        } else {
            "applies the declaration to the control plane"
        };
        return usage(format!(
            "{flag} {what}, but {no_cp}: nothing was sent; add --control-plane https://HOST:PORT --admin-token-file FILE (and --ca-file FILE for a private CA)"
        ));
    }
    if args.common.list {
        println!("Tenant {TENANT}");
        return 0;
    }
    let tenant = resource(acme(&flags.regions.0));
    let text = match args.common.output {
        OutputFormat::Json => serde_json::to_string_pretty(&tenant)
            .map(|s| s + "\n")
            .map_err(|e| e.to_string()),
        OutputFormat::Text => serde_yaml::to_string(&tenant).map_err(|e| e.to_string()),
    };
    match text {
        Ok(text) => print!("{text}"),
        Err(e) => {
            eprintln!("error: cannot print the declaration: {e}");
            return 1;
        }
    }
    eprintln!(
        "{no_cp}: nothing was sent. Printed above: what would be declared, as the Tenant resource the operator reconciles. To declare it: --control-plane https://HOST:PORT --admin-token-file FILE [--ca-file FILE], with --plan to see the changes first and --yes to apply."
    );
    0
}

/// The admin client for `url`, with the token from `--admin-token-file` (first line) and the CA
/// from `--ca-file`. Errors name the flag and the file, never the token.
fn client(url: &str, flags: &Flags) -> Result<ControlPlaneClient, FlagError> {
    let token_file = flags.admin_token_file.as_deref().ok_or_else(|| FlagError {
        flag: "--admin-token-file",
        problem: format!("the control plane {url} needs the admin token, and no token file was given"),
        fix: format!("give --admin-token-file FILE (or set {ENV_ADMIN_TOKEN_FILE}), FILE's first line being the admin token"),
    })?;
    let token = read(token_file, "--admin-token-file")?;
    let token = String::from_utf8_lossy(&token);
    let token = token.lines().next().unwrap_or("").trim();
    if token.is_empty() {
        return Err(FlagError {
            flag: "--admin-token-file",
            problem: format!("{}'s first line is empty", token_file.display()),
            fix: "write the admin token on the file's first line".into(),
        });
    }
    let ca = match &flags.ca_file {
        Some(p) => Some(read(p, "--ca-file")?),
        None => None,
    };
    ControlPlaneClient::new(url, SecretString::new(token), ca.as_deref()).map_err(|e| match e {
        ControlPlaneError::Config {
            field: "ca bundle",
            problem,
        } => FlagError {
            flag: "--ca-file",
            problem,
            fix: "the file is the CA that signs the control plane's certificate".into(),
        },
        e => FlagError {
            flag: "--control-plane",
            problem: e.to_string(),
            fix: "give the control plane as https://HOST:PORT".into(),
        },
    })
}

fn read(path: &Path, flag: &'static str) -> Result<Vec<u8>, FlagError> {
    std::fs::read(path).map_err(|e| FlagError {
        flag,
        problem: format!("cannot read {}: {e}", path.display()),
        fix: format!("give {flag} a readable file"),
    })
}
