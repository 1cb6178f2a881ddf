//! Child side: the device depth of a compiled hub variant. Every fatbin
//! embedded in the variant's shared objects is loaded on the device, one
//! container at a time, as the CUDA runtime registers them when the library
//! is used — so that "no kernel image is available for this device" is
//! found without calling the kernel, and without knowing its API.
//!
//! Which image the driver took is not something the driver says: it is
//! inferred from the images present and the device's capability by the
//! driver's own preference ([`arch::verdict`]), and reported as inferred.

use super::driver::Driver;
use super::request::ModuleKind;
use crate::declared::arch::{self, ComputeCapability, PtxIsa, Runnable, Target};
use crate::declared::embedded::{self, Image};
use crate::declared::fatbin;
use crate::protocol::{CudaError, EmbeddedLoad, Failure};
use object::{Object, ObjectSection};
use std::ops::Range;
use std::path::{Path, PathBuf};
use std::time::Instant;

/// The section of a host ELF file whose fatbins the runtime registers.
const EXECUTABLE: &str = ".nv_fatbin";
/// The section of relocatable device code (`nvcc -rdc=true`), kept for a
/// later device link and never registered as it is.
const RELOCATABLE: &str = "__nv_relfatbin";

/// The shared objects under a variant's directory, sorted by path
/// (`__pycache__` left out).
pub fn shared_objects(dir: &Path) -> std::io::Result<Vec<PathBuf>> {
    fn walk(dir: &Path, out: &mut Vec<PathBuf>) -> std::io::Result<()> {
        for entry in std::fs::read_dir(dir)? {
            let entry = entry?;
            let name = entry.file_name();
            let name = name.to_string_lossy();
            let path = entry.path();
            if path.is_dir() {
                if name != "__pycache__" {
                    walk(&path, out)?;
                }
            } else if (name.ends_with(".so") || name.contains(".so.")) && path.is_file() {
                out.push(path);
            }
        }
        Ok(())
    }
    let mut out = Vec::new();
    walk(dir, &mut out)?;
    out.sort();
    Ok(out)
}

fn unreadable(path: &Path, why: impl std::fmt::Display) -> Failure {
    Failure::InvalidInput {
        message: format!("cannot read the CUDA code in {}: {why}", path.display()),
    }
}

/// One fatbin of a file: where it lies, and what it holds.
struct Container {
    span: Range<u64>,
    /// Every image is relocatable device code: not loadable alone.
    relocatable: bool,
    targets: Vec<(Target, Option<PtxIsa>)>,
}

/// The fatbins of a host ELF file, executable and relocatable.
fn containers(path: &Path, data: &[u8]) -> Result<Vec<Container>, Failure> {
    let elf = object::File::parse(data).map_err(|e| unreadable(path, e))?;
    // Targets with their `a` / `f` suffix, as `inspect` reads them.
    let images: Vec<Image> = embedded::inspect_bytes(path, data)
        .map_err(|e| unreadable(path, e))?
        .images;
    let mut out = Vec::new();
    for name in [EXECUTABLE, RELOCATABLE] {
        let Some(section) = elf.section_by_name(name) else {
            continue;
        };
        let bytes = section.data().map_err(|e| unreadable(path, e))?;
        let base = section.file_range().map_or(0, |(offset, _)| offset);
        let parsed = fatbin::parse(bytes, base).map_err(|e| unreadable(path, e))?;
        for span in &parsed.spans {
            let entries: Vec<&fatbin::Entry<'_>> = parsed
                .entries
                .iter()
                .filter(|e| span.contains(&e.offset))
                .collect();
            let relocatable = name == RELOCATABLE
                || all_relocatable(&entries).map_err(|e| unreadable(path, e))?;
            let targets = images
                .iter()
                .filter(|i| span.contains(&i.offset))
                .map(|i| (i.target, i.ptx_isa))
                .collect();
            out.push(Container {
                span: span.clone(),
                relocatable,
                targets,
            });
        }
    }
    Ok(out)
}

/// Whether a container holds images and every one is relocatable device
/// code: not loadable without a device link.
fn all_relocatable(entries: &[&fatbin::Entry<'_>]) -> Result<bool, fatbin::FatbinError> {
    for entry in entries {
        if !entry.relocatable()? {
            return Ok(false);
        }
    }
    Ok(!entries.is_empty())
}

/// What the driver takes from `targets` on `gpu`, by its preference.
fn taken(targets: &[(Target, Option<PtxIsa>)], gpu: ComputeCapability) -> Option<(String, bool)> {
    match arch::verdict(targets, gpu, None).how {
        Runnable::Sass { target } => Some((format!("{target} SASS"), false)),
        Runnable::PtxJit { target, .. } => Some((format!("{target} PTX, JIT"), true)),
        _ => None,
    }
}

/// `CUDA_ERROR_NO_BINARY_FOR_GPU`.
const NO_BINARY_FOR_GPU: i64 = 209;

/// Loads every executable fatbin of the shared object `path` on the
/// device (`gpu`), unloading each again; relocatable ones are counted, not
/// tried. A load the driver refuses is kept in the result's `error` (the
/// first one), except a container for other GPUs: one refused with 209
/// whose images the driver's rule also finds nothing in for `gpu` (the
/// `10.0a`-only container of a multi-architecture build on a 9.0 GPU),
/// counted in `other_gpus` and an error only when no container of the file
/// loads. A failure that is not the file's (a missing entry point) ends
/// the work.
pub fn load_file(
    driver: &Driver,
    gpu: ComputeCapability,
    variant: &Path,
    path: &Path,
) -> Result<EmbeddedLoad, Failure> {
    let file = crate::fs::open_regular(path).map_err(|e| unreadable(path, e))?;
    // SAFETY: a read-only private map, read within this call; a library
    // truncated underneath it could fault, as with any mmap reader (the
    // same trade `inspect` makes).
    let data = unsafe { memmap2::Mmap::map(&file) }.map_err(|e| unreadable(path, e))?;
    let containers = if data.starts_with(b"\x7fELF") {
        containers(path, &data)?
    } else {
        Vec::new()
    };
    let all: Vec<(Target, Option<PtxIsa>)> = containers
        .iter()
        .filter(|c| !c.relocatable)
        .flat_map(|c| c.targets.iter().copied())
        .collect();
    let mut load = EmbeddedLoad {
        file: path
            .strip_prefix(variant)
            .unwrap_or(path)
            .display()
            .to_string(),
        images: arch::describe_images(&all),
        loaded: 0,
        relocatable: 0,
        other_gpus: 0,
        taken: None,
        load_ms: 0.0,
        jit_ms: None,
        error: None,
    };
    // The first refusal of a container for other GPUs.
    let mut not_here = None;
    let mut taken_all: Vec<String> = Vec::new();
    let mut jit_ms = 0.0;
    let mut jitted = false;
    let started = Instant::now();
    for container in &containers {
        if container.relocatable {
            load.relocatable += 1;
            continue;
        }
        if container.targets.is_empty() {
            continue;
        }
        let (Ok(start), Ok(end)) = (
            usize::try_from(container.span.start),
            usize::try_from(container.span.end),
        ) else {
            continue;
        };
        let Some(bytes) = data.get(start..end) else {
            continue;
        };
        // The driver reads the fatbin's 64-bit header fields in place:
        // hand it 8-byte aligned memory.
        let mut words = vec![0u64; bytes.len().div_ceil(8)];
        for (word, chunk) in words.iter_mut().zip(bytes.chunks(8)) {
            let mut b = [0u8; 8];
            b[..chunk.len()].copy_from_slice(chunk);
            *word = u64::from_ne_bytes(b);
        }
        // SAFETY: `words` holds `bytes.len()` initialised bytes.
        let aligned: &[u8] =
            unsafe { std::slice::from_raw_parts(words.as_ptr().cast::<u8>(), bytes.len()) };
        match driver.load(aligned, ModuleKind::Fatbin) {
            Ok(loaded) => {
                load.loaded += 1;
                if let Some((what, jit)) = taken(&container.targets, gpu) {
                    if jit {
                        jitted = true;
                        jit_ms += loaded.jit_ms;
                    }
                    if !taken_all.contains(&what) {
                        taken_all.push(what);
                    }
                }
                // Freeing the code again is housekeeping: a refusal here
                // says nothing about the variant.
                let _ = loaded.module.unload();
            }
            Err(Failure::Cuda(error))
                if error.code == NO_BINARY_FOR_GPU && taken(&container.targets, gpu).is_none() =>
            {
                load.other_gpus += 1;
                not_here.get_or_insert(error);
            }
            Err(Failure::Cuda(error)) => {
                load.error.get_or_insert(error);
            }
            Err(other) => return Err(other),
        }
    }
    if load.loaded == 0 && load.error.is_none() {
        load.error = not_here;
    }
    load.load_ms = started.elapsed().as_secs_f64() * 1e3;
    load.jit_ms = jitted.then_some(jit_ms);
    if !taken_all.is_empty() {
        load.taken = Some(taken_all.join(", "));
    }
    Ok(load)
}

/// The first refused load of `loads`, named after its file, as the
/// failure that ends the device depth.
pub fn first_error(loads: &[EmbeddedLoad]) -> Option<CudaError> {
    loads.iter().find_map(|l| {
        l.error.clone().map(|e| CudaError {
            call: format!("{} ({})", e.call, l.file),
            ..e
        })
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_driver_prefers_sass_and_falls_back_to_ptx() {
        let t = |s: &str| (s.parse::<Target>().unwrap(), None);
        let h100 = ComputeCapability::new(9, 0);
        assert_eq!(
            taken(&[t("sm_80"), t("sm_90"), t("compute_80")], h100),
            Some(("sm_90 SASS".to_owned(), false))
        );
        assert_eq!(
            taken(&[t("sm_80"), t("compute_80")], h100),
            Some(("compute_80 PTX, JIT".to_owned(), true))
        );
        assert_eq!(taken(&[t("sm_80")], h100), None);
        assert_eq!(taken(&[t("sm_90a")], ComputeCapability::new(10, 0)), None);
    }

    #[test]
    fn a_failure_names_its_file() {
        let error = CudaError {
            call: "cuModuleLoadDataEx".into(),
            code: 209,
            name: "CUDA_ERROR_NO_BINARY_FOR_GPU".into(),
            message: String::new(),
            log: None,
        };
        let load = |file: &str, error: Option<CudaError>| EmbeddedLoad {
            file: file.into(),
            images: String::new(),
            loaded: 0,
            relocatable: 0,
            other_gpus: 0,
            taken: None,
            load_ms: 0.0,
            jit_ms: None,
            error,
        };
        let loads = [load("a.so", None), load("b.so", Some(error))];
        let first = first_error(&loads).unwrap();
        assert_eq!(first.call, "cuModuleLoadDataEx (b.so)");
        assert_eq!(first.code, 209);
        assert!(first_error(&loads[..1]).is_none());
    }
}
