//! Files a command writes besides its answer (`labels --output`, `bench
//! --plot`, `fleet report --html`): the path checked before any work, so
//! that a bad one is one message and no file, and the file written whole.

use super::{BadInput, Failure, Internal};
use std::path::Path;

/// `flag`'s FILE, whose folder exists and can be written, and whose name
/// ends in `.extension` when one is required (the content is that format,
/// whatever the name says).
pub(super) fn writable(flag: &str, output: &Path, extension: Option<&str>) -> Result<(), Failure> {
    let bad = |why: &str| BadInput(format!("{flag} {}: {why}", output.display()));
    if output.is_dir() {
        return Err(bad("a folder; expected a file path in it"));
    }
    if let Some(extension) = extension {
        let ends = output
            .extension()
            .is_some_and(|e| e.eq_ignore_ascii_case(extension));
        if !ends {
            return Err(bad(&format!(
                "expected a file name ending in .{extension} (the file is {})",
                extension.to_uppercase()
            )));
        }
    }
    let folder = match output.parent() {
        Some(p) if !p.as_os_str().is_empty() => p,
        _ => Path::new("."),
    };
    if !folder.is_dir() {
        return Err(bad("its folder does not exist"));
    }
    nix::unistd::access(
        folder,
        nix::unistd::AccessFlags::W_OK | nix::unistd::AccessFlags::X_OK,
    )
    .map_err(|_| bad("its folder is not writable"))
}

/// Write `text` to `path` whole (readers see the old file or the new one).
pub(super) fn write(path: &Path, text: &str) -> Result<(), Failure> {
    kernel_preflight::fs::write_atomic(path, text.as_bytes(), ".preflight-", 0o644)
        .map_err(|e| Internal(format!("cannot write {}: {e}", path.display())))
}
