//! Report: the tables people read and the JSON machines read, built from
//! the library's types.

pub mod bench;
pub mod cache;
pub mod check;
pub mod device;
pub mod doctor;
pub mod inspect;
pub mod native;
pub mod resolve;

use comfy_table::{ContentArrangement, Table, presets::UTF8_FULL_CONDENSED};

/// A table in the house style, with a header row.
pub fn table(header: &[&str]) -> Table {
    let mut table = Table::new();
    table
        .load_preset(UTF8_FULL_CONDENSED)
        .set_content_arrangement(ContentArrangement::Dynamic)
        .set_header(header.to_vec());
    table
}
