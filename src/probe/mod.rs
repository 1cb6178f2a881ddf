//! Probe: run one job (a hub variant, a native module, the device alone, the
//! device list) in a sandboxed child process, so that whatever it does
//! (crash, hang, `exit(1)`, flood its output) the caller survives and learns
//! what happened.
//!
//! Every executor implements [`Executor`]: a [`Job`] goes in, [`Evidence`]
//! comes out, never a verdict (classification is the next layer's job). The
//! *python executor* ([`PythonExecutor`]) imports hub variants the way the
//! hub loader does; the *cuda executor* ([`cuda::CudaExecutor`]) loads and
//! launches CUDA modules through the driver API. Both children speak
//! [`crate::protocol`].

mod bench;
pub mod cuda;
mod fork;
mod job;
mod judge;
pub mod library;
pub mod machine;
mod python;

pub use crate::protocol::{Evidence, ExecutorKind};
pub use bench::{BenchChild, BenchExecutor, BenchRole, BenchSpec, Stopped};
pub use fork::PRELOAD_ENV;
pub use job::{Ahead, Executor, Identity, Job, Placement, ProbeError, Subject};
pub use library::{Entry as LibraryEntry, Forks, LibraryError, SMOKE_AS_ENV};
pub use python::{
    COMPARE, DRIVER, DRIVER_FILES, FORK_ENV, PYTHON_DEPENDS, PythonExecutor, torch_device,
};

use crate::discover::{KernelRepo, RepoId};
use crate::protocol::{Channel, Made};
use crate::sandbox::RunReport;
use crate::variant::VariantName;
use sha2::{Digest, Sha256};
use std::path::{Path, PathBuf};
use std::sync::OnceLock;

/// Where a probe's smoke workload comes from, most specific first.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum SmokeSource {
    /// A file given by the user, with `def smoke(kernel, device)`.
    File(PathBuf),
    /// The kernel repo's own `benchmarks/benchmark*.py` (hub convention).
    Benchmarks {
        /// The `benchmarks/` directory.
        dir: PathBuf,
        /// The kernel repo (working directory while the scripts load).
        repo: PathBuf,
    },
    /// preflight's own smoke for a hub kernel (`probes/kernels/`).
    Library(library::Entry),
    /// No workload: import only.
    LoadOnly,
}

/// What the user of a run chose for its smokes, over what each kernel
/// would get by itself.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct SmokeChoice {
    /// `--smoke FILE`: every hub variant runs this file.
    pub file: Option<PathBuf>,
    /// `--smoke-as ORG/NAME`: every hub kernel runs this library smoke.
    pub library: Option<library::Entry>,
    /// Forks that run the library smoke of the repository they forked
    /// (`PREFLIGHT_SMOKE_AS`).
    pub forks: library::Forks,
}

impl SmokeSource {
    /// Pick the first source that exists: what the user chose (the file,
    /// the library smoke for every kernel, the one for this fork), the
    /// repo's benchmarks, the library smoke written for `repo_id`, else
    /// load only.
    ///
    /// A kernel is matched to the library by the hub repository it is a
    /// snapshot of, never by its name: a smoke calls the API of the
    /// repository it was written for, and judges any other kernel of that
    /// name by an API it need not have.
    pub fn choose(choice: &SmokeChoice, repo: Option<&Path>, repo_id: Option<&RepoId>) -> Self {
        if let Some(file) = &choice.file {
            return SmokeSource::File(file.clone());
        }
        if let Some(entry) = choice
            .library
            .or_else(|| repo_id.and_then(|id| choice.forks.entry(id)))
        {
            return SmokeSource::Library(entry);
        }
        if let Some(repo) = repo
            .map(KernelRepo::from_dir)
            .filter(KernelRepo::has_benchmark_scripts)
        {
            return SmokeSource::Benchmarks {
                dir: repo.benchmarks(),
                repo: repo.dir().to_path_buf(),
            };
        }
        repo_id
            .and_then(library::Entry::for_repo)
            .map_or(SmokeSource::LoadOnly, SmokeSource::Library)
    }
}

/// The torch device a variant's smoke runs on; `auto` lets the child pick
/// (universal variants, SDKs for any backend and names of no known backend
/// run wherever torch has an accelerator, else on cpu).
pub fn device_for(variant: &VariantName) -> &'static str {
    match variant.backend_kind().as_deref() {
        Some("cuda" | "rocm") => "cuda",
        Some("xpu") => "xpu",
        Some("metal") => "mps",
        Some("cann" | "npu") => "npu",
        Some("neuron") => "neuron",
        Some("tpu") => "tpu",
        Some("cpu") => "cpu",
        _ => "auto",
    }
}

/// A sandbox for probes of the kernels whose files are `files` (see
/// [`kernel_files`]): those files read-only, and, when they are one
/// kernel's, that kernel's own JIT caches, keyed by where its files are
/// (`crate::sandbox::Sandbox::jit_caches_of`): what its probes compile,
/// its later probes find, and nothing else does.
pub(crate) fn kernel_sandbox(
    files: impl IntoIterator<Item = PathBuf>,
) -> Result<crate::sandbox::Sandbox, crate::sandbox::SandboxError> {
    let mut files: Vec<PathBuf> = files.into_iter().collect();
    files.sort();
    files.dedup();
    let mut sandbox = crate::sandbox::Sandbox::new()?;
    if let [one] = files.as_slice() {
        let canonical = std::fs::canonicalize(one).unwrap_or_else(|_| one.clone());
        let identity = crate::hash::sha256_hex(canonical.as_os_str().as_encoded_bytes());
        sandbox = sandbox.jit_caches_of(&identity[..32], &canonical);
    }
    Ok(files
        .into_iter()
        .fold(sandbox, crate::sandbox::Sandbox::read_only))
}

/// What of the kernel a variant belongs to a probe must not change, and
/// so keeps read-only in its sandbox: the kernel's repo above `build/`
/// (every variant of it, its benchmarks), and for a snapshot in the hub
/// cache the kernel's whole folder there, whose `blobs/` the snapshot's
/// files link to; a lone variant folder is itself.
pub(crate) fn kernel_files(variant: &Path) -> PathBuf {
    let variant = std::path::absolute(variant).unwrap_or_else(|_| variant.to_path_buf());
    let named = |p: &Path, name: &str| p.file_name().is_some_and(|n| n == name);
    let Some(repo) = KernelRepo::of_variant(&variant) else {
        return variant;
    };
    let repo = repo.dir();
    match repo
        .parent()
        .filter(|snapshots| named(snapshots, "snapshots"))
        .and_then(Path::parent)
    {
        Some(kernel) => kernel.to_path_buf(),
        None => repo.to_path_buf(),
    }
}

/// The evidence of a finished child: how it ended, what its channel file
/// says, what it printed on stderr.
fn evidence(executor: ExecutorKind, run: RunReport, channel: &Path, made: Made) -> Evidence {
    let channel = Channel::read(channel);
    let leaked = run.leak_summary();
    Evidence {
        executor,
        termination: run.termination,
        events: channel.events,
        channel: channel.problems,
        stderr: run.stderr.text(),
        leaked,
        wall: run.wall,
        pid: run.pid,
        made,
        exhausted: run.exhausted,
    }
}

/// Resolve an interpreter the way a shell would: a path with a `/` as is,
/// else the first executable of that name on `PATH`.
pub fn find_python(python: &Path) -> Option<PathBuf> {
    use std::os::unix::fs::PermissionsExt;
    let executable = |p: &Path| {
        crate::seen::metadata(p).is_ok_and(|m| m.is_file() && m.permissions().mode() & 0o111 != 0)
    };
    if python.components().count() > 1 {
        return executable(python).then(|| python.to_path_buf());
    }
    crate::seen::env_var_os("PATH").and_then(|paths| {
        std::env::split_paths(&paths)
            .map(|dir| dir.join(python))
            .find(|p| executable(p))
    })
}

/// What identifies the python executor's code: sha256 of its driver, every
/// file the driver loads ([`DRIVER_FILES`]) and the fork server and client
/// (computed once per process).
fn python_code_identity() -> &'static str {
    static PYTHON: OnceLock<String> = OnceLock::new();
    PYTHON.get_or_init(|| {
        let mut h = Sha256::new();
        // A forked probe also runs the fork server and its client.
        let fork = [
            ("fork_server.py", fork::SERVER),
            ("fork_client.py", fork::CLIENT),
        ];
        for (name, text) in DRIVER_FILES.iter().chain(&fork) {
            h.update(name.as_bytes());
            h.update(text.as_bytes());
        }
        format!("python driver {}", crate::hash::hex(&h.finalize()))
    })
}
