//! What classification knows of the machine besides a probe's evidence:
//! the facts of its fingerprint that tell two causes of one failure apart
//! (which nvcc a kernel that compiles at run time sees, which release it
//! is, which GPU the kernel runs on). Classification without them stays
//! sound; it only names fewer specifics.

use crate::declared::nvcc::Release;
use crate::fingerprint::{ComputeCapability, Fingerprint, Toolkits};
use std::path::{Path, PathBuf};

/// The machine a probe ran on, as its fingerprint describes it.
#[derive(Debug, Clone, Default)]
pub struct Machine {
    /// The toolkits found, and the CUDA home a kernel sees (`None`: not
    /// known, e.g. when evidence is classified on its own).
    pub toolkits: Option<Toolkits>,
    /// The compute capability of the GPU that CUDA numbers 0.
    pub capability: Option<ComputeCapability>,
    /// Whether the machine has an NVIDIA driver or GPU at all (`None`: not
    /// known). A probe cannot have used a CUDA device where it has neither.
    pub nvidia: Option<bool>,
}

impl Machine {
    /// The facts of `fingerprint` (best taken full: the capability is
    /// measured).
    pub fn of(fingerprint: &Fingerprint) -> Machine {
        Machine {
            toolkits: Some(fingerprint.toolkits.clone()),
            capability: fingerprint
                .cuda_default_device()
                .and_then(|g| g.compute_capability),
            nvidia: Some(fingerprint.gpus.driver.is_some() || !fingerprint.gpus.devices.is_empty()),
        }
    }

    /// Whether a kernel that looks for its toolkit the usual way (CUDA_HOME,
    /// CUDA_PATH, `nvcc` on PATH, /usr/local/cuda) finds an nvcc; `None`:
    /// not known.
    pub(super) fn sees_nvcc(&self) -> Option<bool> {
        self.toolkits.as_ref().map(|t| t.visible_nvcc().is_some())
    }

    /// The release of the nvcc a kernel ran: the toolkit whose `bin/nvcc`
    /// is `tool`, else (a bare `nvcc`, or nothing known of the command) the
    /// one a kernel sees; `None` when neither is known.
    pub(super) fn release_of(&self, tool: Option<&str>) -> Option<(Release, PathBuf)> {
        let toolkits = self.toolkits.as_ref()?;
        let same = |a: &Path, b: &Path| {
            a == b || crate::fs::canonicalize(a).ok() == crate::fs::canonicalize(b).ok()
        };
        let by_path = tool.filter(|t| t.contains('/')).and_then(|t| {
            toolkits
                .found
                .iter()
                .find(|k| k.nvcc.as_deref().is_some_and(|n| same(n, Path::new(t))))
        });
        let toolkit =
            by_path.or_else(|| toolkits.visible_toolkit().filter(|k| k.nvcc.is_some()))?;
        let release = Release::of(toolkit.version.as_deref()?)?;
        Some((release, toolkit.root.clone()))
    }

    /// The CUDA home a kernel sees, and an nvcc that only a pip wheel holds
    /// (its root and version), for the hint of a missing nvcc.
    pub(super) fn nvcc_places(&self) -> (Option<&Path>, Option<(&Path, Option<&str>)>) {
        let Some(t) = &self.toolkits else {
            return (None, None);
        };
        let wheel = t
            .wheel_nvcc()
            .map(|w| (w.root.as_path(), w.version.as_deref()));
        (t.visible.as_deref(), wheel)
    }
}
