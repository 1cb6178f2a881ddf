//! Child side: which library files the child's CUDA calls are actually
//! bound to. preflight chooses `libcuda` and `libnvrtc` by full path; the
//! dynamic loader may still hand a call to another copy (cudarc opens NVRTC
//! by name, `libnvrtc.so` first, and a system copy on the loader's path
//! wins over the chosen `libnvrtc.so.13`). Evidence about one library
//! reported as evidence about another would be wrong, so a mismatch is a
//! fault of the probe, naming both files.

use crate::protocol::Failure;
use std::path::{Path, PathBuf};

/// The same file, whatever the spelling (symlinks, `..`).
fn same_file(a: &Path, b: &Path) -> bool {
    match (std::fs::canonicalize(a), std::fs::canonicalize(b)) {
        (Ok(a), Ok(b)) => a == b,
        _ => a == b,
    }
}

/// The bound file of `library` as the runtime event reports it; an error
/// when preflight chose another file (`chosen`) than the one bound.
pub fn verify(
    library: &str,
    chosen: Option<&Path>,
    bound: Option<PathBuf>,
) -> Result<Option<String>, Failure> {
    match (chosen, &bound) {
        (Some(chosen), Some(bound)) if !same_file(chosen, bound) => Err(Failure::Internal {
            message: format!(
                "preflight chose {library} at {} but the loader bound its calls to {}: another copy on the loader's path came first; the evidence would describe the wrong library",
                chosen.display(),
                bound.display()
            ),
            traceback: None,
        }),
        _ => Ok(bound.map(|b| b.display().to_string())),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_library_bound_elsewhere_is_a_fault_naming_both_files() {
        let dir = tempfile::tempdir().unwrap();
        let (a, b) = (dir.path().join("libcuda.so.1"), dir.path().join("other.so"));
        std::fs::write(&a, "a").unwrap();
        std::fs::write(&b, "b").unwrap();
        let link = dir.path().join("link.so");
        std::os::unix::fs::symlink(&a, &link).unwrap();
        assert_eq!(
            verify("libcuda", Some(&link), Some(a.clone())).unwrap(),
            Some(a.display().to_string())
        );
        assert_eq!(verify("libcuda", None, None).unwrap(), None);
        match verify("libcuda", Some(&a), Some(b.clone())) {
            Err(Failure::Internal { message, .. }) => {
                assert!(message.contains(&a.display().to_string()), "{message}");
                assert!(message.contains(&b.display().to_string()), "{message}");
            }
            other => panic!("{other:?}"),
        }
    }
}
