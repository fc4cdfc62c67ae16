use indicatif::{ProgressBar, ProgressStyle};
use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use harmony::domain::{HarmonyEvent, ScoreStatus};

use crate::console::Console;

/// The spinners on screen, shared with prompts so they can be hidden while a question is asked.
pub(crate) type Spinners = Arc<Mutex<HashMap<String, ProgressBar>>>;

/// Runs `f` (a prompt) with every spinner hidden and its ticking paused.
pub(crate) fn suspended<R>(spinners: &Spinners, f: impl FnOnce() -> R) -> R {
    let bars: Vec<ProgressBar> = spinners
        .lock()
        .map(|s| s.values().cloned().collect())
        .unwrap_or_default();
    match bars.first() {
        Some(bar) => bar.suspend(f),
        None => f(),
    }
}

/// Shows run events: spinners on a terminal, plain lines otherwise, nothing with `-q`.
pub(crate) fn subscriber(
    console: Console,
    quiet: bool,
    spinners: Spinners,
) -> impl Fn(&HarmonyEvent) + Send + Sync + 'static {
    move |event: &HarmonyEvent| {
        if quiet {
            return;
        }
        let per_score = matches!(
            event,
            HarmonyEvent::InterpretStarted { .. }
                | HarmonyEvent::InterpretProgress { .. }
                | HarmonyEvent::InterpretFinished { .. }
        );
        if console.interactive && per_score {
            show_spinner(&spinners, event);
        } else if let Some(line) = plain_line(event) {
            console.write_err(&format!("{line}\n"));
        }
    }
}

fn show_spinner(spinners: &Mutex<HashMap<String, ProgressBar>>, event: &HarmonyEvent) {
    let Ok(mut spinners) = spinners.lock() else {
        return;
    };
    match event {
        HarmonyEvent::InterpretStarted { score } => {
            let bar = ProgressBar::new_spinner();
            if let Ok(style) = ProgressStyle::with_template("{spinner} {prefix}: {msg}") {
                bar.set_style(style);
            }
            bar.set_prefix(score.clone());
            bar.set_message("running");
            bar.enable_steady_tick(Duration::from_millis(100));
            spinners.insert(score.clone(), bar);
        }
        HarmonyEvent::InterpretProgress { score, message } => {
            if let Some(bar) = spinners.get(score) {
                bar.set_message(message.clone());
            }
        }
        HarmonyEvent::InterpretFinished {
            score,
            status,
            message,
        } => {
            let text = format!("{} {score}: {message}", mark(*status));
            match spinners.remove(score) {
                Some(bar) => bar.finish_with_message(text),
                None => ProgressBar::hidden().println(text),
            }
        }
        _ => {}
    }
}

fn mark(status: ScoreStatus) -> &'static str {
    match status {
        ScoreStatus::Success => "[ok]",
        ScoreStatus::Noop => "[unchanged]",
        ScoreStatus::Failed => "[FAILED]",
        ScoreStatus::Skipped => "[skipped]",
    }
}

fn plain_line(event: &HarmonyEvent) -> Option<String> {
    Some(match event {
        HarmonyEvent::TopologyPreparing { topology } => {
            format!("harmony: preparing topology {topology}")
        }
        HarmonyEvent::TopologyReady { topology, .. } => {
            format!("harmony: topology {topology} ready")
        }
        HarmonyEvent::TopologyFailed { topology, reason } => {
            format!("harmony: topology {topology} failed: {reason}")
        }
        HarmonyEvent::InterpretStarted { score } => format!("harmony: {score}: started"),
        HarmonyEvent::InterpretProgress { score, message } => {
            format!("harmony: {score}: {message}")
        }
        HarmonyEvent::InterpretFinished {
            score,
            status,
            message,
        } => {
            format!("harmony: {score}: {} {message}", mark(*status))
        }
    })
}
