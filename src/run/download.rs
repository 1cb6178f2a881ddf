//! `warmup --download`: a pinned kernel's candidates fetched with the hub's
//! own client, through `kernel_preflight.download` in the probed
//! interpreter. The binary speaks no HTTP; the Python package that ships it
//! does, with the user's token. Not a probe: it runs outside the sandbox,
//! with the network and the user's environment, as `pip` would.

use crate::discover::hub_cache::RevisionSpec;
use crate::discover::project::Pinned;
use std::path::{Path, PathBuf};

/// The script the interpreter runs: `repo`, then `version` or `revision`
/// and its value, as `kernel_preflight.download` takes them.
const FETCH: &str = "import sys, kernel_preflight as kp\n\
    repo, kind, pin = sys.argv[1:]\n\
    kp.download(repo, **{kind: int(pin) if kind == 'version' else pin})\n";

/// Why a kernel could not be fetched.
#[derive(Debug, thiserror::Error)]
pub enum DownloadError {
    /// No interpreter to fetch with (the user's to give).
    #[error("--download needs a Python interpreter: give --python P")]
    NoPython,
    /// The interpreter lacks the Python package (the user's to install).
    #[error(
        "--download needs the Python package kernel_preflight in {} (pip install 'kernel-preflight[hub]', or from a checkout: pip install '.[hub]')",
        python.display()
    )]
    NoPackage {
        /// The interpreter.
        python: PathBuf,
    },
    /// The hub's client refused (no such repo or revision, no network).
    #[error("cannot fetch {repo} ({spec}): {why}")]
    Refused {
        /// `ORG/NAME`.
        repo: String,
        /// The revision or version asked for.
        spec: RevisionSpec,
        /// The client's last line on stderr.
        why: String,
    },
    /// The interpreter could not be started at all (preflight's side).
    #[error("cannot run {}: {source}", python.display())]
    Spawn {
        /// The interpreter.
        python: PathBuf,
        /// Why.
        source: std::io::Error,
    },
}

impl DownloadError {
    /// Whether the user can fix it (exit 2) rather than preflight (exit 3).
    pub fn is_bad_input(&self) -> bool {
        !matches!(self, DownloadError::Spawn { .. })
    }
}

/// Fetch `pin`'s candidates into the hub cache with `python`.
pub(super) fn fetch(python: &Path, pin: &Pinned) -> Result<(), DownloadError> {
    let (kind, value) = match &pin.spec {
        RevisionSpec::Version(v) => ("version", v.to_string()),
        RevisionSpec::Revision(r) => ("revision", r.clone()),
        RevisionSpec::Main => ("revision", "main".to_owned()),
    };
    let out = std::process::Command::new(python)
        .args(["-c", FETCH, &pin.repo, kind, &value])
        .stdin(std::process::Stdio::null())
        .output()
        .map_err(|source| DownloadError::Spawn {
            python: python.to_path_buf(),
            source,
        })?;
    if out.status.success() {
        return Ok(());
    }
    let stderr = String::from_utf8_lossy(&out.stderr);
    let last = stderr
        .lines()
        .rev()
        .find(|l| !l.trim().is_empty())
        .unwrap_or("");
    if last.contains("No module named 'kernel_preflight'") {
        return Err(DownloadError::NoPackage {
            python: python.to_path_buf(),
        });
    }
    Err(DownloadError::Refused {
        repo: pin.repo.clone(),
        spec: pin.spec.clone(),
        why: last.to_owned(),
    })
}
