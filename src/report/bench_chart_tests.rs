use super::*;
use crate::bench::result::tests::{excluded as not_timed, fixture};
use crate::bench::result::{BenchContext, BenchStatus};
use crate::classify::OutcomeKind;
use crate::fingerprint::ClassFacts;

fn ranked() -> BenchReport {
    let mut report = fixture();
    report.rank(7);
    report
}

#[test]
fn every_row_and_verdict_is_written_out_on_an_opaque_card() {
    let svg = svg(&ranked());
    // The card: the first shape, as large as the picture, opaque white.
    let card = svg.split("<rect").nth(1).unwrap();
    assert!(card.starts_with(" fill=\"#ffffff\" height="), "{card}");
    assert!(!svg.contains("opacity=\"0\""), "{svg}");
    for name in [
        "1. cu129-fast",
        "2. cu128-mid",
        "3. cu130-slow",
        "reference",
    ] {
        assert!(
            svg.contains(&format!("\n{name}\n")),
            "no row {name}:\n{svg}"
        );
    }
    assert!(svg.contains("\nfastest\n"), "{svg}");
    assert_eq!(svg.matches("\nslower\n").count(), 3, "{svg}");
    assert!(
        svg.contains("cu126-wrong: wrong_result: max abs error 0.5 &gt; 1e-5"),
        "{svg}"
    );
    assert!(
        svg.contains("cu124-crash: crashed: SIGSEGV in round 3"),
        "{svg}"
    );
    assert!(svg.contains("no hub revision (a local folder)"), "{svg}");
}

#[test]
fn names_are_escaped_and_a_long_one_is_shortened_with_a_tooltip() {
    let mut report = ranked();
    let long = format!("cu129-{}", "x".repeat(150));
    report.variants[0].variant = long.clone();
    report.variants[1].variant = "<script>&\"".into();
    let svg = svg(&report);
    assert!(svg.contains("2. &lt;script&gt;&amp;\""), "{svg}");
    assert!(!svg.contains("<script>"), "{svg}");
    assert!(svg.contains(&format!("<title>1. {long}</title>")), "{svg}");
    assert!(!svg.contains(&format!("\n1. {long}\n")), "{svg}");
}

#[test]
fn the_caption_names_the_revision_machine_and_date() {
    let mut report = ranked();
    report.context = Some(BenchContext {
        revision: Some("0123456789ab".into()),
        machine: ClassFacts {
            gpu: "NVIDIA H200 (sm 9.0)".into(),
            driver: "570.86.10".into(),
            toolkit: "12.8".into(),
            torch: "2.8.0 (cuda 12.8)".into(),
            python: "3.12.3".into(),
            arch: "linux-x86_64".into(),
            env: Default::default(),
        },
        finished: 0,
    });
    let svg = svg(&report);
    for part in [
        "revision 0123456789ab",
        "GPU NVIDIA H200 (sm 9.0) · driver 570.86.10 · torch 2.8.0 (cuda 12.8)",
        "1970-01-01T00:00:00Z",
        "after at least 10 samples and 0.25 s",
    ] {
        assert!(svg.contains(part), "no {part:?}:\n{svg}");
    }
}

#[test]
fn a_bench_with_nothing_timed_still_lists_every_failure() {
    let mut report = ranked();
    report.variants = vec![not_timed(
        "cu126-wrong",
        OutcomeKind::WrongResult,
        "off by one",
    )];
    report.reference = None;
    let svg = svg(&report);
    assert!(svg.contains("No variant was timed."), "{svg}");
    assert!(svg.contains("Not timed (1)"), "{svg}");
    assert!(
        svg.contains("cu126-wrong: wrong_result: off by one"),
        "{svg}"
    );
    assert!(matches!(
        report.variants[0].status,
        BenchStatus::Excluded { .. }
    ));
}

#[test]
fn a_row_of_many_samples_draws_a_bounded_number_of_dots() {
    let many: Vec<f64> = (0..30_000).map(|i| 1.0 + (i % 100) as f64 * 1e-3).collect();
    let dots = scales::spread(&many);
    assert_eq!(dots.len(), scales::MAX_DOTS);
    assert_eq!(dots.first(), Some(&1.0));
    assert_eq!(dots.last(), Some(&1.099));
}
