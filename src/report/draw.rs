//! What the SVG pictures share: text measured in a monospaced font (so a
//! layout can be computed without a browser), fitting and wrapping it,
//! and axis ticks.

use svg::node::element::{Text, Title};

/// The fonts of every picture: monospaced, so that a string's width is
/// its length times one advance, whichever of them the viewer has.
pub const FONTS: &str = "DejaVu Sans Mono, Menlo, Consolas, Liberation Mono, monospace";

/// A monospaced glyph's advance, in ems: DejaVu Sans Mono and Menlo are
/// 0.602, Liberation Mono 0.600, Consolas 0.550; rounded up so that an
/// estimate never falls short.
const ADVANCE_EM: f64 = 0.61;

/// The width `text` takes at `size` px.
pub fn width(text: &str, size: f64) -> f64 {
    text.chars().count() as f64 * size * ADVANCE_EM
}

/// The characters that fit in `px` at `size`.
fn chars_in(px: f64, size: f64) -> usize {
    // The epsilon keeps a width computed as n characters' from flooring
    // to n - 1.
    (px / (size * ADVANCE_EM) + 1e-9).floor().max(1.0) as usize
}

/// `text`, or when it is wider than `px`, its start and end around a `…`.
pub fn fit(text: &str, size: f64, px: f64) -> String {
    let max = chars_in(px, size);
    let chars: Vec<char> = text.chars().collect();
    if chars.len() <= max {
        return text.to_string();
    }
    let keep = max.saturating_sub(1);
    let head = keep.div_ceil(2);
    let tail = keep - head;
    let mut out: String = chars[..head].iter().collect();
    out.push('…');
    out.extend(&chars[chars.len() - tail..]);
    out
}

/// `text` in lines no wider than `px` at `size`, broken at spaces (a word
/// wider than a line is cut), at most `max_lines` of them (the last one
/// ending in `…` when text was left out).
pub fn wrap(text: &str, size: f64, px: f64, max_lines: usize) -> Vec<String> {
    let max = chars_in(px, size);
    let mut lines: Vec<String> = Vec::new();
    let mut line = String::new();
    for word in text.split_whitespace() {
        let mut word: Vec<char> = word.chars().collect();
        loop {
            let used = line.chars().count();
            let room = if used == 0 {
                max
            } else {
                max.saturating_sub(used + 1)
            };
            if word.len() <= room {
                if used > 0 {
                    line.push(' ');
                }
                line.extend(&word);
                break;
            }
            if used == 0 {
                // A word longer than a whole line: cut it.
                line.extend(&word[..max]);
                word.drain(..max);
            }
            lines.push(std::mem::take(&mut line));
        }
    }
    if !line.is_empty() {
        lines.push(line);
    }
    if lines.len() > max_lines {
        lines.truncate(max_lines);
        if let Some(last) = lines.last_mut() {
            let mut chars: Vec<char> = last.chars().collect();
            chars.truncate(max.saturating_sub(1));
            *last = chars.into_iter().collect::<String>() + "…";
        }
    }
    lines
}

/// A `<text>` at `(x, y)` (its baseline) of `size` px, `weight` and
/// `fill`; `full`, when the text is a shortened form of it, as its tooltip.
pub fn text(x: f64, y: f64, size: f64, content: &str, fill: &str) -> Text {
    Text::new(content)
        .set("x", px(x))
        .set("y", px(y))
        .set("font-size", size)
        .set("fill", fill)
}

/// `text` shortened to fit `width` px, with the whole of it as its
/// tooltip when it had to be shortened.
pub fn fitted(x: f64, y: f64, size: f64, content: &str, fill: &str, room: f64) -> Text {
    let shown = fit(content, size, room);
    let element = text(x, y, size, &shown, fill);
    if shown == content {
        element
    } else {
        element.add(Title::new(content))
    }
}

/// A coordinate rounded to a tenth of a pixel: shorter text, and the same
/// text on every machine.
pub fn px(x: f64) -> f64 {
    (x * 10.0).round() / 10.0
}

/// Round values between `lo` and `hi` for a linear axis: steps of 1, 2 or
/// 5 times a power of ten, about `count` of them.
pub fn linear_ticks(lo: f64, hi: f64, count: usize) -> Vec<f64> {
    let span = hi - lo;
    if !(span.is_finite() && span > 0.0) {
        return vec![lo];
    }
    let raw = span / count.max(1) as f64;
    let magnitude = 10f64.powf(raw.log10().floor());
    let step = [1.0, 2.0, 5.0, 10.0]
        .iter()
        .map(|m| m * magnitude)
        .find(|s| *s >= raw)
        .unwrap_or(10.0 * magnitude);
    let first = (lo / step).ceil() as i64;
    let last = (hi / step).floor() as i64;
    (first..=last).map(|i| i as f64 * step).collect()
}

/// Round ratios between `lo` and `hi` (both above 0) for a logarithmic
/// axis: 1, 2 and 5 times powers of ten, and 1 itself.
pub fn log_ticks(lo: f64, hi: f64) -> Vec<f64> {
    let mut out = Vec::new();
    for exponent in -4..=4 {
        for m in [1.0, 2.0, 5.0] {
            let v = m * 10f64.powi(exponent);
            if v >= lo && v <= hi {
                out.push(v);
            }
        }
    }
    out
}

/// Of `ticks` (positions in px, with their labels), those whose labels do
/// not come closer than `gap` px to one already kept, `first` kept first:
/// labels never overlap, and the one that matters most stays.
pub fn spaced(
    ticks: Vec<(f64, String)>,
    size: f64,
    gap: f64,
    first: Option<usize>,
) -> Vec<(f64, String)> {
    let mut order: Vec<usize> = (0..ticks.len()).collect();
    if let Some(first) = first.filter(|f| *f < ticks.len()) {
        order.retain(|i| *i != first);
        order.insert(0, first);
    }
    let mut kept: Vec<usize> = Vec::new();
    for i in order {
        let (x, label) = &ticks[i];
        let half = width(label, size) / 2.0;
        let clear = kept.iter().all(|k| {
            let (kx, kl) = &ticks[*k];
            (x - kx).abs() >= half + width(kl, size) / 2.0 + gap
        });
        if clear {
            kept.push(i);
        }
    }
    kept.sort_unstable();
    kept.into_iter().map(|i| ticks[i].clone()).collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_long_name_keeps_its_start_and_end() {
        let name = "torch28-cxx11-cu128-x86_64-linux-with-a-very-long-suffix";
        let shown = fit(name, 10.0, 10.0 * ADVANCE_EM * 21.0);
        assert_eq!(shown, "torch28-cx…ong-suffix");
        assert!(width(&shown, 10.0) <= 10.0 * ADVANCE_EM * 21.0);
        assert_eq!(fit("short", 10.0, 100.0), "short");
    }

    #[test]
    fn wrapped_lines_fit_and_say_when_text_was_left_out() {
        let lines = wrap(
            "one two three four five six",
            10.0,
            10.0 * ADVANCE_EM * 9.0,
            2,
        );
        assert_eq!(lines, vec!["one two", "three…"]);
        let lines = wrap("abcdefghijkl mn", 10.0, 10.0 * ADVANCE_EM * 5.0, 9);
        assert_eq!(lines, vec!["abcde", "fghij", "kl mn"]);
    }

    #[test]
    fn ticks_are_round_and_inside() {
        assert_eq!(linear_ticks(0.3, 2.1, 4), vec![0.5, 1.0, 1.5, 2.0]);
        assert_eq!(log_ticks(0.3, 3.0), vec![0.5, 1.0, 2.0]);
    }

    #[test]
    fn spaced_labels_never_overlap_and_keep_the_first() {
        let ticks = vec![
            (0.0, "0.5×".to_string()),
            (10.0, "1×".to_string()),
            (50.0, "2×".to_string()),
        ];
        let kept = spaced(ticks, 10.0, 4.0, Some(1));
        assert_eq!(
            kept.iter().map(|t| t.1.as_str()).collect::<Vec<_>>(),
            ["1×", "2×"]
        );
    }
}
