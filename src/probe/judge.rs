//! Judging ahead: the hub's acceptance of many variants decided in one
//! python child before (or while) they are probed. Importing the installed
//! `kernels` package's parser and validators (with the HTTP client they
//! pull in) is most of what a cold probe child costs beyond the variant's
//! own import; one judge child pays it once for a whole run.
//!
//! The judge runs the same driver, interpreter and environment in a sandbox
//! like a probe's, and asks the same function (`acceptance.accept`) in
//! the same order of variants; it writes one line per verdict, with the
//! exact bytes of the `metadata.json` it judged. A probe child replays the
//! line for its variant only when its `metadata.json` still has those
//! bytes, and judges itself otherwise, so a verdict never outlives what it
//! was given. The judge stops at the first judgment that prints anything
//! on stderr (a probe's stderr is evidence) and after a refusal that may
//! have changed the interpreter's state (probes/python/judge.py:
//! `judge_all`); the variants after it judge themselves, as every probe did
//! before. The verdicts live in memory for one run and are never cached on
//! their own: an outcome's cache key already holds everything a verdict
//! depends on (the variant's files, the interpreter and its packages, the
//! driver).

use super::python::DRIVER_NAME;
use super::{ProbeError, PythonExecutor};
use crate::sandbox::{Cancel, Limits};
use std::ffi::OsString;
use std::path::{Path, PathBuf};
use std::sync::{Arc, OnceLock};

/// The variants to judge, as a JSON array of paths.
const LISTING_NAME: &str = "preflight_judge.json";
/// Where the judge writes its verdicts, one JSON line each.
const OUT_NAME: &str = "preflight_judged.jsonl";

/// The judge's verdicts, shared by an executor and its clones; the parent
/// never reads them, it hands them to each probe child as they are.
#[derive(Debug, Clone, Default)]
pub(super) struct Verdicts(Arc<OnceLock<Vec<u8>>>);

impl Verdicts {
    /// The verdicts, once a judge has left some.
    pub(super) fn get(&self) -> Option<&[u8]> {
        self.0.get().map(Vec::as_slice)
    }

    /// A slot that holds `given` from the start (a judge of the run then
    /// leaves nothing: its variants judge themselves, as when it stops).
    fn given(given: Option<&[u8]>) -> Verdicts {
        let slot = OnceLock::new();
        if let Some(bytes) = given {
            let _ = slot.set(bytes.to_vec());
        }
        Verdicts(Arc::new(slot))
    }
}

impl PythonExecutor {
    /// A copy of this executor with a slot of its own for verdicts: what
    /// [`PythonExecutor::judge_ahead`] leaves there is used by the copy's
    /// (and its clones') probes only. A run takes one, so that no verdict
    /// reaches another run.
    pub fn judging(&self) -> PythonExecutor {
        PythonExecutor {
            verdicts: Verdicts::given(self.given.as_deref()),
            ..self.clone()
        }
    }

    /// Judges `variants` (hub variant directories, in the order they will
    /// be probed) in one sandboxed child under `limits`, and leaves its
    /// verdicts for this executor's later probes. Returns how many variants
    /// it judged; 0 (and nothing left) when it judged none, when its slot
    /// already holds verdicts, or when `cancel` stopped it first. Probes
    /// that start before it ends, or whose variant it did not judge, judge
    /// themselves. A path that is not UTF-8 ends the list (JSON has no
    /// other spelling for it): it and the variants after it judge themselves.
    pub fn judge_ahead(
        &self,
        variants: &[PathBuf],
        limits: &Limits,
        cancel: &Cancel,
    ) -> Result<usize, ProbeError> {
        let mut paths = Vec::new();
        for variant in variants {
            let path = std::path::absolute(variant).map_err(|source| ProbeError::Path {
                path: variant.clone(),
                source,
            })?;
            match path.into_os_string().into_string() {
                Ok(path) => paths.push(path),
                Err(_) => break,
            }
        }
        // A forked probe judges itself in an interpreter that has imported
        // `kernels` already: a judge would only take a core from it.
        let forking = self.forking.is_some() && self.fork_fallback().is_none();
        if forking || paths.is_empty() || self.verdicts.get().is_some() {
            return Ok(0);
        }
        let sandbox = super::kernel_sandbox(variants.iter().map(|v| super::kernel_files(v)))?;
        let dir = sandbox.dir();
        self.write_driver(dir)?;
        let listing = dir.join(LISTING_NAME);
        let text = serde_json::to_string(&paths).map_err(std::io::Error::other);
        text.and_then(|text| std::fs::write(&listing, text))
            .map_err(|source| ProbeError::Setup {
                path: listing.clone(),
                source,
            })?;
        let out = dir.join(OUT_NAME);
        let args: Vec<OsString> = vec![
            "-B".into(),
            dir.join(DRIVER_NAME).into(),
            "--judge".into(),
            listing.into(),
            out.clone().into(),
        ];
        sandbox.run(&self.child(dir, args), limits, cancel)?;
        Ok(self.keep(&out))
    }

    /// Keeps the complete lines of the judge's file `out`; how many.
    fn keep(&self, out: &Path) -> usize {
        let Ok(mut judged) = std::fs::read(out) else {
            return 0;
        };
        // A line the judge did not finish is no verdict.
        let complete = judged
            .iter()
            .rposition(|&b| b == b'\n')
            .map_or(0, |i| i + 1);
        judged.truncate(complete);
        let count = judged.iter().filter(|&&b| b == b'\n').count();
        if count > 0 {
            let _ = self.verdicts.0.set(judged);
        }
        count
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_torn_last_line_is_no_verdict() {
        let dir = tempfile::tempdir().unwrap();
        let out = dir.path().join("judged");
        std::fs::write(&out, "{\"a\": 1}\n{\"b\"").unwrap();
        let executor = PythonExecutor::new("python3").judging();
        assert_eq!(executor.keep(&out), 1);
        assert_eq!(executor.verdicts.get(), Some(&b"{\"a\": 1}\n"[..]));
    }

    #[test]
    fn nothing_judged_leaves_the_slot_empty_and_copies_do_not_share_it() {
        let dir = tempfile::tempdir().unwrap();
        let out = dir.path().join("judged");
        std::fs::write(&out, "{\"b\"").unwrap();
        let executor = PythonExecutor::new("python3");
        assert_eq!(executor.keep(&out), 0);
        assert_eq!(executor.verdicts.get(), None);
        std::fs::write(&out, "{}\n").unwrap();
        let copy = executor.judging();
        assert_eq!(copy.keep(&out), 1);
        assert_eq!(executor.verdicts.get(), None);
        assert!(copy.clone().verdicts.get().is_some());
    }
}
