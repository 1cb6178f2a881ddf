//! `preflight bench --plot FILE.svg`: the bench as one self-contained SVG
//! chart, 800 px wide, on an opaque card (readable on light and dark
//! pages). Per timed variant, and the reference, a row: every sample as a
//! dot (at most 240, spaced evenly by rank), the quartiles as a
//! box, the median as a bar; its speed against the fastest with the
//! bootstrap interval the verdict is drawn from; the verdict in words.
//! Then the variants that were not timed with their outcome, and a caption
//! of what was timed, where, when, and the rule that stopped sampling.

use super::bench::{excluded, flush, percent, speedup, stop, time, timed, timers, verdict};
use super::draw::{self, FONTS, fitted, px, text, width, wrap};
use crate::bench::result::{BenchReport, Timed, VariantBench};
use crate::stats::{Comparison, Verdict};
use svg::Document;
use svg::node::element::{Circle, Group, Line, Rectangle};

mod scales;
use scales::{Scale, speed_scale, spread, time_scale, within};

/// The picture's width, and what a README shows it at.
const WIDTH: f64 = 800.0;
/// Space around everything.
const MARGIN: f64 = 16.0;
/// The samples' panel, left to right.
const DIST: (f64, f64) = (16.0, 420.0);
/// The speed-against-the-fastest panel, left to right.
const FOREST: (f64, f64) = (446.0, 620.0);
/// Where the verdict column starts.
const VERDICT_X: f64 = 640.0;
/// A row's band of dots, in px.
const BAND: f64 = 24.0;

/// Text sizes, px.
const TITLE: f64 = 15.0;
const BODY: f64 = 12.0;
const SMALL: f64 = 11.0;

/// Colours: ink on the card, muted ink, rules, and one per verdict (each
/// verdict is also written out: colour is never the only sign).
const INK: &str = "#1f2328";
const MUTED: &str = "#57606a";
const RULE: &str = "#d0d7de";
const CARD: &str = "#ffffff";
const SAMPLE: &str = "#0969da";
const REFERENCE: &str = "#8250df";

fn verdict_colour(v: Option<Verdict>) -> &'static str {
    match v {
        None => "#1a7f37",
        Some(Verdict::Faster) => "#1a7f37",
        Some(Verdict::Slower) => "#cf222e",
        Some(Verdict::Same) => MUTED,
        Some(Verdict::Ambiguous) => "#9a6700",
    }
}

/// One timed row of the chart.
struct Row<'a> {
    rank: String,
    variant: &'a VariantBench,
    timed: &'a Timed,
}

impl Row<'_> {
    fn is_fastest(&self) -> bool {
        self.rank == "1"
    }

    /// Its comparison with the fastest, when there is an estimate.
    fn vs(&self) -> Option<Comparison> {
        self.variant.vs_fastest.filter(|c| c.speedup > 0.0)
    }

    /// What the verdict column says, in words.
    fn verdict(&self) -> &'static str {
        match (self.is_fastest(), self.vs()) {
            (true, _) => "fastest",
            (false, Some(c)) => verdict(c.verdict),
            (false, None) => "no estimate",
        }
    }

    /// Its median, quartiles and sample count, for the name's line.
    fn stats(&self, off_axis: usize) -> String {
        let s = &self.timed.summary;
        let off = if off_axis > 0 {
            format!(" ({off_axis} past the axis)")
        } else {
            String::new()
        };
        format!(
            "median {} · IQR {} · {} samples{off} · stop: {}",
            time(s.median),
            time(s.iqr),
            s.samples,
            stop(self.timed.stop)
        )
    }
}

/// The chart of a ranked report ([`BenchReport::rank`]), as SVG text.
pub fn svg(report: &BenchReport) -> String {
    let rows: Vec<Row> = timed(report)
        .filter_map(|(rank, variant)| {
            Some(Row {
                rank,
                variant,
                timed: variant.timed()?,
            })
        })
        .collect();
    let mut body = Group::new();
    let mut y = MARGIN + TITLE;
    body = body.add(
        fitted(
            MARGIN,
            y,
            TITLE,
            &format!("Benchmark of {}", report.target),
            INK,
            WIDTH - 2.0 * MARGIN,
        )
        .set("font-weight", "bold"),
    );
    y += 4.0;
    for line in caption(report) {
        for part in wrap(&line, BODY, WIDTH - 2.0 * MARGIN, 3) {
            y += 16.0;
            body = body.add(text(MARGIN, y, BODY, &part, MUTED));
        }
    }
    y += 24.0;
    if rows.is_empty() {
        body = body
            .add(text(MARGIN, y, BODY, "No variant was timed.", INK).set("font-weight", "bold"));
    } else {
        let (group, bottom) = plot(&rows, y);
        body = body.add(group);
        y = bottom;
    }
    let excluded = excluded(report);
    if !excluded.is_empty() {
        y += 26.0;
        body = body.add(
            text(
                MARGIN,
                y,
                BODY,
                &format!("Not timed ({})", excluded.len()),
                INK,
            )
            .set("font-weight", "bold"),
        );
        for (name, outcome, reason) in excluded {
            let line = format!("{name}: {outcome}: {reason}");
            for (i, part) in wrap(&line, SMALL, WIDTH - 2.0 * MARGIN - 12.0, 3)
                .iter()
                .enumerate()
            {
                y += 15.0;
                let indent = if i == 0 { 0.0 } else { 12.0 };
                body = body.add(text(MARGIN + indent, y, SMALL, part, INK));
            }
        }
    }
    y += 22.0;
    let fingerprint: String = report.fingerprint.chars().take(12).collect();
    body = body.add(text(
        MARGIN,
        y,
        SMALL,
        &format!("preflight bench · machine fingerprint {fingerprint}"),
        MUTED,
    ));
    let height = px(y + MARGIN);
    Document::new()
        .set("viewBox", (0, 0, WIDTH, height))
        .set("width", WIDTH)
        .set("height", height)
        .set("font-family", FONTS)
        .add(svg::node::element::Title::new(format!(
            "Benchmark of {}, workload {}",
            report.target, report.workload
        )))
        .add(
            Rectangle::new()
                .set("width", WIDTH)
                .set("height", height)
                .set("rx", 6)
                .set("fill", CARD)
                .set("stroke", RULE),
        )
        .add(body)
        .to_string()
        + "\n"
}

/// The caption: what was timed (kernel, revision, workload), where
/// (machine facts, device, clock), when, and the stopping rule.
fn caption(report: &BenchReport) -> Vec<String> {
    let revision = report
        .context
        .as_ref()
        .and_then(|c| c.revision.as_deref())
        .map_or_else(
            || "no hub revision (a local folder)".to_string(),
            |r| format!("revision {r}"),
        );
    let mut lines = vec![format!(
        "kernel {} · {revision} · workload {}",
        report.target, report.workload
    )];
    if let Some(c) = &report.context {
        let m = &c.machine;
        // ClassFacts says "-" for a fact the machine does not have.
        let fact = |name: &str, value: &str, none: &str| match value {
            "-" => none.to_string(),
            v => format!("{name}{v}"),
        };
        let facts = [
            fact("GPU ", &m.gpu, "no GPU"),
            fact("driver ", &m.driver, ""),
            fact("torch ", &m.torch, "no torch"),
            fact("Python ", &m.python, "no Python"),
            m.arch.clone(),
        ];
        let facts: Vec<String> = facts.into_iter().filter(|f| !f.is_empty()).collect();
        lines.push(format!("machine: {}", facts.join(" · ")));
    }
    let timers = timers(report);
    let flush = flush(report);
    let when = report.context.as_ref().map_or_else(String::new, |c| {
        let at = std::time::UNIX_EPOCH + std::time::Duration::from_secs(c.finished);
        format!(" · finished {}", super::labels::rfc3339(at))
    });
    lines.push(format!(
        "timed on {} with {}, {flush}{when}",
        report.device,
        if timers.is_empty() {
            "nothing".to_string()
        } else {
            timers.join(" and ")
        }
    ));
    let c = &report.criteria;
    lines.push(format!(
        "sampling stopped per variant after at least {} samples and {} s, once noise (stdev / mean) \
         was under {} or stopped improving, or at {} s",
        c.min_samples,
        c.min_time.as_secs_f64(),
        percent(c.max_noise),
        c.timeout.as_secs_f64(),
    ));
    lines
}

/// The rows from `top` down, their axes and legends; the group and where
/// it ends.
fn plot(rows: &[Row], top: f64) -> (Group, f64) {
    let mut g = Group::new();
    let head = |x: f64, s: &str| text(x, top, SMALL, s, MUTED).set("font-weight", "bold");
    g = g
        .add(head(DIST.0, "time per call"))
        .add(head(FOREST.0, "speed vs fastest"))
        .add(head(VERDICT_X, "verdict"));
    let times = time_scale(rows);
    let speeds = speed_scale(rows);
    let time_ticks: Vec<(f64, String)> = draw::linear_ticks(times.lo, times.hi, 5)
        .into_iter()
        .map(|t| (times.at(t), time(t)))
        .collect();
    let time_ticks = within(draw::spaced(time_ticks, SMALL, 10.0, None), DIST, 10.0);
    let speed_ticks: Vec<(f64, String)> = draw::log_ticks(speeds.lo, speeds.hi)
        .into_iter()
        .map(|t| {
            (
                speeds.at(t),
                format!(
                    "{}×",
                    super::bench::sig3(t)
                        .trim_end_matches('0')
                        .trim_end_matches('.')
                ),
            )
        })
        .collect();
    let one = speed_ticks
        .iter()
        .position(|(x, _)| (*x - speeds.at(1.0)).abs() < 0.01);
    let speed_ticks = within(draw::spaced(speed_ticks, SMALL, 8.0, one), FOREST, 12.0);
    let grid: Vec<f64> = time_ticks.iter().chain(&speed_ticks).map(|t| t.0).collect();
    let mut y = top + 6.0;
    for row in rows {
        let (drawn, bottom) = draw_row(row, y, times, speeds, &grid);
        g = g.add(drawn);
        y = bottom;
    }
    let labels_y = y + 14.0;
    for (x, label) in time_ticks.iter().chain(&speed_ticks) {
        g = g.add(text(*x, labels_y, SMALL, label, MUTED).set("text-anchor", "middle"));
    }
    let mut y = labels_y + 6.0;
    let legend = "dots: samples · box: quartiles · bar: median · speed vs fastest = the fastest's \
                  median / this one's, with its 95 % bootstrap interval over paired rounds; \
                  verdicts: faster, slower, same (inside the noise band), ambiguous (the interval \
                  crosses the band's edge)";
    for line in wrap(legend, SMALL, WIDTH - 2.0 * MARGIN, 4) {
        y += 15.0;
        g = g.add(text(MARGIN, y, SMALL, &line, MUTED));
    }
    (g, y)
}

fn vline(x: f64, y1: f64, y2: f64) -> Line {
    Line::new()
        .set("x1", px(x))
        .set("x2", px(x))
        .set("y1", px(y1))
        .set("y2", px(y2))
}

/// One row from `top`: its name and figures, its samples, its speed and
/// verdict; the group and where the next row starts.
fn draw_row(row: &Row, top: f64, times: Scale, speeds: Scale, grid: &[f64]) -> (Group, f64) {
    let mut g = Group::new();
    let s = &row.timed.summary;
    let off_axis = row
        .timed
        .samples_ms
        .iter()
        .filter(|x| **x > times.hi)
        .count();
    let stats = row.stats(off_axis);
    let name = match row.rank.as_str() {
        "ref" => row.variant.variant.clone(),
        rank => format!("{rank}. {}", row.variant.variant),
    };
    let room = WIDTH - 2.0 * MARGIN;
    let mut y = top + 14.0;
    let inline = width(&name, BODY) + 16.0 + width(&stats, SMALL) <= room;
    let name_room = if inline {
        room - width(&stats, SMALL) - 16.0
    } else {
        room
    };
    g = g.add(fitted(MARGIN, y, BODY, &name, INK, name_room).set("font-weight", "bold"));
    if inline {
        g = g.add(text(WIDTH - MARGIN, y, SMALL, &stats, MUTED).set("text-anchor", "end"));
    } else {
        y += 15.0;
        g = g.add(fitted(MARGIN, y, SMALL, &stats, MUTED, room));
    }
    let cy = y + 8.0 + BAND / 2.0;
    let (band_top, band_bottom) = (cy - BAND / 2.0, cy + BAND / 2.0);
    // The grid within the band only, under the marks: it never crosses text.
    let mut lines = Group::new().set("stroke", RULE).set("stroke-width", 1);
    for x in grid {
        lines = lines.add(vline(*x, band_top, band_bottom));
    }
    g = g.add(lines).add(
        vline(speeds.at(1.0), band_top, band_bottom)
            .set("stroke", MUTED)
            .set("stroke-dasharray", "3 3"),
    );
    let colour = if row.rank == "ref" { REFERENCE } else { SAMPLE };
    let mut dots = Group::new().set("fill", colour).set("fill-opacity", 0.45);
    for (i, ms) in spread(&row.timed.samples_ms).into_iter().enumerate() {
        // Golden-ratio offsets: spread over the band, the same each time.
        let jitter = ((i as f64 * 0.618_034) % 1.0 - 0.5) * (BAND - 6.0);
        dots = dots.add(
            Circle::new()
                .set("cx", px(times.at(ms)))
                .set("cy", px(cy + jitter))
                .set("r", 1.8),
        );
    }
    let (q1, q3) = (times.at(s.q1), times.at(s.q3));
    g = g
        .add(dots)
        .add(
            Rectangle::new()
                .set("x", px(q1))
                .set("y", px(cy - 8.0))
                .set("width", px((q3 - q1).max(1.0)))
                .set("height", 16)
                .set("fill", "none")
                .set("stroke", INK)
                .set("stroke-width", 1.2),
        )
        .add(
            vline(times.at(s.median), cy - 11.0, cy + 11.0)
                .set("stroke", INK)
                .set("stroke-width", 2.5),
        );
    let colour = verdict_colour(if row.is_fastest() {
        None
    } else {
        row.vs().map(|c| c.verdict)
    });
    if row.is_fastest() {
        g = g.add(diamond(speeds.at(1.0), cy, colour));
    } else if let Some(c) = row.vs() {
        g = g
            .add(
                Line::new()
                    .set("x1", px(speeds.at(c.low)))
                    .set("x2", px(speeds.at(c.high)))
                    .set("y1", px(cy))
                    .set("y2", px(cy))
                    .set("stroke", colour)
                    .set("stroke-width", 3)
                    .set("stroke-linecap", "round"),
            )
            .add(
                Circle::new()
                    .set("cx", px(speeds.at(c.speedup)))
                    .set("cy", px(cy))
                    .set("r", 4)
                    .set("fill", colour)
                    .set("stroke", CARD),
            );
    }
    g = g.add(text(VERDICT_X, cy - 2.0, BODY, row.verdict(), colour).set("font-weight", "bold"));
    if let Some(c) = row.vs().filter(|_| !row.is_fastest()) {
        g = g.add(text(VERDICT_X, cy + 12.0, SMALL, &speedup(&c), INK));
    }
    let bottom = cy + BAND / 2.0 + 8.0;
    g = g.add(
        Line::new()
            .set("x1", MARGIN)
            .set("x2", WIDTH - MARGIN)
            .set("y1", px(bottom))
            .set("y2", px(bottom))
            .set("stroke", RULE),
    );
    (g, bottom)
}

/// The fastest's mark: a diamond at 1×.
fn diamond(x: f64, y: f64, colour: &str) -> svg::node::element::Path {
    let d = svg::node::element::path::Data::new()
        .move_to((px(x), px(y - 5.0)))
        .line_to((px(x + 5.0), px(y)))
        .line_to((px(x), px(y + 5.0)))
        .line_to((px(x - 5.0), px(y)))
        .close();
    svg::node::element::Path::new()
        .set("d", d)
        .set("fill", colour)
}

#[cfg(test)]
#[path = "bench_chart_tests.rs"]
mod tests;
