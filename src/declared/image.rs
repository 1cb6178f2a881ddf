//! Reading one embedded image's target (`sm_90a`, `compute_100f`) and PTX
//! ISA: from a cubin's own ELF headers and sections, from PTX text, or,
//! for an image inside a fatbin, from its entry header where that says
//! the same for less work (see [`Depth`]).

use crate::declared::arch::{self, ImageKind, PtxIsa, Suffix, Target};
use crate::declared::embedded::{Image, Problem};
use crate::declared::fatbin::{Entry, FatbinError};
use object::read::elf::{ElfFile64, FileHeader};
use object::{Object, ObjectSection};
use std::borrow::Cow;

/// `e_machine` of a cubin.
pub(crate) const EM_CUDA: u16 = 190;
/// `EI_ABIVERSION` of cubins with the V2 `e_flags` layout (CUDA 12.9 for
/// sm_100 and later, CUDA 13 for every SM); V1 is 7.
const ABI_V2: u8 = 8;
/// `.nv.compat` attribute whose value 1 marks an arch-specific (`a`) cubin
/// (nvcc 13.5; what cuobjdump reads).
const COMPAT_ARCH_SPECIFIC: u8 = 0x09;

/// How deep `inspect` reads the images inside a fatbin. Standalone cubin
/// and PTX files are always read whole: they are not compressed.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum Depth {
    /// A SASS image's target from its fatbin entry header: the SM and the
    /// `a` / `f` flags (0x100000 / 0x200000) that fatbinary sets from the
    /// `-gencode` it was given; a PTX image's from its text, decompressed
    /// only up to its `.version` and `.target` lines. No cubin is
    /// decompressed, so a library of gigabytes of zstd-compressed code is
    /// listed in milliseconds.
    #[default]
    Headers,
    /// Every image decompressed whole and its target read from the image
    /// itself: a cubin's `e_flags`, toolkit note and `.nv.compat`, as
    /// cuobjdump does. It differs from [`Depth::Headers`] only on a fatbin
    /// whose entry headers contradict their images (assembled by hand with
    /// `fatbinary --image3=…,sm=90` around an `sm_90a` cubin).
    Images,
}

/// Whether reading `entry` at `depth` means decompressing something.
pub(crate) fn decompresses(entry: &Entry<'_>, depth: Depth) -> bool {
    entry.compression.is_some() && (depth == Depth::Images || entry.kind == ImageKind::Ptx)
}

/// The image a fatbin entry holds, read as deep as `depth` asks; `section`
/// names the ELF section of the fatbin in errors.
pub(crate) fn entry_image(
    entry: &Entry<'_>,
    section: Option<&str>,
    depth: Depth,
) -> Result<Image, Problem> {
    let fatbin = |source: FatbinError| Problem::Fatbin {
        section: section.map(str::to_string),
        source,
    };
    let (target, ptx_isa) = match (entry.kind, depth) {
        (ImageKind::Sass, Depth::Headers) => (header_target(entry)?, None),
        (ImageKind::Sass, Depth::Images) => {
            let bytes = entry.bytes().map_err(fatbin)?;
            (cubin_image(&bytes, entry.offset, Some(entry))?.target, None)
        }
        (ImageKind::Ptx, _) => {
            let text = match depth {
                Depth::Headers => entry.head(ptx_head_complete),
                Depth::Images => entry.bytes(),
            }
            .map_err(fatbin)?;
            let (target, isa) = ptx_target(&text).map_err(|why| Problem::Ptx {
                offset: entry.offset,
                why,
            })?;
            (target, isa.or(entry.ptx_isa))
        }
    };
    Ok(Image {
        kind: entry.kind,
        target,
        ptx_isa,
        compressed: entry.compression,
        stored_size: entry.stored_size,
        size: entry.size,
        offset: entry.offset,
    })
}

/// A SASS target as the fatbin entry header gives it. The flags are what
/// [`cubin_image`] falls back on too; nvcc's fatbinary sets them from the
/// same `-arch` that ptxas compiled the cubin for.
fn header_target(entry: &Entry<'_>) -> Result<Target, Problem> {
    if entry.sm < 10 {
        return Err(Problem::Cubin {
            offset: entry.offset,
            why: format!(
                "its fatbin entry header names sm {}, no SM architecture",
                entry.sm
            ),
        });
    }
    let suffix = if entry.flags_arch_specific() {
        Suffix::ArchSpecific
    } else if entry.flags_family() {
        Suffix::Family
    } else {
        Suffix::None
    };
    Ok(Target {
        kind: ImageKind::Sass,
        sm: entry.sm,
        suffix,
    })
}

/// The target of a cubin: SM from `e_flags`, suffix from the toolkit note
/// (`-arch sm_100f`), the `.nv.compat` attributes, the `e_flags` accelerator
/// bit, or the fatbin entry's flags, whichever says it.
pub(crate) fn cubin_image(
    data: &[u8],
    offset: u64,
    entry: Option<&Entry<'_>>,
) -> Result<Image, Problem> {
    let bad = |why: String| Problem::Cubin { offset, why };
    let elf = ElfFile64::<object::Endianness>::parse(data).map_err(|e| bad(e.to_string()))?;
    let header = elf.elf_header();
    let endian = elf.endian();
    let machine = header.e_machine(endian).0;
    if machine != EM_CUDA {
        return Err(bad(format!("e_machine is {machine}, not {EM_CUDA} (CUDA)")));
    }
    let flags = header.e_flags(endian).0;
    let (sm, accelerator) = if header.e_ident().abi_version >= ABI_V2 {
        ((flags >> 8) & 0xff, flags & 0x8 != 0)
    } else {
        (flags & 0xff, flags & 0x800 != 0)
    };
    if sm < 10 {
        return Err(bad(format!("e_flags {flags:#x} name no SM architecture")));
    }
    let section = |name: &str| elf.section_by_name(name).and_then(|s| s.data().ok());
    let note_arch = section(".note.nv.tkinfo").and_then(tkinfo_arch);
    let compat_a = section(".nv.compat").is_some_and(compat_arch_specific);
    let suffix = match note_arch {
        Some(t) if t.sm == sm && t.suffix != Suffix::None => t.suffix,
        _ if accelerator || compat_a || entry.is_some_and(Entry::flags_arch_specific) => {
            Suffix::ArchSpecific
        }
        _ if entry.is_some_and(Entry::flags_family) => Suffix::Family,
        _ => Suffix::None,
    };
    Ok(Image {
        kind: ImageKind::Sass,
        target: Target {
            kind: ImageKind::Sass,
            sm,
            suffix,
        },
        ptx_isa: None,
        compressed: None,
        stored_size: data.len() as u64,
        size: data.len() as u64,
        offset,
    })
}

/// The `-arch sm_XY[a|f]` option recorded in a cubin's toolkit note.
fn tkinfo_arch(note: &[u8]) -> Option<Target> {
    let text = String::from_utf8_lossy(note);
    let at = text.find("-arch")? + "-arch".len();
    let rest = text[at..].trim_start_matches([' ', '=']);
    let token: String = rest
        .chars()
        .take_while(|c| c.is_ascii_alphanumeric() || *c == '_')
        .collect();
    token.parse().ok()
}

/// Whether `.nv.compat` carries the arch-specific attribute. Records are
/// `u8 format, u8 attribute, u16 value`; format 4 is followed by `value`
/// bytes of data.
fn compat_arch_specific(data: &[u8]) -> bool {
    let mut at = 0usize;
    while let Some(record) = data.get(at..at + 4) {
        let value = u16::from_le_bytes([record[2], record[3]]);
        if record[0] == 2 && record[1] == COMPAT_ARCH_SPECIFIC {
            return value & 0xff == 1;
        }
        at += 4;
        if record[0] == 4 {
            at += usize::from(value);
        }
    }
    false
}

pub(crate) fn looks_like_ptx(data: &[u8]) -> bool {
    let head = &data[..data.len().min(64 * 1024)];
    let text = String::from_utf8_lossy(head);
    text.lines().any(|l| l.trim_start().starts_with(".version"))
        && text.lines().any(|l| l.trim_start().starts_with(".target"))
}

/// The rest of the first line of `text` that starts, after blanks, with
/// the directive `name`.
fn directive(text: &str, name: &str) -> Option<String> {
    text.lines()
        .map(str::trim_start)
        .find_map(|l| l.strip_prefix(name))
        .map(|rest| rest.trim().to_string())
}

/// Whether the complete lines at the start of a PTX text already hold both
/// directives [`ptx_target`] reads: then it gives the same answer on this
/// head as on the whole text, since it reads the first of each and a line
/// break is never part of a UTF-8 sequence.
fn ptx_head_complete(head: &[u8]) -> bool {
    let Some(end) = head.iter().rposition(|&b| b == b'\n') else {
        return false;
    };
    let text = String::from_utf8_lossy(&head[..end]);
    directive(&text, ".version").is_some() && directive(&text, ".target").is_some()
}

/// The `.target` (as `compute_…`) and `.version` of PTX text.
pub(crate) fn ptx_target(data: &[u8]) -> Result<(Target, Option<PtxIsa>), String> {
    let text = std::str::from_utf8(data)
        .map(Cow::Borrowed)
        .unwrap_or_else(|_| String::from_utf8_lossy(data));
    let isa = directive(&text, ".version").and_then(|v| v.parse::<PtxIsa>().ok());
    let target = directive(&text, ".target").ok_or("no .target directive")?;
    let first = target
        .split([',', ' ', '\t'])
        .next()
        .unwrap_or_default()
        .to_string();
    let sm = first
        .strip_prefix("sm_")
        .ok_or_else(|| format!(".target {first:?} names no sm_ architecture"))?;
    let target: Target = format!("compute_{sm}")
        .parse()
        .map_err(|e: arch::ParseArchError| e.to_string())?;
    Ok((target, isa))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn tkinfo_arch_reads_the_option() {
        let note = b"\0\0Build cuda_13.5\0-arch sm_100f -m 64 \0";
        assert_eq!(tkinfo_arch(note).unwrap().to_string(), "sm_100f");
        assert!(tkinfo_arch(b"nothing here").is_none());
    }

    #[test]
    fn compat_attribute_marks_arch_specific() {
        let a = [
            2, 9, 1, 0, 2, 0xc, 0, 0, 4, 0xb, 8, 0, 9, 0, 0, 0, 0, 0, 0, 0,
        ];
        let plain = [2, 9, 0, 0, 2, 0xc, 0, 0];
        assert!(compat_arch_specific(&a));
        assert!(!compat_arch_specific(&plain));
        assert!(!compat_arch_specific(&[4, 9, 0xff, 0xff]));
    }

    #[test]
    fn ptx_text_gives_target_and_isa() {
        let ptx = b"//\n.version 9.5\n.target sm_90a\n.address_size 64\n";
        let (t, isa) = ptx_target(ptx).unwrap();
        assert_eq!(t.to_string(), "compute_90a");
        assert_eq!(isa, Some(PtxIsa::new(9, 5)));
        assert!(ptx_target(b".version 9.5\n").is_err());
        assert!(ptx_target(b".target gfx90a\n").is_err());
    }

    #[test]
    fn a_ptx_head_is_complete_once_both_directives_end_their_lines() {
        assert!(!ptx_head_complete(b".version 9.5\n.target sm_9"));
        assert!(!ptx_head_complete(b".target sm_90a\n// .version 9.5\n"));
        assert!(ptx_head_complete(
            b"//\n.version 9.5\n.target sm_90a\n.addr"
        ));
    }
}
