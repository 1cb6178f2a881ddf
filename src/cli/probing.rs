//! Options shared by the commands that probe (`check`, `select`, `warmup`).

use super::{BadInput, Failure, Internal};
use kernel_preflight::cache::Cache;
use kernel_preflight::declared::embedded::Judge;
use kernel_preflight::discover::Named;
use kernel_preflight::fingerprint::{Fingerprint, Sources};
use kernel_preflight::probe;
use kernel_preflight::run::{
    self, CheckReport, Executors, ExecutorsError, Plan, PlanOptions, Reporter, RunEvent,
};
use kernel_preflight::sandbox::{self, Limits};
use std::io::IsTerminal;
use std::path::PathBuf;
use std::sync::{Arc, OnceLock};
use std::time::Duration;

/// How to probe.
#[derive(clap::Args, Debug)]
pub struct ProbeArgs {
    /// Probes at the same time (default: min(variants, CPUs, 4)).
    #[arg(long, value_parser = clap::value_parser!(u32).range(1..=256))]
    pub jobs: Option<u32>,
    /// Seconds each probe may run before it is stopped.
    #[arg(long, default_value_t = 60.0, value_name = "S")]
    pub timeout: f64,
    /// Seconds between SIGTERM and SIGKILL when a probe is stopped.
    #[arg(long, default_value_t = 5.0, value_name = "S")]
    pub grace: f64,
    /// The Python interpreter the probes run in (default: $VIRTUAL_ENV,
    /// $CONDA_PREFIX, python3 on PATH, as for the fingerprint).
    #[arg(long, value_name = "P")]
    pub python: Option<PathBuf>,
    /// Smoke file with `def smoke(kernel, device)`, instead of the repo's
    /// benchmarks or preflight's own smoke library.
    #[arg(long, value_name = "FILE")]
    pub smoke: Option<PathBuf>,
    /// Probe every variant again, and keep no outcome.
    #[arg(long)]
    pub no_cache: bool,
}

/// `--NAME VALUE` as a positive duration, else one message (exit 2).
pub(super) fn seconds(name: &str, value: f64) -> Result<Duration, Failure> {
    Duration::try_from_secs_f64(value)
        .ok()
        .filter(|d| !d.is_zero())
        .ok_or_else(|| {
            BadInput(format!(
                "--{name} {value}: expected a positive number of seconds"
            ))
        })
}

/// Validated probing options, before the machine is known.
pub struct Probing {
    /// Child limits.
    pub limits: Limits,
    /// `--python`, resolved to a path.
    pub python: Option<PathBuf>,
    /// The cache: the fingerprint's facts, and outcomes unless `--no-cache`.
    cache: Arc<Cache>,
    /// The full fingerprint, once made (a warm `select` makes it before it
    /// knows whether it must plan).
    fingerprint: OnceLock<Fingerprint>,
    args: ProbeArgs,
}

impl ProbeArgs {
    /// Check every option before anything is detected or probed.
    pub fn validate(self) -> Result<Probing, Failure> {
        let limits = Limits {
            timeout: seconds("timeout", self.timeout)?,
            grace: seconds("grace", self.grace)?,
            ..Limits::default()
        };
        let python = match &self.python {
            Some(p) => Some(probe::find_python(p).ok_or_else(|| {
                BadInput(format!(
                    "--python {}: no such executable (give a path, or a name on PATH)",
                    p.display()
                ))
            })?),
            None => None,
        };
        if let Some(smoke) = &self.smoke
            && !smoke.is_file()
        {
            return Err(BadInput(format!(
                "--smoke {}: no such file (expected a Python file with def smoke(kernel, device))",
                smoke.display()
            )));
        }
        Ok(Probing {
            limits,
            python,
            cache: Arc::new(Cache::from_env()),
            fingerprint: OnceLock::new(),
            args: self,
        })
    }
}

impl Probing {
    /// The full fingerprint of this machine for the chosen interpreter
    /// (measured once, then cached).
    pub fn fingerprint(&self) -> Result<Fingerprint, Failure> {
        if let Some(fp) = self.fingerprint.get() {
            return Ok(fp.clone());
        }
        let mut sources = Sources::from_process();
        sources.python = self.python.clone();
        let fp = super::fingerprint::full(&sources, self.cache.as_ref())?;
        Ok(self.fingerprint.get_or_init(|| fp).clone())
    }

    /// The cache outcomes are kept in; `None` under `--no-cache`.
    pub fn outcome_cache(&self) -> Option<&Cache> {
        (!self.args.no_cache).then_some(self.cache.as_ref())
    }

    /// The options [`Probing::run`] plans with for `all` and `judge`.
    pub fn plan_options(&self, all: bool, judge: Option<Judge>) -> PlanOptions {
        PlanOptions {
            smoke: self.args.smoke.clone(),
            all,
            judge,
            limits: self.limits.clone(),
        }
    }

    /// The executors of a run of `plan` ([`Executors::for_plan`]), with
    /// `--python`.
    pub fn executors(&self, plan: &Plan) -> Result<Executors, Failure> {
        Executors::for_plan(plan, self.python.as_deref()).map_err(|e| match e {
            ExecutorsError::NoPython => BadInput(e.to_string()),
            ExecutorsError::NoBinary(_) => Internal(e.to_string()),
        })
    }

    /// Plan `targets` and answer every job (what `check`, `select` and
    /// `warmup` share): `all` probes variants for another OS or CPU too;
    /// `judge` adds the embedded-architecture check to declared verdicts.
    /// Exits on an interrupt, once every child is stopped; a job whose
    /// child could not be run at all is an internal fault.
    pub fn run(
        &self,
        targets: Vec<Named>,
        all: bool,
        judge: bool,
        reporter: &dyn Reporter,
    ) -> Result<(Plan, CheckReport), Failure> {
        let fingerprint = self.fingerprint()?;
        let cancel = sandbox::install_interrupt_handler();
        let options = self.plan_options(all, judge.then(|| Judge::from_fingerprint(&fingerprint)));
        let cache = (!self.args.no_cache).then(|| Arc::clone(&self.cache));
        let plan = Plan::new(targets, &fingerprint, &options, cache);
        for warning in &plan.warnings {
            eprintln!("preflight: warning: {warning}");
        }
        let executors = self.executors(&plan)?;
        let cpus = std::thread::available_parallelism().map_or(1, usize::from);
        let jobs = match self.args.jobs {
            Some(n) => n as usize,
            None => plan.probe_count().min(cpus).clamp(1, 4),
        };
        let report = run::run(&plan, &executors, jobs, &cancel, reporter);
        if let Some(why) = executors.python.as_ref().and_then(|p| p.fork_fallback()) {
            eprintln!("preflight: warning: probes ran as fresh processes, not forked: {why}");
        }
        super::exit_if_interrupted(
            &cancel,
            if self.args.no_cache {
                "every probe was stopped"
            } else {
                "every probe was stopped; outcomes probed so far are cached"
            },
        );
        // A child that could not be run at all answers nothing about its
        // job: preflight (or the machine) failed.
        if let Some(fault) = report.faults.first() {
            return Err(Internal(fault.clone()));
        }
        Ok((plan, report))
    }
}

/// Reports a run on stderr: warnings as they come, and a progress bar over
/// the probes when stderr is a terminal.
pub struct Progress {
    bar: OnceLock<Option<indicatif::ProgressBar>>,
}

impl Progress {
    /// No bar yet: it appears once the run knows how many probes it starts.
    pub fn new() -> Progress {
        Progress {
            bar: OnceLock::new(),
        }
    }

    /// Remove the bar.
    pub fn finish(&self) {
        if let Some(Some(bar)) = self.bar.get() {
            bar.finish_and_clear();
        }
    }
}

impl Reporter for Progress {
    fn report(&self, event: RunEvent<'_>) {
        let bar = || self.bar.get().and_then(Option::as_ref);
        match event {
            RunEvent::Probing { count } => {
                let _ = self.bar.set(progress_bar(count, "probing"));
            }
            RunEvent::Finished { result, .. } => {
                if let Some(bar) = bar() {
                    bar.inc(1);
                    bar.set_message(format!("{} {}", result.variant, result.outcome.kind));
                }
            }
            RunEvent::Warning { message, .. } => warn(bar(), message),
            RunEvent::Skipped { .. } | RunEvent::Cached { .. } | RunEvent::Started { .. } => {}
        }
    }
}

/// A warning on stderr, above a progress bar if there is one.
pub fn warn(bar: Option<&indicatif::ProgressBar>, message: &str) {
    let line = || eprintln!("preflight: warning: {message}");
    match bar {
        Some(bar) => bar.suspend(line),
        None => line(),
    }
}

/// A progress bar on stderr, only when stderr is a terminal.
pub fn progress_bar(len: usize, what: &str) -> Option<indicatif::ProgressBar> {
    if !std::io::stderr().is_terminal() || len == 0 {
        return None;
    }
    let bar = indicatif::ProgressBar::new(len as u64);
    if let Ok(style) = indicatif::ProgressStyle::with_template(&format!(
        "{{spinner}} {what} [{{bar:30}}] {{pos}}/{{len}} {{wide_msg}}"
    )) {
        bar.set_style(style.progress_chars("=> "));
    }
    bar.enable_steady_tick(Duration::from_millis(120));
    Some(bar)
}
