use clap::Parser;
use std::ffi::OsString;
use std::fmt::Display;
use std::process::ExitCode;

use harmony::domain::operator::OperatorHandle;
use harmony::domain::{Inventory, Maestro, RunContext, RunOptions, Score, ScoreStatus, Topology};

use crate::args::{Args, OutputFormat};
use crate::console::Console;
use crate::operator::CliOperator;
use crate::report::{Preparation, REPORT_FORMAT_VERSION, RunReport, Summary};
use crate::{progress, select};

/// Exit status: every Score succeeded or was unchanged.
const EXIT_OK: u8 = 0;
/// Exit status: a Score or the topology preparation failed.
const EXIT_FAILED: u8 = 1;
/// Exit status: usage or validation error; nothing was run.
const EXIT_USAGE: u8 = 2;

/// Parses the process arguments, builds the topology with `make_topology` and runs the Scores.
pub async fn run<T, F, E>(
    inventory: Inventory,
    make_topology: F,
    scores: Vec<Box<dyn Score<T>>>,
) -> ExitCode
where
    T: Topology + 'static,
    F: FnOnce(&RunContext) -> Result<T, E>,
    E: Display,
{
    let code = run_with(
        std::env::args_os(),
        Console::stdio(),
        inventory,
        make_topology,
        scores,
    )
    .await;
    ExitCode::from(code)
}

/// Like [`run`] with explicit arguments and console; returns the exit status.
pub async fn run_with<T, F, E, I, A>(
    argv: I,
    console: Console,
    inventory: Inventory,
    make_topology: F,
    scores: Vec<Box<dyn Score<T>>>,
) -> u8
where
    T: Topology + 'static,
    F: FnOnce(&RunContext) -> Result<T, E>,
    E: Display,
    I: IntoIterator<Item = A>,
    A: Into<OsString> + Clone,
{
    let args = match Args::try_parse_from(argv) {
        Ok(a) => a,
        Err(e) => {
            let code = if e.use_stderr() { EXIT_USAGE } else { EXIT_OK };
            let text = e.render().to_string();
            if e.use_stderr() {
                console.write_err(&text)
            } else {
                console.write_out(&text)
            }
            return code;
        }
    };
    let _ = env_logger::Builder::new()
        .filter_level(args.log_level())
        .try_init();
    let usage = |msg: String| {
        console.write_err(&format!("error: {msg}\n"));
        EXIT_USAGE
    };

    let spinners = progress::Spinners::default();
    let ctx = RunContext {
        plan: args.plan,
        out_dir: args.out.clone(),
        prune: args.prune,
        force_conflicts: args.force_conflicts,
        kubeconfig: args.kubeconfig.clone(),
        context: args.context.clone(),
        apply: args.apply,
        inventory: args.inventory.clone(),
        roles: args.roles.clone(),
        discovery_timeout: args.discovery_timeout.map(std::time::Duration::from_secs),
        operator: OperatorHandle::new(CliOperator::new(
            args.yes,
            console.interactive,
            spinners.clone(),
        )),
    };
    let topology = match make_topology(&ctx) {
        Ok(t) => t,
        Err(e) => return usage(format!("cannot set up the topology: {e}")),
    };
    let mut maestro = Maestro::new(inventory, topology);
    maestro.register(scores);

    if args.list {
        list(&console, &maestro, args.output);
        return EXIT_OK;
    }

    let mut selection = match select::filter(maestro.scores(), &args.filters) {
        Ok(s) => s,
        Err(msg) => return usage(msg),
    };
    if args.filters.is_empty() && !args.yes && console.interactive && maestro.scores().len() > 1 {
        selection = match select::prompt(maestro.scores()) {
            Ok(Some(s)) if !s.is_empty() => s,
            Ok(_) => return usage("no Score selected; nothing to do".into()),
            Err(msg) => return usage(msg),
        };
    }

    let invalid = maestro.validate(&selection);
    if !invalid.is_empty() {
        for (score, e) in &invalid {
            console.write_err(&format!("error: Score {score:?}: {e}\n"));
        }
        return usage(format!(
            "{} Score(s) failed validation; nothing was applied",
            invalid.len()
        ));
    }

    let topology = maestro.topology();
    if topology.mode().changes_infrastructure() && !args.yes {
        let question = format!(
            "Apply {} Score(s) to topology {:?}? This changes live infrastructure.",
            selection.len(),
            topology.name()
        );
        if !console.interactive {
            return usage(format!(
                "this run would change live infrastructure on topology {:?} and needs confirmation, but there is no terminal to ask on; re-run with --yes to confirm (or --plan to only see the changes)",
                topology.name()
            ));
        }
        match select::confirm(&question) {
            Ok(true) => {}
            Ok(false) => {
                return usage(
                    "not confirmed; nothing was applied (pass --yes to skip this question)".into(),
                );
            }
            Err(msg) => return usage(msg),
        }
    }

    maestro.subscribe(progress::subscriber(
        console.clone(),
        args.quiet > 0,
        spinners,
    ));
    let options = RunOptions {
        keep_going: args.keep_going,
    };
    let (preparation, scores) = match maestro.run(&selection, options).await {
        Ok(reports) => {
            let prep = match maestro.prepare().await {
                Ok(p) => Preparation::from(p),
                Err(e) => Preparation::Failed {
                    message: e.to_string(),
                },
            };
            (prep, reports)
        }
        Err(e) => (
            Preparation::Failed {
                message: e.to_string(),
            },
            Vec::new(),
        ),
    };
    let failed = matches!(preparation, Preparation::Failed { .. })
        || scores.iter().any(|r| r.status == ScoreStatus::Failed);
    let report = RunReport {
        format_version: REPORT_FORMAT_VERSION,
        topology: maestro.topology().name().to_string(),
        mode: maestro.topology().mode(),
        preparation,
        summary: Summary::of(&scores),
        scores,
        exit_code: if failed { EXIT_FAILED } else { EXIT_OK },
    };
    match args.output {
        OutputFormat::Text => console.write_out(&report.to_text()),
        OutputFormat::Json => console.write_out(&format!("{}\n", report.to_json())),
    }
    report.exit_code
}

fn list<T: Topology>(console: &Console, maestro: &Maestro<T>, format: OutputFormat) {
    let names: Vec<String> = maestro.scores().iter().map(|s| s.name()).collect();
    match format {
        OutputFormat::Text => {
            console.write_out(&names.iter().map(|n| format!("{n}\n")).collect::<String>())
        }
        OutputFormat::Json => {
            let scores: Vec<serde_json::Value> = maestro
                .scores()
                .iter()
                .map(|s| serde_json::json!({"name": s.name(), "parameters": s.parameters()}))
                .collect();
            console.write_out(&format!("{}\n", serde_json::json!({ "scores": scores })));
        }
    }
}
