//! Options shared by the commands that probe (`check`, `select`, `warmup`,
//! `bench`), and who hears their events.

use super::{BadInput, Failure, Internal};
use kernel_preflight::cache::Cache;
use kernel_preflight::probe::{self, SmokeChoice};
use kernel_preflight::report::events::Recorder;
use kernel_preflight::report::progress::{Bars, Progress};
use kernel_preflight::run::{Listener, RemoteSettings, Session, SessionError, SessionOptions, Tee};
use kernel_preflight::sandbox::{self, Cancel, Limits};
use std::path::PathBuf;
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
    /// The fleet's remote outcome store, a redis:// URL (user, password, host, port, db),
    /// over PREFLIGHT_REMOTE (docs/fleet.md).
    #[arg(long, value_name = "URL")]
    pub remote: Option<String>,
}

/// The remote store `flag` (`--remote URL`) or the environment names,
/// validated; else one message (exit 2).
pub(super) fn remote(flag: Option<&str>) -> Result<Option<RemoteSettings>, Failure> {
    RemoteSettings::from_env(flag).map_err(|e| BadInput(e.to_string()))
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
            python,
            smoke,
            no_cache: self.no_cache,
            jobs: self.jobs.map(|n| n as usize),
            packages: Vec::new(),
            remote: remote(self.remote.as_deref())?,
        };
        Ok(Probing {
            session: Session::new(options, Cache::from_env()),
        })
    }
}

/// A session's failure as the command line reports it.
impl From<SessionError> for Failure {
    fn from(e: SessionError) -> Self {
        if e.is_bad_input() {
            BadInput(e.to_string())
        } else {
            Internal(e.to_string())
        }
    }
}

impl Probing {
    /// These probes taking the hub's acceptance from `verdicts`
    /// ([`Session::with_verdicts`]).
    pub fn with_verdicts(self, verdicts: &[u8]) -> Probing {
        Probing {
            session: self.session.with_verdicts(verdicts),
        }
    }

    /// The library's session the arguments made.
    pub fn session(&self) -> &Session {
        &self.session
    }

    /// `answer` with the Ctrl-C handler installed, after the fingerprint:
    /// its failure is the answer before any handler is installed, as
    /// before any plan. Exits on an interrupt, once every child is stopped.
    pub fn interruptible<T, E>(
        &self,
        answer: impl FnOnce(&Session, &Cancel) -> Result<T, E>,
    ) -> Result<T, Failure>
    where
        Failure: From<E>,
    {
        self.session.fingerprint()?;
        let cancel = sandbox::install_interrupt_handler();
        let answer = answer(&self.session, &cancel);
        super::exit_if_interrupted(&cancel, self.interrupted());
        Ok(answer?)
    }

    /// What an interrupted check says.
    pub fn interrupted(&self) -> &'static str {
        if self.session.options().no_cache {
            "every probe was stopped"
        } else {
            "every probe was stopped; outcomes probed so far are cached"
        }
    }
}

/// `--events FILE`: the run's events as JSON lines.
#[derive(clap::Args, Debug, Default)]
pub struct EventsArgs {
    /// Write every event of the run to FILE as it happens, one JSON object
    /// a line, each with its time (docs/events.md); removed when the
    /// command fails.
    #[arg(long, value_name = "FILE")]
    pub events: Option<PathBuf>,
}

/// Who hears a command's events: the progress display on stderr, and the
/// event log when `--events` asks for one.
pub struct Watchers {
    progress: Progress,
    log: Option<Recorder>,
}

impl Watchers {
    /// The display with `bars`, and the log `events` creates (refused
    /// before anything runs when it cannot be written).
    pub fn new(bars: Bars, events: &EventsArgs) -> Result<Watchers, Failure> {
        let log = match &events.events {
            Some(path) => {
                Some(Recorder::create(path).map_err(|e| BadInput(format!("--events {e}")))?)
            }
            None => None,
        };
        Ok(Watchers {
            progress: Progress::new(bars),
            log,
        })
    }

    /// Run `command` with every watcher listening, then clear the display;
    /// a command that fails leaves no event log.
    pub fn watch<T>(
        self,
        command: impl FnOnce(&dyn Listener) -> Result<T, Failure>,
    ) -> Result<T, Failure> {
        let result = match &self.log {
            Some(log) => command(&Tee(&self.progress, log)),
            None => command(&self.progress),
        };
        self.progress.finish();
        match (result, self.log) {
            (Err(e), Some(log)) => {
                log.discard();
                Err(e)
            }
            (result, log) => {
                if let Some(why) = log.as_ref().and_then(Recorder::failure) {
                    eprintln!("preflight: warning: {why}");
                }
                result
            }
        }
    }
}
