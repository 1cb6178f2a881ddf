//! `preflight resolve`

use super::{Answer, BadInput, Failure, emit, emit_json};
use kernel_preflight::cache::Cache;
use kernel_preflight::discover;
use kernel_preflight::report;
use kernel_preflight::run::resolve::Resolving;
use kernel_preflight::run::{Session, SessionOptions};
use kernel_preflight::variant::VariantName;
use std::path::PathBuf;

/// Arguments of `preflight resolve`.
#[derive(clap::Args)]
pub struct Args {
    /// Kernel repo, variant directory, or hub cache folder.
    #[arg(conflicts_with_all = ["variants", "repo"])]
    target: Option<PathBuf>,
    /// Judge these variant names instead of a directory.
    #[arg(long, value_delimiter = ',', conflicts_with = "repo")]
    variants: Option<Vec<String>>,
    #[command(flatten)]
    repo: super::repo::RepoArgs,
    /// Override detected facts: backend, cuda, rocm, xpu, cann, cpu, os,
    /// torch, cxx11, tvm-ffi, macos, python, free-threaded, mlx, kernels
    /// (e.g. backend=cuda,cuda=12.8,torch=2.9,python=3.12,kernels=0.18.3).
    #[arg(long, value_name = "K=V,…")]
    system: Option<String>,
    /// The Python environment kernels load into (default: $VIRTUAL_ENV,
    /// $CONDA_PREFIX, python3 on PATH).
    #[arg(long)]
    python: Option<PathBuf>,
    /// Print JSON instead of a table.
    #[arg(long)]
    json: bool,
}

pub fn run(args: Args) -> Result<Answer, Failure> {
    let repo = args.repo.single("resolve")?;
    let what = match (&args.target, &args.variants, repo) {
        (Some(path), _, _) => Resolving::Discovered(hub_only(path)?),
        (_, _, Some(repo)) => {
            Resolving::Discovered(super::repo::discover_repo(repo, &args.repo.spec())?)
        }
        (None, Some(list), None) => Resolving::Names(
            list.iter()
                .map(|s| VariantName::parse(s.trim()))
                .collect::<Result<_, _>>()?,
        ),
        (None, None, None) => {
            return Err(BadInput(
                "resolve needs a TARGET directory, --variants A,B,… or --repo ORG/NAME".into(),
            ));
        }
    };
    let options = SessionOptions {
        python: args.python,
        ..SessionOptions::default()
    };
    let resolved = Session::new(options, Cache::from_env())
        .resolve(what, args.system.as_deref().unwrap_or(""))?;
    for warning in resolved.discovery.iter().flat_map(|d| &d.warnings) {
        eprintln!("preflight: warning: {warning}");
    }
    let (decisions, discovery, system) = (
        &resolved.decisions,
        resolved.discovery.as_ref(),
        &resolved.system,
    );
    if args.json {
        emit_json(&report::resolve::json(decisions, discovery, system));
    } else {
        emit(&report::resolve::table(decisions, discovery, system));
    }
    Ok(if resolved.any_accepted() {
        Answer::Yes
    } else {
        Answer::No
    })
}

/// The variants behind `path`; a native target has none to resolve.
fn hub_only(path: &std::path::Path) -> Result<discover::Discovery, Failure> {
    match discover::discover(path)? {
        discover::Target::Hub(d) => Ok(d),
        discover::Target::Native(_) => Err(BadInput(format!(
            "{} is a native target (preflight.toml): resolve judges hub variants by name; \
             use `preflight check {0}` for its modules",
            path.display()
        ))),
    }
}
