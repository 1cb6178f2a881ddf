//! Output of `preflight doctor`: a table of capabilities for people, the
//! [`DoctorReport`] as JSON for machines.

use crate::doctor::{DoctorReport, Verdict};
use comfy_table::{ColumnConstraint, Width};
use std::fmt::Write;

fn mark(verdict: Verdict) -> &'static str {
    match verdict {
        Verdict::Pass => "✓ pass",
        Verdict::Skipped => "– skipped",
        Verdict::Missing => "! missing",
        Verdict::Fail => "✗ fail",
    }
}

fn ms(v: f64) -> String {
    match v {
        0.0 => "-".into(),
        v if v >= 1000.0 => format!("{:.1} s", v / 1000.0),
        v => format!("{v:.0} ms"),
    }
}

/// The table doctor prints: the summary line, one row per capability
/// (verdict, time, what happened), then what to do about each problem.
pub fn table(report: &DoctorReport) -> String {
    let mut out = String::new();
    let _ = writeln!(out, "{}", report.summary);
    if let Some(isolation) = &report.isolation {
        let _ = writeln!(out, "probes run in {}", isolation.describe());
    }
    if !report.walls.is_empty() {
        let _ = writeln!(out, "a probe's walls, in order (docs/sandbox.md):");
        for wall in &report.walls {
            let _ = writeln!(out, "  {wall}");
        }
    }
    let mut table = super::table(&["capability", "verdict", "time", "details"]);
    for c in &report.checks {
        table.add_row(vec![
            c.title.to_owned(),
            mark(c.verdict).to_owned(),
            ms(c.time_ms),
            c.message.clone(),
        ]);
    }
    // Messages name paths and versions; wrap them rather than make the
    // table as wide as the longest one.
    if let Some(details) = table.column_mut(3) {
        details.set_constraint(ColumnConstraint::UpperBoundary(Width::Fixed(72)));
    }
    let _ = writeln!(out, "{table}");
    let hints: Vec<_> = report
        .checks
        .iter()
        .filter(|c| !c.hint.is_empty())
        .collect();
    if !hints.is_empty() {
        out.push_str("what to do:\n");
        for c in hints {
            let _ = writeln!(out, "  {} ({}): {}", c.name, c.kind, c.hint);
        }
    }
    out.trim_end().to_owned()
}
