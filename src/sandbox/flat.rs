//! Where Linux refuses overlayfs (an older kernel in a user namespace, a
//! file system that cannot be a lower layer), a probe's `/tmp`, `TMPDIR`
//! and home folder are private folders holding the host's entries, each
//! bound read-only in its place, instead of the host's seen through a
//! copy-on-write layer: a probe still reads what is there (a venv of a
//! checkout under `/tmp`, the hub cache in the home folder) and nothing
//! it writes outlives it, but it cannot change a file or a folder of the
//! host's there (where an overlay would have let it write a private copy).
//! Found out by the first probe that meets it and held for the process, so
//! that the run says it once and `doctor`'s plan shows it.

use std::sync::Mutex;

/// The test-only switch: set (non-empty) in `preflight`'s environment, each
/// probe's reaper takes its overlay mounts as refused (`EPERM`) without
/// trying them, as `unshare` forces a refusal of the namespaces, so that
/// the tests reach what follows a real refusal. Never for a real run.
pub const REFUSE_OVERLAY_FOR_TESTS: &str = "PREFLIGHT_TEST_REFUSE_OVERLAY";

static REFUSED: Mutex<Option<String>> = Mutex::new(None);

/// Whether [`REFUSE_OVERLAY_FOR_TESTS`] is set.
pub(crate) fn refuse_for_tests() -> bool {
    std::env::var_os(REFUSE_OVERLAY_FOR_TESTS).is_some_and(|v| !v.is_empty())
}

/// Why overlays are refused here, once a probe met the refusal; `None`
/// while every overlay so far was made.
pub(crate) fn refused() -> Option<String> {
    REFUSED.lock().ok().and_then(|r| r.clone())
}

/// Records that a probe's overlay was refused, and why.
pub(crate) fn record(reason: String) {
    if let Ok(mut refused) = REFUSED.lock() {
        refused.get_or_insert(reason);
    }
}

/// The one warning to print when probes got private folders in place of
/// overlays; `None` when they got the overlays.
pub fn overlay_warning() -> Option<String> {
    refused().map(|reason| {
        format!(
            "overlayfs refused ({reason}): each probe sees the host's entries of /tmp, \
             TMPDIR and its home folder read-only, with new names private to it; \
             a kernel that writes into a file or folder already there is refused"
        )
    })
}
