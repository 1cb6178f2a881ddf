//! Verdicts of the hub's acceptance handed over by the caller (`check
//! --verdicts FILE`): the Python flag's loader has just run its own
//! validators on its pick, with the very `kernels` the probe would import
//! to judge it again; the probe replays the caller's verdict instead
//! (`probes/python/judge.py`, `replay`), which spares a cold load the
//! import of the loader's validators and their HTTP stack in the child.
//!
//! Only what the probed interpreter's own `kernels` would have said is
//! admitted: a line whose judge is not `kernels <the version the machine's
//! fingerprint found installed>` is left out (its variant is judged in its
//! probe, as always), and so is a line that does not parse. The probe
//! replays a line only for the very bytes of the `metadata.json` it names,
//! and only when its judge is the `kernels` it would import itself.

use crate::fingerprint::Fingerprint;
use std::sync::Arc;

/// The lines of `given` whose judge is the `kernels` installed where
/// `fingerprint`'s interpreter is (any `kernels` release where the
/// fingerprint found none in the environment's own site-packages: one a
/// `.pth` file adds; the probe replays a line only when its judge is the
/// `kernels` it would import, `judge.py`'s `from_this_loader`), or `None`
/// when no line is.
pub(super) fn admitted(given: &[u8], fingerprint: &Fingerprint) -> Option<Arc<[u8]>> {
    let found = fingerprint
        .python
        .as_ref()?
        .packages
        .get("kernels")
        .cloned()
        .flatten();
    let judges = |who: &str| match &found {
        Some(version) => who.strip_prefix("kernels ") == Some(version.as_str()),
        None => who.starts_with("kernels "),
    };
    let mut out = Vec::new();
    for line in given.split(|b| *b == b'\n') {
        let Ok(verdict) = serde_json::from_slice::<serde_json::Value>(line) else {
            continue;
        };
        let admitted = verdict["who"].as_str().is_some_and(judges)
            && verdict["variant"].is_string()
            && verdict["metadata"].is_string()
            && verdict.get("refused").is_some();
        if admitted {
            out.extend_from_slice(line);
            out.push(b'\n');
        }
    }
    (!out.is_empty()).then(|| out.into())
}
