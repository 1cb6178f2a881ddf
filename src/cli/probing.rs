//! Options shared by the commands that probe (`check`, `select`, `warmup`).

use super::{BadInput, Failure};
use kernel_preflight::cache::Cache;
use kernel_preflight::fingerprint::{Fingerprint, Sources};
use kernel_preflight::probe;
use kernel_preflight::run::CheckOptions;
use kernel_preflight::sandbox::Limits;
use std::io::IsTerminal;
use std::path::PathBuf;
use std::sync::Arc;
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

fn seconds(name: &str, value: f64) -> Result<Duration, Failure> {
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
            args: self,
        })
    }
}

impl Probing {
    /// The full fingerprint of this machine for the chosen interpreter
    /// (measured once, then cached).
    pub fn fingerprint(&self) -> Result<Fingerprint, Failure> {
        let mut sources = Sources::from_process();
        sources.python = self.python.clone();
        super::fingerprint::full(&sources, self.cache.as_ref())
    }

    /// Options for [`kernel_preflight::run::run`], for `probes` children.
    pub fn options(
        &self,
        fingerprint: &Fingerprint,
        probes: usize,
        all: bool,
    ) -> Result<CheckOptions, Failure> {
        let python = self
            .python
            .clone()
            .or_else(|| probe::find_python(&fingerprint.python.as_ref()?.interpreter))
            .ok_or_else(|| BadInput("no Python interpreter found: give --python P".into()))?;
        let cpus = std::thread::available_parallelism().map_or(1, usize::from);
        let jobs = match self.args.jobs {
            Some(n) => n as usize,
            None => probes.min(cpus).clamp(1, 4),
        };
        Ok(CheckOptions {
            python,
            smoke: self.args.smoke.clone(),
            all,
            jobs,
            limits: self.limits.clone(),
            judge: None,
            cache: (!self.args.no_cache).then(|| Arc::clone(&self.cache)),
        })
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
