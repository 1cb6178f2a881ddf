//! `preflight doctor`

use super::{Answer, Failure, emit, emit_json};
use kernel_preflight::cache::Cache;
use kernel_preflight::doctor::health::Health;
use kernel_preflight::report;
use kernel_preflight::run::{Session, SessionOptions};
use kernel_preflight::sandbox;
use std::path::PathBuf;

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
    let timeout = super::probing::seconds("timeout", args.timeout)?;
    let options = SessionOptions {
        python: args.python,
        ..SessionOptions::default()
    };
    let session = Session::new(options, Cache::from_env());
    let cancel = sandbox::install_interrupt_handler();
    if args.health {
        let answer = session.health(timeout, args.expect_gpus, &cancel);
        super::exit_if_interrupted(&cancel, "the health check was stopped");
        let answer = answer?;
        if args.json {
            emit_json(&answer);
        } else {
            emit(&answer.line());
        }
        return match answer {
            Health::Healthy { .. } => Ok(Answer::Yes),
            Health::Fault { .. } => Ok(Answer::No),
            Health::Unchecked { message } => Err(Failure::Internal(message)),
        };
    }
    let report = session.doctor(timeout, &cancel);
    super::exit_if_interrupted(&cancel, "every probe was stopped");
    let report = report?;
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
