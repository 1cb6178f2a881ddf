//! `preflight resolve`

use super::{Answer, BadInput, Failure, emit, emit_json};
use kernel_preflight::declared::{self, System};
use kernel_preflight::discover;
use kernel_preflight::report;
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
    /// torch, cxx11, tvm-ffi, macos (e.g. backend=cuda,cuda=12.8,torch=2.9).
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
    let discovery = match (&args.target, &args.variants, repo) {
        (Some(path), _, _) => Some(hub_only(path)?),
        (_, _, Some(repo)) => Some(super::repo::discover_repo(repo, &args.repo.spec())?),
        (None, Some(_), None) => None,
        (None, None, None) => {
            return Err(BadInput(
                "resolve needs a TARGET directory, --variants A,B,… or --repo ORG/NAME".into(),
            ));
        }
    };
    let names: Vec<VariantName> = match (&discovery, &args.variants) {
        (Some(d), _) => d.variants.iter().map(|v| v.name.clone()).collect(),
        (None, Some(list)) => list
            .iter()
            .map(|s| VariantName::parse(s.trim()))
            .collect::<Result<_, _>>()?,
        (None, None) => Vec::new(),
    };
    let system = system(&args)?;
    let decisions = declared::resolve(&names, &system);
    let accepted = decisions.iter().any(|d| d.accepted());
    if let Some(d) = &discovery {
        for warning in &d.warnings {
            eprintln!("preflight: warning: {warning}");
        }
    }
    if args.json {
        emit_json(&report::resolve::json(
            &decisions,
            discovery.as_ref(),
            &system,
        ));
    } else {
        emit(&report::resolve::table(
            &decisions,
            discovery.as_ref(),
            &system,
        ));
    }
    Ok(if accepted { Answer::Yes } else { Answer::No })
}

fn system(args: &Args) -> Result<System, Failure> {
    let spec = args.system.as_deref().unwrap_or("");
    // Parse first, so that a bad --system is reported before anything is detected.
    System::bare_host().with_overrides(spec)?;
    let detected = if covers_detected_facts(spec) {
        System::bare_host()
    } else {
        System::from_fingerprint(&super::fingerprint::full(args.python.clone(), Vec::new())?)
    };
    Ok(detected.with_overrides(spec)?)
}

/// Whether `--system` pins every fact the environment could tell, so that
/// fingerprinting the machine would be wasted time.
fn covers_detected_facts(spec: &str) -> bool {
    let keys: Vec<&str> = spec
        .split(',')
        .filter_map(|kv| kv.split_once('=').map(|(k, _)| k.trim()))
        .collect();
    ["backend", "torch", "cxx11", "tvm-ffi"]
        .iter()
        .all(|k| keys.contains(k))
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
