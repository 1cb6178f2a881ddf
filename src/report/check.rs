//! Output of `preflight check`: what each variant declares next to what it
//! did.

use crate::classify::OutcomeKind;
use crate::declared::System;
use crate::run::{CheckReport, CheckResult, Target};
use std::fmt::Write;

fn ms(value: Option<f64>) -> String {
    match value {
        None => "-".into(),
        Some(v) if v >= 1000.0 => format!("{:.2} s", v / 1000.0),
        Some(v) if v >= 10.0 => format!("{v:.0} ms"),
        Some(v) => format!("{v:.2} ms"),
    }
}

/// The table `check` prints for people: per target, variant · declared ·
/// observed · depth · smoke · total, then one line per failure.
pub fn table(report: &CheckReport, targets: &[Target]) -> String {
    let mut out = String::new();
    let system = System::from_fingerprint(&report.fingerprint);
    let _ = writeln!(out, "system: {}", super::resolve::system_line(&system));
    for target in targets {
        let rows: Vec<&CheckResult> = report
            .results
            .iter()
            .filter(|r| r.target == target.given)
            .collect();
        let kernel = target.discovery.kernel.as_deref().unwrap_or("kernel");
        let _ = writeln!(
            out,
            "\n{kernel}: {} variants in {}",
            rows.len(),
            target.discovery.root.display()
        );
        let mut table =
            super::table(&["variant", "declared", "observed", "depth", "smoke", "total"]);
        for r in &rows {
            let declared = match r.declared.short {
                None => "accepted".to_string(),
                Some(short) => format!("rejected ({short})"),
            };
            let mark = if r.disagrees() { "≠ " } else { "" };
            table.add_row(vec![
                r.variant.clone(),
                declared,
                format!("{mark}{}", r.outcome.kind),
                r.outcome.depth.map_or("-", |d| d.as_str()).to_string(),
                ms(r.timings.smoke_ms),
                if r.outcome.kind == OutcomeKind::Skipped {
                    "-".into()
                } else if r.cached {
                    format!("{} (cached)", ms(Some(r.timings.total_ms)))
                } else {
                    ms(Some(r.timings.total_ms))
                },
            ]);
        }
        let _ = writeln!(out, "{table}");
        for r in &rows {
            let o = &r.outcome;
            if o.kind.passed() && r.leaked.is_none() && !r.disagrees() {
                continue;
            }
            let (mark, where_) = match o.kind {
                OutcomeKind::Skipped => ("–", String::new()),
                OutcomeKind::Pass => ("⚠", String::new()),
                _ => ("✗", format!(" in {}", o.phase.as_str())),
            };
            let _ = writeln!(
                out,
                "{mark} {} — {}{where_}: {}",
                r.variant, o.kind, o.message
            );
            if !o.kind.passed() && !o.hint.is_empty() {
                let _ = writeln!(out, "    hint: {}", o.hint);
            }
            if r.disagrees()
                && let Some(reason) = &r.declared.reason
            {
                let _ = writeln!(out, "    declared: rejected, {reason}");
            }
            if let Some(leak) = &r.leaked {
                let _ = writeln!(out, "    leaked processes were killed: {leak}");
            }
        }
        let passing: Vec<&str> = rows
            .iter()
            .filter(|r| r.outcome.kind.passed())
            .map(|r| r.variant.as_str())
            .collect();
        let _ = write!(
            out,
            "{} of {} variants work here",
            passing.len(),
            rows.len()
        );
        match passing.first() {
            Some(best) => {
                let _ = writeln!(out, "; the best working variant is {best}");
            }
            None => out.push('\n'),
        }
    }
    if report.results.iter().any(CheckResult::disagrees) {
        let _ = writeln!(
            out,
            "≠ observed outcome disagrees with the declared verdict"
        );
    }
    out.trim_end().to_string()
}
