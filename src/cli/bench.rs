//! `preflight bench`

use super::probing::{EventsArgs, ProbeArgs, Watchers};
use super::{Answer, BadInput, Failure, Internal, emit, emit_json};
use kernel_preflight::bench::{BenchError, BenchOptions, Benched};
use kernel_preflight::discover::native::{MANIFEST, is_native_target};
use kernel_preflight::discover::{self, Named};
use kernel_preflight::report::bench as render;
use kernel_preflight::report::progress::Bars;
use kernel_preflight::sandbox;
use kernel_preflight::stats::StopCriteria;
use std::path::PathBuf;

/// How `bench` prints its report.
#[derive(clap::ValueEnum, Clone, Copy, Debug, PartialEq, Eq)]
enum Format {
    /// A table for people, fastest first, with a bar per variant.
    Table,
    /// A GitHub markdown table, for a PR or a model card.
    Markdown,
    /// Every summary, the fingerprint and the job identities.
    Json,
}

/// Arguments of `preflight bench`.
#[derive(clap::Args)]
#[command(after_help = "\
A hub kernel (TARGET or --repo): its variants that pass are timed side by side.
Native targets (directories with a preflight.toml): each one is timed as a
whole — every launch of every module in each sample — and several given
together are compared side by side, e.g. one kernel built -O3 and -G:
  preflight bench build-o3 build-debug")]
pub struct Args {
    /// A kernel repo, directory of variants, or hub cache folder; or one or
    /// more native targets (directories with a preflight.toml), compared
    /// with each other.
    #[arg(
        value_name = "TARGET",
        required_unless_present = "repo",
        conflicts_with = "repo"
    )]
    targets: Vec<PathBuf>,
    #[command(flatten)]
    repo: super::repo::RepoArgs,
    /// Time only these variants (comma-separated names; hub kernels).
    #[arg(long, value_delimiter = ',', value_name = "A,B")]
    variants: Option<Vec<String>>,
    /// The workload of the repo's benchmarks/benchmark*.py to time
    /// (`benchmark_<W>`; default: the smallest of the first class; hub
    /// kernels).
    #[arg(long, value_name = "W")]
    workload: Option<String>,
    /// Stop a variant once its relative noise (stdev / mean) is below PCT percent.
    #[arg(long, default_value_t = 0.5, value_name = "PCT")]
    max_noise: f64,
    /// Samples each variant takes at least.
    #[arg(long, default_value_t = 10, value_name = "N")]
    min_samples: usize,
    /// Seconds each variant is timed at least.
    #[arg(long, default_value_t = 0.5, value_name = "S")]
    min_time: f64,
    /// Seconds each variant is timed at most, whatever its noise.
    #[arg(long, default_value_t = 30.0, value_name = "S")]
    timeout: f64,
    /// Do not flush the L2 cache before each sample on a GPU.
    #[arg(long)]
    no_flush: bool,
    /// Time variants that run on the host by their process's CPU time
    /// instead of the wall clock: the time other processes get cannot
    /// lengthen it (contention for the core itself, a busy sibling
    /// hyperthread, still can), but it adds up every thread, so a
    /// multi-threaded kernel looks slower than it is. Device events are
    /// kept on a GPU.
    #[arg(long)]
    cpu_time: bool,
    /// Print JSON (the same as --format json).
    #[arg(long, conflicts_with = "format")]
    json: bool,
    /// How to print the report.
    #[arg(long, value_enum, value_name = "F")]
    format: Option<Format>,
    /// Also draw the bench as a chart in FILE (SVG, for a browser, a
    /// README or a pull request): each timed variant's samples, median and
    /// interval against the fastest with its verdict, the variants not
    /// timed with their outcome, and what was timed where.
    #[arg(long, value_name = "FILE.svg")]
    plot: Option<PathBuf>,
    /// Probes at the same time before the bench (the bench itself times
    /// one variant at a time).
    #[arg(long, value_parser = clap::value_parser!(u32).range(1..=256))]
    jobs: Option<u32>,
    /// Seconds each probe, and each bench child's import and warm-up, may take.
    #[arg(long, default_value_t = 60.0, value_name = "S")]
    probe_timeout: f64,
    /// The Python interpreter (default: as for the fingerprint).
    #[arg(long, value_name = "P")]
    python: Option<PathBuf>,
    /// Smoke file with `def smoke(kernel, device)` to time, instead of the
    /// repo's benchmarks (hub kernels).
    #[arg(long, value_name = "FILE")]
    smoke: Option<PathBuf>,
    /// Time preflight's library smoke written for the hub kernel ORG/NAME
    /// (a fork of it, a local checkout), instead of the repo's benchmarks.
    #[arg(long, value_name = "ORG/NAME", conflicts_with = "smoke")]
    smoke_as: Option<String>,
    /// Probe every variant again, and keep no outcome and no bench result.
    #[arg(long)]
    no_cache: bool,
    /// The fleet's remote outcome store, a redis:// URL (user, password, host, port, db),
    /// over PREFLIGHT_REMOTE (docs/fleet.md).
    #[arg(long, value_name = "URL")]
    remote: Option<String>,
    #[command(flatten)]
    events: EventsArgs,
}

impl Args {
    fn criteria(&self) -> Result<StopCriteria, Failure> {
        if !(self.max_noise.is_finite() && self.max_noise > 0.0 && self.max_noise < 100.0) {
            return Err(BadInput(format!(
                "--max-noise {}: expected a percentage above 0 and below 100",
                self.max_noise
            )));
        }
        if self.min_samples < 2 {
            return Err(BadInput(format!(
                "--min-samples {}: expected at least 2",
                self.min_samples
            )));
        }
        let (min_time, timeout) = (
            super::probing::seconds("min-time", self.min_time)?,
            super::probing::seconds("timeout", self.timeout)?,
        );
        if min_time > timeout {
            return Err(BadInput(format!(
                "--min-time {} is longer than --timeout {}",
                self.min_time, self.timeout
            )));
        }
        Ok(StopCriteria {
            min_samples: self.min_samples,
            min_time,
            max_noise: self.max_noise / 100.0,
            timeout,
        })
    }
}

pub fn run(args: Args) -> Result<Answer, Failure> {
    let criteria = args.criteria()?;
    if let Some(plot) = &args.plot {
        super::output::writable("--plot", plot, Some("svg"))?;
    }
    let format = match (args.json, args.format) {
        (true, _) => Format::Json,
        (false, f) => f.unwrap_or(Format::Table),
    };
    let probing = ProbeArgs {
        jobs: args.jobs,
        timeout: args.probe_timeout,
        grace: 5.0,
        python: args.python.clone(),
        smoke: args.smoke.clone(),
        smoke_as: args.smoke_as.clone(),
        no_cache: args.no_cache,
        remote: args.remote.clone(),
    }
    .validate()?;
    let targets = targets(&args)?;
    let options = BenchOptions {
        workload: args.workload.clone(),
        variants: args.variants.clone(),
        criteria,
        flush_l2: !args.no_flush,
        seed: 0x5eed,
        cpu_time: args.cpu_time,
    };
    let Benched { bench, .. } = Watchers::new(Bars::Probes, &args.events)?.watch(|listener| {
        probing.session().fingerprint()?;
        let cancel = sandbox::install_interrupt_handler();
        let benched = probing
            .session()
            .bench(targets, &options, &cancel, listener);
        let started = matches!(&benched, Ok(Benched { bench: Some(_), .. }));
        super::exit_if_interrupted(
            &cancel,
            if started {
                "every bench child was stopped; nothing was kept"
            } else {
                probing.interrupted()
            },
        );
        Ok(benched?)
    })?;
    // Not interrupted (that exited): the bench ran.
    let report = bench.ok_or_else(|| Internal("the bench did not run".into()))?;
    let timed = report.any_timed();
    if !timed {
        // Like `select`: a "no" (exit 1), said on stderr; the report
        // below gives each variant's reason.
        eprintln!("preflight: no variant passes here, so none was timed (see `preflight check`)");
    }
    if let Some(plot) = &args.plot {
        super::output::write(plot, &kernel_preflight::report::bench_chart::svg(&report))?;
    }
    match format {
        Format::Json => emit_json(&report),
        Format::Markdown => emit(&render::markdown(&report)),
        Format::Table => emit(&render::table(&report, width())),
    }
    Ok(if timed { Answer::Yes } else { Answer::No })
}

/// A bench's failure as the command line reports it.
impl From<BenchError> for Failure {
    fn from(e: BenchError) -> Self {
        match e {
            BenchError::Session(e) => e.into(),
            e if e.is_bad_input() => BadInput(e.to_string()),
            e => Internal(e.to_string()),
        }
    }
}

/// What to bench: one hub kernel (a TARGET or `--repo`), or one or more
/// native targets; several TARGETs must all be native.
fn targets(args: &Args) -> Result<Vec<Named>, Failure> {
    let [_, _, ..] = args.targets.as_slice() else {
        let one = super::repo::one_kernel(
            args.targets.first().map(PathBuf::as_path),
            &args.repo,
            "bench",
        )?;
        return Ok(vec![one]);
    };
    let mut named = Vec::with_capacity(args.targets.len());
    for path in &args.targets {
        let absolute =
            std::path::absolute(path).map_err(|e| BadInput(format!("{}: {e}", path.display())))?;
        if !is_native_target(&absolute) {
            return Err(BadInput(format!(
                "{}: not a native target (no {MANIFEST}); bench takes several TARGETs only when each is a native target — a hub kernel's variants are compared within one TARGET",
                path.display()
            )));
        }
        named.push(Named {
            given: path.display().to_string(),
            target: discover::discover(&absolute)?,
        });
    }
    Ok(named)
}

/// The width to fit: the terminal's (see `report::grid::terminal_width`);
/// into a pipe, a file or a terminal of unknown size, wide enough that no
/// cell wraps.
fn width() -> usize {
    kernel_preflight::report::grid::width().map_or(200, usize::from)
}
