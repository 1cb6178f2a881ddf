//! Output of `preflight bench`: a table for people and markdown for a PR.
//! (`--json` is the serde form of [`BenchReport`].)

use crate::bench::result::{BenchReport, BenchStatus, Timer, VariantBench};
use crate::stats::{Comparison, StopRule, Verdict};

/// The columns shared by the table and the markdown.
const HEADER: [&str; 9] = [
    "#",
    "variant",
    "median",
    "IQR",
    "noise",
    "samples",
    "stop",
    "vs fastest",
    "vs reference",
];

/// A table for people, fastest first, with a bar per variant (median and
/// IQR whisker) scaled to the slowest, `width` columns wide at most.
/// Expects a ranked report ([`BenchReport::rank`]).
pub fn table(report: &BenchReport, width: usize) -> String {
    let mut out = format!("bench {}, workload {}\n", report.target, report.workload);
    for line in conditions(report, |s| s.to_string()) {
        out.push_str(&format!("{line}\n"));
    }
    let rows = rows(report);
    if rows.is_empty() {
        out.push_str("no variant was timed\n");
    } else {
        let mut table = super::table(&header(report));
        table.set_width(u16::try_from(width).unwrap_or(u16::MAX));
        for row in &rows {
            table.add_row(row.clone());
        }
        out.push_str(&format!(
            "{table}\nbars: median |, IQR [ ], to scale\n{}",
            bars(report, width)
        ));
    }
    for (name, outcome, reason) in excluded(report) {
        out.push_str(&format!("not timed: {name}: {outcome}: {reason}\n"));
    }
    out
}

/// A GitHub markdown table with the device and fingerprint, for a PR or a
/// model card. Expects a ranked report ([`BenchReport::rank`]).
pub fn markdown(report: &BenchReport) -> String {
    let code = |s: &str| format!("`{s}`");
    let mut out = format!(
        "### Benchmark of {}, workload {}\n\n{}\n\n",
        code(&report.target),
        code(&report.workload),
        conditions(report, code).join("  \n")
    );
    let rows = rows(report);
    if rows.is_empty() {
        out.push_str("No variant was timed.\n");
    } else {
        let header = header(report);
        let cells = |row: &[String]| format!("| {} |\n", row.join(" | "));
        out.push_str(&cells(
            &header.iter().map(|h| h.to_string()).collect::<Vec<_>>(),
        ));
        let align: Vec<String> = header
            .iter()
            .map(|h| {
                if matches!(*h, "#" | "median" | "IQR" | "noise" | "samples") {
                    "--:"
                } else {
                    "---"
                }
                .to_string()
            })
            .collect();
        out.push_str(&cells(&align));
        for mut row in rows {
            row[1] = format!("`{}`", row[1]);
            let row: Vec<String> = row.iter().map(|c| c.replace('|', "\\|")).collect();
            out.push_str(&cells(&row));
        }
    }
    let excluded = excluded(report);
    if !excluded.is_empty() {
        out.push_str("\nNot timed:\n");
        for (name, outcome, reason) in excluded {
            out.push_str(&format!("- `{name}`: {outcome}: {reason}\n"));
        }
    }
    out
}

/// The clocks the timed variants were timed with, in words, sorted, each
/// once.
pub(super) fn timers(report: &BenchReport) -> Vec<&'static str> {
    let mut timers: Vec<&'static str> = timed(report)
        .filter_map(|(_, v)| v.timed())
        .map(|t| match t.timer {
            Timer::DeviceEvents => "device events",
            Timer::CpuTime => "the process's CPU time",
            Timer::HostClock => "the host clock",
        })
        .collect();
    timers.sort_unstable();
    timers.dedup();
    timers
}

/// Whether the samples were taken after an L2 flush, in words.
pub(super) fn flush(report: &BenchReport) -> &'static str {
    if report.flush_l2 {
        "L2 flushed before each sample"
    } else {
        "no L2 flush"
    }
}

/// How the variants were timed and compared, one line each.
pub(super) fn conditions(report: &BenchReport, code: fn(&str) -> String) -> [String; 3] {
    let timers = timers(report);
    let flush = flush(report);
    let c = &report.criteria;
    [
        format!(
            "on {} (full fingerprint {}), timed with {}, {flush}",
            report.device,
            code(&report.fingerprint),
            if timers.is_empty() {
                "nothing".to_string()
            } else {
                timers.join(" and ")
            },
        ),
        format!(
            "stop: at least {} samples and {} s, then noise under {} or a plateau; at most {} s",
            c.min_samples,
            c.min_time.as_secs_f64(),
            percent(c.max_noise),
            c.timeout.as_secs_f64(),
        ),
        "vs: speedup = their median / this median, its 95 % bootstrap interval, the verdict"
            .to_string(),
    ]
}

/// The header, without the reference column when no reference was timed.
fn header(report: &BenchReport) -> Vec<&'static str> {
    let with_reference = reference_timed(report);
    HEADER[..if with_reference { 9 } else { 8 }].to_vec()
}

fn reference_timed(report: &BenchReport) -> bool {
    report
        .reference
        .as_ref()
        .is_some_and(|r| r.timed().is_some())
}

/// The timed variants with their rank (`1`, `2`, …), then the reference
/// (`ref`) when it was timed.
pub(super) fn timed(report: &BenchReport) -> impl Iterator<Item = (String, &VariantBench)> {
    let variants = report.variants.iter().filter(|v| v.timed().is_some());
    let reference = report.reference.iter().filter(|r| r.timed().is_some());
    variants
        .enumerate()
        .map(|(i, v)| ((i + 1).to_string(), v))
        .chain(reference.map(|r| ("ref".to_string(), r)))
}

/// One row of cells per timed variant, in [`HEADER`] order.
fn rows(report: &BenchReport) -> Vec<Vec<String>> {
    let with_reference = reference_timed(report);
    timed(report)
        .filter_map(|(rank, v)| {
            let t = v.timed()?;
            let s = &t.summary;
            let mut samples = s.samples.to_string();
            if t.dropped_throttled > 0 {
                samples.push_str(&format!(" ({} throttled dropped)", t.dropped_throttled));
            }
            let vs_fastest = match rank.as_str() {
                "1" => "fastest".to_string(),
                _ => comparison(v.vs_fastest),
            };
            let vs_reference = match rank.as_str() {
                "ref" => "reference".to_string(),
                _ => comparison(v.vs_reference),
            };
            let mut row = vec![
                rank,
                v.variant.clone(),
                time(s.median),
                time(s.iqr),
                percent(s.rel_noise),
                samples,
                stop(t.stop).to_string(),
                vs_fastest,
            ];
            if with_reference {
                row.push(vs_reference);
            }
            Some(row)
        })
        .collect()
}

/// The variants (and reference) that were not timed: name, outcome, reason.
pub(super) fn excluded(report: &BenchReport) -> Vec<(String, &str, String)> {
    let reference = report
        .reference
        .iter()
        .map(|r| (format!("reference {}", r.variant), r));
    report
        .variants
        .iter()
        .map(|v| (v.variant.clone(), v))
        .chain(reference)
        .filter_map(|(name, v)| match &v.status {
            BenchStatus::Excluded { outcome, reason } => Some((
                name,
                outcome.as_str(),
                // A traceback's lines would break the list.
                reason.split_whitespace().collect::<Vec<_>>().join(" "),
            )),
            BenchStatus::Timed(_) => None,
        })
        .collect()
}

/// One bar per timed variant: `=` up to the median `|`, the interquartile
/// range between `[` and `]`, all scaled to the largest third quartile.
fn bars(report: &BenchReport, width: usize) -> String {
    let rows: Vec<(String, f64, f64, f64)> = timed(report)
        .filter_map(|(_, v)| {
            let s = v.timed()?.summary;
            Some((v.variant.clone(), s.q1, s.median, s.q3))
        })
        .collect();
    let scale = rows.iter().map(|r| r.3).fold(0.0, f64::max);
    let name_w = rows.iter().map(|r| r.0.chars().count()).max().unwrap_or(0);
    let labels: Vec<String> = rows.iter().map(|r| time(r.2)).collect();
    let label_w = labels.iter().map(|l| l.chars().count()).max().unwrap_or(0);
    let bar_w = width.saturating_sub(name_w + label_w + 4).clamp(10, 60);
    let mut out = String::new();
    for ((name, q1, median, q3), label) in rows.iter().zip(&labels) {
        let col = |x: f64| {
            let f = if scale > 0.0 {
                (x / scale).clamp(0.0, 1.0)
            } else {
                0.0
            };
            (f * (bar_w - 1) as f64).round() as usize
        };
        // A summary read back from JSON need not be ordered; never slice backwards.
        let cm = col(*median);
        let (c1, c3) = (col(*q1).min(cm), col(*q3).max(cm));
        let mut bar = vec![' '; bar_w];
        bar[..cm].fill('=');
        bar[cm..c3].fill('-');
        bar[c1] = '[';
        bar[c3] = ']';
        bar[cm] = '|';
        let bar: String = bar.into_iter().collect();
        out.push_str(&format!("{name:<name_w$}  {bar}  {label:>label_w$}\n"));
    }
    out
}

/// `0.498× [0.496, 0.501] slower`, or `–` without an estimate.
fn comparison(c: Option<Comparison>) -> String {
    let Some(c) = c.filter(|c| c.speedup > 0.0) else {
        return "–".to_string();
    };
    format!("{} {}", speedup(&c), verdict(c.verdict))
}

/// `0.498× [0.496, 0.501]`: a speedup and its 95 % bootstrap interval.
pub(super) fn speedup(c: &Comparison) -> String {
    format!("{}× [{}, {}]", sig3(c.speedup), sig3(c.low), sig3(c.high))
}

/// A verdict in words.
pub(super) fn verdict(v: Verdict) -> &'static str {
    match v {
        Verdict::Faster => "faster",
        Verdict::Slower => "slower",
        Verdict::Same => "same",
        Verdict::Ambiguous => "ambiguous",
    }
}

pub(super) fn stop(rule: StopRule) -> &'static str {
    match rule {
        StopRule::Noise => "noise",
        StopRule::Plateau => "plateau",
        StopRule::Timeout => "timeout",
        StopRule::MaxSamples => "max samples",
    }
}

/// A fraction as a percentage with two decimals.
pub(super) fn percent(fraction: f64) -> String {
    format!("{:.2} %", fraction * 100.0)
}

/// Milliseconds in the unit that keeps three significant digits readable.
pub(super) fn time(ms: f64) -> String {
    // A value that three digits round up to 1000 of a unit is shown in
    // the next one (`1.00 ms`, not `1000 µs`).
    let (value, unit) = match ms {
        x if x >= 999.5 => ((x / 1000.0).max(1.0), "s"),
        x if x >= 0.9995 => (x.max(1.0), "ms"),
        x if x >= 0.9995e-3 => ((x * 1e3).max(1.0), "µs"),
        x => (x * 1e6, "ns"),
    };
    format!("{} {unit}", sig3(value))
}

/// A number with three significant digits (more when it has more integer
/// digits).
pub(super) fn sig3(x: f64) -> String {
    if x == 0.0 || !x.is_finite() {
        return format!("{x}");
    }
    let decimals = (2 - x.abs().log10().floor() as i32).clamp(0, 6) as usize;
    format!("{x:.decimals$}")
}

#[cfg(test)]
#[path = "bench_tests.rs"]
mod tests;
