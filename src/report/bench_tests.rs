use super::*;
use crate::bench::result::Timed;
use crate::classify::OutcomeKind;
use crate::stats::{StopCriteria, Summary};

/// A timed variant with a hand-written summary (the samples do not matter
/// to the report).
fn timed(name: &str, q1: f64, median: f64, q3: f64, stop: StopRule) -> VariantBench {
    VariantBench {
        variant: name.to_string(),
        job: "ab".repeat(8),
        status: BenchStatus::Timed(Timed {
            summary: Summary {
                samples: 120,
                median,
                q1,
                q3,
                iqr: q3 - q1,
                min: q1,
                max: q3,
                mean: median,
                stdev: median / 100.0,
                rel_noise: 0.01,
            },
            stop,
            samples_ms: vec![median],
            rounds: Vec::new(),
            dropped_throttled: 0,
            timer: Timer::DeviceEvents,
        }),
        vs_fastest: None,
        vs_reference: None,
    }
}

fn cmp(speedup: f64, low: f64, high: f64, verdict: Verdict) -> Option<Comparison> {
    Some(Comparison {
        speedup,
        low,
        high,
        verdict,
    })
}

/// Two timed variants (1 ms and 2 ms, 1.5 ms apart... ), one excluded.
fn report() -> BenchReport {
    let mut slow = timed("cu128-slow", 1.8, 2.0, 2.4, StopRule::Plateau);
    slow.vs_fastest = cmp(0.5, 0.49, 0.51, Verdict::Slower);
    BenchReport {
        target: "org/relu".to_string(),
        workload: "smoke".to_string(),
        fingerprint: "0123abcd".to_string(),
        device: "NVIDIA H200".to_string(),
        flush_l2: true,
        criteria: StopCriteria::default(),
        variants: vec![
            timed("cu129-fast", 0.9, 1.0, 1.2, StopRule::Noise),
            slow,
            VariantBench {
                variant: "cu126-bad".to_string(),
                job: "cd".repeat(8),
                status: BenchStatus::Excluded {
                    outcome: OutcomeKind::WrongResult,
                    reason: "max abs error 0.5".to_string(),
                },
                vs_fastest: None,
                vs_reference: None,
            },
        ],
        reference: None,
        context: None,
    }
}

/// The report with a reference timed at 4 ms.
fn with_reference() -> BenchReport {
    let mut r = report();
    let mut reference = timed("torch", 3.0, 4.0, 4.1, StopRule::Timeout);
    reference.vs_fastest = cmp(0.25, 0.24, 0.26, Verdict::Slower);
    r.reference = Some(reference);
    r.variants[0].vs_reference = cmp(4.0, 3.9, 4.1, Verdict::Faster);
    r.variants[1].vs_reference = cmp(2.0, 1.9, 2.1, Verdict::Ambiguous);
    r
}

#[test]
fn table_for_people() {
    let expected = "\
bench org/relu, workload smoke
on NVIDIA H200 (full fingerprint 0123abcd), timed with device events, L2 flushed before each sample
stop: at least 10 samples and 0.5 s, then noise under 0.50 % or a plateau; at most 30 s
vs: speedup = their median / this median, its 95 % bootstrap interval, the verdict
┌───┬────────────┬─────────┬────────┬────────┬─────────┬─────────┬──────────────────────────────┐
│ # ┆ variant    ┆ median  ┆ IQR    ┆ noise  ┆ samples ┆ stop    ┆ vs fastest                   │
╞═══╪════════════╪═════════╪════════╪════════╪═════════╪═════════╪══════════════════════════════╡
│ 1 ┆ cu129-fast ┆ 1.00 ms ┆ 300 µs ┆ 1.00 % ┆ 120     ┆ noise   ┆ fastest                      │
│ 2 ┆ cu128-slow ┆ 2.00 ms ┆ 600 µs ┆ 1.00 % ┆ 120     ┆ plateau ┆ 0.500× [0.490, 0.510] slower │
└───┴────────────┴─────────┴────────┴────────┴─────────┴─────────┴──────────────────────────────┘
bars: median |, IQR [ ], to scale
cu129-fast  ======================[==|----]                               1.00 ms
cu128-slow  ============================================[====|---------]  2.00 ms
not timed: cu126-bad: wrong_result: max abs error 0.5
";
    assert_eq!(table(&report(), 100), expected);
    // Too narrow to fit is wrapped, not a failure.
    assert!(table(&report(), 0).contains("not timed: cu126-bad"));
}

#[test]
fn table_with_a_reference() {
    let out = table(&with_reference(), 150);
    let lines: Vec<&str> = out.lines().collect();
    assert!(
        lines[5].contains("┆ vs reference                 │"),
        "{out}"
    );
    assert!(
        lines[7].ends_with("┆ fastest                      ┆ 4.00× [3.90, 4.10] faster    │"),
        "{out}"
    );
    assert!(
        lines[8].ends_with("┆ 2.00× [1.90, 2.10] ambiguous │"),
        "{out}"
    );
    assert!(lines[9].starts_with("│ ref ┆ torch "), "{out}");
    assert!(
        lines[9].ends_with("┆ 0.250× [0.240, 0.260] slower ┆ reference                    │"),
        "{out}"
    );
    assert_eq!(
        lines[11..15],
        [
            "bars: median |, IQR [ ], to scale",
            "cu129-fast  =============[|--]                                            1.00 ms",
            "cu128-slow  ==========================[==|-----]                          2.00 ms",
            "torch       ===========================================[==============|]  4.00 ms",
        ]
    );
}

#[test]
fn markdown_for_a_pr() {
    let expected = "\
### Benchmark of `org/relu`, workload `smoke`

on NVIDIA H200 (full fingerprint `0123abcd`), timed with device events, L2 flushed before each sample  
stop: at least 10 samples and 0.5 s, then noise under 0.50 % or a plateau; at most 30 s  
vs: speedup = their median / this median, its 95 % bootstrap interval, the verdict

| # | variant | median | IQR | noise | samples | stop | vs fastest | vs reference |
| --: | --- | --: | --: | --: | --: | --- | --- | --- |
| 1 | `cu129-fast` | 1.00 ms | 300 µs | 1.00 % | 120 | noise | fastest | 4.00× [3.90, 4.10] faster |
| 2 | `cu128-slow` | 2.00 ms | 600 µs | 1.00 % | 120 | plateau | 0.500× [0.490, 0.510] slower | 2.00× [1.90, 2.10] ambiguous |
| ref | `torch` | 4.00 ms | 1.10 ms | 1.00 % | 120 | timeout | 0.250× [0.240, 0.260] slower | reference |

Not timed:
- `cu126-bad`: wrong_result: max abs error 0.5
";
    assert_eq!(markdown(&with_reference()), expected);
}

#[test]
fn bars_have_a_floor_width_and_survive_zero() {
    let mut r = report();
    // 10 columns whatever the width asked for.
    let bars_only = bars(&r, 0);
    assert_eq!(
        bars_only,
        "cu129-fast  ===[|]      1.00 ms\ncu128-slow  =======[|]  2.00 ms\n"
    );
    r.variants.truncate(1);
    r.variants[0] = timed("zero", 0.0, 0.0, 0.0, StopRule::Noise);
    assert_eq!(bars(&r, 40), "zero  |                             0 ns\n");
}

#[test]
fn nothing_timed_and_a_failed_reference() {
    let mut r = report();
    r.variants.retain(|v| v.timed().is_none());
    r.reference = Some(VariantBench {
        status: BenchStatus::Excluded {
            outcome: OutcomeKind::Crashed,
            reason: "SIGSEGV".to_string(),
        },
        ..timed("torch", 1.0, 1.0, 1.0, StopRule::Noise)
    });
    let out = table(&r, 80);
    assert!(out.contains("timed with nothing, L2 flushed"), "{out}");
    assert!(out.ends_with(
        "no variant was timed\n\
         not timed: cu126-bad: wrong_result: max abs error 0.5\n\
         not timed: reference torch: crashed: SIGSEGV\n"
    ));
    let md = markdown(&r);
    assert!(md.contains("No variant was timed.\n"), "{md}");
    assert!(
        md.ends_with("- `reference torch`: crashed: SIGSEGV\n"),
        "{md}"
    );
}

#[test]
fn throttled_samples_and_missing_estimates_are_said() {
    let mut r = report();
    if let BenchStatus::Timed(t) = &mut r.variants[1].status {
        t.dropped_throttled = 3;
        t.timer = Timer::HostClock;
        t.stop = StopRule::MaxSamples;
    }
    r.variants[1].vs_fastest = None;
    let md = markdown(&r);
    assert!(
        md.contains("timed with device events and the host clock"),
        "{md}"
    );
    assert!(
        md.contains("| 120 (3 throttled dropped) | max samples | – |"),
        "{md}"
    );
}

#[test]
fn disordered_summaries_and_multiline_reasons_do_not_break_it() {
    let mut r = report();
    if let BenchStatus::Timed(t) = &mut r.variants[0].status {
        (t.summary.q1, t.summary.median, t.summary.q3) = (5.0, 2.0, 0.1);
    }
    if let BenchStatus::Timed(t) = &mut r.variants[1].status {
        t.summary.median = f64::NAN;
    }
    if let BenchStatus::Excluded { reason, .. } = &mut r.variants[2].status {
        *reason = "Traceback:\n  File x\n\nValueError: bad".to_string();
    }
    let out = table(&r, 80);
    assert!(
        out.ends_with("not timed: cu126-bad: wrong_result: Traceback: File x ValueError: bad\n")
    );
    assert!(
        markdown(&r).ends_with("- `cu126-bad`: wrong_result: Traceback: File x ValueError: bad\n")
    );
}

#[test]
fn units_keep_three_digits() {
    assert_eq!(time(0.000512), "512 ns");
    assert_eq!(time(0.0123), "12.3 µs");
    assert_eq!(time(0.5), "500 µs");
    assert_eq!(time(1.0), "1.00 ms");
    assert_eq!(time(999.0), "999 ms");
    assert_eq!(time(0.9996), "1.00 ms");
    assert_eq!(time(999.7), "1.00 s");
    assert_eq!(time(1234.5), "1.23 s");
    assert_eq!(time(123_456.0), "123 s");
    assert_eq!(sig3(0.04567), "0.0457");
    assert_eq!(sig3(12345.0), "12345");
    assert_eq!(percent(0.005), "0.50 %");
}

#[test]
fn ranked_fixture_reads_fastest_first() {
    let mut r = crate::bench::result::tests::fixture();
    r.rank(1);
    let out = table(&r, 160);
    let at = |name: &str| out.find(&format!("┆ {name} ")).unwrap_or(usize::MAX);
    assert!(
        at("cu129-fast") < at("cu128-mid") && at("cu128-mid") < at("cu130-slow"),
        "{out}"
    );
    assert!(out.contains("┆ 0.498× [0.496, 0.501] slower"), "{out}");
    assert!(out.contains("not timed: cu126-wrong: wrong_result: max abs error 0.5 > 1e-5\n"));
    assert!(out.ends_with("not timed: cu124-crash: crashed: SIGSEGV in round 3\n"));
}
