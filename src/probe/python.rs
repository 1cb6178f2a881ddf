//! The python executor's parent side: it writes the embedded driver
//! (`probes/python/driver.py` and the files it loads, [`DRIVER_FILES`]) into
//! the sandbox's directory, starts the interpreter there, and reads the
//! child's events back from the channel file.

use super::fork::{self, Forking};
use super::judge::Verdicts;
use super::{
    Ahead, BenchExecutor, Executor, Job, Placement, ProbeError, SmokeSource, Subject, device_for,
};
use crate::fingerprint::Fingerprint;
use crate::protocol::{CHANNEL_ENV, Depth, Event, Evidence, ExecutorKind, Made, Tail};
use crate::sandbox::{Cancel, ChildCommand};
use crate::variant::VariantName;
use std::ffi::OsString;
use std::path::{Path, PathBuf};
use std::sync::Arc;

/// The variable that turns on the Python package's verification of every
/// `kernels` load (`python/kernel_preflight/_enable.py`).
pub const KERNEL_PREFLIGHT_ENV: &str = "KERNEL_PREFLIGHT";

/// The child-side driver, embedded so that an installed binary needs no data files.
pub const DRIVER: &str = include_str!("../../probes/python/driver.py");

/// The driver's comparison of results with references, written next to it.
pub const COMPARE: &str = include_str!("../../probes/python/compare.py");

/// The hub's `python-depends` allowlist (`kernels/python_depends.json` of
/// the `kernels` release the acceptance rules were copied from), handed to
/// the driver for variants probed where `kernels` is not installed.
pub const PYTHON_DEPENDS: &str = include_str!("../../probes/python/python_depends.json");

pub(super) const DRIVER_NAME: &str = "preflight_driver.py";

/// Every file the driver needs, by the name it is written under next to it
/// (the driver itself included): all of them decide a verdict, so all of
/// them belong to a probe's identity. The names are prefixed because the
/// driver's folder is first on the child's `sys.path`: a kernel's own
/// `import device` must not find preflight's.
pub const DRIVER_FILES: &[(&str, &str)] = &[
    (DRIVER_NAME, DRIVER),
    ("preflight_compare.py", COMPARE),
    (
        "preflight_acceptance.py",
        include_str!("../../probes/python/acceptance.py"),
    ),
    (
        "preflight_hub_bridge.py",
        include_str!("../../probes/python/hub_bridge.py"),
    ),
    (
        "preflight_hub_rules.py",
        include_str!("../../probes/python/hub_rules.py"),
    ),
    (
        "preflight_hub_metadata.py",
        include_str!("../../probes/python/hub_metadata.py"),
    ),
    (
        "preflight_judge.py",
        include_str!("../../probes/python/judge.py"),
    ),
    (
        "preflight_device.py",
        include_str!("../../probes/python/device.py"),
    ),
    (
        "preflight_smoke_sources.py",
        include_str!("../../probes/python/smoke.py"),
    ),
    (
        "preflight_bench.py",
        include_str!("../../probes/python/bench.py"),
    ),
    ("preflight_python_depends.json", PYTHON_DEPENDS),
];
pub(super) const CHANNEL_NAME: &str = "preflight_result.jsonl";
const SMOKE_NAME: &str = "preflight_smoke.py";
/// The judge child's verdicts, as a probe child finds them next to its driver.
const VERDICTS_NAME: &str = "preflight_verdicts.jsonl";

/// Runs hub variants in a Python interpreter, one sandboxed child each.
#[derive(Debug, Clone)]
pub struct PythonExecutor {
    /// The Python interpreter (an absolute path, see [`super::find_python`]).
    pub python: PathBuf,
    /// Extra environment for the child, on top of the sandbox's scrubbed one.
    pub env: Vec<(OsString, OsString)>,
    /// What [`PythonExecutor::judge_ahead`] left for this executor's probes.
    pub(super) verdicts: Verdicts,
    /// The hub's acceptance, judged by the caller's own loader before it
    /// asked ([`PythonExecutor::given_verdicts`]): the verdicts every run
    /// of this executor starts with.
    pub(super) given: Option<std::sync::Arc<[u8]>>,
    /// The fork server its probes are forked from, when forking is on
    /// ([`PythonExecutor::forked`]).
    pub(super) forking: Option<Forking>,
}

/// The variable that turns forked probes off (`PREFLIGHT_FORK=0`).
pub const FORK_ENV: &str = "PREFLIGHT_FORK";

impl PythonExecutor {
    /// An executor running `python`, with no extra environment.
    pub fn new(python: impl Into<PathBuf>) -> PythonExecutor {
        PythonExecutor {
            python: python.into(),
            env: Vec::new(),
            verdicts: Verdicts::default(),
            given: None,
            forking: None,
        }
    }

    /// This executor, its probes replaying `verdicts` (the judge's format,
    /// one JSON line per variant: `probes/python/judge.py`) where they name
    /// the variant and the very bytes of its `metadata.json`, instead of
    /// judging the hub's acceptance themselves: what the caller's own
    /// loader decided, with the same `kernels`, just before it asked
    /// (`check --verdicts`).
    pub fn given_verdicts(self, verdicts: std::sync::Arc<[u8]>) -> PythonExecutor {
        PythonExecutor {
            given: Some(verdicts),
            ..self
        }
    }

    /// This executor, forking its probes from one fork server
    /// (`probe::fork`) that holds torch and `kernels` already imported.
    /// Where the server cannot be used, probes stay fresh processes.
    pub fn forked(self) -> PythonExecutor {
        PythonExecutor {
            forking: Some(Forking::new(true)),
            ..self
        }
    }

    /// [`PythonExecutor::forked`] even where torch is not installed (the
    /// server then holds `kernels`, or nothing): what the tests use to run
    /// every fixture forked, and `PREFLIGHT_FORK=1`.
    pub fn forked_always(self) -> PythonExecutor {
        PythonExecutor {
            forking: Some(Forking::new(false)),
            ..self
        }
    }

    /// [`PythonExecutor::forked`] where `torch` is installed, unless
    /// `PREFLIGHT_FORK=0` says not to (`PREFLIGHT_FORK=1`:
    /// [`PythonExecutor::forked_always`], torch or not).
    pub fn forked_unless_told(self, torch: bool) -> PythonExecutor {
        match std::env::var_os(FORK_ENV) {
            Some(value) if value == "0" => self,
            Some(value) if value == "1" => self.forked_always(),
            _ if torch => self.forked(),
            _ => self,
        }
    }

    /// The python executor of a run on the machine `fingerprint`
    /// describes: forking its probes where torch is installed, unless
    /// `PREFLIGHT_FORK` says otherwise ([`PythonExecutor::forked_unless_told`]).
    pub fn for_machine(python: impl Into<PathBuf>, fingerprint: &Fingerprint) -> PythonExecutor {
        PythonExecutor::new(python).forked_unless_told(torch_installed(fingerprint))
    }

    /// How this executor makes its probes' children (what their cache keys
    /// say); a forked probe whose server was given up runs fresh, and its
    /// outcome says so.
    pub fn made(&self) -> Made {
        if self.forking.is_some() {
            Made::Forked
        } else {
            Made::Fresh
        }
    }

    /// Starts this executor's fork server now rather than with its first
    /// probe (whose timeout its start counts against), and waits until it
    /// is ready: for a caller that has time before its probes, and for
    /// tests about probes rather than about the server's start. Why probes
    /// will be fresh processes, when they will; `None` also when forking
    /// is off.
    pub fn start_fork_server(&self) -> Option<String> {
        self.forking
            .as_ref()
            .and_then(|forking| forking.start(self))
    }

    /// Why this executor's probes are fresh processes although forking is
    /// on (the server could not start, or its state went bad); `None` while
    /// they are forked, or when forking is off.
    pub fn fork_fallback(&self) -> Option<String> {
        self.forking.as_ref().and_then(Forking::fallback)
    }

    /// The child's command line, with the driver (and a library smoke) written into `dir`.
    pub(super) fn command(
        &self,
        dir: &Path,
        variant: &Path,
        device: &str,
        smoke: &SmokeSource,
    ) -> Result<ChildCommand, ProbeError> {
        let write = |name: &str, text: &str| {
            let path = dir.join(name);
            std::fs::write(&path, text)
                .map(|()| path.clone())
                .map_err(|source| ProbeError::Setup { path, source })
        };
        let absolute = |path: &Path| {
            std::path::absolute(path).map_err(|source| ProbeError::Path {
                path: path.to_path_buf(),
                source,
            })
        };
        self.write_driver(dir)?;
        let driver = dir.join(DRIVER_NAME);
        let mut args: Vec<OsString> = vec![
            "-B".into(),
            driver.into(),
            "--variant".into(),
            absolute(variant)?.into(),
            "--device".into(),
            device.into(),
        ];
        match smoke {
            SmokeSource::File(file) => {
                args.extend(["--smoke".into(), absolute(file)?.into()]);
            }
            SmokeSource::Library(entry) => {
                let file = write(SMOKE_NAME, entry.source())?;
                args.extend(["--smoke".into(), file.into()]);
                args.extend(["--smoke-kind".into(), "library".into()]);
            }
            SmokeSource::Benchmarks { dir, repo } => {
                args.extend(["--benchmarks".into(), absolute(dir)?.into()]);
                args.extend(["--repo".into(), absolute(repo)?.into()]);
            }
            SmokeSource::LoadOnly => {}
        }
        if let Some(verdicts) = self.verdicts.get() {
            let path = dir.join(VERDICTS_NAME);
            std::fs::write(&path, verdicts).map_err(|source| ProbeError::Setup {
                path: path.clone(),
                source,
            })?;
            args.extend(["--verdicts".into(), path.into()]);
        }
        Ok(self.child(dir, args))
    }

    /// Writes the driver and its files into `dir`.
    pub(super) fn write_driver(&self, dir: &Path) -> Result<(), ProbeError> {
        for (name, text) in DRIVER_FILES {
            let path = dir.join(name);
            std::fs::write(&path, text).map_err(|source| ProbeError::Setup { path, source })?;
        }
        Ok(())
    }

    /// The interpreter with `args`, in the environment every child of this
    /// executor gets (the judge's too: its verdicts hold for the probes only
    /// because it sees what they see).
    pub(super) fn child(&self, dir: &Path, args: Vec<OsString>) -> ChildCommand {
        let mut env: Vec<(OsString, OsString)> = vec![
            (CHANNEL_ENV.into(), dir.join(CHANNEL_NAME).into()),
            ("PYTHONDONTWRITEBYTECODE".into(), "1".into()),
            ("PYTHONUNBUFFERED".into(), "1".into()),
            // The probe imports the variant as plain `kernels` does: a
            // kernel that loads another kernel while it is imported must
            // not start a verification of its own inside the sandbox.
            (KERNEL_PREFLIGHT_ENV.into(), "0".into()),
        ];
        env.extend(self.env.iter().cloned());
        ChildCommand {
            program: self.python.clone(),
            args,
            env,
        }
    }
}

/// Whether the interpreter `fingerprint` describes has torch installed.
fn torch_installed(fingerprint: &Fingerprint) -> bool {
    fingerprint
        .python
        .as_ref()
        .is_some_and(|p| p.packages.get("torch").is_some_and(Option::is_some))
}

/// The torch device string for a variant placed on `placement` (`cuda`,
/// `cuda:1`, `cpu`, `auto`): what its child is told to run on.
pub fn torch_device(name: &VariantName, placement: Placement) -> String {
    let own = device_for(name);
    match placement {
        Placement::Default => own.to_owned(),
        Placement::Cpu => "cpu".to_owned(),
        Placement::Ordinal(_) if own == "cpu" || own == "auto" => own.to_owned(),
        Placement::Ordinal(n) => format!("{own}:{n}"),
    }
}

impl Executor for PythonExecutor {
    fn kind(&self) -> ExecutorKind {
        ExecutorKind::Python
    }

    /// Hub variants, imported the way the hub loader imports them.
    fn accepts(&self, subject: &Subject) -> bool {
        matches!(subject, Subject::Variant { .. })
    }

    fn code_identity(&self) -> &'static str {
        super::python_code_identity()
    }

    fn made(&self) -> Made {
        PythonExecutor::made(self)
    }

    fn bench(&self) -> Option<&dyn BenchExecutor> {
        Some(self)
    }

    /// A copy that keeps the verdicts a judge leaves for this run's probes
    /// ([`PythonExecutor::judging`]).
    fn for_run(&self) -> Option<Arc<dyn Executor>> {
        Some(Arc::new(self.judging()))
    }

    /// One child to judge the hub's acceptance of the pending hub variants
    /// ([`PythonExecutor::judge_ahead`]), when some of their probes start
    /// after the first `parallel`: those replay its verdicts instead of
    /// importing the hub's validators again; the first ones, and any it
    /// leaves out, judge themselves.
    fn ahead<'a>(&'a self, pending: &[&'a Job], parallel: usize) -> Option<Ahead<'a>> {
        // The run offers this executor only the jobs it accepts: variants.
        let paths: Vec<PathBuf> = pending
            .iter()
            .filter_map(|job| match &job.subject {
                Subject::Variant { path, .. } => Some(path.clone()),
                _ => None,
            })
            .collect();
        if paths.len() <= parallel.max(1) {
            return None;
        }
        let limits = pending.first()?.limits.clone();
        Some(Box::new(move |cancel: &Cancel| {
            let _ = self.judge_ahead(&paths, &limits, cancel);
        }))
    }

    fn after_run(&self) -> Option<String> {
        self.fork_fallback().map(|why| {
            format!(
                "probes ran as fresh processes, not forked: {}",
                crate::text::printable_line(&why)
            )
        })
    }

    fn run(&self, job: &Job, cancel: &Cancel) -> Result<Evidence, ProbeError> {
        let Subject::Variant { name, path } = &job.subject else {
            return Err(ProbeError::Unsupported {
                executor: self.kind(),
                subject: job.subject.describe(),
            });
        };
        let Some(forking) = &self.forking else {
            return self.probe(job, name, path, None, cancel);
        };
        // The server's start counts against the probe's timeout.
        let asked = std::time::Instant::now();
        let ticket = forking.ticket(self, job.limits.timeout);
        let Some(ticket) = ticket else {
            return self.probe(job, name, path, None, cancel);
        };
        let mut forked_job = job.clone();
        forked_job.limits.timeout = job.limits.timeout.saturating_sub(asked.elapsed());
        let id = ticket.id;
        let evidence = self.probe(&forked_job, name, path, Some(ticket), cancel)?;
        if cancel.is_cancelled() {
            // Stopped: nothing is probed again, so what the server did
            // with the request is not waited for.
            return Ok(evidence);
        }
        match forking.answer(id) {
            Some(fork::Answer::Refused(why)) => {
                // No probe ran: the server refused (or could not join the
                // sandbox). Every later probe, this one too, is fresh.
                forking.refuse(why);
                self.probe(job, name, path, None, cancel)
            }
            // Forked, or the request never reached the server (the run
            // ended first): the run's end is the evidence.
            Some(fork::Answer::Forked) | None => Ok(evidence),
        }
    }
}

impl PythonExecutor {
    /// One probe, forked from the server `ticket` reaches, else fresh.
    fn probe(
        &self,
        job: &Job,
        name: &VariantName,
        path: &Path,
        ticket: Option<fork::Ticket>,
        cancel: &Cancel,
    ) -> Result<Evidence, ProbeError> {
        let smoke = if job.depth >= Depth::Smoke {
            &job.smoke
        } else {
            &SmokeSource::LoadOnly
        };
        let mut sandbox = super::kernel_sandbox(job.subject.protected())?;
        if let SmokeSource::File(file) = smoke {
            sandbox = sandbox.read_only(file);
        }
        let device = torch_device(name, job.device);
        let mut command = self.command(sandbox.dir(), path, &device, smoke)?;
        let launch = match ticket {
            Some(ticket) => {
                command.args = fork::client_args(sandbox.dir(), &command.args)?;
                // The socket to the server is the client's stdin; the
                // client hands its place to the probe it gets.
                sandbox = sandbox.with_stdin(ticket.client).with_handoff();
                Made::Forked
            }
            None => Made::Fresh,
        };
        // Once the child reported `done` its evidence is complete; what it
        // does after (an interpreter that will not exit) is a fact too.
        let view = sandbox.view();
        let mut tail = Tail::default();
        let mut done = || {
            tail.lines(&view.path(CHANNEL_NAME))
                .iter()
                .any(|line| matches!(serde_json::from_str(line), Ok(Event::Done { .. })))
        };
        let run = sandbox.run_until(&command, &job.limits, cancel, &mut done)?;
        Ok(super::evidence(
            self.kind(),
            run,
            &sandbox.dir().join(CHANNEL_NAME),
            launch,
        ))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ordinals_apply_to_devices_that_have_them() {
        let name = |n: &str| VariantName::parse(n).unwrap();
        let cu = name("torch28-cxx11-cu128-x86_64-linux");
        assert_eq!(torch_device(&cu, Placement::Default), "cuda");
        assert_eq!(torch_device(&cu, Placement::Ordinal(1)), "cuda:1");
        assert_eq!(torch_device(&cu, Placement::Cpu), "cpu");
        let universal = name("torch-universal");
        assert_eq!(torch_device(&universal, Placement::Ordinal(1)), "auto");
    }
}
