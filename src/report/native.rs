//! Output of `preflight check` for native module targets (a directory with
//! a `preflight.toml`): one row per module, in the same JSON shape as the
//! variants of hub targets.

use super::check::{CheckResult, Declared};
use crate::classify::OutcomeKind;
use crate::probe::native::NativeReport;
use std::fmt::Write;

/// One [`CheckResult`] per module: `variant` is the module's file name and
/// the declared verdict is "accepted" (a module declares nothing by name).
pub fn rows(given: &str, report: &NativeReport) -> Vec<CheckResult> {
    report
        .modules
        .iter()
        .map(|(module, run)| CheckResult {
            target: given.to_owned(),
            variant: module.name(),
            path: module.spec.path.display().to_string(),
            declared: Declared {
                accepted: true,
                reason: None,
                short: None,
            },
            outcome: run.outcome.clone(),
            timings: run.timings,
            leaked: run.run.leaked.clone(),
        })
        .collect()
}

fn ms(value: Option<f64>) -> String {
    match value {
        None => "-".into(),
        Some(v) if v >= 1000.0 => format!("{:.2} s", v / 1000.0),
        Some(v) if v >= 10.0 => format!("{v:.0} ms"),
        Some(v) if v >= 0.1 => format!("{v:.2} ms"),
        Some(v) => format!("{:.1} µs", v * 1e3),
    }
}

/// The table for people: module · kind · observed · depth · load · launch
/// (median of the timed launches) · total, then one line per failure.
pub fn table(given: &str, report: &NativeReport) -> String {
    let mut out = String::new();
    let device = report
        .modules
        .iter()
        .find_map(|(_, r)| r.facts.device.as_ref().map(|d| (d, r.facts.driver_version)));
    let _ = write!(out, "{given}: {} native module(s)", report.modules.len());
    if let Some((d, driver)) = device {
        let _ = write!(out, " on {} (sm_{}{})", d.name, d.major, d.minor);
        if let Some(v) = driver {
            let _ = write!(out, ", CUDA driver {}.{}", v / 1000, (v % 1000) / 10);
        }
    }
    out.push('\n');
    let mut table = super::table(&[
        "module", "kind", "observed", "depth", "load", "launch", "total",
    ]);
    for (module, run) in &report.modules {
        table.add_row(vec![
            module.name(),
            module.spec.kind.as_str().to_owned(),
            run.outcome.kind.to_string(),
            run.outcome.depth.map_or("-", |d| d.as_str()).to_owned(),
            ms(run.timings.import_ms),
            ms(run.timings.smoke_ms),
            ms(Some(run.timings.total_ms)),
        ]);
    }
    let _ = writeln!(out, "{table}");
    for (module, run) in &report.modules {
        let o = &run.outcome;
        if o.kind == OutcomeKind::Pass {
            continue;
        }
        let _ = writeln!(
            out,
            "✗ {} — {} in {}: {}",
            module.name(),
            o.kind,
            o.phase.as_str(),
            o.message
        );
        if !o.hint.is_empty() {
            let _ = writeln!(out, "    hint: {}", o.hint);
        }
    }
    let passing = report
        .modules
        .iter()
        .filter(|(_, r)| r.outcome.kind.passed())
        .count();
    let _ = write!(
        out,
        "{passing} of {} modules work here",
        report.modules.len()
    );
    out
}
