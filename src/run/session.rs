//! The library's front door for the commands that probe: options given
//! once, the machine measured once, then `check` (which `select`,
//! `warmup` and `bench` build on) planned, keyed and answered here.
//! The command line is a client of this, as a binding would be: it parses
//! arguments, calls one method and renders the answer with `report`.

use super::download::DownloadError;
use super::event::{Listener, Stream};
use super::{
    CheckReport, Executors, ExecutorsError, Plan, PlanOptions, RemoteRow, RemoteSettings, Reporter,
    RunEvent,
};
use crate::cache::Cache;
use crate::declared::SystemError;
use crate::declared::embedded::Judge;
use crate::discover::{DiscoverError, Named};
use crate::fingerprint::{Fingerprint, FingerprintError, Sources};
use crate::probe::SmokeChoice;
use crate::sandbox::{Cancel, Limits};
use std::path::PathBuf;
use std::sync::{Arc, OnceLock};

/// How a session probes, validated by its caller.
#[derive(Debug, Clone, Default)]
pub struct SessionOptions {
    /// Each child's limits.
    pub limits: Limits,
    /// The interpreter the probes run in (resolved to a path); `None`: the
    /// fingerprint's.
    pub python: Option<PathBuf>,
    /// What the user chose for the smokes of hub variants, over the repo's
    /// own benchmarks and preflight's library.
    pub smoke: SmokeChoice,
    /// Probe every job again, and keep no outcome.
    pub no_cache: bool,
    /// Probes at the same time; `None`: min(probes, CPUs, 4).
    pub jobs: Option<usize>,
    /// Packages whose versions the fingerprint reports besides its own
    /// list (`fingerprint --package`; a variant's python-depends).
    pub packages: Vec<String>,
    /// The fleet's remote store behind the outcome cache
    /// ([`RemoteSettings::from_env`]); `None`: this node alone.
    pub remote: Option<RemoteSettings>,
}

/// What `check` probes, besides every job of its targets for this OS and
/// CPU.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct CheckOptions {
    /// Probe the variants for another OS or CPU too (`check --all`).
    pub every_platform: bool,
    /// Add the embedded-architecture check to the declared verdicts: what
    /// each job's embedded CUDA images can run on this GPU, before any
    /// launch (`check`; not `select`, `warmup`, `bench`).
    pub judge_embedded: bool,
    /// Answer from the outcome cache alone (`check --cached`): a job it
    /// does not hold is `skipped`, and nothing runs, not even the try of
    /// the namespaces that says what a probe would run in.
    pub cached_only: bool,
}

/// Why a session could not answer.
#[derive(Debug, thiserror::Error)]
pub enum SessionError {
    /// The machine could not be described (bad input: a missing
    /// interpreter, an unreadable override).
    #[error(transparent)]
    Fingerprint(#[from] FingerprintError),
    /// The running binary cannot be found: the full fingerprint's cuda
    /// child is this binary.
    #[error("cannot find the preflight binary (/proc/self/exe)")]
    NoBinary,
    /// The run's executors cannot be had.
    #[error(transparent)]
    Executors(#[from] ExecutorsError),
    /// A job's child could not be run at all (a fork refused, a file of
    /// the probe not written): preflight's or the machine's fault, not an
    /// answer about the job.
    #[error("{0}")]
    Fault(String),
    /// A target could not be discovered (bad input).
    #[error(transparent)]
    Discover(#[from] DiscoverError),
    /// `--system` overrides that do not parse (bad input).
    #[error(transparent)]
    System(#[from] SystemError),
    /// A kernel could not be fetched from the hub.
    #[error(transparent)]
    Download(#[from] DownloadError),
    /// A request the session refuses before anything runs (bad input),
    /// said in full.
    #[error("{0}")]
    Refused(String),
}

impl SessionError {
    /// Whether the user can fix it (exit 2) rather than preflight or the
    /// machine (exit 3).
    pub fn is_bad_input(&self) -> bool {
        match self {
            SessionError::Fingerprint(_)
            | SessionError::Executors(ExecutorsError::NoPython)
            | SessionError::Discover(_)
            | SessionError::System(_)
            | SessionError::Refused(_) => true,
            SessionError::Download(e) => e.is_bad_input(),
            SessionError::NoBinary
            | SessionError::Executors(ExecutorsError::NoBinary(_))
            | SessionError::Fault(_) => false,
        }
    }
}

/// One caller's session: the options, the cache, and this machine's full
/// fingerprint once it is measured.
#[derive(Debug)]
pub struct Session {
    options: SessionOptions,
    pub(super) cache: Arc<Cache>,
    fingerprint: OnceLock<Fingerprint>,
    /// The hub's acceptance as the caller's own loader judged it
    /// ([`Session::with_verdicts`]).
    verdicts: Option<Arc<[u8]>>,
}

impl Session {
    /// A session with `options` over `cache` (the fingerprint's facts are
    /// kept there even with `no_cache`, which concerns outcomes).
    pub fn new(options: SessionOptions, cache: Cache) -> Session {
        let cache = super::cached::remote::attach(cache, options.remote.as_ref());
        Session {
            options,
            cache: Arc::new(cache),
            fingerprint: OnceLock::new(),
            verdicts: None,
        }
    }

    /// Where the session's fingerprint looks: this process, with the
    /// session's interpreter and extra packages.
    pub(crate) fn sources(&self) -> Sources {
        let mut sources = Sources::from_process();
        sources.python = self.options.python.clone();
        sources.extra_packages = self.options.packages.clone();
        sources
    }

    /// The fast fingerprint of this machine (files only: no child, no
    /// GPU wake-up), its tool versions kept in the cache.
    pub fn fast_fingerprint(&self) -> Result<Fingerprint, SessionError> {
        Ok(Fingerprint::fast(&self.sources(), self.cache.as_ref())?)
    }

    /// This session, its probes taking the hub's acceptance of a variant
    /// from `verdicts` (the judge's format, one JSON line per variant:
    /// `probes/python/judge.py`) instead of judging it again, where a line
    /// names the variant, the very bytes of its `metadata.json`, and the
    /// `kernels` of the probed interpreter as its judge (`check
    /// --verdicts`: the Python flag hands over what the caller's loader
    /// decided just before it asked). Any other line is left out, and its
    /// variant judged in its probe as always.
    pub fn with_verdicts(self, verdicts: &[u8]) -> Session {
        Session {
            verdicts: Some(verdicts.into()),
            ..self
        }
    }

    /// The options the session was made with.
    pub fn options(&self) -> &SessionOptions {
        &self.options
    }

    /// The full fingerprint of this machine for the session's interpreter
    /// (measured once, then cached).
    pub fn fingerprint(&self) -> Result<Fingerprint, SessionError> {
        if let Some(fp) = self.fingerprint.get() {
            return Ok(fp.clone());
        }
        let sources = self.sources();
        let preflight = crate::fs::current_exe().ok_or(SessionError::NoBinary)?;
        let fp =
            crate::probe::machine::full_fingerprint(&sources, self.cache.as_ref(), &preflight)?;
        Ok(self.fingerprint.get_or_init(|| fp).clone())
    }

    /// This machine's full fingerprint only when it was measured before
    /// and kept in the cache (`Ok(None)` otherwise): what a command that
    /// must not start a child (`labels`) keys its lookups by.
    pub fn kept_fingerprint(&self) -> Result<Option<Fingerprint>, SessionError> {
        if let Some(fp) = self.fingerprint.get() {
            return Ok(Some(fp.clone()));
        }
        let sources = self.sources();
        let fast = Fingerprint::fast(&sources, self.cache.as_ref())?;
        let Some(measured) = crate::fingerprint::full::cached(&sources, self.cache.as_ref(), &fast)
        else {
            return Ok(None);
        };
        let fp = fast.with_measured(measured, &sources)?;
        Ok(Some(self.fingerprint.get_or_init(|| fp).clone()))
    }

    /// The interpreters of the other environments of this machine that
    /// were measured and kept (and are unchanged since): where verdicts
    /// may be when this session's environment has none.
    pub fn measured_elsewhere(&self) -> Result<Vec<PathBuf>, SessionError> {
        let fast = Fingerprint::fast(&self.sources(), self.cache.as_ref())?;
        Ok(crate::fingerprint::full::measured_elsewhere(
            self.cache.as_ref(),
            &fast,
        ))
    }

    /// The interpreter this session's fingerprint names, found without a
    /// child; `None`: none found.
    pub fn interpreter(&self) -> Result<Option<PathBuf>, SessionError> {
        let fast = Fingerprint::fast(&self.sources(), self.cache.as_ref())?;
        Ok(fast.python.map(|p| p.interpreter))
    }

    /// This session over the same cache with another interpreter.
    pub fn with_python(&self, python: PathBuf) -> Session {
        Session {
            options: SessionOptions {
                python: Some(python),
                ..self.options.clone()
            },
            cache: Arc::clone(&self.cache),
            fingerprint: OnceLock::new(),
            verdicts: self.verdicts.clone(),
        }
    }

    /// Plan `targets` as `warmup` does and answer each from the outcome
    /// cache alone ([`super::recall::recall`]): no child is started, not
    /// even to measure the machine. `Ok(None)`: the machine was never
    /// measured here (no `warmup` yet), so nothing kept can be found.
    pub fn recall(
        &self,
        targets: Vec<Named>,
    ) -> Result<Option<(Plan, Vec<super::Recalled>)>, SessionError> {
        let Some(fingerprint) = self.kept_fingerprint()? else {
            return Ok(None);
        };
        let options = self.plan_options(false, None);
        let cache = (!self.options.no_cache).then(|| Arc::clone(&self.cache));
        let executors = self.executors(&fingerprint);
        let plan = Plan::new(targets, &fingerprint, &options, &executors, cache);
        let recalled = (0..plan.targets.len())
            .map(|i| super::recall::recall(&plan, super::TargetId(i)))
            .collect();
        Ok(Some((plan, recalled)))
    }

    /// The cache outcomes are kept in; `None` with `no_cache`.
    pub fn outcome_cache(&self) -> Option<&Cache> {
        (!self.options.no_cache).then_some(self.cache.as_ref())
    }

    /// Every entry of the fleet's remote store, as this machine judges it
    /// (`cache ls --remote`): trusted, another machine class's, or refused
    /// and why. Without a remote store, or one that cannot be listed, the
    /// request is refused (bad input: the setting is the user's).
    pub fn remote_entries(&self) -> Result<Vec<RemoteRow>, SessionError> {
        let fingerprint = self.fingerprint()?.hash();
        super::cached::remote::entries(&self.cache, &fingerprint).map_err(SessionError::Refused)
    }

    /// How the session plans: `all` probes variants for another OS or CPU
    /// too; `judge` adds the embedded-architecture check to declared
    /// verdicts.
    pub(crate) fn plan_options(&self, all: bool, judge: Option<Judge>) -> PlanOptions {
        PlanOptions {
            smoke: self.options.smoke.clone(),
            all,
            judge,
            limits: self.options.limits.clone(),
        }
    }

    /// The executors of this session's runs on the machine `fingerprint`
    /// describes ([`Executors::for_machine`], with the session's
    /// interpreter).
    pub(crate) fn executors(&self, fingerprint: &Fingerprint) -> Executors {
        let given = self
            .verdicts
            .as_deref()
            .and_then(|v| super::verdicts::admitted(v, fingerprint));
        Executors::for_machine_given(fingerprint, self.options.python.as_deref(), given)
    }

    /// Plan `targets` and answer every job, from the cache or by probing,
    /// `jobs` at a time (what `check`, `select` and `warmup` share), as
    /// `options` asks. `listener` hears every event, timed. On `cancel`
    /// every child is stopped and the report holds what was answered; a
    /// job whose child could not be run at all is [`SessionError::Fault`].
    /// A report answered from the cache alone says what a probe would have
    /// run in ([`CheckReport::isolation`]).
    pub fn check(
        &self,
        targets: Vec<Named>,
        options: &CheckOptions,
        cancel: &Cancel,
        listener: &dyn Listener,
    ) -> Result<(Plan, CheckReport), SessionError> {
        let (plan, mut report, _) =
            self.answer(targets, options, cancel, &Stream::new(listener))?;
        if report.isolation.is_none() && !options.cached_only {
            report.isolation = crate::sandbox::isolation();
        }
        Ok((plan, report))
    }

    /// [`Session::check`] on `stream`, and the executors the run used
    /// (which `bench` times the passing jobs with: `Session::bench`, in
    /// `crate::bench`).
    pub(crate) fn answer(
        &self,
        targets: Vec<Named>,
        options: &CheckOptions,
        cancel: &Cancel,
        stream: &Stream<'_>,
    ) -> Result<(Plan, CheckReport, Executors), SessionError> {
        let fingerprint = self.fingerprint()?;
        let judge = options
            .judge_embedded
            .then(|| Judge::from_fingerprint(&fingerprint));
        let plan_options = self.plan_options(options.every_platform, judge);
        let cache = (!self.options.no_cache).then(|| Arc::clone(&self.cache));
        let executors = self.executors(&fingerprint);
        let plan = Plan::new(targets, &fingerprint, &plan_options, &executors, cache);
        stream.report(RunEvent::Planned { plan: &plan });
        for message in &plan.warnings {
            stream.report(RunEvent::Warning { job: None, message });
        }
        executors.ready_for(&plan)?;
        let cpus = std::thread::available_parallelism().map_or(1, usize::from);
        let jobs = self
            .options
            .jobs
            .unwrap_or_else(|| plan.probe_count().min(cpus).clamp(1, 4));
        let report = match options.cached_only {
            false => super::run(&plan, &executors, jobs, cancel, stream),
            true => super::from_cache(&plan, stream),
        };
        for message in executors.after_run() {
            stream.report(RunEvent::Warning {
                job: None,
                message: &message,
            });
        }
        if cancel.signal().is_none()
            && let Some(fault) = report.faults.first()
        {
            return Err(SessionError::Fault(fault.clone()));
        }
        Ok((plan, report, executors))
    }
}
