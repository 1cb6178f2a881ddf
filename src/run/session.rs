//! The library's front door for the commands that probe: options given
//! once, the machine measured once, then `check` (which `select`,
//! `warmup` and `bench` build on) planned, keyed and answered here.
//! The command line is a client of this, as a binding would be: it parses
//! arguments, calls one method and renders the answer with `report`.

use super::{CheckReport, Executors, ExecutorsError, Plan, PlanOptions, Reporter, RunEvent, warm};
use crate::cache::Cache;
use crate::declared::embedded::Judge;
use crate::discover::Named;
use crate::fingerprint::{Fingerprint, FingerprintError, Sources};
use crate::probe::SmokeChoice;
use crate::sandbox::{Cancel, Limits};
use std::path::{Path, PathBuf};
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
}

/// One caller's session: the options, the cache, and this machine's full
/// fingerprint once it is measured.
#[derive(Debug)]
pub struct Session {
    options: SessionOptions,
    cache: Arc<Cache>,
    fingerprint: OnceLock<Fingerprint>,
}

impl Session {
    /// A session with `options` over `cache` (the fingerprint's facts are
    /// kept there even with `no_cache`, which concerns outcomes).
    pub fn new(options: SessionOptions, cache: Cache) -> Session {
        Session {
            options,
            cache: Arc::new(cache),
            fingerprint: OnceLock::new(),
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

    /// What the session's fingerprint is taken from.
    fn sources(&self) -> Sources {
        let mut sources = Sources::from_process();
        sources.python = self.options.python.clone();
        sources.extra_packages = self.options.packages.clone();
        sources
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

    /// How the session plans: `all` probes variants for another OS or CPU
    /// too; `judge` adds the embedded-architecture check to declared
    /// verdicts.
    pub fn plan_options(&self, all: bool, judge: Option<Judge>) -> PlanOptions {
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
    pub fn executors(&self, fingerprint: &Fingerprint) -> Executors {
        Executors::for_machine(fingerprint, self.options.python.as_deref())
    }

    /// `select`'s warm path: the variant a cold `select` (the hub's
    /// preference, names decide) would choose among the variants in `root`,
    /// from the target's warm record when it still holds ([`warm::answer`]);
    /// `Ok(None)`: plan as usual (also when the fingerprint fails: the
    /// ordinary path reports that in its order). `Err` says why a record
    /// was ignored (it is removed).
    pub fn warm_select(&self, root: &Path) -> Result<Option<warm::Answer>, String> {
        let Some(cache) = self.outcome_cache() else {
            return Ok(None);
        };
        let Ok(fingerprint) = self.fingerprint() else {
            return Ok(None);
        };
        let options = self.plan_options(false, None);
        let installed = fingerprint.installed_digest();
        warm::answer(cache, root, &fingerprint.hash(), &options, &installed)
    }

    /// Keep the warm record of a `select` run of one hub target (`before`
    /// taken before its variants were listed); `Err`: it could not be
    /// written, which only costs the next `select` an ordinary run.
    pub fn remember_select(
        &self,
        plan: &Plan,
        report: &CheckReport,
        before: &warm::Before,
    ) -> Result<(), String> {
        warm::remember(plan, report, &self.plan_options(false, None), before)
    }

    /// Plan `targets` and answer every job, from the cache or by probing,
    /// `jobs` at a time (what `check`, `select` and `warmup` share): `all`
    /// probes variants for another OS or CPU too; `judge` adds the
    /// embedded-architecture check to declared verdicts. The plan's
    /// warnings go to `reporter` first. On `cancel` every child is
    /// stopped and the report holds what was answered; a job whose child
    /// could not be run at all is [`SessionError::Fault`].
    pub fn check(
        &self,
        targets: Vec<Named>,
        all: bool,
        judge: bool,
        cancel: &Cancel,
        reporter: &dyn Reporter,
    ) -> Result<(Plan, CheckReport), SessionError> {
        let (plan, report, _) = self.answer(targets, all, judge, cancel, reporter)?;
        Ok((plan, report))
    }

    /// `warmup`: every job of `targets` answered and kept (only the
    /// variants for this OS and CPU, no embedded-architecture judge), so
    /// that a later `check` or `select` of them is answered from the cache.
    pub fn warmup(
        &self,
        targets: Vec<Named>,
        cancel: &Cancel,
        reporter: &dyn Reporter,
    ) -> Result<(Plan, CheckReport), SessionError> {
        self.check(targets, false, false, cancel, reporter)
    }

    /// [`Session::check`], and the executors the run used (which `bench`
    /// times the passing jobs with: `Session::bench`, in `crate::bench`).
    pub(crate) fn answer(
        &self,
        targets: Vec<Named>,
        all: bool,
        judge: bool,
        cancel: &Cancel,
        reporter: &dyn Reporter,
    ) -> Result<(Plan, CheckReport, Executors), SessionError> {
        let fingerprint = self.fingerprint()?;
        let options = self.plan_options(all, judge.then(|| Judge::from_fingerprint(&fingerprint)));
        let cache = (!self.options.no_cache).then(|| Arc::clone(&self.cache));
        let executors = self.executors(&fingerprint);
        let plan = Plan::new(targets, &fingerprint, &options, &executors, cache);
        for message in &plan.warnings {
            reporter.report(RunEvent::Warning { job: None, message });
        }
        executors.ready_for(&plan)?;
        let cpus = std::thread::available_parallelism().map_or(1, usize::from);
        let jobs = self
            .options
            .jobs
            .unwrap_or_else(|| plan.probe_count().min(cpus).clamp(1, 4));
        let report = super::run(&plan, &executors, jobs, cancel, reporter);
        for message in executors.after_run() {
            reporter.report(RunEvent::Warning {
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
