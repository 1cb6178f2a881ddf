//! The pictures as a person sees them: `bench --plot`'s SVG chart and
//! `fleet report --html`'s page, made from hard cases (long and hostile
//! names, a tie, failures, a class with no verdict), laid out by a real
//! headless Chromium, whose boxes a script measures: every variant and
//! class present, no text overlapping other text, nothing outside the
//! picture, nothing under 11 px at 800 px wide, readable in a dark theme;
//! plus snapshots of their text.
//!
//! Screenshots go to `$PREFLIGHT_SCREENSHOTS` when it is set, for people
//! to look at.

mod common;

use common::browser::{self, dump_dom, found, screenshot};
use kernel_preflight::bench::result::{
    BenchContext, BenchReport, BenchStatus, Timed, Timer, VariantBench,
};
use kernel_preflight::classify::OutcomeKind;
use kernel_preflight::fingerprint::ClassFacts;
use kernel_preflight::report::{bench_chart, fleet_page};
use kernel_preflight::run::fleet::{Fleet, Here, KernelVerdicts, MachineClass, VariantVerdict};
use kernel_preflight::stats::{StopCriteria, StopRule, Summary};
use std::path::{Path, PathBuf};

/// A name longer than a row: the chart shortens it and keeps it whole in
/// a tooltip.
const LONG: &str = "torch28-cxx11-cu128-x86_64-linux-built-with-a-very-long-experimental-suffix-that-no-row-can-hold-whole";
/// A name with every character markup must escape.
const HOSTILE: &str = "cu129-<b>&\"quoted\"</b>";

/// `n` samples around `base` ms, spread by `spread` (a fraction),
/// deterministic (a linear congruential generator; the figures do not
/// matter, only that they are the same each run).
fn samples(seed: u64, n: usize, base: f64, spread: f64) -> Vec<f64> {
    let mut x = seed
        .wrapping_mul(6364136223846793005)
        .wrapping_add(1442695040888963407);
    (0..n)
        .map(|_| {
            x = x
                .wrapping_mul(6364136223846793005)
                .wrapping_add(1442695040888963407);
            let u = (x >> 11) as f64 / (1u64 << 53) as f64;
            ((base * (1.0 + spread * (u - 0.5))) * 1e4).round() / 1e4
        })
        .collect()
}

fn timed(name: &str, samples_ms: Vec<f64>, stop: StopRule) -> VariantBench {
    VariantBench {
        variant: name.into(),
        job: "0".repeat(16),
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

fn excluded(name: &str, outcome: OutcomeKind, reason: &str) -> VariantBench {
    VariantBench {
        variant: name.into(),
        job: "0".repeat(16),
        status: BenchStatus::Excluded {
            outcome,
            reason: reason.into(),
        },
        vs_fastest: None,
        vs_reference: None,
    }
}

fn facts(gpu: &str, driver: &str) -> ClassFacts {
    ClassFacts {
        gpu: gpu.into(),
        driver: driver.into(),
        toolkit: "12.8".into(),
        torch: "2.8.0 (cuda 12.8)".into(),
        python: "3.12.3".into(),
        arch: "linux-x86_64".into(),
        env: Default::default(),
    }
}

/// A ranked bench: a fastest variant and its twin (same), a noisy one
/// with a long name (ambiguous), slower ones (one with a hostile name),
/// the reference, and two failures.
fn bench_report() -> BenchReport {
    let mut report = BenchReport {
        target: "kernels-community/activation".into(),
        workload: "SiluAndMul.large".into(),
        fingerprint: "4aba234b0e6d07253a51bb08f680c04798384b9aab3043f15195b9053d215695".into(),
        device: "cuda:0 (NVIDIA H100 80GB HBM3)".into(),
        flush_l2: true,
        criteria: StopCriteria::default(),
        variants: vec![
            timed(
                "torch28-cxx11-cu128-x86_64-linux",
                samples(1, 200, 1.00, 0.01),
                StopRule::Noise,
            ),
            timed(
                "torch28-cxx11-cu126-x86_64-linux",
                samples(2, 200, 1.0005, 0.01),
                StopRule::Noise,
            ),
            timed(
                "torch27-cxx11-cu118-x86_64-linux",
                samples(3, 150, 1.6, 0.06),
                StopRule::Plateau,
            ),
            timed(LONG, samples(4, 400, 1.05, 0.5), StopRule::Timeout),
            timed(HOSTILE, samples(5, 120, 2.4, 0.05), StopRule::Noise),
            excluded(
                "torch29-cxx11-cu130-x86_64-linux",
                OutcomeKind::UnsupportedArch,
                "no kernel image is available for execution on the device (built for sm_100, this GPU is sm_90)",
            ),
            excluded(
                "torch-universal",
                OutcomeKind::WrongResult,
                "max abs error 0.5 > 1e-05",
            ),
        ],
        reference: Some(timed(
            "reference",
            samples(6, 100, 3.1, 0.05),
            StopRule::Noise,
        )),
        context: Some(BenchContext {
            revision: Some("0123456789ab".into()),
            machine: facts("NVIDIA H100 80GB HBM3 (sm 9.0)", "570.86.10"),
            finished: 1_780_000_000,
        }),
    };
    report.rank(0x5eed);
    report
}

fn verdict(variant: &str, outcome: OutcomeKind, accepted: bool) -> VariantVerdict {
    VariantVerdict {
        variant: variant.into(),
        outcome,
        accepted,
    }
}

fn kernel(
    name: &str,
    version: Option<&str>,
    chosen: Option<&str>,
    variants: Vec<VariantVerdict>,
) -> KernelVerdicts {
    KernelVerdicts {
        kernel: name.into(),
        version: version.map(Into::into),
        chosen: chosen.map(Into::into),
        variants,
    }
}

fn class(hash: &str, facts: Option<ClassFacts>, kernels: Vec<KernelVerdicts>) -> MachineClass {
    MachineClass {
        class: hash[..12].into(),
        fingerprint: hash.into(),
        facts,
        machine: "NVIDIA A10G, driver 550.54.15, Python 3.12.3 [9c0e1a2b3c4d]".into(),
        kernels,
    }
}

/// Three classes: two that disagree on a kernel, one that sent no facts
/// and has no verdict for it; a kernel nothing runs on one class; a
/// hostile kernel name; this machine's environment in the first class.
fn fleet() -> Fleet {
    use OutcomeKind::{ImportError, Pass, UnsupportedArch};
    let activation = |chosen: &str, cu129: OutcomeKind| {
        kernel(
            "kernels-community/activation",
            Some("0123456789ab"),
            Some(chosen),
            vec![
                verdict("torch28-cxx11-cu129-x86_64-linux", cu129, true),
                verdict("torch28-cxx11-cu128-x86_64-linux", Pass, true),
            ],
        )
    };
    let flash = |works: bool| {
        kernel(
            "kernels-community/flash-attn3",
            Some("v2"),
            works.then_some("torch28-cxx11-cu128-x86_64-linux"),
            vec![verdict(
                "torch28-cxx11-cu128-x86_64-linux",
                if works { Pass } else { UnsupportedArch },
                true,
            )],
        )
    };
    Fleet {
        classes: vec![
            class(
                &"1a".repeat(32),
                Some(facts("NVIDIA H100 80GB HBM3 (sm 9.0)", "570.86.10")),
                vec![
                    activation("torch28-cxx11-cu129-x86_64-linux", Pass),
                    flash(true),
                ],
            ),
            class(
                &"2b".repeat(32),
                Some(facts("NVIDIA A100-SXM4-80GB (sm 8.0)", "550.54.15")),
                vec![
                    activation("torch28-cxx11-cu128-x86_64-linux", ImportError),
                    flash(false),
                ],
            ),
            class(
                &"3c".repeat(32),
                None,
                vec![kernel(
                    "org/<script>alert(1)</script>",
                    None,
                    None,
                    vec![verdict("torch-universal", ImportError, false)],
                )],
            ),
        ],
        refused: 1,
        here: vec![Here {
            class: "1a1a1a1a1a1a".into(),
            python: "/opt/venv/bin/python".into(),
        }],
    }
}

/// Where this test writes its pages (and screenshots, unless
/// `$PREFLIGHT_SCREENSHOTS` names a folder for them).
fn pages(what: &str) -> (PathBuf, PathBuf) {
    let dir = common::fresh_dir(what);
    let shots =
        std::env::var_os("PREFLIGHT_SCREENSHOTS").map_or_else(|| dir.clone(), PathBuf::from);
    std::fs::create_dir_all(&shots).unwrap();
    (dir, shots)
}

/// Measures every `<text>` of the inline SVG: its box, font size and
/// content, overlaps between any two, and any outside the picture.
const MEASURE_SVG: &str = r#"<pre id="out"></pre><script>
const out = [];
const svg = document.querySelector('svg');
const frame = svg.getBoundingClientRect();
const texts = [...svg.querySelectorAll('text')].map(t => ({
  s: t.childNodes[0].textContent.trim(), r: t.getBoundingClientRect(),
  size: parseFloat(getComputedStyle(t).fontSize) }));
out.push('width ' + Math.round(frame.width));
for (const t of texts) {
  out.push('text ' + t.s);
  if (t.r.left < frame.left - 0.5 || t.r.right > frame.right + 0.5 || t.r.top < frame.top - 0.5 || t.r.bottom > frame.bottom + 0.5)
    out.push('outside ' + t.s);
  if (t.size < 11) out.push('small ' + t.s);
}
for (let i = 0; i < texts.length; i++) for (let j = i + 1; j < texts.length; j++) {
  const a = texts[i].r, b = texts[j].r;
  const w = Math.min(a.right, b.right) - Math.max(a.left, b.left);
  const h = Math.min(a.bottom, b.bottom) - Math.max(a.top, b.top);
  if (w > 0.5 && h > 0.5) out.push('overlap ' + texts[i].s + ' | ' + texts[j].s);
}
document.getElementById('out').textContent = out.join('\n');
</script>"#;

fn lines<'a>(found: &'a str, kind: &str) -> Vec<&'a str> {
    found
        .lines()
        .filter_map(|l| l.strip_prefix(kind).and_then(|l| l.strip_prefix(' ')))
        .collect()
}

#[test]
fn the_bench_chart_in_a_browser_shows_every_row_with_no_text_overlapping() {
    let report = bench_report();
    let svg = bench_chart::svg(&report);
    let (dir, shots) = pages("chart");
    let page = dir.join("chart.html");
    std::fs::write(
        &page,
        format!("<!doctype html><meta charset=utf-8><body style=\"margin:0\">{svg}{MEASURE_SVG}"),
    )
    .unwrap();
    let result = found(&dump_dom(&browser::url(&page), 800, &[]), "out");
    assert_eq!(lines(&result, "width"), ["800"], "{result}");
    assert!(lines(&result, "overlap").is_empty(), "{result}");
    assert!(lines(&result, "outside").is_empty(), "{result}");
    assert!(lines(&result, "small").is_empty(), "{result}");
    let texts = lines(&result, "text");
    let has = |s: &str| texts.iter().any(|t| t.contains(s));
    // Every timed variant and the reference by name (the long one
    // shortened, its start kept), every verdict in words, every failure.
    for v in report
        .variants
        .iter()
        .chain(&report.reference)
        .map(|v| v.variant.as_str())
    {
        let shown = if v == LONG { &v[..40] } else { v };
        assert!(has(shown), "{v} is not shown:\n{result}");
    }
    for word in ["fastest", "same", "ambiguous", "slower"] {
        assert!(texts.contains(&word), "no verdict {word}:\n{result}");
    }
    assert!(has("unsupported_arch"), "{result}");
    assert!(has("wrong_result"), "{result}");
    for caption in [
        "revision 0123456789ab",
        "SiluAndMul.large",
        "driver 570.86.10",
        "torch 2.8.0",
        "2026-05-28T20:26:40Z",
        "noise (stdev / mean)",
    ] {
        assert!(has(caption), "no {caption:?} in the caption:\n{result}");
    }
    // As a README shows it: the file itself in an <img>, on a dark page.
    let file = dir.join("bench.svg");
    std::fs::write(&file, &svg).unwrap();
    let dark = dir.join("dark.html");
    std::fs::write(
        &dark,
        "<!doctype html><body style=\"margin:0;background:#0d1117\"><img src=\"bench.svg\" width=\"800\">",
    )
    .unwrap();
    let size = screenshot(
        &browser::url(&dark),
        800,
        700,
        &shots.join("bench-chart-dark-page.png"),
        &[],
    );
    assert_eq!(size, (800, 700));
    screenshot(
        &browser::url(&file),
        800,
        700,
        &shots.join("bench-chart.png"),
        &[],
    );
}

/// Measures the fleet page: its classes and kernels, cells whose text
/// does not fit, which rows show, and the theme's colours.
const MEASURE_PAGE: &str = r#"<pre id="out"></pre><script>
// On load: by then the URL's fragment is the page's target.
window.addEventListener('load', () => {
const out = [];
const matrix = document.querySelector('div.scroll > table');
for (const th of matrix.querySelectorAll('thead th a code')) out.push('class ' + th.textContent);
for (const tr of matrix.querySelectorAll(':scope > tbody > tr')) {
  out.push('kernel ' + tr.querySelector('th').childNodes[0].textContent + (tr.offsetParent ? '' : ' (hidden)')
    + (tr.classList.contains('disagree') ? ' (disagree)' : ''));
}
for (const cell of matrix.querySelectorAll(':scope > thead th, :scope > tbody > tr > *')) {
  if (cell.offsetParent && cell.scrollWidth > cell.clientWidth + 1) out.push('overflow ' + cell.textContent.trim());
}
const style = getComputedStyle(document.body);
out.push('colours ' + style.backgroundColor + ' on ' + style.color);
out.push('font ' + parseFloat(style.fontSize));
document.getElementById('out').textContent = out.join('\n');
});
</script>"#;

/// The page with the measuring script appended (the page itself has none).
fn measured_page(dir: &Path, html: &str) -> PathBuf {
    let page = dir.join("fleet.html");
    std::fs::write(
        &page,
        html.replace("</body>", &format!("{MEASURE_PAGE}</body>")),
    )
    .unwrap();
    page
}

/// `rgb(r, g, b)`'s brightness, 0 to 255.
fn brightness(rgb: &str) -> f64 {
    let n: Vec<f64> = rgb
        .trim_start_matches("rgb(")
        .trim_end_matches(')')
        .split(',')
        .map(|c| c.trim().parse().unwrap())
        .collect();
    (n[0] + n[1] + n[2]) / 3.0
}

#[test]
fn the_fleet_page_in_a_browser_shows_every_class_and_kernel_in_both_themes_and_filters() {
    let html = fleet_page::html(&fleet(), "2026-12-07T04:00:00Z");
    assert!(!html.contains("<script"), "the page itself has no script");
    for external in ["src=", "<link", "url(", "http://", "https://"] {
        assert!(
            !html.contains(external),
            "the page needs no network: {external}"
        );
    }
    let (dir, shots) = pages("fleet-page");
    let page = measured_page(&dir, &html);
    let url = browser::url(&page);
    for (theme, extra) in [("light", &[][..]), ("dark", &["--force-dark-mode"][..])] {
        let result = found(&dump_dom(&url, 800, extra), "out");
        assert_eq!(
            lines(&result, "class"),
            ["1a1a1a1a1a1a", "2b2b2b2b2b2b", "3c3c3c3c3c3c"],
            "{result}"
        );
        assert_eq!(
            lines(&result, "kernel"),
            [
                "kernels-community/activation@0123456789ab (disagree)",
                "kernels-community/flash-attn3@v2 (disagree)",
                "org/<script>alert(1)</script>",
            ],
            "{result}"
        );
        assert!(lines(&result, "overflow").is_empty(), "{theme}: {result}");
        let colours = lines(&result, "colours")[0];
        let (bg, fg) = colours.split_once(" on ").unwrap();
        let (bg, fg) = (brightness(bg), brightness(fg));
        match theme {
            "light" => assert!(bg > 200.0 && fg < 80.0, "{theme}: {colours}"),
            _ => assert!(bg < 60.0 && fg > 180.0, "{theme}: {colours}"),
        }
        assert!(
            lines(&result, "font")[0].parse::<f64>().unwrap() >= 13.0,
            "{result}"
        );
        screenshot(
            &url,
            800,
            900,
            &shots.join(format!("fleet-page-{theme}.png")),
            extra,
        );
    }
    // A kernel's anchor shows its row alone.
    let result = found(&dump_dom(&format!("{url}#k1"), 800, &[]), "out");
    assert_eq!(
        lines(&result, "kernel"),
        [
            "kernels-community/activation@0123456789ab (hidden) (disagree)",
            "kernels-community/flash-attn3@v2 (disagree)",
            "org/<script>alert(1)</script> (hidden)",
        ],
        "{result}"
    );
}

#[test]
fn bench_chart_snapshot() {
    insta::assert_snapshot!("bench_chart_svg", bench_chart::svg(&bench_report()));
}

/// The page's text, a tag a line so that a change reads as a diff (the
/// page itself is one line: HTML needs no more).
#[test]
fn fleet_page_snapshot() {
    let html = fleet_page::html(&fleet(), "2026-12-07T04:00:00Z");
    insta::assert_snapshot!("fleet_page_html", html.replace("><", ">\n<"));
}
