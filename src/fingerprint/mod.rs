//! Fingerprint: a description of this machine, complete enough that nothing
//! which changes whether a kernel runs is left out, and cheap enough to be
//! computed on every call; its sha256 keys every cached probe outcome.
//!
//! The *fast* fingerprint reads files only (`/sys`, `/proc`, the `stat` and
//! listings of toolkits and site-packages): it never loads libcuda, never
//! starts Python, never wakes a GPU. The *full* fingerprint adds what only a
//! child process can measure (compute capability and CUDA's own device
//! numbering, the CUDA driver API version, the exact Python version,
//! torch's C++ ABI). The children are started by the probe layer
//! (`probe::machine`); what they said joins the fast fingerprint here
//! ([`Fingerprint::with_measured`]) and is cached under its hash
//! ([`full::cached`]).
//!
//! The hash covers what the machine *is*, never how a fact was found: see
//! [`Fingerprint::canonical`].
//!
//! Every detected fact can be overridden by a `PREFLIGHT_…` variable, and
//! `/sys` and `/proc` can be redirected (`PREFLIGHT_SYSFS_ROOT`,
//! `PREFLIGHT_PROCFS_ROOT`): see `docs/fingerprint.md`.

pub mod capability;
pub(crate) mod child;
mod class;
pub mod env;
pub mod facts;
pub mod full;
pub mod gpu;
pub mod host;
mod identity;
mod packages;
pub mod python;
mod sources;
pub mod toolkit;

#[cfg(test)]
mod tests;

pub use capability::ComputeCapability;
pub use class::ClassFacts;
pub use facts::{FactStore, MeasuredFacts, NoStore, Stat, ToolAnswer};
pub use full::{Measured, MeasuredDevice};
pub use gpu::{Gpu, Gpus, Libcuda};
pub use host::Host;
pub use identity::MachineIdentity;
pub use python::{PythonEnv, PythonMeasured, PythonVia, TorchBuild};
pub use sources::Sources;
pub use toolkit::{FoundVia, Library, Toolkit, Toolkits, VersionFrom};

use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;
use std::path::PathBuf;

/// Version of the fingerprint's layout; part of the hash, so that a new
/// layout never matches an old cache entry.
pub const SCHEMA: u32 = 2;

/// A description of this machine.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Fingerprint {
    /// [`SCHEMA`].
    pub schema: u32,
    /// `fast` or `full`.
    pub depth: Depth,
    /// The NVIDIA driver and GPUs.
    pub gpus: Gpus,
    /// CUDA toolkits, NVRTC and the CUDA runtime.
    pub toolkits: Toolkits,
    /// The Python environment; `None`: no interpreter found.
    pub python: Option<PythonEnv>,
    /// OS, CPU and C library.
    pub host: Host,
    /// The environment variables that change kernel behaviour (see [`env`](mod@env)).
    pub env: BTreeMap<String, String>,
}

/// How much of the fingerprint was determined.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Depth {
    /// Files only.
    Fast,
    /// Files plus the facts measured in a child process.
    Full,
}

/// A fingerprint could not be made: only a bad override or a bad
/// `--python` does this; a missing GPU, Python or toolkit is a fact.
#[derive(Debug, thiserror::Error)]
pub enum FingerprintError {
    /// A `PREFLIGHT_…` variable whose value does not fit.
    #[error("invalid {var}={value:?}: {why}")]
    BadOverride {
        /// The variable.
        var: String,
        /// Its value.
        value: String,
        /// What was expected.
        why: String,
    },
    /// `--python` (or `PREFLIGHT_PYTHON`) names no file.
    #[error("{}: no such Python interpreter", .0.display())]
    NoSuchPython(PathBuf),
    /// `--python` (or `PREFLIGHT_PYTHON`) names a program that is not a
    /// Python the probes can run in.
    #[error("{}: {why}", path.display())]
    NotPython {
        /// The interpreter as named.
        path: PathBuf,
        /// What it is, as far as asking it told.
        why: String,
    },
}

impl Fingerprint {
    /// The fast fingerprint: files only. Tool versions that had to be asked
    /// are kept in `store`.
    pub fn fast(src: &Sources, store: &dyn FactStore) -> Result<Fingerprint, FingerprintError> {
        let listings = sources::Listings::default();
        let tools = facts::ToolAnswers::new(store);
        let python = python::detect(src, &listings, &tools)?;
        let site: &[PathBuf] = python.as_ref().map_or(&[], |p| &p.site_packages);
        let toolkits = toolkit::detect(src, site, &tools, &listings)?;
        Ok(Fingerprint {
            schema: SCHEMA,
            depth: Depth::Fast,
            gpus: gpu::detect(src)?,
            toolkits,
            python,
            host: host::detect(src)?,
            env: env::detect(src),
        })
    }

    /// This (fast) fingerprint completed with measured facts; overrides
    /// of measured facts are applied again, so that they win.
    pub fn with_measured(
        mut self,
        measured: Measured,
        src: &Sources,
    ) -> Result<Fingerprint, FingerprintError> {
        self.merge(measured);
        gpu::apply_overrides(src, &mut self.gpus)?;
        if let Some(p) = self.python.as_mut() {
            python::apply_overrides(src, p)?;
        }
        Ok(self)
    }

    /// Add measured facts: each GPU's compute capability and CUDA ordinal,
    /// matched by PCI bus id; the driver API version; and what Python said.
    fn merge(&mut self, m: Measured) {
        self.depth = Depth::Full;
        self.gpus.cuda_driver_api = m.cuda_driver_api.or(self.gpus.cuda_driver_api.take());
        if m.libcuda == Libcuda::Ok {
            // CUDA's own numbering replaces the one inferred from files.
            for gpu in &mut self.gpus.devices {
                gpu.cuda_index = None;
            }
        }
        for d in m.devices {
            match self
                .gpus
                .devices
                .iter_mut()
                .find(|g| g.pci_bus_id == d.pci_bus_id)
            {
                Some(gpu) => {
                    gpu.cuda_index = Some(d.ordinal);
                    gpu.compute_capability = Some(d.compute_capability);
                    gpu.model.get_or_insert(d.name);
                }
                // CUDA sees a device that the PCI bus listing did not show
                // (a restricted /sys): keep it rather than lose it.
                None => self.gpus.devices.push(Gpu {
                    pci_bus_id: d.pci_bus_id,
                    device_id: String::new(),
                    model: Some(d.name),
                    cuda_index: Some(d.ordinal),
                    compute_capability: Some(d.compute_capability),
                    uuid: None,
                }),
            }
        }
        self.gpus
            .devices
            .sort_by(|a, b| a.pci_bus_id.cmp(&b.pci_bus_id));
        self.gpus.libcuda = Some(m.libcuda);
        if let Some(p) = self.python.as_mut() {
            if let Some(PythonMeasured::Ok {
                version,
                torch_cxx11_abi,
            }) = &m.python
            {
                p.version = Some(version.clone());
                if let (Some(t), Some(abi)) = (p.torch.as_mut(), torch_cxx11_abi) {
                    t.cxx11_abi = Some(*abi);
                }
            }
            p.measured = m.python;
        }
    }

    /// The digest of what is installed in the Python environment's import
    /// folders ([`python::distributions_digest`]), as taken with this
    /// fingerprint; that of no folders without Python.
    pub fn installed_digest(&self) -> String {
        self.python.as_ref().map_or_else(
            || python::distributions_digest(&[]),
            PythonEnv::installed_digest,
        )
    }

    /// The GPU that CUDA numbers 0 (after `CUDA_VISIBLE_DEVICES` and
    /// `CUDA_DEVICE_ORDER`): the device a kernel runs on by default.
    pub fn cuda_default_device(&self) -> Option<&Gpu> {
        self.gpus.devices.iter().find(|g| g.cuda_index == Some(0))
    }

    /// The canonical serialization, which the hash covers: compact JSON of
    /// what the machine is ([`MachineIdentity`], which holds exactly the
    /// hashed fields: not how a fact was found, nor `python.installed`,
    /// which each outcome record carries on its own), objects in key
    /// order, lists in a defined order.
    pub fn canonical(&self) -> Vec<u8> {
        // Serializing these types cannot fail: no maps with non-string keys,
        // no floats, no custom serializers that fail. Through a `Value`, so
        // that every object's keys are sorted.
        let value = serde_json::to_value(MachineIdentity::from(self)).unwrap_or_default();
        serde_json::to_vec(&value).unwrap_or_default()
    }

    /// sha256 of [`Fingerprint::canonical`], lower-case hex.
    pub fn hash(&self) -> String {
        crate::hash::sha256_hex(&self.canonical())
    }
}

/// A fingerprint with its hash, as `--json` prints it.
#[derive(Debug, Serialize)]
pub struct Hashed<'a> {
    /// [`Fingerprint::hash`].
    pub hash: String,
    /// The fingerprint.
    #[serde(flatten)]
    pub fingerprint: &'a Fingerprint,
}

impl<'a> From<&'a Fingerprint> for Hashed<'a> {
    fn from(fingerprint: &'a Fingerprint) -> Self {
        Hashed {
            hash: fingerprint.hash(),
            fingerprint,
        }
    }
}
