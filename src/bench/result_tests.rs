use super::*;
use crate::stats::SplitMix64;
use std::time::Duration;

/// `n` samples around `base` ms with 1 % noise, rounded to the microsecond
/// so that they survive a JSON round trip bit for bit.
pub(crate) fn samples(seed: u64, n: usize, base: f64) -> Vec<f64> {
    let mut rng = SplitMix64::new(seed);
    (0..n)
        .map(|_| (base * (1.0 + 0.01 * rng.normal()) * 1000.0).round() / 1000.0)
        .collect()
}

/// A timed variant with these samples.
pub(crate) fn timed(name: &str, samples_ms: Vec<f64>, stop: StopRule) -> VariantBench {
    VariantBench {
        variant: name.to_string(),
        job: format!("{:0>16}", name.len()),
        status: BenchStatus::Timed(Timed {
            summary: Summary::of(&samples_ms).unwrap(),
            stop,
            samples_ms,
            rounds: Vec::new(),
            dropped_throttled: 0,
            timer: Timer::DeviceEvents,
        }),
        vs_fastest: None,
        vs_reference: None,
    }
}

/// An excluded variant.
pub(crate) fn excluded(name: &str, outcome: OutcomeKind, reason: &str) -> VariantBench {
    VariantBench {
        variant: name.to_string(),
        job: "00".to_string(),
        status: BenchStatus::Excluded {
            outcome,
            reason: reason.to_string(),
        },
        vs_fastest: None,
        vs_reference: None,
    }
}

/// A report, unranked: medians 2, 1 and 3 ms among two excluded variants,
/// and a reference at 4 ms.
pub(crate) fn fixture() -> BenchReport {
    BenchReport {
        target: "kernels-community/relu".to_string(),
        workload: "smoke".to_string(),
        fingerprint: "0123456789abcdef".to_string(),
        device: "NVIDIA H200 (sm_90)".to_string(),
        flush_l2: true,
        criteria: StopCriteria {
            min_time: Duration::from_millis(250),
            ..StopCriteria::default()
        },
        variants: vec![
            excluded(
                "cu126-wrong",
                OutcomeKind::WrongResult,
                "max abs error 0.5 > 1e-5",
            ),
            timed("cu128-mid", samples(1, 40, 2.0), StopRule::Plateau),
            timed("cu129-fast", samples(2, 40, 1.0), StopRule::Noise),
            excluded("cu124-crash", OutcomeKind::Crashed, "SIGSEGV in round 3"),
            timed("cu130-slow", samples(3, 40, 3.0), StopRule::Timeout),
        ],
        reference: Some(timed("reference", samples(4, 40, 4.0), StopRule::Noise)),
        context: None,
    }
}

fn names(r: &BenchReport) -> Vec<&str> {
    r.variants.iter().map(|v| v.variant.as_str()).collect()
}

#[test]
fn rank_sorts_fastest_first_and_excluded_last_in_order() {
    let mut r = fixture();
    r.rank(1);
    assert_eq!(
        names(&r),
        [
            "cu129-fast",
            "cu128-mid",
            "cu130-slow",
            "cu126-wrong",
            "cu124-crash"
        ]
    );
}

#[test]
fn rank_compares_with_the_fastest_and_the_reference() {
    let mut r = fixture();
    r.rank(1);
    let v = &r.variants;
    assert_eq!(v[0].vs_fastest, None);
    let mid = v[1].vs_fastest.unwrap();
    assert_eq!(mid.verdict, Verdict::Slower);
    assert!((mid.speedup - 0.5).abs() < 0.02, "{mid:?}");
    let slow = v[2].vs_fastest.unwrap();
    assert!((slow.speedup - 1.0 / 3.0).abs() < 0.02, "{slow:?}");
    let fast_ref = v[0].vs_reference.unwrap();
    assert_eq!(fast_ref.verdict, Verdict::Faster);
    assert!((fast_ref.speedup - 4.0).abs() < 0.1, "{fast_ref:?}");
    assert!(v[2].vs_reference.unwrap().verdict == Verdict::Faster);
    for e in &v[3..] {
        assert_eq!((e.vs_fastest, e.vs_reference), (None, None));
    }
    let reference = r.reference.as_ref().unwrap();
    assert_eq!(reference.vs_fastest.unwrap().verdict, Verdict::Slower);
    assert_eq!(reference.vs_reference, None);
    assert_eq!(
        r.contenders()
            .map(|v| v.variant.as_str())
            .collect::<Vec<_>>(),
        ["cu129-fast"]
    );
}

#[test]
fn rank_is_deterministic_and_idempotent() {
    let mut a = fixture();
    a.rank(7);
    let mut b = a.clone();
    b.variants.reverse();
    b.rank(7);
    // Equal ranks, equal comparisons, whatever the order given.
    assert_eq!(names(&a)[..3], names(&b)[..3]);
    assert_eq!(a.variants[..3], b.variants[..3]);
}

#[test]
fn rank_clears_stale_comparisons_and_leaves_no_reference_alone() {
    let mut r = fixture();
    r.reference = None;
    r.rank(1);
    let stale = r.variants[1].vs_fastest;
    r.variants.swap(0, 1);
    r.variants[0].vs_fastest = None;
    r.variants[1].vs_fastest = stale;
    r.variants[3].vs_fastest = stale;
    r.rank(1);
    assert_eq!(r.variants[0].vs_fastest, None);
    assert!(r.variants.iter().all(|v| v.vs_reference.is_none()));
    assert_eq!(r.variants[3].vs_fastest, None);
}

#[test]
fn equal_variants_are_both_contenders() {
    let mut r = fixture();
    r.variants = vec![
        timed("a", samples(10, 400, 1.0), StopRule::Noise),
        timed("b", samples(11, 400, 1.0), StopRule::Noise),
        timed("c", samples(12, 400, 2.0), StopRule::Noise),
    ];
    r.rank(3);
    let top: Vec<_> = r.contenders().map(|v| v.variant.as_str()).collect();
    assert_eq!(top.len(), 2, "{top:?}");
    assert!(matches!(
        r.variants[1].vs_fastest.unwrap().verdict,
        Verdict::Same | Verdict::Ambiguous
    ));
}

#[test]
fn rank_of_nothing_timed() {
    let mut r = fixture();
    r.variants.retain(|v| v.timed().is_none());
    r.rank(1);
    assert_eq!(names(&r), ["cu126-wrong", "cu124-crash"]);
    assert_eq!(r.reference.as_ref().unwrap().vs_fastest, None);
    assert_eq!(r.contenders().count(), 0);
}

#[test]
fn json_round_trip_and_shape() {
    let mut r = fixture();
    r.rank(1);
    let json = serde_json::to_string_pretty(&r).unwrap();
    let back: BenchReport = serde_json::from_str(&json).unwrap();
    assert_eq!(back, r);
    let value: serde_json::Value = serde_json::from_str(&json).unwrap();
    let fast = &value["variants"][0];
    assert_eq!(fast["status"]["status"], "timed");
    assert_eq!(fast["status"]["stop"], "noise");
    assert_eq!(fast["status"]["timer"], "device_events");
    assert_eq!(value["variants"][1]["vs_fastest"]["verdict"], "slower");
    assert_eq!(value["variants"][3]["status"]["outcome"], "wrong_result");
    assert_eq!(value["criteria"]["min_time"], 0.25);
}
