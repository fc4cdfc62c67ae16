use std::ffi::OsString;
use std::fmt::Display;
use std::process::ExitCode;

use harmony::domain::operator::OperatorHandle;
use harmony::domain::{Inventory, Maestro, RunContext, RunOptions, Score, ScoreStatus, Topology};

use clap::FromArgMatches;

use crate::args::{Args, NoFlags, OutputFormat};
use crate::console::Console;
use crate::operator::CliOperator;
use crate::parse::{EXIT_USAGE, parse_args};
use crate::report::{Preparation, REPORT_FORMAT_VERSION, RunReport, Summary};
use crate::{progress, select};
use harmony::domain::flags::TopologyFlags;

/// Exit status: every Score succeeded or was unchanged.
const EXIT_OK: u8 = 0;
/// Exit status: a Score or the topology preparation failed.
const EXIT_FAILED: u8 = 1;

/// Parses the process arguments, builds the topology with `make_topology` and runs the Scores.
/// The flags offered are the common ones and those `T` reads ([`TopologyFlags`]).
pub async fn run<T, F, E>(
    inventory: Inventory,
    make_topology: F,
    scores: Vec<Box<dyn Score<T>>>,
) -> ExitCode
where
    T: Topology + TopologyFlags + 'static,
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
    T: Topology + TopologyFlags + 'static,
    F: FnOnce(&RunContext) -> Result<T, E>,
    E: Display,
    I: IntoIterator<Item = A>,
    A: Into<OsString> + Clone,
{
    run_program_with::<NoFlags, T, _, _, _, _>(argv, console, inventory, |_, ctx| {
        make_topology(ctx).map(|t| (t, scores))
    })
    .await
}

/// A program with flags of its own, `X` (a `clap::Args`, listed first in `--help`; give a flag
/// `env = "VAR"` to fall back on an environment variable): `setup` gets them with the run
/// context and returns the topology and the Scores. An error from `setup` exits 2 (name the
/// flag in it).
///
/// ```no_run
/// use harmony::domain::{Inventory, Score};
/// use harmony::infra::render::RenderTopology;
/// use std::process::ExitCode;
///
/// #[derive(clap::Args)]
/// struct Flags {
///     /// How many replicas to declare.
///     #[arg(long, env = "SHOP_REPLICAS", default_value_t = 2)]
///     replicas: u32,
/// }
///
/// #[tokio::main]
/// async fn main() -> ExitCode {
///     harmony_cli::run_program(Inventory::empty(), |flags: Flags, ctx| {
///         let scores: Vec<Box<dyn Score<RenderTopology>>> = Vec::new(); // built from flags.replicas
///         Ok::<_, String>((RenderTopology::from_context(ctx), scores))
///     })
///     .await
/// }
/// ```
pub async fn run_program<X, T, F, E>(inventory: Inventory, setup: F) -> ExitCode
where
    X: clap::Args + FromArgMatches,
    T: Topology + TopologyFlags + 'static,
    F: FnOnce(X, &RunContext) -> Result<(T, Vec<Box<dyn Score<T>>>), E>,
    E: Display,
{
    let code = run_program_with(std::env::args_os(), Console::stdio(), inventory, setup).await;
    ExitCode::from(code)
}

/// Like [`run_program`] with explicit arguments and console; returns the exit status.
pub async fn run_program_with<X, T, F, E, I, A>(
    argv: I,
    console: Console,
    inventory: Inventory,
    setup: F,
) -> u8
where
    X: clap::Args + FromArgMatches,
    T: Topology + TopologyFlags + 'static,
    F: FnOnce(X, &RunContext) -> Result<(T, Vec<Box<dyn Score<T>>>), E>,
    E: Display,
    I: IntoIterator<Item = A>,
    A: Into<OsString> + Clone,
{
    let (args, flags) = match parse_args::<T, X, _, _>(argv, &console) {
        Ok(parsed) => parsed,
        Err(code) => return code,
    };
    if let Some(msg) = ownership_without_a_cluster::<T>(&args) {
        console.write_err(&format!("error: {msg}\n"));
        return EXIT_USAGE;
    }
    run_args(args, console, inventory, |ctx| setup(flags, ctx)).await
}

/// Runs with flags already parsed by [`parse_args`]: for a program that decides, after
/// parsing, whether to run Scores at all.
pub async fn run_args<T, F, E>(args: Args, console: Console, inventory: Inventory, setup: F) -> u8
where
    T: Topology + 'static,
    F: FnOnce(&RunContext) -> Result<(T, Vec<Box<dyn Score<T>>>), E>,
    E: Display,
{
    let mut logger = env_logger::Builder::new();
    logger.filter_level(args.log_level());
    // kube-rs and rustls log each failed request themselves; the report already says it once.
    if args.log_level() < log::LevelFilter::Debug {
        for target in harmony::infra::kube::REPEATING_LOG_TARGETS {
            logger.filter_module(target, log::LevelFilter::Off);
        }
    }
    let _ = logger.try_init();
    let usage = |msg: String| {
        console.write_err(&format!("error: {msg}\n"));
        EXIT_USAGE
    };

    let bmc = match args
        .bare_metal
        .bmc
        .iter()
        .map(|s| harmony::domain::capability::HostBmc::parse(s))
        .collect::<Result<Vec<_>, _>>()
    {
        Ok(b) => b,
        Err(e) => return usage(e),
    };
    let spinners = progress::Spinners::default();
    let ctx = RunContext {
        plan: args.common.plan,
        out_dir: args.common.out.clone(),
        prune: args.ownership.prune,
        force_conflicts: args.ownership.force_conflicts,
        kubeconfig: args.cluster.kubeconfig.clone(),
        context: args.cluster.context.clone(),
        apply: args.bare_metal.apply,
        inventory: args.bare_metal.inventory.clone(),
        roles: args.bare_metal.roles.clone(),
        discovery_timeout: args
            .bare_metal
            .discovery_timeout
            .map(std::time::Duration::from_secs),
        assign: args.bare_metal.assign.clone(),
        root_device: args.bare_metal.root_device.clone(),
        bmc,
        bmc_ca_file: args.bare_metal.bmc_ca_file.clone(),
        bmc_insecure: args.bare_metal.bmc_insecure,
        wait: args.ownership.wait_policy(),
        no_skip: args.ownership.no_skip,
        operator: OperatorHandle::new(CliOperator::new(
            args.common.yes,
            console.interactive,
            spinners.clone(),
        )),
    };
    if let Err(e) = harmony::domain::capability::HostBmc::check_unique(&ctx.bmc) {
        return usage(e);
    }
    let (topology, scores) = match setup(&ctx) {
        Ok(t) => t,
        Err(e) => return usage(e.to_string()),
    };
    let mut maestro = Maestro::new(inventory, topology);
    maestro.register(scores);

    if args.common.list {
        list(&console, &maestro, args.common.output);
        return EXIT_OK;
    }

    let mut selection = match select::filter(maestro.scores(), &args.common.filters) {
        Ok(s) => s,
        Err(msg) => return usage(msg),
    };
    if args.common.filters.is_empty()
        && !args.common.yes
        && console.interactive
        && maestro.scores().len() > 1
    {
        selection = match select::prompt(maestro.scores()) {
            Ok(Some(s)) if !s.is_empty() => s,
            Ok(_) => return usage("no Score selected; nothing to do".into()),
            Err(msg) => return usage(msg),
        };
    }

    if let Err(e) = maestro.validate_inventory() {
        return usage(format!("{e}; nothing was applied"));
    }
    let invalid = maestro.validate(&selection);
    if !invalid.is_empty() {
        for (score, e) in &invalid {
            console.write_err(&format!("error: Score \"{score}\": {e}\n"));
        }
        return usage(format!(
            "{} Score(s) failed validation; nothing was applied",
            invalid.len()
        ));
    }

    let topology = maestro.topology();
    if topology.mode().changes_infrastructure() && !args.common.yes {
        let question = format!(
            "Apply {} Score(s) to topology \"{}\"? This changes live infrastructure.",
            selection.len(),
            topology.name()
        );
        if !console.interactive {
            return usage(format!(
                "this run would change live infrastructure on topology \"{}\" and needs confirmation, but there is no terminal to ask on; re-run with --yes to confirm (or --plan to only see the changes)",
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
        args.common.quiet > 0,
        spinners,
    ));
    let options = RunOptions {
        keep_going: args.common.keep_going,
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
    match args.common.output {
        OutputFormat::Text => console.write_out(&report.to_text()),
        OutputFormat::Json => console.write_out(&format!("{}\n", report.to_json())),
    }
    report.exit_code
}

/// `--prune`/`--force-conflicts`/`--no-wait`/`--wait-timeout`/`--no-skip` on a topology that renders unless a cluster is named: without
/// `--kubeconfig`/`--context` nothing is live to prune or take over, so the flag would be ignored.
fn ownership_without_a_cluster<T: TopologyFlags>(args: &Args) -> Option<String> {
    let flag = if args.ownership.prune {
        "--prune"
    } else if args.ownership.force_conflicts {
        "--force-conflicts"
    } else if args.ownership.no_wait {
        "--no-wait"
    } else if args.ownership.wait_timeout.is_some() {
        "--wait-timeout"
    } else if args.ownership.no_skip {
        "--no-skip"
    } else {
        return None;
    };
    let cluster_named = args.cluster.kubeconfig.is_some() || args.cluster.context.is_some();
    (T::FLAGS.cluster && !cluster_named).then(|| {
        format!(
            "{flag} acts on live objects, and without --kubeconfig FILE or --context NAME this program renders files; name the cluster, or drop {flag}"
        )
    })
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
