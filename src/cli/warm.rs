//! `select`'s warm path as the command line reports it: the answer from
//! the target's warm record ([`kernel_preflight::run::Session::warm_select`]),
//! and the record kept after an ordinary run, with their warnings.

use super::probing::Probing;
use kernel_preflight::run::warm::Before;
use kernel_preflight::run::{CheckReport, Plan};
use std::path::{Path, PathBuf};

/// The variant a cold `select` would choose among the variants in `root`,
/// when the warm record says so and still holds; `None`: run as usual.
pub fn select(probing: &Probing, root: &Path) -> Option<PathBuf> {
    match probing.session().warm_select(root) {
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
    if let Err(why) = probing.session().remember_select(plan, report, before) {
        eprintln!("preflight: warning: {why}");
    }
}
