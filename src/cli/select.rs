//! `preflight select`

use super::probing::{ProbeArgs, Progress};
use super::{Answer, BadInput, Failure, emit, emit_json};
use kernel_preflight::discover::{self, Named, Target};
use kernel_preflight::report::select;
use kernel_preflight::run::select::{Names, Rank, Selection};
use std::path::PathBuf;

/// Arguments of `preflight select`.
#[derive(clap::Args)]
pub struct Args {
    /// Kernel repo, directory of variants, or hub cache folder.
    #[arg(required_unless_present = "repo", conflicts_with = "repo")]
    target: Option<PathBuf>,
    #[command(flatten)]
    repo: super::repo::RepoArgs,
    /// Pick the variant with the shortest bench median kept for this
    /// machine (`preflight bench`), saying when the top two are ambiguous;
    /// without bench results, the shortest smoke call (one cold call, not a
    /// speed), said on stderr.
    #[arg(long)]
    fastest: bool,
    /// With --fastest: rank by the bench results kept for workload W
    /// (`preflight bench --workload W`) instead of those of a bench run
    /// without --workload.
    #[arg(long, value_name = "W", requires = "fastest")]
    workload: Option<String>,
    /// Let evidence overrule names: when no variant the hub accepts by name
    /// works, choose one it rejects by name whose smoke workload ran here
    /// (depth smoke or deeper). Said on stderr and in the JSON.
    #[arg(long)]
    overrule_names: bool,
    /// Print JSON: the choice, its outcome, and every alternative.
    #[arg(long)]
    json: bool,
    #[command(flatten)]
    probing: ProbeArgs,
}

pub fn run(args: Args) -> Result<Answer, Failure> {
    let probing = args.probing.validate()?;
    let (given, located) = match (&args.target, args.repo.single("select")?) {
        // Absolute, so that the printed path can be loaded from anywhere.
        (Some(path), _) => {
            let absolute = std::path::absolute(path)
                .map_err(|e| BadInput(format!("{}: {e}", path.display())))?;
            let located = if discover::native::is_native_target(&absolute) {
                Err(discover::discover(&absolute)?)
            } else {
                Ok(discover::locate_hub(&absolute)?)
            };
            (path.display().to_string(), located)
        }
        (None, Some(repo)) => (
            repo.to_string(),
            Ok(super::repo::locate_repo(repo, &args.repo.spec())?),
        ),
        (None, None) => return Err(BadInput("select needs a TARGET or --repo ORG/NAME".into())),
    };
    // The plain question (the hub's preference, names decide, a path
    // printed) is answered by the target's warm record when it holds. A
    // single variant has its directory's folder as its root, which a record
    // of the whole folder is keyed by: it is planned as usual.
    let warm = !args.json && !args.fastest && !args.overrule_names;
    let mut before = None;
    if let (true, Ok(located)) = (warm, &located)
        && located.kind != discover::TargetKind::Variant
    {
        if let Some(answer) = super::warm::select(&probing, &located.root) {
            emit(&answer.display().to_string());
            return Ok(Answer::Yes);
        }
        before = Some(kernel_preflight::run::warm::Before::take(&located.root));
    }
    let named = Named {
        given,
        target: match located {
            Ok(located) => Target::Hub(located.list()?),
            Err(native) => native,
        },
    };
    if let Target::Native(_) = named.target {
        // A native target's modules are all needed, not alternatives to
        // pick one from.
        return Err(BadInput(format!(
            "{} is a native target (preflight.toml): select picks one variant of a hub kernel, \
             and a native target's modules are all needed, not alternatives; \
             use `preflight check {0}` or `preflight warmup {0}`",
            named.given
        )));
    }
    let progress = Progress::new();
    let (plan, report) = probing.run(vec![named], false, false, &progress)?;
    progress.finish();
    if let Some(before) = &before {
        super::warm::remember(&probing, &plan, &report, before);
    }
    let rank = if args.fastest {
        Rank::Fastest
    } else {
        Rank::Preference
    };
    let names = if args.overrule_names {
        Names::Overruled
    } else {
        Names::Decide
    };
    let selection = Selection::of_run(&plan, &report, rank, names, args.workload.as_deref());
    for note in select::notes(&selection) {
        eprintln!("{note}");
    }
    let found = selection.path.is_some();
    if args.json {
        emit_json(&selection);
    } else if let Some(path) = selection.path {
        emit(path);
    } else {
        eprintln!("{}", select::none_works(&report, &plan));
    }
    Ok(if found { Answer::Yes } else { Answer::No })
}
