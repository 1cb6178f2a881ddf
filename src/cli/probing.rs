//! Options shared by the commands that probe (`check`, `select`, `warmup`,
//! `bench`).

use super::{BadInput, Failure, Internal};
use kernel_preflight::bench::{BenchOptions, BenchReporter, Benched};
use kernel_preflight::cache::Cache;
use kernel_preflight::discover::Named;
use kernel_preflight::fingerprint::Fingerprint;
use kernel_preflight::probe::{self, SmokeChoice};
use kernel_preflight::run::{
    CheckReport, ExecutorsError, Plan, Reporter, RunEvent, Session, SessionError, SessionOptions,
};
use kernel_preflight::sandbox::{self, Cancel, Limits};
use std::io::IsTerminal;
use std::path::PathBuf;
use std::sync::OnceLock;
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
    /// Run preflight's library smoke written for the hub kernel ORG/NAME
    /// (a fork of it, a local checkout), instead of the repo's benchmarks
    /// or the library smoke of the kernel's own repo id.
    #[arg(long, value_name = "ORG/NAME", conflicts_with = "smoke")]
    pub smoke_as: Option<String>,
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

/// `--smoke-as ORG/NAME` as the library entry it names, else one message
/// (exit 2).
fn smoke_as(given: &str) -> Result<probe::LibraryEntry, Failure> {
    probe::LibraryEntry::named(given).map_err(|e| BadInput(format!("--smoke-as {given}: {e}")))
}

/// The forks `PREFLIGHT_SMOKE_AS` names, else one message (exit 2).
fn forks_from_env() -> Result<probe::Forks, Failure> {
    let bad = |why: String| BadInput(format!("{}: {why}", probe::SMOKE_AS_ENV));
    match std::env::var(probe::SMOKE_AS_ENV) {
        Ok(value) => probe::Forks::parse(&value).map_err(|e| bad(e.to_string())),
        Err(std::env::VarError::NotPresent) => Ok(probe::Forks::default()),
        Err(std::env::VarError::NotUnicode(_)) => Err(bad("not valid UTF-8".into())),
    }
}

/// Validated probing options, before the machine is known: the
/// library's [`Session`], made from the arguments.
pub struct Probing {
    /// `--python`, resolved to a path.
    pub python: Option<PathBuf>,
    session: Session,
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
                let what = if p.is_dir() {
                    "a folder, not a Python interpreter"
                } else if p.is_file() {
                    "not executable"
                } else {
                    "no such executable (give a path, or a name on PATH)"
                };
                BadInput(format!("--python {}: {what}", p.display()))
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
        let smoke = SmokeChoice {
            library: self.smoke_as.as_deref().map(smoke_as).transpose()?,
            forks: forks_from_env()?,
            file: self.smoke,
        };
        let options = SessionOptions {
            limits,
            python: python.clone(),
            smoke,
            no_cache: self.no_cache,
            jobs: self.jobs.map(|n| n as usize),
            packages: Vec::new(),
        };
        Ok(Probing {
            python,
            session: Session::new(options, Cache::from_env()),
        })
    }
}

/// A session's failure as the command line reports it.
impl From<SessionError> for Failure {
    fn from(e: SessionError) -> Self {
        match e {
            SessionError::Fingerprint(_) | SessionError::Executors(ExecutorsError::NoPython) => {
                BadInput(e.to_string())
            }
            SessionError::NoBinary
            | SessionError::Executors(ExecutorsError::NoBinary(_))
            | SessionError::Fault(_) => Internal(e.to_string()),
        }
    }
}

impl Probing {
    /// The library's session the arguments made.
    pub fn session(&self) -> &Session {
        &self.session
    }

    /// The full fingerprint of this machine for the chosen interpreter
    /// (measured once, then cached).
    pub fn fingerprint(&self) -> Result<Fingerprint, Failure> {
        Ok(self.session.fingerprint()?)
    }

    /// [`Session::check`] with the Ctrl-C handler installed: exits on an
    /// interrupt, once every child is stopped.
    pub fn run(
        &self,
        targets: Vec<Named>,
        all: bool,
        judge: bool,
        reporter: &dyn Reporter,
    ) -> Result<(Plan, CheckReport), Failure> {
        self.interruptible(|session, cancel| session.check(targets, all, judge, cancel, reporter))
    }

    /// [`Session::warmup`] with the Ctrl-C handler installed, as [`Probing::run`].
    pub fn warmup(
        &self,
        targets: Vec<Named>,
        reporter: &dyn Reporter,
    ) -> Result<(Plan, CheckReport), Failure> {
        self.interruptible(|session, cancel| session.warmup(targets, cancel, reporter))
    }

    /// [`Session::bench`] with the Ctrl-C handler installed: exits on an
    /// interrupt, once every child is stopped.
    pub fn bench(
        &self,
        targets: Vec<Named>,
        options: &BenchOptions,
        reporter: &dyn Reporter,
        bench_reporter: &dyn BenchReporter,
    ) -> Result<Benched, Failure> {
        self.fingerprint()?;
        let cancel = sandbox::install_interrupt_handler();
        let answer = self
            .session
            .bench(targets, options, &cancel, reporter, bench_reporter);
        let benched = matches!(&answer, Ok(Benched { bench: Some(_), .. }));
        super::exit_if_interrupted(
            &cancel,
            if benched {
                "every bench child was stopped; nothing was kept"
            } else {
                self.interrupted()
            },
        );
        Ok(answer?)
    }

    /// `answer` with the Ctrl-C handler installed, after the fingerprint:
    /// its failure is the answer before any handler is installed, as
    /// before any plan. Exits on an interrupt, once every child is stopped.
    fn interruptible<T>(
        &self,
        answer: impl FnOnce(&Session, &Cancel) -> Result<T, SessionError>,
    ) -> Result<T, Failure> {
        self.fingerprint()?;
        let cancel = sandbox::install_interrupt_handler();
        let answer = answer(&self.session, &cancel);
        super::exit_if_interrupted(&cancel, self.interrupted());
        Ok(answer?)
    }

    /// What an interrupted check says.
    fn interrupted(&self) -> &'static str {
        if self.session.options().no_cache {
            "every probe was stopped"
        } else {
            "every probe was stopped; outcomes probed so far are cached"
        }
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
