//! The CUDA images embedded in a file or a variant directory, read without
//! cuobjdump: host ELF files (`.so`) through their `.nv_fatbin` section,
//! standalone `.fatbin`, `.cubin` and `.ptx` files.
//!
//! Files are memory-mapped and only the bytes of the fatbin and of the ELF
//! headers are touched, so a 1 GB shared object is read in milliseconds.

use crate::declared::arch::{self, ComputeCapability, ImageKind, PtxIsa, Suffix, Target, Verdict};
use crate::declared::fatbin::{self, Compression, Entry, FatbinError};
use object::read::elf::{ElfFile64, FileHeader};
use object::{Object, ObjectSection};
use serde::Serialize;
use std::borrow::Cow;
use std::path::{Path, PathBuf};

/// `e_machine` of a cubin.
const EM_CUDA: u16 = 190;
/// `EI_ABIVERSION` of cubins with the V2 `e_flags` layout (CUDA 12.9 for
/// sm_100 and later, CUDA 13 for every SM); V1 is 7.
const ABI_V2: u8 = 8;
/// Sections that hold fatbins in host ELF files, most specific first.
const FATBIN_SECTIONS: [&str; 2] = [".nv_fatbin", "__nv_relfatbin"];
/// `.nv.compat` attribute whose value 1 marks an arch-specific (`a`) cubin
/// (nvcc 13.5; what cuobjdump reads).
const COMPAT_ARCH_SPECIFIC: u8 = 0x09;

/// One embedded image.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Image {
    /// SASS or PTX.
    pub kind: ImageKind,
    /// `sm_90a`, `compute_90`, … with the `a` / `f` suffix kept.
    pub target: Target,
    /// PTX ISA version (PTX only).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub ptx_isa: Option<PtxIsa>,
    /// Compression of the stored bytes, if any.
    pub compressed: Option<Compression>,
    /// Bytes stored in the file (for a member of an nvcc `--concat` group,
    /// which is compressed as a whole: its own decompressed size).
    pub stored_size: u64,
    /// Bytes once decompressed.
    pub size: u64,
    /// Absolute file offset of the image's fatbin entry header (0 for a
    /// standalone cubin or PTX file).
    pub offset: u64,
}

/// What kind of file was inspected.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Format {
    /// A host ELF file (shared object, executable, object file).
    Elf,
    /// A standalone fatbin.
    Fatbin,
    /// A standalone cubin (one SASS image).
    Cubin,
    /// A standalone PTX file.
    Ptx,
}

impl Format {
    /// How people call it.
    pub fn describe(self) -> &'static str {
        match self {
            Format::Elf => "ELF file",
            Format::Fatbin => "fatbin",
            Format::Cubin => "cubin",
            Format::Ptx => "PTX file",
        }
    }
}

/// Everything found in one file.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct FileImages {
    /// The file.
    pub path: PathBuf,
    /// Its format.
    pub format: Format,
    /// Number of fatbin containers found.
    pub fatbins: usize,
    /// SASS and PTX images, in file order.
    pub images: Vec<Image>,
    /// Entries of other kinds (LTO IR, …) that no driver loads directly.
    pub other_entries: usize,
}

impl FileImages {
    /// Targets with their ISA, the input of [`arch::verdict`].
    pub fn targets(&self) -> Vec<(Target, Option<PtxIsa>)> {
        self.images.iter().map(|i| (i.target, i.ptx_isa)).collect()
    }

    /// Whether the file holds any CUDA code at all.
    pub fn has_cuda(&self) -> bool {
        !self.images.is_empty()
    }

    /// The compatibility rule for this file on `gpu` (see [`arch::verdict`]).
    pub fn verdict(&self, gpu: ComputeCapability, driver_ptx: Option<PtxIsa>) -> Verdict {
        arch::verdict(&self.targets(), gpu, driver_ptx)
    }
}

/// A file that could not be inspected, with what was wrong and where.
#[derive(Debug, thiserror::Error)]
#[error("{}: {problem}", path.display())]
pub struct InspectError {
    /// The file.
    pub path: PathBuf,
    /// What went wrong.
    pub problem: Problem,
}

/// Why a file could not be inspected.
#[derive(Debug, thiserror::Error)]
pub enum Problem {
    /// The file cannot be opened, mapped or listed.
    #[error("cannot read: {0}")]
    Io(#[from] std::io::Error),
    /// Neither ELF, fatbin nor PTX.
    #[error("not an ELF file, fatbin, cubin or PTX file (starts with {0})")]
    Unrecognised(String),
    /// A file of zero bytes.
    #[error("empty file, not an ELF file, fatbin, cubin or PTX file")]
    Empty,
    /// An ELF file whose headers do not parse.
    #[error("not a readable ELF file: {0}")]
    Elf(object::Error),
    /// A fatbin that does not parse.
    #[error("{}{source}", section.as_ref().map(|s| format!("{s} section: ")).unwrap_or_default())]
    Fatbin {
        /// The ELF section that holds it, if any.
        section: Option<String>,
        /// What is wrong with it.
        source: FatbinError,
    },
    /// A SASS image that is not a cubin.
    #[error("SASS image at offset {offset:#x} is not a valid cubin: {why}")]
    Cubin {
        /// File offset of its entry header.
        offset: u64,
        /// What is wrong.
        why: String,
    },
    /// A PTX image without a readable `.target`.
    #[error("PTX image at offset {offset:#x} is not valid PTX: {why}")]
    Ptx {
        /// File offset of its entry header.
        offset: u64,
        /// What is wrong.
        why: String,
    },
}

/// Inspect one file, or every `.so`, `.cubin`, `.fatbin` and `.ptx` file
/// under a directory (sorted by path; symlinked files are followed,
/// symlinked directories are not).
pub fn inspect_path(path: &Path) -> Result<Vec<FileImages>, InspectError> {
    let err = |problem: Problem| InspectError {
        path: path.to_path_buf(),
        problem,
    };
    let meta = std::fs::metadata(path).map_err(|e| err(e.into()))?;
    if !meta.is_dir() {
        return Ok(vec![inspect_file(path)?]);
    }
    let mut files = Vec::new();
    collect(path, &mut files)?;
    files.sort();
    files.iter().map(|f| inspect_file(f)).collect()
}

/// Whether a file name looks like something that can hold CUDA images.
fn is_candidate(name: &str) -> bool {
    name.ends_with(".so")
        || name.contains(".so.")
        || name.ends_with(".cubin")
        || name.ends_with(".fatbin")
        || name.ends_with(".ptx")
}

fn collect(dir: &Path, out: &mut Vec<PathBuf>) -> Result<(), InspectError> {
    let err = |e: std::io::Error| InspectError {
        path: dir.to_path_buf(),
        problem: e.into(),
    };
    for entry in std::fs::read_dir(dir).map_err(err)? {
        let entry = entry.map_err(err)?;
        let path = entry.path();
        let file_type = entry.file_type().map_err(err)?;
        if file_type.is_dir() {
            collect(&path, out)?;
        } else if is_candidate(&entry.file_name().to_string_lossy())
            && (file_type.is_file() || path.is_file())
        {
            out.push(path);
        }
    }
    Ok(())
}

/// Inspect one file, whatever its format.
pub fn inspect_file(path: &Path) -> Result<FileImages, InspectError> {
    let err = |problem: Problem| InspectError {
        path: path.to_path_buf(),
        problem,
    };
    let file = std::fs::File::open(path).map_err(|e| err(e.into()))?;
    let len = file.metadata().map_err(|e| err(e.into()))?.len();
    if len == 0 {
        return Err(err(Problem::Empty));
    }
    // SAFETY: the map is read-only and private to this call; a file truncated
    // underneath it by another process could fault, as with any mmap reader
    // (ripgrep and the `object` tools accept the same trade).
    let map = unsafe { memmap2::Mmap::map(&file) }.map_err(|e| err(e.into()))?;
    inspect_bytes(path, &map).map_err(err)
}

/// Inspect a file's bytes; `path` only names it in the result.
pub fn inspect_bytes(path: &Path, data: &[u8]) -> Result<FileImages, Problem> {
    let mut found = FileImages {
        path: path.to_path_buf(),
        format: Format::Elf,
        fatbins: 0,
        images: Vec::new(),
        other_entries: 0,
    };
    if data.starts_with(b"\x7fELF") {
        if elf_machine(data) == Some(EM_CUDA) {
            found.format = Format::Cubin;
            found.images.push(cubin_image(data, 0, None)?);
        } else {
            host_elf(data, &mut found)?;
        }
    } else if data.starts_with(&fatbin::FATBIN_MAGIC.to_le_bytes()) {
        found.format = Format::Fatbin;
        let parsed = fatbin::parse(data, 0).map_err(|source| Problem::Fatbin {
            section: None,
            source,
        })?;
        add_fatbin(&parsed, None, &mut found)?;
    } else if looks_like_ptx(data) {
        found.format = Format::Ptx;
        let (target, isa) = ptx_target(data).map_err(|why| Problem::Ptx { offset: 0, why })?;
        found.images.push(Image {
            kind: ImageKind::Ptx,
            target,
            ptx_isa: isa,
            compressed: None,
            stored_size: data.len() as u64,
            size: data.len() as u64,
            offset: 0,
        });
    } else {
        let head: Vec<String> = data.iter().take(4).map(|b| format!("{b:02x}")).collect();
        return Err(Problem::Unrecognised(format!("bytes {}", head.join(" "))));
    }
    Ok(found)
}

fn elf_machine(data: &[u8]) -> Option<u16> {
    let b = data.get(18..20)?;
    Some(match data.get(5)? {
        2 => u16::from_be_bytes([b[0], b[1]]),
        _ => u16::from_le_bytes([b[0], b[1]]),
    })
}

fn host_elf(data: &[u8], found: &mut FileImages) -> Result<(), Problem> {
    let elf = object::File::parse(data).map_err(Problem::Elf)?;
    for name in FATBIN_SECTIONS {
        let Some(section) = elf.section_by_name(name) else {
            continue;
        };
        let bytes = section.data().map_err(Problem::Elf)?;
        let base = section.file_range().map_or(0, |(offset, _)| offset);
        let parsed = fatbin::parse(bytes, base).map_err(|source| Problem::Fatbin {
            section: Some(name.to_string()),
            source,
        })?;
        add_fatbin(&parsed, Some(name), found)?;
        // An executable fatbin makes the relocatable one redundant, as in cuobjdump.
        if found.fatbins > 0 {
            break;
        }
    }
    Ok(())
}

fn add_fatbin(
    parsed: &fatbin::Fatbin<'_>,
    section: Option<&str>,
    found: &mut FileImages,
) -> Result<(), Problem> {
    found.fatbins += parsed.containers;
    found.other_entries += parsed.other_entries;
    for entry in &parsed.entries {
        let bytes = entry.bytes().map_err(|source| Problem::Fatbin {
            section: section.map(str::to_string),
            source,
        })?;
        found.images.push(entry_image(entry, &bytes)?);
    }
    Ok(())
}

fn entry_image(entry: &Entry<'_>, bytes: &[u8]) -> Result<Image, Problem> {
    let mut image = match entry.kind {
        ImageKind::Sass => cubin_image(bytes, entry.offset, Some(entry))?,
        ImageKind::Ptx => {
            let (target, isa) = ptx_target(bytes).map_err(|why| Problem::Ptx {
                offset: entry.offset,
                why,
            })?;
            Image {
                kind: ImageKind::Ptx,
                target,
                ptx_isa: isa.or(entry.ptx_isa),
                compressed: None,
                stored_size: 0,
                size: 0,
                offset: entry.offset,
            }
        }
    };
    image.compressed = entry.compression;
    image.stored_size = entry.stored_size;
    image.size = entry.size;
    Ok(image)
}

/// The target of a cubin: SM from `e_flags`, suffix from the toolkit note
/// (`-arch sm_100f`), the `.nv.compat` attributes, the `e_flags` accelerator
/// bit, or the fatbin entry's flags, whichever says it.
fn cubin_image(data: &[u8], offset: u64, entry: Option<&Entry<'_>>) -> Result<Image, Problem> {
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

fn looks_like_ptx(data: &[u8]) -> bool {
    let head = &data[..data.len().min(64 * 1024)];
    let text = String::from_utf8_lossy(head);
    text.lines().any(|l| l.trim_start().starts_with(".version"))
        && text.lines().any(|l| l.trim_start().starts_with(".target"))
}

/// The `.target` (as `compute_…`) and `.version` of PTX text.
fn ptx_target(data: &[u8]) -> Result<(Target, Option<PtxIsa>), String> {
    let text = std::str::from_utf8(data)
        .map(Cow::Borrowed)
        .unwrap_or_else(|_| String::from_utf8_lossy(data));
    let directive = |name: &str| {
        text.lines()
            .map(str::trim_start)
            .find_map(|l| l.strip_prefix(name))
            .map(|rest| rest.trim().to_string())
    };
    let isa = directive(".version").and_then(|v| v.parse::<PtxIsa>().ok());
    let target = directive(".target").ok_or("no .target directive")?;
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
}

/// What the embedded-architecture check is judged against: this machine's
/// GPU and its driver's PTX JIT.
#[derive(Debug, Clone, Copy, Default)]
pub struct Judge {
    /// Compute capability of CUDA device 0, when known.
    pub gpu: Option<ComputeCapability>,
    /// The newest PTX ISA the driver JIT-compiles, when known.
    pub driver_ptx: Option<PtxIsa>,
}

impl Judge {
    /// The GPU a kernel runs on by default — the one CUDA numbers 0 after
    /// `CUDA_VISIBLE_DEVICES` and `CUDA_DEVICE_ORDER`, not the first on the
    /// PCI bus — when the fingerprint knows its compute capability, and the
    /// driver's PTX ISA.
    pub fn from_fingerprint(fp: &crate::fingerprint::Fingerprint) -> Judge {
        Judge {
            gpu: fp.cuda_default_device().and_then(|g| g.compute_capability),
            driver_ptx: fp.gpus.driver.as_deref().and_then(arch::driver_max_ptx_isa),
        }
    }
}

/// Whether the CUDA code a variant ships can run on the judged GPU: `None`
/// when there is no GPU to judge against, no CUDA code, or a file cannot be
/// read (the probe will tell); else the verdict, naming the first file that
/// cannot run ("_ops.so: SASS for sm_80 and sm_90a, no PTX; this GPU is
/// sm_100: no image can run here").
pub fn variant_verdict(dir: &Path, judge: Judge) -> Option<(bool, String)> {
    let gpu = judge.gpu?;
    let files = inspect_path(dir).ok()?;
    let with_cuda: Vec<&FileImages> = files.iter().filter(|f| f.has_cuda()).collect();
    if with_cuda.is_empty() {
        return None;
    }
    let name = |f: &FileImages| {
        f.path
            .strip_prefix(dir)
            .unwrap_or(&f.path)
            .display()
            .to_string()
    };
    for f in &with_cuda {
        let verdict = f.verdict(gpu, judge.driver_ptx);
        if !verdict.runnable {
            return Some((false, format!("{}: {}", name(f), verdict.summary)));
        }
    }
    Some((
        true,
        format!(
            "every CUDA file ({}) has an image for this GPU",
            with_cuda.len()
        ),
    ))
}
