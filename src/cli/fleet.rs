//! `preflight fleet ls|diff|report`

use super::{Answer, BadInput, Failure, emit, emit_json};
use kernel_preflight::cache::Cache;
use kernel_preflight::report;
use kernel_preflight::run::fleet::DiffOptions;
use kernel_preflight::run::{Session, SessionOptions};
use std::path::PathBuf;

/// Arguments of `preflight fleet`.
#[derive(clap::Args)]
pub struct Args {
    #[command(subcommand)]
    action: Action,
    /// Print JSON instead of text.
    #[arg(long, global = true)]
    json: bool,
    /// The fleet's remote store (default: PREFLIGHT_REMOTE).
    #[arg(long, global = true, value_name = "URL")]
    remote: Option<String>,
}

#[derive(clap::Subcommand)]
enum Action {
    /// Per machine class, per kernel and version: the variant chosen and
    /// every variant's outcome, from the remote store.
    Ls,
    /// The verdicts and the facts that differ between two machine classes.
    Diff {
        /// The first class: its hash as `fleet ls` prints it (a unique
        /// prefix is enough).
        a: String,
        /// The second class.
        b: String,
    },
    /// The fleet as one self-contained HTML page: kernels against machine
    /// classes, the variant each chooses, every verdict and difference.
    Report {
        /// The page to write (opens offline, reads without script).
        #[arg(long, value_name = "FILE.html")]
        html: PathBuf,
    },
}

pub fn run(args: Args) -> Result<Answer, Failure> {
    if let Action::Report { html } = &args.action {
        if args.json {
            return Err(BadInput(
                "fleet report writes an HTML page (--html FILE); --json is for fleet ls and fleet diff"
                    .into(),
            ));
        }
        super::output::writable("--html", html, Some("html"))?;
    }
    let remote = super::probing::remote(args.remote.as_deref())?.ok_or_else(|| {
        BadInput("fleet: no remote store (set PREFLIGHT_REMOTE or give --remote URL)".into())
    })?;
    let options = SessionOptions {
        remote: Some(remote),
        ..SessionOptions::default()
    };
    let session = Session::new(options, Cache::from_env());
    match args.action {
        Action::Ls => {
            let fleet = session.fleet()?;
            if args.json {
                emit_json(&fleet);
            } else {
                emit(&report::fleet::list(&fleet));
            }
        }
        Action::Report { html } => {
            let fleet = session.fleet()?;
            let now = report::labels::rfc3339(std::time::SystemTime::now());
            super::output::write(&html, &report::fleet_page::html(&fleet, &now))?;
            eprintln!(
                "preflight: wrote {} ({} × {})",
                html.display(),
                report::count(fleet.classes.len(), "machine class|machine classes"),
                report::count(fleet.kernels().len(), "kernel")
            );
        }
        Action::Diff { a, b } => {
            let diff = session.fleet_diff(DiffOptions { a, b })?;
            if args.json {
                emit_json(&diff);
            } else {
                emit(&report::fleet::diff(&diff));
            }
        }
    }
    Ok(Answer::Yes)
}
