//! Sandbox (parent side): run one untrusted child so that whatever it does —
//! crash, hang, `exit(1)`, flood its output, leave helpers or daemons
//! behind — the caller survives and learns exactly what happened.
//!
//! Each [`Sandbox`] owns a fresh temporary directory: the child's working
//! directory, `PWD` and `TMPDIR`. [`Sandbox::run`] forks and executes the
//! child in a session of its own, with `RLIMIT_CORE=0`, a file-descriptor
//! limit and a scrubbed environment ([`scrubbed_env`]); no address-space
//! limit, since CUDA maps huge virtual ranges. Time is bounded instead:
//! timeout → SIGTERM to the child's process group → grace → SIGKILL. Output
//! is drained by one `poll` loop and kept bounded ([`Captured`]).
//!
//! With a reaper ([`set_default_reaper`], [`Sandbox::with_reaper`]: the
//! `preflight` binary in its `__reaper` mode, see [`reaper`]) the session
//! is led by a small subreaper process that forks the child into a process
//! group of its own and holds every descendant, wherever it goes: when the
//! child has exited and its pipes are closed (or [`Limits::pipe_close_wait`]
//! has passed), every descendant still alive is killed, reaped and listed
//! in [`RunReport::leaked`] with its command line — a helper in a process
//! group of its own, a daemon, a grandchild that closed its output alike.
//! Timeouts and cancellation go through the same reaper, and it takes
//! everything down when the parent dies, even by SIGKILL. Without a reaper
//! the child leads its own session and group, only the group is killed, and
//! the report says so ([`RunReport::contained`] is false).
//!
//! With a reaper and where Linux allows it ([`isolation`]), each run also
//! gets namespaces of its own, as Bazel's `linux-sandbox`, bubblewrap and
//! nsjail give them: the reaper is pid 1 of a new pid namespace (the child
//! cannot see or signal this process, its reaper or another sandbox, and
//! everything in it dies with the reaper), in a new mount namespace (a
//! fresh `/proc`; its folder, `/tmp`, `TMPDIR` and `/dev/shm` written into
//! one bounded scratch, [`Limits::scratch`]; [`Sandbox::read_only`] paths
//! read-only; [`Sandbox::hidden`] paths, the hub token files among them,
//! empty), and, when this process is not root, a user namespace. Where
//! Linux refuses them, runs go on without, and [`isolation`] says so.
//!
//! Structured results do not travel through here: the caller names a file in
//! [`Sandbox::dir`] (for example in an environment variable) and reads it
//! after `run` (while it runs, through [`Sandbox::view`]).
//!
//! ```
//! use kernel_preflight::sandbox::{Cancel, ChildCommand, Limits, Sandbox, Termination};
//!
//! let sandbox = Sandbox::new()?;
//! let result = sandbox.dir().join("result.json");
//! let cmd = ChildCommand::new("sh")
//!     .arg("-c")
//!     .arg(r#"echo '{"ok":true}' > "$RESULT"; echo progress; exit 3"#)
//!     .env("RESULT", &result);
//! let report = sandbox.run(&cmd, &Limits::default(), &Cancel::new())?;
//! assert_eq!(report.termination, Termination::Exited { code: 3 });
//! assert_eq!(report.stdout.text(), "progress\n");
//! assert_eq!(std::fs::read_to_string(&result)?, "{\"ok\":true}\n");
//! # Ok::<(), Box<dyn std::error::Error>>(())
//! ```

mod bounds;
mod cancel;
mod capture;
mod carry;
mod env;
mod flat;
mod held;
mod isolation;
mod jit;
mod leak;
mod link;
mod mounts;
mod privileges;
mod procfs;
pub mod reaper;
mod report;
mod spawn;
mod supervise;
mod walls;

pub use bounds::{Exhausted, ProbeBounds, own_cgroup, probe_bounds};
pub use cancel::{Cancel, install_interrupt_handler};
pub use capture::Captured;
pub use env::{is_secret_name, scrubbed_env};
pub use flat::{REFUSE_OVERLAY_FOR_TESTS, overlay_warning};
pub use isolation::{Isolation, MISSING_WITHOUT_NAMESPACES, isolation};
pub use jit::{jit_owner, keep_jit_caches_in};
pub use leak::{Leak, Place};
pub use privileges::default_dispositions;
pub use report::{ChildCommand, Limits, RunReport, SandboxError, Termination, signal_name};
pub use walls::Plan;

use isolation::Mode;
use mounts::{Layout, RawPath};
use reaper::{Namespaced, Setup};
use spawn::{Namespaces, SpawnError};
use std::collections::BTreeMap;
use std::ffi::OsString;
use std::io;
use std::os::fd::AsRawFd;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicI32, Ordering};
use std::sync::{Arc, Mutex, OnceLock};
use std::time::Instant;

/// The default reaper: a path, or how to find it when a sandbox first
/// needs it.
enum DefaultReaper {
    Path(PathBuf),
    Find(fn() -> Option<PathBuf>),
}

static DEFAULT_REAPER: OnceLock<DefaultReaper> = OnceLock::new();

/// Makes `program` the reaper of every [`Sandbox`] created from now on: an
/// executable that runs the reaper when called as `program __reaper -- …`
/// (the `preflight` binary).
///
/// The first call (of this or [`set_default_reaper_with`]) wins; later
/// ones change nothing. Without a call, sandboxes run without a reaper and
/// say so ([`RunReport::contained`]).
pub fn set_default_reaper(program: PathBuf) {
    let _ = DEFAULT_REAPER.set(DefaultReaper::Path(program));
}

/// [`set_default_reaper`] with the path that `find` gives when the first
/// sandbox is created, not before: `preflight` calls this at start, and a
/// command that runs no child never looks for its own binary.
pub fn set_default_reaper_with(find: fn() -> Option<PathBuf>) {
    let _ = DEFAULT_REAPER.set(DefaultReaper::Find(find));
}

/// The reaper a new sandbox gets, if any.
fn default_reaper() -> Option<PathBuf> {
    static FOUND: OnceLock<Option<PathBuf>> = OnceLock::new();
    match DEFAULT_REAPER.get()? {
        DefaultReaper::Path(path) => Some(path.clone()),
        DefaultReaper::Find(find) => FOUND.get_or_init(find).clone(),
    }
}

/// Paths every sandbox created from now on keeps read-only or hides: see
/// [`protect_by_default`] and [`hide_by_default`].
#[derive(Debug, Clone, Default)]
struct Confinement {
    read_only: Vec<PathBuf>,
    hidden: Vec<PathBuf>,
    writable: Vec<PathBuf>,
}

static CONFINEMENT: Mutex<Confinement> = Mutex::new(Confinement {
    read_only: Vec::new(),
    hidden: Vec::new(),
    writable: Vec::new(),
});

fn confinement() -> Confinement {
    CONFINEMENT.lock().map(|c| c.clone()).unwrap_or_default()
}

/// Keeps `path` (and everything below it) read-only in every sandbox made
/// from now on, where namespaces allow: `preflight` protects the hub cache
/// and the kernels it probes, so that no probe changes another's files.
pub fn protect_by_default(path: impl Into<PathBuf>) {
    let path = path.into();
    if let Ok(mut c) = CONFINEMENT.lock()
        && !c.read_only.contains(&path)
    {
        c.read_only.push(path);
    }
}

/// Hides `path` (a file reads as empty, a folder as an empty one) in every
/// sandbox made from now on, where namespaces allow: `preflight` hides its
/// outcome cache, so that no probe rewrites another's evidence. A path
/// that does not exist yet is made an empty folder first, so that a probe
/// cannot make it and leave something there.
pub fn hide_by_default(path: impl Into<PathBuf>) {
    let path = path.into();
    if let Ok(mut c) = CONFINEMENT.lock()
        && !c.hidden.contains(&path)
    {
        c.hidden.push(path);
    }
}

/// Binds `path` (a folder) read-write from the host in every sandbox made
/// from now on, as [`Sandbox::writable`] does for one: `preflight` does so
/// for the folders `PREFLIGHT_PROBE_WRITABLE` names. Hidden paths stay
/// hidden below it.
pub fn write_by_default(path: impl Into<PathBuf>) {
    let path = path.into();
    if let Ok(mut c) = CONFINEMENT.lock()
        && !c.writable.contains(&path)
    {
        c.writable.push(path);
    }
}

/// The folders whose writes a probe in namespaces keeps in a private layer:
/// `/tmp`, and `TMPDIR` (where its sandbox lives) when that is elsewhere.
///
/// What a probe writes below them never reaches this machine's file
/// system, so a file a caller wants back from a probe goes elsewhere.
pub fn private_dirs() -> Vec<PathBuf> {
    temp_layers(Some(&std::env::temp_dir()))
}

/// `/tmp`, and `parent` (a sandbox's parent folder, canonical) unless it
/// is `/` or already below `/tmp`.
fn temp_layers(parent: Option<&Path>) -> Vec<PathBuf> {
    let tmp = Path::new("/tmp");
    let mut temp = vec![tmp.to_path_buf()];
    if let Some(parent) = parent.and_then(|p| std::fs::canonicalize(p).ok())
        && !parent.starts_with(tmp)
        && parent != Path::new("/")
    {
        temp.push(parent);
    }
    temp
}

/// An isolated place to run one child: a fresh temporary directory, removed
/// when the sandbox is dropped.
#[derive(Debug)]
pub struct Sandbox {
    /// The sandbox's folder: the child's working directory is in it, and
    /// in namespaces its scratch is mounted on it.
    root: tempfile::TempDir,
    dir: PathBuf,
    reaper: Option<PathBuf>,
    namespaces: bool,
    confinement: Confinement,
    /// The reaper's pid while a run in namespaces holds it, else 0.
    running: Arc<AtomicI32>,
    /// The child's standard input, when not `/dev/null`.
    stdin: Option<std::os::fd::OwnedFd>,
    /// Whether the child may hand its place to a process it stopped.
    handoff: bool,
    /// Folders bound read-write from the host ([`Sandbox::writable`]).
    writable: Vec<PathBuf>,
    /// The folder of the store that holds this probe's kernel's JIT
    /// caches ([`Sandbox::jit_caches_of`]).
    jit: Option<jit::KernelJit>,
}

/// The child's working directory, as the parent can reach it while the
/// child runs (see [`Sandbox::view`]).
#[derive(Debug, Clone)]
pub struct View {
    dir: PathBuf,
    running: Arc<AtomicI32>,
}

impl View {
    /// Where `name` in the child's working directory is now: in the
    /// child's own scratch while it runs in namespaces (through its
    /// reaper's `/proc/PID/root`), else in [`Sandbox::dir`].
    pub fn path(&self, name: impl AsRef<Path>) -> PathBuf {
        let inside = self.dir.join(name);
        match self.running.load(Ordering::SeqCst) {
            0 => inside,
            reaper => {
                let mut live = PathBuf::from(format!("/proc/{reaper}/root"));
                live.push(inside.strip_prefix("/").unwrap_or(&inside));
                live
            }
        }
    }
}

impl Sandbox {
    /// Creates the temporary directory (under `TMPDIR`); the reaper is the
    /// one given to [`set_default_reaper`], if any, and the paths given to
    /// [`protect_by_default`] and [`hide_by_default`] are protected and
    /// hidden.
    pub fn new() -> Result<Sandbox, SandboxError> {
        let root = tempfile::Builder::new()
            .prefix("preflight-")
            .tempdir()
            .map_err(SandboxError::TempDir)?;
        let dir = root.path().join(mounts::WORK);
        std::fs::create_dir(&dir).map_err(SandboxError::TempDir)?;
        Ok(Sandbox {
            root,
            dir,
            reaper: default_reaper(),
            namespaces: true,
            confinement: confinement(),
            running: Arc::new(AtomicI32::new(0)),
            stdin: None,
            handoff: false,
            writable: confinement().writable,
            jit: None,
        })
    }

    /// Runs children under `reaper` (see [`set_default_reaper`]), or
    /// without one (`None`): then only the child's process group is held,
    /// and the child has no namespaces of its own.
    pub fn with_reaper(mut self, reaper: Option<PathBuf>) -> Sandbox {
        self.reaper = reaper;
        self
    }

    /// Whether children get namespaces of their own where Linux allows
    /// them (the default); `false` runs them as where it does not.
    pub fn with_namespaces(mut self, namespaces: bool) -> Sandbox {
        self.namespaces = namespaces;
        self
    }

    /// The child reads `fd` as its standard input instead of `/dev/null`:
    /// a forked probe's client gets the socket to its fork server so, the
    /// one way to reach it (`probe::fork`).
    pub fn with_stdin(mut self, fd: std::os::fd::OwnedFd) -> Sandbox {
        self.stdin = Some(fd);
        self
    }

    /// Binds `path` (a folder) read-write from the host, where the child
    /// runs in namespaces: past the walls, what the child writes there
    /// stays. For a folder the caller owns and reads after the run (a
    /// test's marks); never for a probe of a kernel.
    pub fn writable(mut self, path: impl Into<PathBuf>) -> Sandbox {
        self.writable.push(path.into());
        self
    }

    /// The child's JIT caches are those of the kernel named `key` (its
    /// identity, as a file name) whose files are `owner`, kept in the
    /// store that [`keep_jit_caches_in`] names: later probes of the same
    /// key find what this one compiled, no other does; the store records
    /// `owner` so that pruning it can tell when the kernel is gone
    /// ([`jit_owner`]). Without a key or a store they are empty folders of
    /// the scratch, gone with the probe.
    pub fn jit_caches_of(mut self, key: &str, owner: &Path) -> Sandbox {
        self.jit = jit::KernelJit::of(key, owner);
        self
    }

    /// [`Sandbox::jit_caches_of`] in the store `store`, not the process's:
    /// tests that run beside others, each with a cache of its own.
    #[cfg(test)]
    pub(crate) fn jit_caches_in(mut self, store: &Path, key: &str, owner: &Path) -> Sandbox {
        self.jit = Some(jit::KernelJit {
            dir: store.join(key),
            owner: owner.to_path_buf(),
        });
        self
    }

    /// The walls a child of this sandbox would get in namespaces, in
    /// order (docs/sandbox.md): what `preflight doctor` prints.
    pub fn plan(&self) -> Result<Plan, SandboxError> {
        let mut env: BTreeMap<OsString, OsString> = scrubbed_env().into_iter().collect();
        env.insert("TMPDIR".into(), self.dir().into());
        let mode = if nix::unistd::geteuid().is_root() {
            Mode::Root
        } else {
            Mode::User
        };
        self.walls(mode, &env, &Limits::default())
    }

    /// Lets the child hand its place over (with a reaper in namespaces):
    /// when it exits with status 0 leaving exactly one process stopped
    /// among the reaper's children, a process that was reparented to the
    /// reaper, that process becomes the child (and is continued). Its end
    /// is the run's, its group the one signalled, and its parent is the
    /// reaper, as a fresh child's is. A forked probe's client hands its
    /// place to the probe a fork server forked into its namespaces.
    pub fn with_handoff(mut self) -> Sandbox {
        self.handoff = true;
        self
    }

    /// Keeps `path` and everything below it read-only for the child (in
    /// namespaces): a variant's own files.
    pub fn read_only(mut self, path: impl Into<PathBuf>) -> Sandbox {
        self.confinement.read_only.push(path.into());
        self
    }

    /// Hides `path` from the child (in namespaces): a file reads as empty,
    /// a folder as an empty one; one that does not exist yet is made an
    /// empty folder first (see [`hide_by_default`]).
    pub fn hidden(mut self, path: impl Into<PathBuf>) -> Sandbox {
        self.confinement.hidden.push(path.into());
        self
    }

    /// The reaper children run under, if any.
    pub fn reaper(&self) -> Option<&Path> {
        self.reaper.as_deref()
    }

    /// The child's working directory, `PWD` and `TMPDIR`: write the driver script
    /// here, and read the result file from here after [`Sandbox::run`].
    ///
    /// A child in namespaces works in a copy of it in its own scratch:
    /// what is here when the run starts is carried in (FIFOs shared), and
    /// the files it leaves there are copied back when it ends (at most
    /// 64 MiB of them; links and special files never).
    pub fn dir(&self) -> &Path {
        &self.dir
    }

    /// The working directory as it is while a run goes on, for reading a
    /// file the child is still writing (from another thread).
    pub fn view(&self) -> View {
        View {
            dir: self.dir.clone(),
            running: Arc::clone(&self.running),
        }
    }

    /// Runs `cmd` in this sandbox under `limits` until it and every one of
    /// its descendants (with a reaper; its process group without one) are
    /// gone.
    ///
    /// Whatever the child does is reported in the [`RunReport`]; `Err` means
    /// a fault of the sandbox itself (the program or the reaper cannot be
    /// executed, a system call failed). A `cancel` already set returns
    /// `Cancelled` without starting anything.
    pub fn run(
        &self,
        cmd: &ChildCommand,
        limits: &Limits,
        cancel: &Cancel,
    ) -> Result<RunReport, SandboxError> {
        self.run_until(cmd, limits, cancel, &mut || false)
    }

    /// [`Sandbox::run`] for a child whose work can be seen to be done
    /// before it exits: `done` is asked every few tens of milliseconds
    /// while the child runs, and once it says yes the child gets
    /// [`Limits::linger`] to exit by itself; a child that does not is
    /// killed and the run ends as [`Termination::DidNotExit`].
    pub fn run_until(
        &self,
        cmd: &ChildCommand,
        limits: &Limits,
        cancel: &Cancel,
        done: &mut dyn FnMut() -> bool,
    ) -> Result<RunReport, SandboxError> {
        let start = Instant::now();
        if cancel.is_cancelled() {
            return Ok(RunReport {
                termination: Termination::Cancelled,
                stdout: Captured::default(),
                stderr: Captured::default(),
                leaked: Vec::new(),
                contained: true,
                wall: start.elapsed(),
                pid: None,
                isolation: Isolation::Session {
                    reason: "cancelled before it started".to_owned(),
                },
                exhausted: Vec::new(),
            });
        }
        crate::seen::taint("a child process ran");
        let mut env: BTreeMap<OsString, OsString> = scrubbed_env().into_iter().collect();
        // The parent's PWD would name a directory the child is not in.
        for name in ["TMPDIR", "PWD"] {
            env.insert(name.into(), self.dir().into());
        }
        env.extend(cmd.env.iter().cloned());
        let cgroups = bounds::ProbeCgroups::make(limits.pids, limits.memory);
        let cgroup_procs: Vec<_> = cgroups
            .iter()
            .flat_map(|c| c.procs())
            .map(AsRawFd::as_raw_fd)
            .collect();
        let ended = |report: Result<RunReport, SandboxError>| {
            report.map(|mut report| {
                report.exhausted = cgroups.as_ref().map(|c| c.exhausted()).unwrap_or_default();
                report
            })
        };
        let prepare = |setup: &Setup| {
            spawn::Prepared::new(
                &cmd.program,
                &cmd.args,
                env.clone(),
                self.dir(),
                limits.max_open_files,
                self.reaper.as_deref().map(|r| (r, setup.encode())),
            )
            .map(|prepared| {
                prepared
                    .with_stdin(self.stdin.as_ref().map(|fd| fd.as_raw_fd()))
                    .in_cgroups(cgroup_procs.clone())
            })
        };
        let modes = match self.reaper {
            Some(_) if self.namespaces => isolation::candidates(),
            _ => Vec::new(),
        };
        let mut refused = None;
        for mode in modes {
            let setup = Setup {
                namespaces: Some(self.namespaced(mode, &env, limits)?),
                handoff: self.handoff,
            };
            match spawn::spawn(&prepare(&setup)?.in_namespaces(Namespaces::new(mode))) {
                Ok(spawned) => {
                    isolation::worked(mode);
                    if let spawn::Spawned {
                        held: held::Held::Reaper(link),
                        ..
                    } = &spawned
                    {
                        self.running.store(link.reaper().as_raw(), Ordering::SeqCst);
                    }
                    let isolation = Isolation::Namespaces {
                        user_namespace: mode == Mode::User,
                    };
                    let report =
                        supervise::supervise(spawned, limits, cancel, start, done, isolation);
                    self.running.store(0, Ordering::SeqCst);
                    return ended(report);
                }
                Err(SpawnError::Refused(why)) => refused = Some(why),
                Err(SpawnError::Sandbox(e)) => return Err(e),
            }
        }
        if let Some(why) = refused {
            isolation::refuse(why);
        }
        let isolation = match (&self.reaper, self.namespaces) {
            (Some(_), true) => isolation::isolation().unwrap_or(Isolation::Session {
                reason: "namespaces refused".to_owned(),
            }),
            (Some(_), false) => Isolation::Session {
                reason: "namespaces switched off for this sandbox".to_owned(),
            },
            (None, _) => Isolation::Session {
                reason: "no reaper".to_owned(),
            },
        };
        let spawned = match spawn::spawn(&prepare(&Setup {
            namespaces: None,
            handoff: false,
        })?) {
            Ok(spawned) => spawned,
            Err(SpawnError::Sandbox(e)) => return Err(e),
            Err(SpawnError::Refused(why)) => {
                return Err(SandboxError::Io(
                    "starting the child",
                    io::Error::other(why),
                ));
            }
        };
        // Its processes can see and signal this one: the interrupt handler
        // must know them.
        let _session = cancel::ProbeSession::register(match &spawned.held {
            held::Held::Reaper(link) => link.reaper().as_raw(),
            held::Held::Group(group) => group.pid().as_raw(),
        });
        ended(supervise::supervise(
            spawned, limits, cancel, start, done, isolation,
        ))
    }

    /// The walls of a child with the environment `env` in `mode`.
    fn walls(
        &self,
        mode: Mode,
        env: &BTreeMap<OsString, OsString>,
        limits: &Limits,
    ) -> Result<Plan, SandboxError> {
        let root = std::fs::canonicalize(self.root.path()).map_err(SandboxError::TempDir)?;
        let temp = temp_layers(root.parent());
        Ok(walls::plan(&walls::Wanted {
            root: &root,
            scratch: limits.scratch,
            env,
            temp: &temp,
            read_only: &self.confinement.read_only,
            writable: &self.writable,
            hidden: &self.confinement.hidden,
            secrets: &env::credential_files(env),
            jit_store: self.jit.as_ref(),
            harden: mode == Mode::Root,
        }))
    }

    /// What the reaper needs to build the child's namespaces in `mode`,
    /// for a child with the environment `env`.
    fn namespaced(
        &self,
        mode: Mode,
        env: &BTreeMap<OsString, OsString>,
        limits: &Limits,
    ) -> Result<Namespaced, SandboxError> {
        let root = std::fs::canonicalize(self.root.path()).map_err(SandboxError::TempDir)?;
        Ok(Namespaced {
            layout: Layout {
                root: RawPath::from(root.as_path()),
                plan: self.walls(mode, env, limits)?,
                refuse_overlay: flat::refuse_for_tests(),
            },
            identity: mode == Mode::Root,
            pids: bounds::pid_bound(limits.pids),
            uid: nix::unistd::geteuid().as_raw(),
            gid: nix::unistd::getegid().as_raw(),
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::Duration;

    #[test]
    fn termination_reads_as_a_phrase() {
        let lingered = Termination::DidNotExit {
            within: Duration::from_secs(3),
        };
        assert_eq!(
            lingered.to_string(),
            "finished, then did not exit within 3.0 s (killed)"
        );
        let stopped = Termination::SandboxKilled {
            signal: libc::SIGSTOP,
            name: "SIGSTOP".into(),
            stopped: true,
        };
        assert_eq!(
            stopped.to_string(),
            "its sandbox was stopped by SIGSTOP (killed)"
        );
        let segv = Termination::Signaled {
            signal: libc::SIGSEGV,
            name: "SIGSEGV".into(),
            core_dumped: false,
        };
        assert_eq!(segv.to_string(), "killed by SIGSEGV");
        let hung = Termination::TimedOut {
            after: Duration::from_secs(60),
            needed_sigkill: true,
        };
        assert_eq!(
            hung.to_string(),
            "timed out after 60.0 s (ignored SIGTERM, killed)"
        );
        assert_eq!(
            Termination::Exited { code: 1 }.to_string(),
            "exited with code 1"
        );
    }

    /// Probes run in parallel on rayon workers.
    #[test]
    fn shareable_across_threads() {
        fn send_sync<T: Send + Sync>() {}
        send_sync::<Sandbox>();
        send_sync::<Cancel>();
        send_sync::<Limits>();
        send_sync::<ChildCommand>();
        send_sync::<RunReport>();
        send_sync::<SandboxError>();
        send_sync::<View>();
    }

    #[test]
    fn signal_names() {
        assert_eq!(signal_name(libc::SIGSEGV), "SIGSEGV");
        assert_eq!(signal_name(libc::SIGRTMIN() + 2), "SIGRTMIN+2");
        assert_eq!(signal_name(999), "signal 999");
    }
}
