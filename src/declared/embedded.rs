//! The CUDA images embedded in a file or a variant directory, read without
//! cuobjdump: host ELF files (`.so`) through their `.nv_fatbin` section,
//! standalone `.fatbin`, `.cubin` and `.ptx` files.
//!
//! Files are memory-mapped and only the bytes of the fatbin and of the ELF
//! headers are touched, so a 1 GB shared object is read in milliseconds;
//! compressed images are not decompressed beyond what their target needs
//! ([`Depth`]).

use crate::declared::arch::{self, ComputeCapability, ImageKind, PtxIsa, Target, Verdict};
use crate::declared::fatbin::{self, Compression, FatbinError};
use crate::declared::image::{
    EM_CUDA, cubin_image, decompresses, entry_image, looks_like_ptx, ptx_target,
};
use object::{Object, ObjectSection};
use rayon::prelude::*;
use serde::Serialize;
use std::path::{Path, PathBuf};

pub use crate::declared::image::Depth;

/// Sections that hold fatbins in host ELF files, most specific first.
const FATBIN_SECTIONS: [&str; 2] = [".nv_fatbin", "__nv_relfatbin"];

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
    let meta = crate::seen::metadata(path).map_err(|e| err(e.into()))?;
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
    let entries = std::fs::read_dir(dir).map_err(err)?;
    crate::seen::listing(dir, None);
    for entry in entries {
        let entry = entry.map_err(err)?;
        let path = entry.path();
        let file_type = entry.file_type().map_err(err)?;
        if file_type.is_dir() {
            collect(&path, out)?;
        } else if is_candidate(&entry.file_name().to_string_lossy())
            && (file_type.is_file() || crate::seen::is_file(&path))
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
    let file = crate::fs::open_regular(path).map_err(|e| err(e.into()))?;
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
    inspect_bytes_with(path, data, Depth::Headers)
}

/// [`inspect_bytes`], reading the images inside fatbins as deep as `depth`
/// asks.
pub fn inspect_bytes_with(path: &Path, data: &[u8], depth: Depth) -> Result<FileImages, Problem> {
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
            host_elf(data, depth, &mut found)?;
        }
    } else if data.starts_with(&fatbin::FATBIN_MAGIC.to_le_bytes()) {
        found.format = Format::Fatbin;
        let parsed = fatbin::parse(data, 0).map_err(|source| Problem::Fatbin {
            section: None,
            source,
        })?;
        add_fatbin(&parsed, None, depth, &mut found)?;
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

fn host_elf(data: &[u8], depth: Depth, found: &mut FileImages) -> Result<(), Problem> {
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
        add_fatbin(&parsed, Some(name), depth, found)?;
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
    depth: Depth,
    found: &mut FileImages,
) -> Result<(), Problem> {
    found.fatbins += parsed.containers;
    found.other_entries += parsed.other_entries;
    let read = |entry| entry_image(entry, section, depth);
    // Decompression is the only work worth spreading over threads; for one
    // entry or none, starting rayon's pool would cost more than it saves.
    let work = parsed
        .entries
        .iter()
        .filter(|e| decompresses(e, depth))
        .count();
    let images: Vec<Result<Image, Problem>> = if work > 1 {
        parsed.entries.par_iter().map(read).collect()
    } else {
        parsed.entries.iter().map(read).collect()
    };
    // The first fault in file order, whichever thread met it first.
    for image in images {
        found.images.push(image?);
    }
    Ok(())
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
