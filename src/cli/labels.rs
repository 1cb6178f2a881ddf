//! `preflight labels`

use super::probing::seconds;
use super::{Answer, BadInput, Failure, emit};
use kernel_preflight::cache::Cache;
use kernel_preflight::discover::hub_cache::RevisionSpec;
use kernel_preflight::discover::project;
use kernel_preflight::labels::Selection;
use kernel_preflight::labels::name::{self, DEFAULT_PREFIX};
use kernel_preflight::probe;
use kernel_preflight::report::labels as render;
use kernel_preflight::run::{Session, SessionOptions};
use std::path::PathBuf;
use std::time::SystemTime;

/// What `labels` prints.
#[derive(clap::ValueEnum, Clone, Copy, Debug, PartialEq, Eq)]
enum Format {
    /// A Node Feature Discovery feature file (features.d).
    Nfd,
    /// Slurm features, one per line (the helpers plugin's helper).
    Slurm,
    /// The node's helpers.conf lines declaring those features.
    SlurmHelpers,
    /// A Ray labels file (`ray start --labels-file`).
    Ray,
    /// Every kernel's verdict, for machines.
    Json,
}

/// Arguments of `preflight labels`.
#[derive(clap::Args)]
pub struct Args {
    /// Label the kernels a `kernels.lock` pins (as `warmup --lock`).
    #[arg(long, value_name = "FILE")]
    lock: Vec<PathBuf>,
    /// Label the kernels of a project's pyproject.toml (as `warmup
    /// --project`).
    #[arg(long, value_name = "DIR")]
    project: Vec<PathBuf>,
    /// Output format.
    #[arg(long, value_enum, default_value = "json")]
    format: Format,
    /// Write to FILE atomically (readers see the old file or the new one)
    /// instead of stdout; its folder must exist and be writable.
    #[arg(long, value_name = "FILE")]
    output: Option<PathBuf>,
    /// Label prefix for nfd and ray: a DNS subdomain of your own.
    #[arg(long, default_value = DEFAULT_PREFIX, value_name = "DOMAIN")]
    prefix: String,
    /// Seconds the nfd labels hold without a refresh (`# +expiry-time`).
    #[arg(long, default_value_t = 3600.0, value_name = "S")]
    ttl: f64,
    /// The nfd labels expire no later than this many seconds after the
    /// oldest evidence they rest on.
    #[arg(long, value_name = "S")]
    max_age: Option<f64>,
    /// The helper program slurm-helpers names.
    #[arg(
        long,
        default_value = "/usr/local/sbin/preflight-features",
        value_name = "PATH"
    )]
    helper: PathBuf,
    /// The Python interpreter the verdicts were probed with (as given to
    /// `warmup --python`; default: as the fingerprint finds it).
    #[arg(long, value_name = "P")]
    python: Option<PathBuf>,
}

pub fn run(args: Args) -> Result<Answer, Failure> {
    name::check_prefix(&args.prefix).map_err(|e| BadInput(format!("--prefix: {e}")))?;
    let ttl = seconds("ttl", args.ttl)?;
    let max_age = args.max_age.map(|s| seconds("max-age", s)).transpose()?;
    if let Some(output) = &args.output {
        super::output::writable("--output", output, None)?;
    }
    let python =
        match &args.python {
            Some(p) => Some(probe::find_python(p).ok_or_else(|| {
                BadInput(format!("--python {}: no such interpreter", p.display()))
            })?),
            None => None,
        };
    let pins = project::pins(&[], &RevisionSpec::Main, &args.lock, &args.project)?;
    let selection = if args.lock.is_empty() && args.project.is_empty() {
        Selection::EveryCached
    } else {
        Selection::Pinned(pins.into_iter().map(|(_, pin)| pin).collect())
    };
    let session = Session::new(
        SessionOptions {
            python,
            ..SessionOptions::default()
        },
        Cache::from_env(),
    );
    let labels = session.labels(&selection)?;
    let text = match args.format {
        Format::Nfd => {
            let expiry = labels.expiry(SystemTime::now(), ttl, max_age);
            render::nfd(&labels, &args.prefix, expiry).map_err(|e| BadInput(e.to_string()))?
        }
        Format::Slurm => render::slurm(&labels),
        Format::SlurmHelpers => render::slurm_helpers(&labels, &args.helper),
        Format::Ray => render::ray(&labels, &args.prefix),
        Format::Json => serde_json::to_string_pretty(&labels).unwrap_or_default() + "\n",
    };
    for line in render::unknown_lines(&labels) {
        eprintln!("preflight: {line}");
    }
    match &args.output {
        Some(path) => super::output::write(path, &text)?,
        None if text.is_empty() => {}
        None => emit(&text),
    }
    Ok(Answer::Yes)
}
