//! Bootstrap comparison of two variants' medians.

use super::SplitMix64;
use super::summary::quantile;
use serde::{Deserialize, Serialize};

/// What a comparison concludes.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Verdict {
    /// The candidate is faster: the whole interval lies above the same band.
    Faster,
    /// The candidate is slower: the whole interval lies below the same band.
    Slower,
    /// The whole interval lies inside the same band.
    Same,
    /// The interval straddles an edge of the same band.
    Ambiguous,
}

/// A candidate's speed against a baseline.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub struct Comparison {
    /// `median(baseline) / median(candidate)`: above 1 the candidate is faster.
    pub speedup: f64,
    /// Lower end of the bootstrap 95 % interval of the speedup.
    pub low: f64,
    /// Upper end of the bootstrap 95 % interval of the speedup.
    pub high: f64,
    /// The verdict drawn from the interval.
    pub verdict: Verdict,
}

/// Half-width of the "same" band: speedups within `[1 / 1.01, 1.01]` (1 %
/// either way, symmetric in ratio) are too small to matter for picking a
/// variant, whatever the statistics say.
pub const SAME_BAND: f64 = 0.01;

/// The least difference called a win between samples of the host's
/// clocks (wall or CPU time of a process): two children running the very
/// same variant, pinned to one CPU, came out steadily 3.5 to 4.4 % apart in
/// 3 of 8 runs on a loaded 2-core VM (`tests/bench.rs`, with equal samples
/// per round and rotated order), each side's own spread 2 to 4 %: where
/// the code sits in memory, which neither side's samples can show. Device
/// events time the kernel alone and keep [`SAME_BAND`].
pub const PROCESS_BAND: f64 = 0.05;

/// Half a side's relative interquartile range, at least [`SAME_BAND`]: a
/// difference smaller than what one variant's own samples vary by is not
/// called a win. Two identical variants in two processes can differ
/// steadily by a few percent on a loaded machine (placement, preemption),
/// more than the bootstrap of either sample stream can see.
fn decision_band(sorted: &[f64]) -> f64 {
    let median = quantile(sorted, 0.5);
    let iqr = quantile(sorted, 0.75) - quantile(sorted, 0.25);
    (iqr / median / 2.0).max(SAME_BAND)
}

/// Bootstrap resamples per comparison.
pub const RESAMPLES: usize = 4_000;

/// Compares two variants' samples by a bootstrap of the ratio of medians,
/// deterministic for a seed.
///
/// When either side has no samples or one that is not a positive finite
/// time, there is no estimate: speedup and interval are all 0 and the verdict
/// is `Ambiguous` ([`try_compare`] says `None` instead).
pub fn compare(candidate_ms: &[f64], baseline_ms: &[f64], seed: u64) -> Comparison {
    try_compare(candidate_ms, baseline_ms, seed).unwrap_or(Comparison {
        speedup: 0.0,
        low: 0.0,
        high: 0.0,
        verdict: Verdict::Ambiguous,
    })
}

/// [`compare`], or `None` when a side has no samples or one that is not a
/// positive finite time.
///
/// Each of [`RESAMPLES`] rounds resamples both sides with replacement and
/// takes the ratio of their medians; `low` and `high` are that ratio's 2.5 %
/// and 97.5 % percentiles, `speedup` the ratio of the observed medians. The
/// verdict, with the band of [`SAME_BAND`]:
/// - `Same` when the whole interval lies inside the band;
/// - `Faster` when the whole interval lies above the wider *decision band*
///   (half the larger relative IQR of the two sides, at least the same
///   band) *and* the two medians' own bootstrap 95 % intervals do not
///   overlap (`Slower` mirrored);
/// - `Ambiguous` otherwise, so a winner is never called on an interval that
///   touches the band, on overlapping medians, or on means.
pub fn try_compare(candidate_ms: &[f64], baseline_ms: &[f64], seed: u64) -> Option<Comparison> {
    unpaired(candidate_ms, baseline_ms, seed, SAME_BAND)
}

/// [`try_compare`] with the decision band at least `floor`.
fn unpaired(
    candidate_ms: &[f64],
    baseline_ms: &[f64],
    seed: u64,
    floor: f64,
) -> Option<Comparison> {
    let candidate = sorted_times(candidate_ms)?;
    let baseline = sorted_times(baseline_ms)?;
    let speedup = quantile(&baseline, 0.5) / quantile(&candidate, 0.5);
    let mut rng = SplitMix64::new(seed);
    let mut cand = Vec::with_capacity(RESAMPLES);
    let mut base = Vec::with_capacity(RESAMPLES);
    let mut ratio = Vec::with_capacity(RESAMPLES);
    for _ in 0..RESAMPLES {
        let (c, b) = (
            resampled_median(&candidate, &mut rng),
            resampled_median(&baseline, &mut rng),
        );
        cand.push(c);
        base.push(b);
        ratio.push(b / c);
    }
    let interval = |v: &mut Vec<f64>| {
        v.sort_by(f64::total_cmp);
        (quantile(v, 0.025), quantile(v, 0.975))
    };
    let (low, high) = interval(&mut ratio);
    let (cand_low, cand_high) = interval(&mut cand);
    let (base_low, base_high) = interval(&mut base);
    let band = 1.0 + SAME_BAND;
    let spread = 1.0
        + decision_band(&candidate)
            .max(decision_band(&baseline))
            .max(floor);
    let verdict = if low >= 1.0 / band && high <= band {
        Verdict::Same
    } else if low > spread && cand_high < base_low {
        Verdict::Faster
    } else if high < 1.0 / spread && cand_low > base_high {
        Verdict::Slower
    } else {
        Verdict::Ambiguous
    };
    Some(Comparison {
        speedup,
        low,
        high,
        verdict,
    })
}

/// One side's samples with the round each was taken in. Rounds interleave
/// the variants (A B C A B C …), so round `r` of two variants met the same
/// machine: a stretch of slower clocks, another process, a throttled host
/// weighs on both.
#[derive(Debug, Clone, Copy)]
pub struct Rounds<'a> {
    /// The kept samples, in milliseconds.
    pub ms: &'a [f64],
    /// The round of each sample (empty: not known).
    pub round: &'a [u32],
}

/// The fewest rounds two sides must share to be compared round by round.
pub const MIN_PAIRED_ROUNDS: usize = 8;

/// [`compare`], round by round where it can be ([`try_compare_rounds`]).
pub fn compare_rounds(candidate: Rounds, baseline: Rounds, seed: u64) -> Comparison {
    try_compare_rounds(candidate, baseline, seed).unwrap_or(Comparison {
        speedup: 0.0,
        low: 0.0,
        high: 0.0,
        verdict: Verdict::Ambiguous,
    })
}

/// Compares two sides round by round when both know the round of every
/// sample and share at least [`MIN_PAIRED_ROUNDS`] rounds; else as
/// [`try_compare`].
///
/// Paired, each shared round gives one ratio, the baseline's median in that
/// round over the candidate's; `speedup` is the median of those ratios and
/// the interval a bootstrap of it over the rounds. A change of the machine
/// that lasts longer than a round (a slower phase of a shared host) moves
/// both sides of a round alike and cancels in its ratio, where comparing
/// the two sides' medians would count it as noise, or, when it covers
/// about half the rounds, as a difference. The verdict is drawn as in
/// [`try_compare`] without its overlap condition (which a stretch both
/// sides met defeats); the decision band is the widest of the ratios' and
/// of each side's (half the relative IQR, at least [`SAME_BAND`]).
pub fn try_compare_rounds(candidate: Rounds, baseline: Rounds, seed: u64) -> Option<Comparison> {
    try_compare_rounds_beyond(candidate, baseline, seed, SAME_BAND)
}

/// [`try_compare_rounds`] where no difference within `floor` (relative,
/// at least [`SAME_BAND`]) is called a win: what two processes running the
/// same code can differ by, steadily, that neither side's samples show.
/// [`PROCESS_BAND`] for samples of the host's clocks.
pub fn try_compare_rounds_beyond(
    candidate: Rounds,
    baseline: Rounds,
    seed: u64,
    floor: f64,
) -> Option<Comparison> {
    let floor = floor.max(SAME_BAND);
    let (Some(cand_sorted), Some(base_sorted)) =
        (sorted_times(candidate.ms), sorted_times(baseline.ms))
    else {
        return None;
    };
    let (Some(cand), Some(base)) = (per_round(candidate), per_round(baseline)) else {
        return unpaired(candidate.ms, baseline.ms, seed, floor);
    };
    let mut ratios: Vec<f64> = cand
        .iter()
        .filter_map(|(round, c)| base.get(round).map(|b| b / c))
        .collect();
    if ratios.len() < MIN_PAIRED_ROUNDS {
        return unpaired(candidate.ms, baseline.ms, seed, floor);
    }
    ratios.sort_by(f64::total_cmp);
    let speedup = quantile(&ratios, 0.5);
    let mut rng = SplitMix64::new(seed);
    let mut medians: Vec<f64> = (0..RESAMPLES)
        .map(|_| resampled_median(&ratios, &mut rng))
        .collect();
    medians.sort_by(f64::total_cmp);
    let (low, high) = (quantile(&medians, 0.025), quantile(&medians, 0.975));
    let band = 1.0 + SAME_BAND;
    // The ratios' own spread, and no less than a side's: pairing cancels
    // what both sides met, not a steady difference between two processes
    // (see `decision_band`), which can be as large as what either side's
    // samples vary by.
    let spread = 1.0
        + decision_band(&ratios)
            .max(decision_band(&cand_sorted))
            .max(decision_band(&base_sorted))
            .max(floor);
    let verdict = if low >= 1.0 / band && high <= band {
        Verdict::Same
    } else if low > spread {
        Verdict::Faster
    } else if high < 1.0 / spread {
        Verdict::Slower
    } else {
        Verdict::Ambiguous
    };
    Some(Comparison {
        speedup,
        low,
        high,
        verdict,
    })
}

/// The median of each round's samples (positive finite times, checked by
/// the caller), by round; `None` when the rounds are not known for every
/// sample.
fn per_round(side: Rounds) -> Option<std::collections::BTreeMap<u32, f64>> {
    if side.round.len() != side.ms.len() {
        return None;
    }
    let mut by_round: std::collections::BTreeMap<u32, Vec<f64>> = Default::default();
    for (&round, &ms) in side.round.iter().zip(side.ms) {
        by_round.entry(round).or_default().push(ms);
    }
    Some(
        by_round
            .into_iter()
            .map(|(round, mut ms)| {
                ms.sort_by(f64::total_cmp);
                (round, quantile(&ms, 0.5))
            })
            .collect(),
    )
}

/// The samples sorted, when all are positive finite times.
fn sorted_times(samples: &[f64]) -> Option<Vec<f64>> {
    if samples.is_empty() || !samples.iter().all(|x| x.is_finite() && *x > 0.0) {
        return None;
    }
    let mut sorted = samples.to_vec();
    sorted.sort_by(f64::total_cmp);
    Some(sorted)
}

/// The median of one bootstrap resample of sorted values, drawn in constant
/// time instead of by resampling all `n` values.
///
/// A resample takes `x[floor(n·Uᵢ)]` for `n` uniform `Uᵢ`; since that map is
/// monotone, its `k`-th smallest value is `x[floor(n·U₍ₖ₎)]`, and the `k`-th
/// order statistic of `n` uniforms is Beta(`k`, `n - k + 1`). For an even
/// count the next one is `U₍ₖ₊₁₎ = U₍ₖ₎ + (1 - U₍ₖ₎)·V` with `V` the smallest of
/// the `n - k` uniforms above, Beta(1, `n - k`). This has exactly the
/// distribution of the resampled median, at any sample count.
fn resampled_median(sorted: &[f64], rng: &mut SplitMix64) -> f64 {
    let n = sorted.len();
    let at = |u: f64| sorted[((u * n as f64) as usize).min(n - 1)];
    let k = n.div_ceil(2);
    let u = rng.beta(k as f64, (n - k + 1) as f64);
    if n % 2 == 1 {
        return at(u);
    }
    // Smallest of n - k uniforms: 1 - W^(1 / (n - k)), W uniform in (0, 1].
    let v = 1.0 - (1.0 - rng.next_f64()).powf(1.0 / (n - k) as f64);
    (at(u) + at(u + (1.0 - u) * v)) / 2.0
}

#[cfg(test)]
mod tests {
    use super::*;

    /// `n` synthetic times around `base` ms: 2 % multiplicative noise and a
    /// 30 % slow sample one time in twenty, so the true median is `base`
    /// times a constant and true ratios are the ratios of the bases.
    fn stream(rng: &mut SplitMix64, n: usize, base: f64, rel: f64) -> Vec<f64> {
        (0..n)
            .map(|_| {
                let slow = if rng.next_f64() < 0.05 { 1.3 } else { 1.0 };
                base * slow * (1.0 + rel * rng.normal())
            })
            .collect()
    }

    fn binomial_tail(n: usize, p: f64, at_least: usize) -> f64 {
        let mut total = 0.0;
        let mut coef = 1.0; // C(n, i)
        for i in 0..=n {
            if i >= at_least {
                total += coef * p.powi(i as i32) * (1.0 - p).powi((n - i) as i32);
            }
            coef = coef * (n - i) as f64 / (i + 1) as f64;
        }
        total
    }

    #[test]
    fn resampled_median_of_odd_count_is_exact() {
        // The median of a resample of 7 is ≤ x[j] when at least 4 draws are
        // among the j + 1 smallest: Binomial(7, (j + 1) / 7) ≥ 4.
        let x: Vec<f64> = (0..7).map(f64::from).collect();
        let mut rng = SplitMix64::new(11);
        let draws = 200_000;
        let mut count = [0usize; 7];
        for _ in 0..draws {
            count[resampled_median(&x, &mut rng) as usize] += 1;
        }
        let upto = |j: usize| binomial_tail(7, j as f64 / 7.0, 4);
        for (j, &c) in count.iter().enumerate() {
            let exact = upto(j + 1) - upto(j);
            let seen = c as f64 / draws as f64;
            assert!((seen - exact).abs() < 0.005, "x[{j}]: {seen} vs {exact}");
        }
    }

    #[test]
    fn resampled_median_of_even_count_matches_plain_resampling() {
        let x: Vec<f64> = (0..6).map(f64::from).collect();
        let mut rng = SplitMix64::new(5);
        let draws = 200_000;
        // Medians of 6 lie on half steps: index them by 2·median.
        let mut fast = [0usize; 11];
        let mut plain = [0usize; 11];
        for _ in 0..draws {
            fast[(2.0 * resampled_median(&x, &mut rng)) as usize] += 1;
            let mut r: Vec<f64> = (0..6).map(|_| x[rng.below(6)]).collect();
            r.sort_by(f64::total_cmp);
            plain[(r[2] + r[3]) as usize] += 1;
        }
        for i in 0..11 {
            let (a, b) = (
                fast[i] as f64 / draws as f64,
                plain[i] as f64 / draws as f64,
            );
            assert!((a - b).abs() < 0.006, "2·median {i}: {a} vs {b}");
        }
    }

    #[test]
    fn deterministic_for_a_seed() {
        let mut rng = SplitMix64::new(1);
        let a = stream(&mut rng, 40, 1.0, 0.02);
        let b = stream(&mut rng, 40, 1.02, 0.02);
        assert_eq!(compare(&a, &b, 9), compare(&a, &b, 9));
        assert_ne!(compare(&a, &b, 9).low, compare(&a, &b, 10).low);
    }

    #[test]
    fn equal_streams_are_never_a_winner() {
        let mut same = 0;
        for seed in 0..60 {
            let mut rng = SplitMix64::new(seed);
            for n in [10, 60, 400] {
                let a = stream(&mut rng, n, 1.0, 0.02);
                let b = stream(&mut rng, n, 1.0, 0.02);
                let c = compare(&a, &b, seed);
                assert!(
                    matches!(c.verdict, Verdict::Same | Verdict::Ambiguous),
                    "seed {seed}, n {n}: {c:?}"
                );
                same += usize::from(n == 400 && c.verdict == Verdict::Same);
            }
        }
        // With 400 samples of 2 % noise the interval is narrow enough to say so.
        assert!(same >= 54, "{same} of 60");
    }

    #[test]
    fn known_ratios_are_found_with_their_interval() {
        for ratio in [1.5, 3.0] {
            let mut covered = 0;
            for seed in 0..40 {
                let mut rng = SplitMix64::new(seed);
                let fast = stream(&mut rng, 50, 1.0, 0.02);
                let slow = stream(&mut rng, 50, ratio, 0.02);
                let c = compare(&fast, &slow, seed);
                assert_eq!(c.verdict, Verdict::Faster, "{ratio}, seed {seed}: {c:?}");
                assert!((c.speedup / ratio - 1.0).abs() < 0.02, "{c:?}");
                assert!(c.low <= c.speedup && c.speedup <= c.high, "{c:?}");
                covered += usize::from(c.low <= ratio && ratio <= c.high);
                let back = compare(&slow, &fast, seed);
                assert_eq!(
                    back.verdict,
                    Verdict::Slower,
                    "{ratio}, seed {seed}: {back:?}"
                );
            }
            // A 95 % interval; allow for the bootstrap's optimism at n = 50.
            assert!(covered >= 35, "ratio {ratio}: covered {covered} of 40");
        }
    }

    #[test]
    fn a_difference_inside_the_band_is_same() {
        let mut rng = SplitMix64::new(3);
        let a = stream(&mut rng, 2000, 1.0, 0.005);
        let b = stream(&mut rng, 2000, 1.003, 0.005);
        assert_eq!(compare(&a, &b, 1).verdict, Verdict::Same);
    }

    #[test]
    fn a_difference_at_the_band_edge_is_ambiguous() {
        // True ratio 1.01: the interval straddles the band's edge.
        let mut rng = SplitMix64::new(4);
        let a = stream(&mut rng, 300, 1.0, 0.02);
        let b = stream(&mut rng, 300, 1.01, 0.02);
        assert_eq!(compare(&a, &b, 1).verdict, Verdict::Ambiguous);
    }

    #[test]
    fn no_estimate_without_times() {
        let ok = [1.0, 2.0];
        for bad in [
            &[][..],
            &[1.0, f64::NAN],
            &[0.0, 1.0],
            &[-1.0],
            &[f64::INFINITY],
        ] {
            assert_eq!(try_compare(bad, &ok, 0), None);
            assert_eq!(try_compare(&ok, bad, 0), None);
            let c = compare(bad, &ok, 0);
            assert_eq!(
                (c.speedup, c.low, c.high, c.verdict),
                (0.0, 0.0, 0.0, Verdict::Ambiguous)
            );
        }
        // One sample each is an estimate, though a weak one.
        let c = try_compare(&[1.0], &[2.0], 0).unwrap();
        assert_eq!((c.speedup, c.low, c.high), (2.0, 2.0, 2.0));
    }

    #[test]
    fn json_names() {
        let c = Comparison {
            speedup: 1.5,
            low: 1.4,
            high: 1.6,
            verdict: Verdict::Faster,
        };
        let json = serde_json::to_string(&c).unwrap();
        assert_eq!(
            json,
            r#"{"speedup":1.5,"low":1.4,"high":1.6,"verdict":"faster"}"#
        );
        assert_eq!(serde_json::from_str::<Comparison>(&json).unwrap(), c);
    }

    /// Two identical variants timed by the wall clock on the loaded CI
    /// machine (tests/bench.rs, a failed run): 2.1 % apart, an interval of
    /// [0.963, 0.990], relative IQRs of 3.4 % and 4.3 %. The bootstrap alone
    /// called this `slower`; it is within what each variant's own samples
    /// vary by.
    #[test]
    fn a_steady_difference_smaller_than_the_spread_is_not_called() {
        let (first, second) = steady_pair();
        let c = compare(&second, &first, 7);
        assert!(c.high < 1.0 / (1.0 + SAME_BAND), "{c:?}");
        assert_eq!(c.verdict, Verdict::Ambiguous, "{c:?}");
    }

    /// The samples of the test above.
    fn steady_pair() -> (Vec<f64>, Vec<f64>) {
        const FIRST: [f64; 66] = [
            10.253, 8.725, 10.880, 11.955, 11.173, 11.271, 11.319, 10.990, 11.116, 11.553, 11.319,
            11.465, 11.181, 11.384, 11.508, 11.597, 11.379, 11.470, 11.277, 11.592, 11.868, 11.237,
            11.280, 11.631, 11.600, 11.803, 11.523, 11.430, 12.096, 11.648, 11.914, 11.715, 12.013,
            11.552, 11.809, 11.846, 12.185, 11.183, 11.563, 11.580, 11.635, 11.355, 11.522, 10.392,
            10.740, 11.638, 11.919, 11.509, 11.266, 11.795, 11.794, 11.410, 11.355, 11.285, 11.611,
            12.062, 11.242, 11.555, 11.648, 11.406, 11.627, 11.168, 10.940, 11.180, 6.958, 9.264,
        ];
        const SECOND: [f64; 66] = [
            8.709, 10.762, 11.826, 11.939, 12.056, 12.150, 12.020, 12.011, 11.475, 11.828, 12.125,
            11.999, 11.832, 12.244, 10.776, 12.286, 11.638, 16.128, 11.843, 11.936, 11.907, 12.172,
            11.740, 11.909, 12.453, 11.484, 11.724, 12.029, 11.687, 11.765, 11.699, 11.838, 11.726,
            11.650, 11.824, 11.934, 11.730, 12.023, 12.500, 11.998, 11.490, 12.895, 11.722, 11.231,
            11.085, 11.313, 11.544, 11.318, 11.283, 11.514, 11.475, 11.419, 11.350, 10.986, 10.990,
            11.552, 11.741, 11.651, 11.342, 11.913, 11.532, 11.392, 11.929, 11.496, 11.218, 14.317,
        ];
        (FIRST.to_vec(), SECOND.to_vec())
    }

    /// Three variants (1×, 1.5×, 3×) timed by CPU time on one CPU of the
    /// loaded CI machine (tests/bench.rs, a failed run): the host went
    /// through slower and faster stretches that every variant met alike,
    /// round by round (samples 16–22 and 44 on are the fast stretch). The
    /// two sides' medians are far apart and their samples bimodal, so
    /// comparing the medians alone called the 1.5× variant `ambiguous`;
    /// round by round the ratio is steady.
    #[test]
    fn rounds_cancel_a_slower_stretch_that_both_sides_met() {
        const FAST: [f64; 87] = [
            5.126, 5.179, 5.025, 5.273, 5.355, 5.168, 5.374, 5.305, 5.365, 5.305, 5.260, 5.281,
            5.284, 5.362, 5.121, 5.007, 3.095, 3.1401, 3.115, 3.077, 3.117, 3.107, 3.306, 5.766,
            5.705, 5.555, 4.854, 4.789, 4.982, 5.748, 5.596, 5.225, 4.843, 4.742, 4.834, 4.816,
            4.779, 4.859, 4.871, 4.754, 4.999, 5.541, 5.589, 5.498, 3.082, 3.109, 3.061, 3.049,
            3.070, 3.054, 3.084, 3.106, 3.093, 3.103, 3.113, 3.647, 3.138, 3.169, 3.139, 3.125,
            3.108, 3.098, 3.051, 3.194, 3.084, 3.107, 3.063, 3.223, 3.072, 3.125, 3.100, 3.082,
            3.108, 3.057, 3.082, 3.049, 3.096, 3.115, 3.132, 3.203, 3.119, 3.092, 3.095, 3.074,
            3.089, 3.128, 3.319,
        ];
        const MID: [f64; 87] = [
            7.880, 7.719, 8.350, 8.085, 7.969, 8.291, 8.073, 7.976, 8.035, 7.942, 7.841, 8.216,
            8.163, 8.085, 8.049, 7.906, 4.694, 4.632, 4.615, 4.698, 6.182, 4.517, 5.107, 8.826,
            8.570, 8.619, 8.836, 7.705, 7.396, 8.410, 8.612, 7.889, 7.619, 7.733, 7.375, 7.640,
            7.203, 7.604, 7.370, 7.328, 6.890, 7.631, 8.463, 8.399, 7.057, 4.815, 4.755, 4.587,
            4.577, 4.641, 4.716, 4.861, 4.649, 4.730, 4.714, 4.822, 4.628, 4.786, 4.811, 4.845,
            4.653, 4.752, 4.600, 4.715, 5.028, 4.765, 4.731, 4.676, 4.799, 4.756, 4.765, 4.759,
            4.640, 4.722, 4.753, 4.755, 4.574, 4.939, 4.754, 4.808, 4.649, 4.684, 4.851, 4.690,
            4.560, 4.764, 4.744,
        ];
        const SLOW: [f64; 87] = [
            15.701, 15.321, 15.757, 15.635, 15.815, 16.061, 15.641, 15.573, 15.780, 15.183, 15.315,
            15.923, 15.837, 15.454, 15.335, 14.927, 9.140, 9.085, 9.076, 9.092, 11.290, 9.027,
            8.928, 16.843, 16.840, 16.954, 14.215, 14.740, 14.945, 16.837, 16.659, 14.729, 14.548,
            14.649, 14.555, 14.727, 14.383, 14.428, 14.637, 14.297, 14.794, 15.932, 16.733, 16.117,
            9.201, 9.044, 9.115, 9.005, 9.094, 8.936, 8.959, 9.222, 9.229, 9.095, 9.169, 9.254,
            9.291, 9.222, 9.090, 9.180, 9.180, 9.222, 9.148, 8.699, 9.244, 9.339, 9.008, 9.086,
            9.507, 9.215, 9.050, 9.128, 9.251, 8.817, 9.121, 9.057, 9.075, 9.184, 9.057, 9.248,
            9.154, 9.058, 9.042, 9.087, 9.180, 9.227, 9.194,
        ];
        let rounds: Vec<u32> = (0..FAST.len() as u32).collect();
        let side = |ms: &'static [f64]| Rounds { ms, round: &rounds };
        assert_eq!(compare(&MID, &FAST, 7).verdict, Verdict::Ambiguous);
        for (ms, truth) in [(&MID[..], 1.5), (&SLOW[..], 3.0)] {
            let c = compare_rounds(side(ms), side(&FAST), 7);
            assert_eq!(c.verdict, Verdict::Slower, "{truth}: {c:?}");
            assert!(
                (1.0 / c.speedup / truth - 1.0).abs() < 0.05,
                "{truth}: {c:?}"
            );
            assert!(c.low <= c.speedup && c.speedup <= c.high, "{c:?}");
        }
        // Equal sides, round by round: never a winner.
        let c = compare_rounds(side(&FAST), side(&FAST), 7);
        assert_eq!(c.verdict, Verdict::Same, "{c:?}");
    }

    #[test]
    fn without_rounds_or_with_few_shared_ones_the_medians_are_compared() {
        let mut rng = SplitMix64::new(3);
        let a = stream(&mut rng, 40, 1.0, 0.02);
        let b = stream(&mut rng, 40, 1.5, 0.02);
        let unpaired = compare(&b, &a, 9);
        let none = Rounds { ms: &b, round: &[] };
        let all: Vec<u32> = (0..40).collect();
        assert_eq!(
            compare_rounds(
                none,
                Rounds {
                    ms: &a,
                    round: &all
                },
                9
            ),
            unpaired
        );
        // Disjoint rounds share none.
        let later: Vec<u32> = (100..140).collect();
        let (x, y) = (
            Rounds {
                ms: &b,
                round: &all,
            },
            Rounds {
                ms: &a,
                round: &later,
            },
        );
        assert_eq!(compare_rounds(x, y, 9), unpaired);
    }

    /// The identical variants of the test above, paired sample by sample
    /// (one sample a round): round by round they are not called apart
    /// either.
    #[test]
    fn a_steady_difference_smaller_than_the_spread_is_not_called_round_by_round() {
        let c = {
            let (first, second) = steady_pair();
            let rounds: Vec<u32> = (0..first.len() as u32).collect();
            compare_rounds(
                Rounds {
                    ms: &second,
                    round: &rounds,
                },
                Rounds {
                    ms: &first,
                    round: &rounds,
                },
                7,
            )
        };
        assert_ne!(c.verdict, Verdict::Slower, "{c:?}");
        assert_ne!(c.verdict, Verdict::Faster, "{c:?}");
    }
}
