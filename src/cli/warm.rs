//! `select`'s warm path: the answer from the target's warm record
//! (`kernel_preflight::run::warm`), and the record kept after an ordinary
//! run.

use super::probing::Probing;
use kernel_preflight::run::warm::{self, Before};
use kernel_preflight::run::{CheckReport, Plan};
use std::path::{Path, PathBuf};

/// The variant a cold `select` would choose among the variants in `root`,
/// when the warm record says so and still holds; `None`: run as usual
/// (also when the fingerprint fails: the ordinary path reports that in its
/// order).
pub fn select(probing: &Probing, root: &Path) -> Option<PathBuf> {
    let cache = probing.outcome_cache()?;
    let fingerprint = probing.fingerprint().ok()?;
    let options = probing.plan_options(false, None);
    let installed = fingerprint.installed_digest();
    match warm::answer(cache, root, &fingerprint.hash(), &options, &installed) {
        Ok(Some(answer)) => {
            for warning in &answer.warnings {
                eprintln!("preflight: warning: {warning}");
            }
            Some(answer.path)
        }
        Ok(None) => None,
        Err(why) => {
            eprintln!("preflight: warning: {why}");
            None
        }
    }
}

/// Keep the warm record of a `select` run; a record that cannot be written
/// only costs the next `select` an ordinary run.
pub fn remember(probing: &Probing, plan: &Plan, report: &CheckReport, before: &Before) {
    let options = probing.plan_options(false, None);
    if let Err(why) = warm::remember(plan, report, &options, before) {
        eprintln!("preflight: warning: {why}");
    }
}
