//! Output of `preflight check` for native module targets (a directory with
//! a `preflight.toml`): one row per module, in the same JSON shape as the
//! variants of hub targets, the declared verdict being what the module's
//! embedded images allow (`preflight inspect`'s compatibility rule).

use crate::classify::OutcomeKind;
use crate::declared::arch::ComputeCapability;
use crate::declared::embedded::{self, Judge};
use crate::probe::cuda::ModuleKind;
use crate::probe::native::NativeModule;
use crate::protocol::DeviceInfo;
use crate::run::native::NativeReport;
use crate::run::{CheckResult, Declared};
use std::fmt::Write;

/// What a module's embedded images declare about this GPU: accepted when
/// some image can run (or when nothing can be judged: CUDA C source, no GPU
/// known, a file inspect cannot read).
fn declared(module: &NativeModule, gpu: Option<ComputeCapability>, judge: Judge) -> Declared {
    let accepted = Declared {
        accepted: true,
        reason: None,
        short: None,
    };
    let Some(gpu) = gpu else {
        return accepted;
    };
    if module.spec.kind == ModuleKind::Cuda {
        return accepted;
    }
    match embedded::inspect_file(&module.spec.path) {
        Ok(file) if file.has_cuda() => {
            let verdict = file.verdict(gpu, judge.driver_ptx);
            Declared {
                accepted: verdict.runnable,
                reason: (!verdict.runnable).then_some(verdict.summary),
                short: (!verdict.runnable).then_some("no image fits"),
            }
        }
        _ => accepted,
    }
}

/// One [`CheckResult`] per module: `variant` is the module's file name.
pub fn rows(given: &str, report: &NativeReport, judge: Judge) -> Vec<CheckResult> {
    report
        .modules
        .iter()
        .map(|(module, run)| {
            let gpu = run
                .report
                .device
                .as_ref()
                .map(DeviceInfo::capability)
                .or(judge.gpu);
            CheckResult {
                target: given.to_owned(),
                variant: module.name(),
                path: module.spec.path.display().to_string(),
                declared: declared(module, gpu, judge),
                outcome: run.outcome.clone(),
                timings: run.timings,
                leaked: run.leaked.clone(),
                cached: false,
            }
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

/// The table for people: module · kind · declared · observed · depth ·
/// load · launch (median of the timed launches) · total, then one line per
/// failure; `rows` are this target's [`rows`].
pub fn table(given: &str, report: &NativeReport, rows: &[CheckResult]) -> String {
    let mut out = String::new();
    let device = report.modules.iter().find_map(|(_, r)| {
        let facts = &r.report;
        facts
            .device
            .as_ref()
            .map(|d| (d, facts.runtime.cuda_driver))
    });
    let _ = write!(out, "{given}: {} native module(s)", report.modules.len());
    if let Some((d, driver)) = device {
        let _ = write!(out, " on {} (sm_{}{})", d.name, d.major, d.minor);
        if let Some(v) = driver {
            let _ = write!(out, ", CUDA driver {}.{}", v / 1000, (v % 1000) / 10);
        }
    }
    out.push('\n');
    let mut table = super::table(&[
        "module", "kind", "declared", "observed", "depth", "load", "launch", "total",
    ]);
    for ((module, run), row) in report.modules.iter().zip(rows) {
        let declared = match row.declared.short {
            None => "accepted".to_owned(),
            Some(short) => format!("rejected ({short})"),
        };
        let mark = if row.disagrees() { "≠ " } else { "" };
        table.add_row(vec![
            module.name(),
            module.spec.kind.as_str().to_owned(),
            declared,
            format!("{mark}{}", run.outcome.kind),
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
    for row in rows.iter().filter(|r| !r.declared.accepted) {
        if let Some(reason) = &row.declared.reason {
            let _ = writeln!(out, "  declared: {} — {reason}", row.variant);
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
