//! `preflight inspect`

use super::{Answer, BadInput, Failure, emit, emit_json};
use kernel_preflight::declared::arch::{ComputeCapability, PtxIsa, driver_max_ptx_isa};
use kernel_preflight::declared::embedded;
use kernel_preflight::report::inspect::{InspectReport, table};
use std::path::PathBuf;

/// Arguments of `preflight inspect`.
#[derive(clap::Args)]
pub struct Args {
    /// Shared objects, cubins, fatbins, PTX files, or directories (every
    /// `.so`, `.cubin`, `.fatbin` and `.ptx` under them).
    #[arg(required = true, value_name = "FILE|DIR")]
    paths: Vec<PathBuf>,
    /// Judge the images against a GPU of this compute capability (e.g. 9.0,
    /// 10.3, 12.1); exit 1 when some file cannot run on it.
    #[arg(long, value_name = "X.Y")]
    gpu: Option<ComputeCapability>,
    /// Newest PTX ISA the driver's JIT accepts (e.g. 8.7 for driver 570);
    /// without it, PTX is assumed to be accepted.
    #[arg(long, value_name = "X.Y", requires = "gpu")]
    driver_ptx: Option<PtxIsa>,
    /// Linux driver version (e.g. 570.86.10): sets --driver-ptx from the
    /// CUDA release notes' driver table.
    #[arg(
        long,
        value_name = "VERSION",
        requires = "gpu",
        conflicts_with = "driver_ptx"
    )]
    driver: Option<String>,
    /// Print JSON instead of tables.
    #[arg(long)]
    json: bool,
}

pub fn run(args: Args) -> Result<Answer, Failure> {
    let driver_ptx = match &args.driver {
        None => args.driver_ptx,
        Some(version) => Some(driver_max_ptx_isa(version).ok_or_else(|| {
            BadInput(format!(
                "--driver {version:?}: not a driver version from 520.61.05 on (CUDA 11.8+); give --driver-ptx X.Y instead"
            ))
        })?),
    };
    let mut files = Vec::new();
    let mut empty_dirs = Vec::new();
    for path in &args.paths {
        let found = embedded::inspect_path(path)?;
        if found.is_empty() {
            empty_dirs.push(path.clone());
        }
        files.extend(found);
    }
    let report = InspectReport::new(&files, empty_dirs, args.gpu, driver_ptx);
    if args.json {
        emit_json(&report);
    } else {
        emit(&table(&report));
    }
    Ok(if report.all_runnable() {
        Answer::Yes
    } else {
        Answer::No
    })
}
