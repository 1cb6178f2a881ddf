//! The progress display: one listener of a command's timed event stream
//! ([`crate::run::event`]) that says on stderr what people watching need —
//! warnings as they come (above any bar), a bar over the probes (one per
//! kernel and an overall one for `warmup`), then the bench's warm-up and
//! rounds. Bars appear only when stderr is a terminal; the library makes
//! no display of its own accord: the command line makes this one.

use super::warmup::label;
use crate::run::{BenchEvent, Event, EventKind, Listener, RunEvent, TargetId};
use indicatif::{MultiProgress, ProgressBar, ProgressStyle};
use std::io::IsTerminal;
use std::sync::Mutex;
use std::time::Duration;

/// What the bars count.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Bars {
    /// One bar over the probes a run starts (`check`, `select`, `bench`).
    Probes,
    /// One bar per kernel over all its jobs, and an overall one (`warmup`).
    PerKernel,
}

/// The display's bars so far.
#[derive(Default)]
struct State {
    /// The probes' bar, or the bench's current one.
    main: Option<ProgressBar>,
    /// `warmup`: one per target, by [`TargetId`].
    per_target: Vec<ProgressBar>,
    /// Keeps `warmup`'s bars drawn together.
    multi: Option<MultiProgress>,
    /// Whether the bench has begun (the check's bar is gone).
    benching: bool,
}

/// The progress display of one command, on stderr.
pub struct Progress {
    bars: Bars,
    terminal: bool,
    state: Mutex<State>,
}

impl Progress {
    /// A display with `bars`, drawn when stderr is a terminal.
    pub fn new(bars: Bars) -> Progress {
        Progress {
            bars,
            terminal: std::io::stderr().is_terminal(),
            state: Mutex::new(State::default()),
        }
    }

    /// Remove every bar.
    pub fn finish(&self) {
        if let Ok(mut state) = self.state.lock() {
            clear(&mut state);
        }
    }

    fn bar(&self, len: usize, what: &str) -> Option<ProgressBar> {
        if !self.terminal || len == 0 {
            return None;
        }
        let bar = ProgressBar::new(len as u64);
        bar.set_style(style(&format!(
            "{{spinner}} {what} [{{bar:30}}] {{pos}}/{{len}} {{wide_msg}}"
        )));
        bar.enable_steady_tick(Duration::from_millis(120));
        Some(bar)
    }

    fn run(&self, state: &mut State, event: &RunEvent<'_>) {
        match (*event, self.bars) {
            (RunEvent::Planned { plan }, Bars::PerKernel) if self.terminal => {
                let multi = MultiProgress::new();
                let overall = multi.add(ProgressBar::new(plan.jobs.len() as u64));
                overall.set_style(style(
                    "{spinner} all kernels [{bar:30}] {pos}/{len} {elapsed}",
                ));
                overall.enable_steady_tick(Duration::from_millis(120));
                state.per_target = plan
                    .targets
                    .iter()
                    .enumerate()
                    .map(|(i, t)| {
                        let jobs = plan.jobs_of(TargetId(i)).count();
                        let bar = multi.add(ProgressBar::new(jobs as u64));
                        bar.set_style(style("  {prefix:30} [{bar:20}] {pos}/{len} {wide_msg}"));
                        bar.set_prefix(label(t));
                        bar
                    })
                    .collect();
                state.main = Some(overall);
                state.multi = Some(multi);
            }
            (RunEvent::Probing { count }, Bars::Probes) => {
                state.main = self.bar(count, "probing");
            }
            (
                RunEvent::Skipped { job, result } | RunEvent::Cached { job, result },
                Bars::PerKernel,
            )
            | (RunEvent::Finished { job, result }, Bars::PerKernel) => {
                if let Some(bar) = state.per_target.get(job.target.0) {
                    bar.inc(1);
                    bar.set_message(format!("{} {}", result.variant, result.outcome.kind));
                }
                if let Some(bar) = &state.main {
                    bar.inc(1);
                }
            }
            (RunEvent::Finished { result, .. }, Bars::Probes) => {
                if let Some(bar) = &state.main {
                    bar.inc(1);
                    bar.set_message(format!("{} {}", result.variant, result.outcome.kind));
                }
            }
            (RunEvent::Warning { message, .. }, _) => {
                say(
                    state.main.as_ref(),
                    &format!("preflight: warning: {message}"),
                );
            }
            (
                RunEvent::Planned { .. }
                | RunEvent::Skipped { .. }
                | RunEvent::Cached { .. }
                | RunEvent::Started { .. }
                | RunEvent::Probing { .. },
                _,
            ) => {}
        }
    }

    fn bench(&self, state: &mut State, event: &BenchEvent<'_>) {
        // The check is over once the bench speaks.
        if !state.benching {
            clear(state);
            state.benching = true;
        }
        match *event {
            BenchEvent::WarmingUp { variant } => {
                if state.main.is_none() {
                    state.main = self.bar(1, "warming up");
                }
                if let Some(bar) = &state.main {
                    bar.set_message(variant.to_owned());
                }
            }
            BenchEvent::Timing { participants } => {
                if let Some(old) = state.main.take() {
                    old.finish_and_clear();
                }
                state.main = self.bar(participants, "timing");
            }
            BenchEvent::Round {
                variant,
                round,
                samples,
                done,
            } => {
                if let Some(bar) = &state.main {
                    if done {
                        bar.inc(1);
                    }
                    bar.set_message(format!("round {round}: {variant} ({samples} samples)"));
                }
            }
            BenchEvent::Excluded { variant, why } => {
                say(
                    state.main.as_ref(),
                    &format!("preflight: {variant} is excluded: {why}"),
                );
            }
        }
    }
}

impl Listener for Progress {
    fn event(&self, event: &Event<'_>) {
        let Ok(mut state) = self.state.lock() else {
            return;
        };
        match &event.kind {
            EventKind::Run(e) => self.run(&mut state, e),
            EventKind::Bench(e) => self.bench(&mut state, e),
            EventKind::Fetching { repo, revision } => say(
                state.main.as_ref(),
                &format!("preflight: fetching {repo} ({revision}) from the hub"),
            ),
        }
    }
}

/// A line on stderr, above a bar if there is one.
fn say(bar: Option<&ProgressBar>, line: &str) {
    let print = || eprintln!("{line}");
    match bar {
        Some(bar) => bar.suspend(print),
        None => print(),
    }
}

fn clear(state: &mut State) {
    for bar in state.per_target.drain(..).chain(state.main.take()) {
        bar.finish_and_clear();
    }
    state.multi = None;
}

fn style(template: &str) -> ProgressStyle {
    ProgressStyle::with_template(template)
        .map(|s| s.progress_chars("=> "))
        .unwrap_or_else(|_| ProgressStyle::default_bar())
}
