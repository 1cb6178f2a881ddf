//! `preflight doctor`

use super::{Answer, BadInput, Failure, Internal, emit, emit_json};
use kernel_preflight::cache::Cache;
use kernel_preflight::doctor::{self, DoctorOptions, health};
use kernel_preflight::fingerprint::{Fingerprint, Sources};
use kernel_preflight::probe::cuda::CudaExecutor;
use kernel_preflight::report;
use kernel_preflight::sandbox::{self, Limits};
use std::path::PathBuf;
use std::time::Duration;

/// Arguments of `preflight doctor`.
#[derive(clap::Args)]
pub struct Args {
    /// Python interpreter for the torch / Triton / CuTe-DSL probes
    /// (default: as the fingerprint finds it: VIRTUAL_ENV, CONDA_PREFIX,
    /// python3 on PATH).
    #[arg(long, value_name = "P")]
    python: Option<PathBuf>,
    /// Seconds each probe may run before it is stopped.
    #[arg(long, default_value_t = 120.0, value_name = "S")]
    timeout: f64,
    /// Print JSON instead of a table.
    #[arg(long)]
    json: bool,
    /// One line and an exit status for a health check (Slurm's
    /// HealthCheckProgram, a liveness probe): 0 when the node's devices
    /// work, 1 naming the fault when not (no device where one is
    /// expected, a device that fails its probe, a driver older than the
    /// toolkits and torch need).
    #[arg(long)]
    health: bool,
    /// With --health: the NVIDIA GPUs the node must have (default: those
    /// on its PCI bus that CUDA may use).
    #[arg(long, value_name = "N", requires = "health")]
    expect_gpus: Option<usize>,
}

pub fn run(args: Args) -> Result<Answer, Failure> {
    let timeout = Duration::try_from_secs_f64(args.timeout)
        .ok()
        .filter(|d| !d.is_zero())
        .ok_or_else(|| {
            BadInput(format!(
                "--timeout {}: expected a positive number of seconds",
                args.timeout
            ))
        })?;
    let mut sources = Sources::from_process();
    sources.python = args.python.clone();
    let fingerprint = Fingerprint::fast(&sources, &Cache::from_env())?;
    let toolkits = &fingerprint.toolkits;
    let nvcc = toolkits
        .found
        .iter()
        .find(|t| Some(&t.root) == toolkits.active.as_ref())
        .and_then(|t| Some((t.nvcc.clone()?, t.version.clone())));
    let limits = Limits {
        timeout,
        ..Limits::default()
    };
    let executor = CudaExecutor::for_machine(&fingerprint)
        .map_err(|e| Internal(format!("cannot find the preflight binary: {e}")))?;
    let options = DoctorOptions {
        executor,
        cuda_limits: limits.clone(),
        nvcc,
        python: fingerprint.python.as_ref().map(|p| p.interpreter.clone()),
        python_limits: limits.clone(),
        nvcc_limits: limits,
    };
    let cancel = sandbox::install_interrupt_handler();
    if args.health {
        let expect = health::Expectation::of(&fingerprint, args.expect_gpus);
        let answer = health::check(&options, &expect, &cancel);
        super::exit_if_interrupted(&cancel, "the health check was stopped");
        if args.json {
            emit_json(&answer);
        } else {
            emit(&answer.line());
        }
        return match answer {
            health::Health::Healthy { .. } => Ok(Answer::Yes),
            health::Health::Fault { .. } => Ok(Answer::No),
            health::Health::Unchecked { message } => Err(Internal(message)),
        };
    }
    let report = doctor::run(&options, &cancel, &|_| {});
    super::exit_if_interrupted(&cancel, "every probe was stopped");
    if args.json {
        emit_json(&report);
    } else {
        emit(&report::doctor::table(&report));
    }
    Ok(if report.any_failure() {
        Answer::No
    } else {
        Answer::Yes
    })
}
