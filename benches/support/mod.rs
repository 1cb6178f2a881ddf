//! What the process-timing benchmarks share: how many rounds, timing one
//! command, and quartiles.
#![allow(dead_code)]

use std::path::PathBuf;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

/// A named case of an interleaved benchmark.
pub type Case<'a> = (&'static str, Box<dyn FnMut() + 'a>);

/// Rounds to run: `PREFLIGHT_BENCH_ROUNDS` (else `default`) under
/// `cargo bench`, which passes `--bench`; 2 under `cargo test --all-targets`,
/// which only shows that every case still runs.
pub fn rounds(default: usize) -> usize {
    if !benchmarking() {
        return 2;
    }
    std::env::var("PREFLIGHT_BENCH_ROUNDS")
        .ok()
        .and_then(|r| r.parse().ok())
        .unwrap_or(default)
        .max(2)
}

/// Whether this is a real benchmark run (`cargo bench`).
pub fn benchmarking() -> bool {
    std::env::args().any(|a| a == "--bench")
}

/// The `preflight` binary cargo built for this benchmark.
pub fn preflight() -> PathBuf {
    PathBuf::from(env!("CARGO_BIN_EXE_preflight"))
}

/// Wall time of one run of `cmd`, which must succeed.
pub fn time(cmd: &mut Command) -> Duration {
    let start = Instant::now();
    let status = cmd
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .status();
    let elapsed = start.elapsed();
    match status {
        Ok(s) if s.success() => elapsed,
        other => panic!("{cmd:?} failed: {other:?}"),
    }
}

/// First quartile, median and third quartile, in milliseconds.
pub struct Quartiles {
    /// 25th percentile.
    pub q1: f64,
    /// 50th percentile.
    pub median: f64,
    /// 75th percentile.
    pub q3: f64,
}

impl Quartiles {
    /// The quartiles of some samples.
    pub fn of(samples: &mut [Duration]) -> Quartiles {
        samples.sort();
        let ms = |q: f64| {
            let i = ((samples.len() - 1) as f64 * q).round() as usize;
            samples[i].as_secs_f64() * 1e3
        };
        Quartiles {
            q1: ms(0.25),
            median: ms(0.5),
            q3: ms(0.75),
        }
    }

    /// One table row: label, q1, median, q3.
    pub fn row(&self, label: &str) -> String {
        format!(
            "{label:<52} {:>8.2} {:>8.2} {:>8.2}",
            self.q1, self.median, self.q3
        )
    }
}

/// The table header matching [`Quartiles::row`].
pub fn header() -> String {
    format!("{:<52} {:>8} {:>8} {:>8}", "", "q1", "median", "q3")
}

/// Runs every case once per round, in an order that rotates each round,
/// after a warm-up of a tenth of the rounds.
pub fn measure(cases: &mut [Case], rounds: usize) -> Vec<Vec<Duration>> {
    for _ in 0..rounds.div_ceil(10) {
        for (_, run) in cases.iter_mut() {
            run();
        }
    }
    let mut samples = vec![Vec::with_capacity(rounds); cases.len()];
    for round in 0..rounds {
        for i in 0..cases.len() {
            let at = (i + round) % cases.len();
            let started = Instant::now();
            (cases[at].1)();
            samples[at].push(started.elapsed());
        }
    }
    samples
}

/// Linear interpolation between the closest ranks of sorted samples.
pub fn quantile(sorted: &[Duration], q: f64) -> Duration {
    let at = q * (sorted.len() - 1) as f64;
    let (lo, hi) = (at.floor() as usize, at.ceil() as usize);
    let frac = at - lo as f64;
    sorted[lo].mul_f64(1.0 - frac) + sorted[hi].mul_f64(frac)
}

/// Print one Markdown row per case (n, q1, median, q3, min, and the median's
/// difference from the first case, the baseline), under `title`.
pub fn print_cases(title: &str, cases: &[Case], samples: Vec<Vec<Duration>>) {
    println!("\n{title}\n");
    println!("| case | n | q1 | median | q3 | min | median Δ |");
    println!("| --- | ---: | ---: | ---: | ---: | ---: | ---: |");
    let mut baseline = None;
    for ((name, _), mut times) in cases.iter().zip(samples) {
        times.sort();
        let median = quantile(&times, 0.5);
        let base = *baseline.get_or_insert(median);
        let ms = |d: Duration| format!("{:.3} ms", d.as_secs_f64() * 1e3);
        println!(
            "| {name} | {} | {} | {} | {} | {} | {:+.3} ms |",
            times.len(),
            ms(quantile(&times, 0.25)),
            ms(median),
            ms(quantile(&times, 0.75)),
            ms(times[0]),
            (median.as_secs_f64() - base.as_secs_f64()) * 1e3,
        );
    }
}
