//! What the machine *is*, as the hash covers it: a typed view of a
//! [`Fingerprint`] holding exactly the hashed fields. Each type is built by
//! destructuring its source with every field named, so a field added to
//! the fingerprint does not compile until it is placed here, hashed or
//! said to be left out; renaming one renames it here, never silently
//! dropping it from the hash.

use super::python::{PythonEnv, TorchBuild};
use super::toolkit::{Library, Toolkit, Toolkits};
use super::{Depth, Fingerprint, Gpus, Host};
use serde::Serialize;
use std::collections::BTreeMap;
use std::path::Path;

/// The hashed facts of a [`Fingerprint`].
#[derive(Debug, Serialize)]
pub struct MachineIdentity<'a> {
    schema: u32,
    depth: Depth,
    gpus: &'a Gpus,
    toolkits: ToolkitsIdentity<'a>,
    python: Option<PythonIdentity<'a>>,
    host: &'a Host,
    env: &'a BTreeMap<String, String>,
}

/// The hashed facts of the toolkits.
#[derive(Debug, Serialize)]
struct ToolkitsIdentity<'a> {
    active: Option<&'a Path>,
    visible: Option<&'a Path>,
    found: Vec<ToolkitIdentity<'a>>,
    nvrtc: &'a [Library],
    cudart: &'a [Library],
}

/// One toolkit, without how it was found or which file gave its version.
#[derive(Debug, Serialize)]
struct ToolkitIdentity<'a> {
    root: &'a Path,
    nvcc: Option<&'a Path>,
    ptxas: Option<&'a Path>,
    version: Option<&'a str>,
    problem: Option<&'a str>,
}

/// The Python environment, as the interpreter it is (never the way it was
/// reached: `--python`, `VIRTUAL_ENV` and `PATH` to one interpreter are
/// one machine).
#[derive(Debug, Serialize)]
struct PythonIdentity<'a> {
    real_path: &'a Path,
    version: Option<&'a str>,
    site_packages: &'a [std::path::PathBuf],
    packages: &'a BTreeMap<String, Option<String>>,
    torch: Option<&'a TorchBuild>,
}

impl<'a> From<&'a Fingerprint> for MachineIdentity<'a> {
    fn from(fp: &'a Fingerprint) -> Self {
        let Fingerprint {
            schema,
            depth,
            gpus,
            toolkits,
            python,
            host,
            env,
        } = fp;
        MachineIdentity {
            schema: *schema,
            depth: *depth,
            gpus,
            toolkits: ToolkitsIdentity::from(toolkits),
            python: python.as_ref().map(PythonIdentity::from),
            host,
            env,
        }
    }
}

impl<'a> From<&'a Toolkits> for ToolkitsIdentity<'a> {
    fn from(t: &'a Toolkits) -> Self {
        let Toolkits {
            active,
            visible,
            found,
            nvrtc,
            cudart,
        } = t;
        ToolkitsIdentity {
            active: active.as_deref(),
            visible: visible.as_deref(),
            found: found.iter().map(ToolkitIdentity::from).collect(),
            nvrtc,
            cudart,
        }
    }
}

impl<'a> From<&'a Toolkit> for ToolkitIdentity<'a> {
    fn from(t: &'a Toolkit) -> Self {
        let Toolkit {
            root,
            nvcc,
            ptxas,
            version,
            problem,
            // How it was found, and which file gave its version.
            found_via: _,
            version_from: _,
        } = t;
        ToolkitIdentity {
            root,
            nvcc: nvcc.as_deref(),
            ptxas: ptxas.as_deref(),
            version: version.as_deref(),
            problem: problem.as_deref(),
        }
    }
}

impl<'a> From<&'a PythonEnv> for PythonIdentity<'a> {
    fn from(p: &'a PythonEnv) -> Self {
        let PythonEnv {
            real_path,
            version,
            site_packages,
            packages,
            torch,
            // How the interpreter was reached, and what was measured in it
            // (its facts are joined into the fields above).
            interpreter: _,
            found_via: _,
            measured: _,
            // The digest of the installed names: every outcome record
            // carries it on its own (a hash covering it would retire the
            // whole cache on every install, not only the outcomes about
            // packages).
            installed: _,
        } = p;
        PythonIdentity {
            real_path,
            version: version.as_deref(),
            site_packages,
            packages,
            torch: torch.as_ref(),
        }
    }
}
