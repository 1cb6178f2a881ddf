//! `preflight check`'s section for a native module target (a directory
//! with a `preflight.toml`): one row per module, the declared verdict being
//! what the module's embedded images allow on this GPU (`preflight
//! inspect`'s compatibility rule).

use super::check::{declared, notes, observed, total};
use crate::discover::NativeTarget;
use crate::run::{CheckReport, CheckResult};
use std::fmt::Write;

fn ms(value: Option<f64>) -> String {
    match value {
        None => "-".into(),
        Some(v) if v >= 1000.0 => format!("{:.2} s", v / 1000.0),
        Some(v) if v >= 10.0 => format!("{v:.0} ms"),
        Some(v) if v >= 0.1 => format!("{v:.2} ms"),
        Some(v) => format!("{:.1} µs", v * 1e3),
    }
}

/// One native target: module · kind · declared · observed · depth · load ·
/// launch (median of the timed launches) · total, then one line per module
/// that did not simply pass; `rows` are this target's, in module order.
pub fn section(
    out: &mut String,
    given: &str,
    target: &NativeTarget,
    rows: &[&CheckResult],
    report: &CheckReport,
) {
    let _ = write!(
        out,
        "{given}: {} native module(s) in {}",
        target.modules.len(),
        target.dir.display()
    );
    // The GPU the modules' images were judged against: CUDA's device 0.
    if let Some(gpu) = report.fingerprint.cuda_default_device() {
        let model = gpu.model.as_deref().unwrap_or("NVIDIA GPU");
        match &gpu.compute_capability {
            Some(cc) => {
                let _ = write!(out, " on {model} (sm {cc})");
            }
            None => {
                let _ = write!(out, " on {model}");
            }
        }
    }
    out.push('\n');
    let mut table = super::table(&[
        "module", "kind", "declared", "observed", "depth", "load", "launch", "total",
    ]);
    for (module, r) in target.modules.iter().zip(rows) {
        table.add_row(vec![
            r.variant.clone(),
            module.spec.kind.as_str().to_owned(),
            declared(r),
            observed(r),
            r.outcome.depth.map_or("-", |d| d.as_str()).to_owned(),
            ms(r.timings.import_ms),
            ms(r.timings.smoke_ms),
            total(r),
        ]);
    }
    let _ = writeln!(out, "{table}");
    notes(out, rows);
    let passing = rows.iter().filter(|r| r.outcome.kind.passed()).count();
    let _ = writeln!(
        out,
        "{passing} of {} {} here",
        super::count(rows.len(), "module"),
        super::works(passing)
    );
}
