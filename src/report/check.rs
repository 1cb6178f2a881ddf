//! Output of `preflight check`: what each variant or module declares next
//! to what it did.

use crate::classify::Fault;
use crate::declared::System;
use crate::discover::{Discovery, Target};
use crate::run::{CheckReport, CheckResult, Plan, TargetId};
use std::fmt::Write;

fn ms(value: Option<f64>) -> String {
    match value {
        None => "-".into(),
        Some(v) if v >= 1000.0 => format!("{:.2} s", v / 1000.0),
        Some(v) if v >= 10.0 => format!("{v:.0} ms"),
        Some(v) => format!("{v:.2} ms"),
    }
}

/// The text `check` prints for people: the system, then per target in the
/// order given a table of what each job declares next to what it did, and
/// one line per failure; `plan` is the plan `report` answered.
pub fn table(report: &CheckReport, plan: &Plan) -> String {
    let mut out = String::new();
    let system = System::from_fingerprint(&report.fingerprint);
    let _ = writeln!(out, "system: {}", super::resolve::system_line(&system));
    if plan
        .targets
        .iter()
        .any(|t| matches!(t.target, Target::Hub(_)))
    {
        let _ = writeln!(out, "declared by the rules of {}", system.rules());
    }
    for (i, named) in plan.targets.iter().enumerate() {
        let rows: Vec<&CheckResult> = report.rows(TargetId(i)).collect();
        out.push('\n');
        match &named.target {
            Target::Hub(discovery) => hub_section(&mut out, discovery, &rows),
            Target::Native(target) => {
                super::native::section(&mut out, &named.given, target, &rows, report)
            }
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

/// One hub kernel: variant · declared · observed · depth · smoke call ·
/// total, then the notes and the device depth's line per shared object.
fn hub_section(out: &mut String, discovery: &Discovery, rows: &[&CheckResult]) {
    let kernel = discovery.kernel.as_deref().unwrap_or("kernel");
    let _ = writeln!(
        out,
        "{kernel}: {} in {}",
        super::count(rows.len(), "variant"),
        discovery.root.display()
    );
    let mut table = super::table(&[
        "variant",
        "declared",
        "observed",
        "depth",
        "smoke call",
        "total",
    ]);
    for r in rows {
        table.add_row(vec![
            r.variant.clone(),
            declared(r),
            observed(r),
            r.outcome.depth.map_or("-", |d| d.as_str()).to_string(),
            ms(r.timings.smoke_ms),
            total(r),
        ]);
    }
    let _ = writeln!(out, "{table}");
    if rows.iter().any(|r| r.timings.smoke_ms.is_some()) {
        // A cold call, probes sharing the device: never a speed.
        let _ = writeln!(
            out,
            "smoke call: one cold call of the workload, not a speed (`preflight bench` times variants)"
        );
    }
    if rows
        .iter()
        .any(|r| !r.outcome.kind.passed() && r.outcome.depth.is_some())
    {
        let _ = writeln!(
            out,
            "depth: how far the probe got; for a failure, what it had done before it failed"
        );
    }
    notes(out, rows);
    super::device::lines(out, rows);
    let passing: Vec<&str> = rows
        .iter()
        .filter(|r| r.outcome.kind.passed())
        .map(|r| r.variant.as_str())
        .collect();
    let _ = write!(
        out,
        "{} of {} {} here",
        passing.len(),
        super::count(rows.len(), "variant"),
        super::works(passing.len())
    );
    match passing.first() {
        Some(best) => {
            let _ = writeln!(out, "; the best working variant is {best}");
        }
        None => out.push('\n'),
    }
}

/// The declared column: `accepted`, or `rejected (why)`.
pub(super) fn declared(r: &CheckResult) -> String {
    match r.declared.short {
        None => "accepted".to_string(),
        Some(short) => format!("rejected ({short})"),
    }
}

/// The observed column, `≠`-marked when it disagrees with the declared one.
pub(super) fn observed(r: &CheckResult) -> String {
    let mark = if r.disagrees() { "≠ " } else { "" };
    format!("{mark}{}", r.outcome.kind)
}

/// The total column, marked when the outcome came from the cache.
pub(super) fn total(r: &CheckResult) -> String {
    if !r.outcome.kind.probed() {
        "-".into()
    } else if r.cached {
        format!("{} (cached)", ms(Some(r.timings.total_ms)))
    } else {
        ms(Some(r.timings.total_ms))
    }
}

/// One line per row that did not simply pass: what happened, where, the
/// hint, the declared reason it disagrees with, leaked processes, what a
/// passing variant's user should still know.
pub(super) fn notes(out: &mut String, rows: &[&CheckResult]) {
    for r in rows {
        let o = &r.outcome;
        if o.kind.passed() && r.leaked.is_none() && o.warning.is_none() && !r.disagrees() {
            continue;
        }
        let (mark, where_) = match o.kind.fault() {
            Fault::NotProbed => ("–", String::new()),
            Fault::None => ("⚠", String::new()),
            Fault::Here | Fault::Preflight => ("✗", format!(" in {}", o.phase.as_str())),
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
            let _ = writeln!(out, "    {leak}");
        }
        if let Some(warning) = &o.warning {
            let _ = writeln!(out, "    warning: {warning}");
        }
    }
}
