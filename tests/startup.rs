//! What every start of the binary pays for: the shared libraries the
//! dynamic loader maps before `main`. `libm.so.6` is loaded only when a
//! math function is first called (`src/lazy_libm.rs`, whose unit test
//! checks the values; `tests/bench.rs` runs the statistics that call them
//! in the binary), never at start.

use object::Endianness;
use object::elf::{DT_NEEDED, FileHeader64};
use object::read::elf::FileHeader;

/// The `DT_NEEDED` entries of the `preflight` binary cargo built.
fn needed() -> Vec<String> {
    let data = std::fs::read(env!("CARGO_BIN_EXE_preflight")).expect("read the binary");
    let data = data.as_slice();
    let header = FileHeader64::<Endianness>::parse(data).expect("an ELF file");
    let endian = header.endian().expect("endianness");
    let sections = header.sections(endian, data).expect("section headers");
    let dynamic = sections
        .dynamic_table(endian, data)
        .expect("dynamic section");
    assert!(!dynamic.is_empty(), "a dynamically linked binary");
    dynamic
        .iter()
        .filter(|d| d.tag == DT_NEEDED)
        .map(|d| String::from_utf8_lossy(dynamic.string(d).expect("a library name")).into_owned())
        .collect()
}

#[test]
fn the_binary_does_not_load_libm_at_start() {
    let needed = needed();
    assert!(
        needed.iter().any(|n| n.starts_with("libc.so")),
        "the reading works: {needed:?}"
    );
    assert!(
        !needed.iter().any(|n| n.starts_with("libm.so")),
        "libm.so.6 is loaded at every start again: a math function other than \
         cos, log, log10 and pow is called (add it to src/lazy_libm.rs): {needed:?}"
    );
}
