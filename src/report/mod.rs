//! Report: the tables people read and the JSON machines read, built from
//! the library's types.

pub mod bench;
pub mod bench_chart;
pub mod cache;
pub mod check;
pub mod device;
pub mod doctor;
mod draw;
pub mod events;
pub mod fingerprint;
pub mod fleet;
pub mod fleet_page;
pub mod grid;
pub mod inspect;
pub mod labels;
pub mod native;
pub mod progress;
pub mod resolve;
pub mod select;
pub mod warmup;

use comfy_table::{ContentArrangement, Table, presets::UTF8_FULL_CONDENSED};

pub use grid::Grid;

/// What a command prints: its answer on stdout, and lines for people on
/// stderr.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Printed {
    /// The answer, when there is one.
    pub stdout: Option<String>,
    /// Notes and explanations, one entry a line (or a block).
    pub stderr: Vec<String>,
}

impl Printed {
    /// Only `stdout`.
    pub fn out(stdout: String) -> Printed {
        Printed {
            stdout: Some(stdout),
            stderr: Vec::new(),
        }
    }
}

/// `value` as pretty JSON, as every `--json` prints it.
pub fn pretty_json<T: serde::Serialize>(value: &T) -> String {
    // The report types serialize without fail (strings, numbers, enums,
    // maps with string keys): a failure is a bug, as the command line's
    // `emit_json` treats it.
    match serde_json::to_string_pretty(value) {
        Ok(text) => text,
        Err(e) => panic!("cannot serialize output: {e}"),
    }
}

/// `n` and the noun, singular for one: `count(1, "variant")` is
/// "1 variant", `count(2, "variant")` "2 variants"; a noun whose plural is
/// not `-s` names it after a `|`: `count(2, "entry|entries")`.
pub fn count(n: usize, noun: &str) -> String {
    let (one, many) = match noun.split_once('|') {
        Some((one, many)) => (one.to_owned(), many.to_owned()),
        None => (noun.to_owned(), format!("{noun}s")),
    };
    format!("{n} {}", if n == 1 { one } else { many })
}

/// The verb of "N of M variants work here", agreeing with N.
pub fn works(n: usize) -> &'static str {
    if n == 1 { "works" } else { "work" }
}

/// A table in the house style, with a header row, that fits the width set
/// by [`grid::set_width`] when printed.
pub fn table(header: &[&str]) -> Grid {
    let mut table = Table::new();
    table
        .load_preset(UTF8_FULL_CONDENSED)
        .set_content_arrangement(ContentArrangement::Dynamic)
        .set_header(header.to_vec());
    Grid::new(table)
}

#[cfg(test)]
mod count_tests {
    #[test]
    fn one_is_singular_and_the_rest_plural() {
        assert_eq!(super::count(1, "variant"), "1 variant");
        assert_eq!(super::count(0, "variant"), "0 variants");
        assert_eq!(super::count(2, "entry|entries"), "2 entries");
        assert_eq!(super::count(1, "entry|entries"), "1 entry");
    }
}
