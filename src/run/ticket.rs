//! Tickets: `check --cached --ticket FILE` writes, beside a cached pass,
//! every input the answer depended on ([`crate::seen`]), so that the
//! Python package's flag can re-check them in-process and answer a warm
//! `get_kernel` with no child at all (`kernel_preflight/_ticket.py`,
//! docs/flag.md).
//!
//! A ticket is written only for one variant whose answer is a pass from
//! the outcome cache, made without any child process, remote store, or
//! file changed too recently to be vouched for by its `stat`; otherwise
//! the file is removed, so that no older ticket outlives the answer it
//! stood for.

use super::CheckReport;
use crate::fingerprint::Sources;
use crate::seen;
use serde::Serialize;
use std::path::Path;

/// The binary that answered: another build may answer differently.
#[derive(Serialize)]
struct Binary {
    path: String,
    stat: seen::Seen,
}

/// What `--ticket` writes.
#[derive(Serialize)]
struct Ticket<'a> {
    /// [`seen::SCHEMA`].
    schema: u32,
    /// The command's arguments after the binary's name, `--ticket FILE`
    /// left out: the question the answer is to.
    argv: &'a [String],
    binary: Binary,
    /// The document `check --json` printed.
    answer: &'a CheckReport,
    /// Every input, as [`seen`] recorded it.
    reads: Vec<seen::Read>,
}

/// Start recording the inputs of a `check --cached` for its ticket: called
/// before anything of the check is read. Every `PREFLIGHT_` variable is an
/// input, whatever reads it.
pub fn begin() {
    let src = Sources::from_process();
    let live = [
        src.sys_root.clone(),
        src.proc_root.clone(),
        src.dev_root.clone(),
    ];
    seen::start(&live);
    seen::prefix("PREFLIGHT_", &src.env);
}

/// Write the ticket of `report`, the answer to `argv`, at `path`
/// atomically (`Ok(None)`), or remove any ticket there and say why none
/// was written (`Ok(Some(why))`). `Err`: the file could not be written or
/// removed.
pub fn finish(
    path: &Path,
    argv: &[String],
    report: &CheckReport,
) -> Result<Option<String>, String> {
    let recorded = seen::finish(seen::now_ns());
    let answer = match report.results.as_slice() {
        [one] if one.cached && one.outcome.kind.passed() && report.faults.is_empty() => Ok(()),
        [_] => Err("the answer is not a cached pass".to_string()),
        _ => Err("a ticket answers one variant".to_string()),
    };
    let binary = crate::fs::current_exe()
        .and_then(|exe| {
            let stat = seen::Seen::of(&std::fs::metadata(&exe).ok()?);
            let path = exe.to_str()?.to_string();
            Some(Binary { path, stat })
        })
        .ok_or_else(|| "this binary cannot be found".to_string());
    let written = answer.and(recorded).and_then(|reads| Ok((reads, binary?)));
    let (reads, binary) = match written {
        Ok(found) => found,
        Err(why) => {
            return match std::fs::remove_file(path) {
                Err(e) if e.kind() != std::io::ErrorKind::NotFound => {
                    Err(format!("cannot remove {}: {e}", crate::fs::shown(path)))
                }
                _ => Ok(Some(why)),
            };
        }
    };
    let ticket = Ticket {
        schema: seen::SCHEMA,
        argv,
        binary,
        answer: report,
        reads,
    };
    let bytes = serde_json::to_vec(&ticket).map_err(|e| format!("cannot write a ticket: {e}"))?;
    if let Some(dir) = path.parent().filter(|d| !d.as_os_str().is_empty()) {
        std::fs::create_dir_all(dir)
            .map_err(|e| format!("cannot make {}: {e}", crate::fs::shown(dir)))?;
    }
    crate::fs::write_atomic(path, &bytes, ".ticket-", 0o600)
        .map_err(|e| format!("cannot write {}: {e}", crate::fs::shown(path)))?;
    Ok(None)
}
