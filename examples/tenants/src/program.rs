//! The program: without a control plane it prints what it would declare and sends nothing; with
//! one it runs `TenantScore` on a `TenantAdminTopology` through `harmony_cli` (`--plan`, `--yes`,
//! `--output json` as for every Harmony program). Exit 0 done (or printed), 1 the control plane
//! refused or failed, 2 bad flags (naming the flag) or nothing confirmed.

use std::convert::Infallible;
use std::path::Path;
use std::process::ExitCode;

use clap::Parser;
use harmony::domain::{ExecutionMode, Inventory, RunContext, Score};
use harmony::infra::agent::{ControlPlaneClient, ControlPlaneError};
use harmony::infra::tenant_admin::TenantAdminTopology;
use harmony_agent_protocol::SecretString;
use harmony_cli::{Args, Console, OutputFormat};

use crate::flags::{ENV_ADMIN_TOKEN_FILE, ENV_CONTROL_PLANE, HELP, split_flags};
use crate::{FlagError, Flags, TENANT, acme, resource, score};

/// Exit status for bad flags: nothing was sent.
const EXIT_USAGE: u8 = 2;

/// The `example-tenants` program (its `main`), reading the process's arguments and environment.
pub async fn cli_main() -> ExitCode {
    ExitCode::from(run(std::env::args().collect(), |name| std::env::var(name).ok()).await)
}

fn usage(e: impl std::fmt::Display) -> u8 {
    eprintln!("error: {e}");
    EXIT_USAGE
}

async fn run(argv: Vec<String>, env: impl Fn(&str) -> Option<String>) -> u8 {
    let (flags, rest) = match split_flags(argv, env) {
        Ok(split) => split,
        Err(e) => return usage(e),
    };
    // The harmony_cli flags are checked here too, so the no-control-plane path honours them.
    let args = match Args::try_parse_from(&rest) {
        Ok(a) => a,
        Err(e) if !e.use_stderr() => {
            if flags.help {
                print!("{HELP}");
            }
            print!("{}", e.render());
            return 0;
        }
        Err(e) => {
            eprint!("{}", e.render());
            return EXIT_USAGE;
        }
    };
    if let Some(flag) = not_for_this_example(&args) {
        return usage(format!(
            "{flag} does not apply to this example: it talks to the control plane only (no cluster, no bare metal); drop {flag}"
        ));
    }
    match flags.control_plane.clone() {
        None => print_declaration(&flags, &args),
        Some(url) => {
            let client = match client(&url, &flags) {
                Ok(c) => c,
                Err(e) => return usage(e),
            };
            let mode = |ctx: &RunContext| {
                if ctx.plan {
                    ExecutionMode::Plan
                } else {
                    ExecutionMode::Apply
                }
            };
            let topology = move |ctx: &RunContext| {
                Ok::<_, Infallible>(TenantAdminTopology::new(client).with_mode(mode(ctx)))
            };
            let scores: Vec<Box<dyn Score<TenantAdminTopology>>> =
                vec![Box::new(score(acme(&flags.regions)))];
            harmony_cli::run_with(rest, Console::stdio(), Inventory::empty(), topology, scores)
                .await
        }
    }
}

/// The first `harmony_cli` flag given that means nothing for a control plane.
fn not_for_this_example(args: &Args) -> Option<&'static str> {
    [
        (args.kubeconfig.is_some(), "--kubeconfig"),
        (args.context.is_some(), "--context"),
        (args.apply, "--apply"),
        (args.inventory.is_some(), "--inventory"),
        (args.roles.is_some(), "--roles"),
        (args.discovery_timeout.is_some(), "--discovery-timeout"),
        (args.prune, "--prune"),
        (args.force_conflicts, "--force-conflicts"),
    ]
    .into_iter()
    .find_map(|(given, flag)| given.then_some(flag))
}

/// No control plane: print the declaration, send nothing, and say so. `--plan` and `--yes`
/// need the control plane, so they are refused rather than pretended.
fn print_declaration(flags: &Flags, args: &Args) -> u8 {
    let no_cp = format!("no control plane given (--control-plane URL or {ENV_CONTROL_PLANE})");
    if args.plan || args.yes {
        let flag = if args.plan { "--plan" } else { "--yes" };
        let what = if args.plan {
            "compares the declaration with what the control plane holds"
        } else {
            "applies the declaration to the control plane"
        };
        return usage(format!(
            "{flag} {what}, but {no_cp}: nothing was sent; add --control-plane https://HOST:PORT --admin-token-file FILE (and --ca-file FILE for a private CA)"
        ));
    }
    if args.list {
        println!("Tenant {TENANT}");
        return 0;
    }
    let tenant = resource(acme(&flags.regions));
    let text = match args.output {
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
