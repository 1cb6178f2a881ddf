//! Tables that fit the terminal they are printed on.
//!
//! The width is decided once, by the command line ([`set_width`]): a
//! terminal's width, or none (a pipe, a file, a terminal of unknown size
//! such as the 0×0 pty of `script` or `docker exec -t`), where tables keep
//! their natural width. Within a width no cell is broken inside a word:
//! cells wrap at spaces, each column at least as wide as its longest word,
//! and a table whose words cannot fit side by side becomes a list, one
//! block per row.

use comfy_table::{ColumnConstraint, Table, Width};
use std::fmt;
use std::sync::atomic::{AtomicU16, Ordering};

/// The width tables fit; 0: none (natural width).
static WIDTH: AtomicU16 = AtomicU16::new(0);

/// Narrower than this, a terminal's reported width is not believed.
const NARROWEST: u16 = 20;

/// Sets the width every table of this process fits (`None`: natural width).
pub fn set_width(width: Option<u16>) {
    WIDTH.store(width.unwrap_or(0), Ordering::Relaxed);
}

/// The width set by [`set_width`], if any.
pub fn width() -> Option<u16> {
    match WIDTH.load(Ordering::Relaxed) {
        0 => None,
        w => Some(w),
    }
}

/// The width of the terminal on `fd`: `COLUMNS` when it holds a number of
/// at least 20; else the terminal's own size; `None` when `fd` is not a
/// terminal or the terminal does not know its size (0×0), which is then
/// treated as no terminal at all.
pub fn terminal_width(fd: i32) -> Option<u16> {
    if let Some(columns) = std::env::var("COLUMNS")
        .ok()
        .and_then(|c| c.trim().parse::<u16>().ok())
        .filter(|w| *w >= NARROWEST)
    {
        return Some(columns);
    }
    // SAFETY: TIOCGWINSZ fills a `winsize` and touches nothing else; a
    // descriptor that is not a terminal makes it fail with ENOTTY.
    let mut size: libc::winsize = unsafe { std::mem::zeroed() };
    let ok = unsafe { libc::ioctl(fd, libc::TIOCGWINSZ, &mut size) } == 0;
    (ok && size.ws_col >= NARROWEST).then_some(size.ws_col)
}

/// A table in the house style that fits the width set by [`set_width`]
/// (or its own, given with `set_width` on the table) when printed.
#[derive(Clone)]
pub struct Grid(Table);

impl Grid {
    /// Wraps a table; see [`super::table`].
    pub fn new(mut table: Table) -> Grid {
        // The width is ours to decide: comfy-table's own look at the
        // terminal would take a 0×0 pty for a 0-column one.
        table.force_no_tty();
        Grid(table)
    }
}

impl std::ops::Deref for Grid {
    type Target = Table;
    fn deref(&self) -> &Table {
        &self.0
    }
}

impl std::ops::DerefMut for Grid {
    fn deref_mut(&mut self) -> &mut Table {
        &mut self.0
    }
}

/// The longest word (split at spaces) of each column, header included.
fn longest_words(table: &Table) -> Vec<usize> {
    let mut longest: Vec<usize> = Vec::new();
    let rows = table.header().into_iter().chain(table.row_iter());
    for row in rows {
        for (i, cell) in row.cell_iter().enumerate() {
            let word = cell
                .content()
                .split_whitespace()
                .map(|w| w.chars().count())
                .max()
                .unwrap_or(0);
            if longest.len() <= i {
                longest.resize(i + 1, 0);
            }
            longest[i] = longest[i].max(word);
        }
    }
    longest
}

/// The columns a table of these content widths takes: a border on each
/// side and between columns, and a space of padding each side of a cell.
fn frame(contents: &[usize]) -> usize {
    contents.iter().map(|w| w + 3).sum::<usize>() + 1
}

/// `line` after `indent`, wrapped at spaces within `width` (continuation
/// lines indented two more); a word longer than the room stays whole.
fn wrap(out: &mut String, line: &str, indent: &str, width: usize) {
    let mut current = indent.to_owned();
    let mut empty = true;
    for word in line.split(' ') {
        let wide = current.chars().count() + 1 + word.chars().count() > width;
        if !empty && wide {
            out.push_str(current.trim_end());
            out.push('\n');
            current = format!("{indent}  ");
            empty = true;
        }
        if !empty {
            current.push(' ');
        }
        current.push_str(word);
        empty = false;
    }
    out.push_str(current.trim_end());
    out.push('\n');
}

/// Each column's content width within `width`: at least its longest word;
/// the room left goes first to the columns that lack least of their
/// natural width (a short column is then not wrapped at all), the rest to
/// the widest.
fn widths(natural: &[usize], words: &[usize], width: usize) -> Vec<usize> {
    let mut widths = words.to_vec();
    let mut spare = width.saturating_sub(frame(&widths));
    let mut order: Vec<usize> = (0..widths.len()).collect();
    order.sort_by_key(|&i| natural[i].saturating_sub(widths[i]));
    for i in order {
        let more = natural[i].saturating_sub(widths[i]).min(spare);
        widths[i] += more;
        spare -= more;
    }
    widths
}

/// One block per row: the first cell, then `header: cell` for the others;
/// a table of two columns (a fact and its value) as `fact: value`, a value
/// of several lines indented under its fact.
fn list(table: &Table, width: usize) -> String {
    if table.header().map(|h| h.cell_count()) == Some(2) {
        let mut out = String::new();
        for row in table.row_iter() {
            let cells: Vec<String> = row.cell_iter().map(|c| c.content()).collect();
            let (fact, value) = match cells.as_slice() {
                [fact, value, ..] => (fact.replace('\n', " "), value.clone()),
                [fact] => (fact.replace('\n', " "), String::new()),
                [] => continue,
            };
            if value.contains('\n') || fact.len() + value.len() + 2 > width {
                out.push_str(&format!("{fact}:\n"));
                for line in value.lines() {
                    wrap(&mut out, line, "  ", width);
                }
            } else {
                out.push_str(&format!("{fact}: {value}\n"));
            }
        }
        return out.trim_end().to_owned();
    }
    let header: Vec<String> = table
        .header()
        .map(|h| h.cell_iter().map(|c| c.content()).collect())
        .unwrap_or_default();
    let label = header.iter().skip(1).map(|h| h.chars().count()).max();
    let mut out = String::new();
    for row in table.row_iter() {
        let cells: Vec<String> = row.cell_iter().map(|c| c.content()).collect();
        let Some((first, rest)) = cells.split_first() else {
            continue;
        };
        out.push_str(&first.replace('\n', " "));
        out.push('\n');
        for (i, cell) in rest.iter().enumerate() {
            let name = header.get(i + 1).map_or("", String::as_str);
            let pad = label.unwrap_or(0).saturating_sub(name.chars().count());
            let line = format!("{name}:{} {}", " ".repeat(pad), cell.replace('\n', " "));
            wrap(&mut out, &line, "  ", width);
        }
    }
    out.trim_end().to_owned()
}

impl fmt::Display for Grid {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let Some(width) = self.0.width().filter(|w| *w > 0).or_else(width) else {
            return write!(f, "{}", self.0);
        };
        let natural = self.0.column_max_content_widths();
        let natural: Vec<usize> = natural.iter().map(|w| usize::from(*w)).collect();
        if frame(&natural) <= usize::from(width) {
            return write!(f, "{}", self.0);
        }
        let words = longest_words(&self.0);
        if frame(&words) > usize::from(width) {
            return write!(f, "{}", list(&self.0, usize::from(width)));
        }
        let mut table = self.0.clone();
        for (column, content) in
            table
                .column_iter_mut()
                .zip(widths(&natural, &words, usize::from(width)))
        {
            let with_padding = u16::try_from(content + 2).unwrap_or(u16::MAX);
            column.set_constraint(ColumnConstraint::Absolute(Width::Fixed(with_padding)));
        }
        write!(f, "{table}")
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn sample() -> Grid {
        let mut g = super::super::table(&["variant", "declared", "observed"]);
        g.add_row(vec![
            "torch29-cpu-x86_64-windows",
            "rejected (other OS)",
            "skipped",
        ]);
        g.add_row(vec![
            "torch-universal",
            "accepted",
            "≠ missing_dependency: missing Python module `relu_demo_native`",
        ]);
        g
    }

    fn words(text: &str) -> Vec<String> {
        text.split(|c: char| c.is_whitespace() || "│┆┌┐└┘├┤─═╞╡╪┼┬┴".contains(c))
            .filter(|w| !w.is_empty())
            .map(str::to_owned)
            .collect()
    }

    #[test]
    fn at_60_columns_no_word_is_broken_and_no_line_is_wider() {
        let mut g = sample();
        g.set_width(60);
        let text = g.to_string();
        for line in text.lines() {
            assert!(line.chars().count() <= 60, "{line}\n{text}");
        }
        for word in [
            "torch29-cpu-x86_64-windows",
            "missing_dependency:",
            "`relu_demo_native`",
        ] {
            assert!(words(&text).iter().any(|w| w == word), "{word}:\n{text}");
        }
    }

    #[test]
    fn words_that_cannot_sit_side_by_side_become_a_list() {
        let mut g = sample();
        g.set_width(40);
        let text = g.to_string();
        assert!(text.starts_with("torch29-cpu-x86_64-windows\n  declared: rejected (other OS)\n  observed: skipped\ntorch-universal\n"), "{text}");
    }

    #[test]
    fn without_a_width_a_table_keeps_its_natural_width() {
        let text = sample().to_string();
        assert!(
            text.lines()
                .any(|l| l
                    .contains("≠ missing_dependency: missing Python module `relu_demo_native`")),
            "{text}"
        );
    }
}
