//! `select`'s words beside its answer: what `--fastest` ranked by, a
//! choice that overrules the hub's names, and the table when no variant
//! works (the answer itself is a path, or `Selection`'s JSON).

use super::check;
use crate::run::select::{Basis, Selected, Selection, Speed};
use crate::run::{CheckReport, DEFAULT_WORKLOAD, Plan};

/// What `select` prints: on stdout the chosen path (or, with `json`, the
/// [`Selection`] as pretty JSON), and on stderr its notes, or the table of
/// why no variant works.
pub fn printed(selected: &Selected, json: bool) -> super::Printed {
    let ran = match selected {
        Selected::Warm { path } => return super::Printed::out(path.display().to_string()),
        Selected::Ran(ran) => ran,
    };
    let selection = ran.selection();
    let mut printed = super::Printed {
        stdout: None,
        stderr: notes(&selection),
    };
    if json {
        printed.stdout = Some(super::pretty_json(&selection));
    } else if let Some(path) = selection.path {
        printed.stdout = Some(path.to_owned());
    } else {
        printed.stderr.push(none_works(&ran.report, &ran.plan));
    }
    printed
}

/// The notes `select` prints on stderr beside `selection`, one a line.
pub fn notes(selection: &Selection) -> Vec<String> {
    let mut notes = Vec::new();
    if let (Some(speed), Some(variant)) = (&selection.speed, selection.variant) {
        notes.extend(speed_note(variant, speed));
    }
    if selection.overrules_name
        && let Some(variant) = selection.variant
    {
        notes.push(format!(
            "preflight: {variant} is rejected by the hub by its name here; \
             chosen because its smoke workload ran here and --overrule-names was given"
        ));
    }
    notes
}

/// What `select` prints on stderr when no variant works: that, and the
/// check's table of why.
pub fn none_works(report: &CheckReport, plan: &Plan) -> String {
    format!(
        "preflight: no variant works here\n\n{}",
        check::table(report, plan)
    )
}

/// What `--fastest` ranked by: bench medians (and whether they tell the
/// top two apart), or nothing that measures speed.
fn speed_note(variant: &str, speed: &Speed) -> Option<String> {
    match (speed.basis, &speed.runner_up, &speed.vs_runner_up) {
        (Basis::NoBenchData, _, _) if speed.workload != DEFAULT_WORKLOAD => Some(format!(
            "preflight: no bench results of workload {0} for this machine: ranked by the smoke's \
             one cold call, which is not a speed measurement \
             (run `preflight bench --workload {0}` for one)",
            speed.workload
        )),
        (Basis::NoBenchData, _, _) => Some(
            "preflight: no bench results for this machine: ranked by the smoke's one cold call, \
             which is not a speed measurement (run `preflight bench` for one)"
                .to_owned(),
        ),
        (Basis::Bench, Some(other), Some(vs)) if speed.ambiguous => Some(format!(
            "preflight: ambiguous: the bench cannot tell {variant} from {other} \
             ({:.3}x, 95% interval {:.3}-{:.3}, {}); either may be the faster",
            vs.speedup,
            vs.low,
            vs.high,
            serde_json::to_value(vs.verdict)
                .ok()
                .and_then(|v| v.as_str().map(str::to_owned))
                .unwrap_or_default()
        )),
        (Basis::Bench, Some(other), Some(vs)) => Some(format!(
            "preflight: {variant} is the fastest by bench medians: {:.3}x {other} \
             (95% interval {:.3}-{:.3})",
            vs.speedup, vs.low, vs.high
        )),
        (Basis::Bench, _, _) => None,
    }
}
