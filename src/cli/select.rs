//! `preflight select`

use super::probing::{ProbeArgs, Watchers};
use super::{Answer, BadInput, Failure, print};
use kernel_preflight::discover;
use kernel_preflight::report::progress::Bars;
use kernel_preflight::report::select;
use kernel_preflight::run::select::{Names, Rank, SelectOptions, Wanted};
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
            if discover::native::is_native_target(&absolute) {
                // Discovered first: a broken preflight.toml says so.
                discover::discover(&absolute)?;
                // A native target's modules are all needed, not
                // alternatives to pick one from.
                return Err(BadInput(format!(
                    "{} is a native target (preflight.toml): select picks one variant of a hub kernel, \
                     and a native target's modules are all needed, not alternatives; \
                     use `preflight check {0}` or `preflight warmup {0}`",
                    path.display()
                )));
            }
            (path.display().to_string(), discover::locate_hub(&absolute)?)
        }
        (None, Some(repo)) => (
            repo.to_string(),
            super::repo::locate_repo(repo, &args.repo.spec())?,
        ),
        (None, None) => return Err(BadInput("select needs a TARGET or --repo ORG/NAME".into())),
    };
    let options = SelectOptions {
        rank: if args.fastest {
            Rank::Fastest
        } else {
            Rank::Preference
        },
        names: if args.overrule_names {
            Names::Overruled
        } else {
            Names::Decide
        },
        workload: args.workload,
        wanted: if args.json {
            Wanted::Selection
        } else {
            Wanted::Path
        },
    };
    // A user whose warmup measured another environment: say where its
    // verdicts are before this one is measured.
    if let Some(note) = kernel_preflight::labels::unmeasured_here(probing.session())? {
        eprintln!("preflight: {note} (select measures this one now)");
    }
    let selected = Watchers::new(Bars::Probes, &Default::default())?.watch(|listener| {
        probing.interruptible(|session, cancel| {
            session.select(given, located, &options, cancel, listener)
        })
    })?;
    print(&select::printed(&selected, args.json));
    Ok(if selected.found() {
        Answer::Yes
    } else {
        Answer::No
    })
}
