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
//! Structured results do not travel through here: the caller names a file in
//! [`Sandbox::dir`] (for example in an environment variable) and reads it
//! after `run`.
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

mod cancel;
mod capture;
mod env;
mod held;
mod leak;
mod link;
mod procfs;
pub mod reaper;
mod spawn;
mod supervise;

pub use cancel::{Cancel, install_interrupt_handler};
pub use capture::Captured;
pub use env::{is_secret_name, scrubbed_env};
pub use leak::{Leak, Place};

use std::collections::BTreeMap;
use std::ffi::OsString;
use std::io;
use std::path::{Path, PathBuf};
use std::sync::OnceLock;
use std::time::{Duration, Instant};

/// Bounds on one run.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Limits {
    /// Wall time from start until SIGTERM to the group.
    pub timeout: Duration,
    /// Time between SIGTERM and SIGKILL.
    pub grace: Duration,
    /// Bytes kept from the start of each stream.
    pub output_head: usize,
    /// Bytes kept from the end of each stream.
    pub output_tail: usize,
    /// `RLIMIT_NOFILE` of the child (clamped to the parent's hard limit).
    pub max_open_files: u64,
    /// How long the pipes may stay open after the child exits before the
    /// holder is treated as a leaked grandchild.
    pub pipe_close_wait: Duration,
}

impl Default for Limits {
    /// 60 s timeout, 5 s grace, 64 KiB head and tail, 4096 files, 500 ms pipe wait.
    fn default() -> Limits {
        Limits {
            timeout: Duration::from_secs(60),
            grace: Duration::from_secs(5),
            output_head: 64 * 1024,
            output_tail: 64 * 1024,
            max_open_files: 4096,
            pipe_close_wait: Duration::from_millis(500),
        }
    }
}

/// What to execute in a sandbox.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ChildCommand {
    /// The program: a bare name is looked up in the child's `PATH`; a
    /// relative path with a slash is taken from the parent's working directory.
    pub program: PathBuf,
    /// Arguments after the program name.
    pub args: Vec<OsString>,
    /// Variables set on top of [`scrubbed_env`] (and override it).
    pub env: Vec<(OsString, OsString)>,
}

impl ChildCommand {
    /// A command without arguments or extra variables.
    pub fn new(program: impl Into<PathBuf>) -> ChildCommand {
        ChildCommand {
            program: program.into(),
            args: Vec::new(),
            env: Vec::new(),
        }
    }

    /// Adds one argument.
    pub fn arg(mut self, arg: impl Into<OsString>) -> ChildCommand {
        self.args.push(arg.into());
        self
    }

    /// Adds one environment variable.
    pub fn env(mut self, name: impl Into<OsString>, value: impl Into<OsString>) -> ChildCommand {
        self.env.push((name.into(), value.into()));
        self
    }
}

/// How a run ended.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Termination {
    /// The child exited by itself with this status.
    Exited {
        /// The exit status (0–255).
        code: i32,
    },
    /// A signal killed the child (not one sent by the sandbox).
    Signaled {
        /// The signal number.
        signal: i32,
        /// Its name, `"SIGSEGV"`, `"SIGRTMIN+2"`, or `"signal N"`.
        name: String,
        /// Whether the kernel reports a core dump (never written: `RLIMIT_CORE=0`).
        core_dumped: bool,
    },
    /// The deadline passed; the group got SIGTERM.
    TimedOut {
        /// Time from start until SIGTERM.
        after: Duration,
        /// Whether the child outlived the grace period and needed SIGKILL.
        needed_sigkill: bool,
    },
    /// The run was cancelled ([`Cancel`]); everything held got SIGKILL.
    Cancelled,
}

impl std::fmt::Display for Termination {
    /// A short phrase for messages: `exited with code 1`, `killed by SIGSEGV`,
    /// `timed out after 60.0 s`, `cancelled`.
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Termination::Exited { code } => write!(f, "exited with code {code}"),
            Termination::Signaled {
                name, core_dumped, ..
            } => {
                write!(f, "killed by {name}")?;
                if *core_dumped {
                    f.write_str(" (core dumped)")?;
                }
                Ok(())
            }
            Termination::TimedOut {
                after,
                needed_sigkill,
            } => {
                write!(f, "timed out after {:.1} s", after.as_secs_f64())?;
                if *needed_sigkill {
                    f.write_str(" (ignored SIGTERM, killed)")?;
                }
                Ok(())
            }
            Termination::Cancelled => f.write_str("cancelled"),
        }
    }
}

/// Everything known about one run.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RunReport {
    /// How it ended.
    pub termination: Termination,
    /// What the child wrote on stdout (bounded).
    pub stdout: Captured,
    /// What the child wrote on stderr (bounded).
    pub stderr: Captured,
    /// Processes that outlived the child (or, when the sandbox had to kill
    /// the child, that had left its process group), in the order found; at
    /// most 256 from a reaper.
    pub leaked: Vec<Leak>,
    /// Whether a reaper held every descendant of the child, so that none
    /// can be running now. False without a reaper: then only the child's
    /// process group was killed, and a descendant that left it is listed
    /// only if it still held the output (and is left running).
    pub contained: bool,
    /// Wall time from just before the fork until everything was reaped.
    pub wall: Duration,
    /// The child's pid, also its process group id (and, without a reaper,
    /// its session id); `None` when the run was cancelled before it started.
    pub pid: Option<i32>,
}

impl RunReport {
    /// The leaks in one line for reports (`2 processes outlived the probe:
    /// pid 4242 (sleep 300): in a process group of its own, killed; …`);
    /// `None` when there is none.
    pub fn leak_summary(&self) -> Option<String> {
        leak::summary(&self.leaked)
    }
}

/// A fault of the sandbox itself (never of the child): the child could not
/// be started, or the operating system refused a supervision call.
#[derive(Debug, thiserror::Error)]
pub enum SandboxError {
    /// The temporary directory could not be created.
    #[error("cannot create the sandbox directory: {0}")]
    TempDir(#[source] io::Error),
    /// A bare program name that is not in the child's `PATH`.
    #[error("cannot execute {}: not found in PATH{}", program.display(), match path {
        Some(path) => format!(" ({})", path.to_string_lossy()),
        None => " (PATH is not set)".to_owned(),
    })]
    NotFound {
        /// The program as given.
        program: PathBuf,
        /// The `PATH` searched.
        path: Option<OsString>,
    },
    /// `execve` failed: no such file, permission denied, bad interpreter, ….
    #[error("cannot execute {}: {source}", program.display())]
    Exec {
        /// The program as executed.
        program: PathBuf,
        /// The error `execve` returned.
        source: io::Error,
    },
    /// A set-up step in the child before `execve` failed.
    #[error("cannot start {}: {step} failed: {source}", program.display())]
    ChildSetup {
        /// The program.
        program: PathBuf,
        /// The step that failed.
        step: &'static str,
        /// Its error.
        source: io::Error,
    },
    /// An argument, a variable or a path cannot be passed to `execve`.
    #[error("cannot execute {}: {what} contains a NUL byte", program.display())]
    NulByte {
        /// The program.
        program: PathBuf,
        /// What held the NUL byte.
        what: String,
    },
    /// An operating-system call of the supervisor failed.
    #[error("{0} failed: {1}")]
    Io(&'static str, #[source] io::Error),
    /// The reaper between the sandbox and the child failed: it went away
    /// before reporting the child's end, or spoke nonsense.
    #[error("the sandbox's reaper {0}")]
    Reaper(String),
}

impl SandboxError {
    fn os(what: &'static str, errno: nix::errno::Errno) -> SandboxError {
        SandboxError::Io(what, errno.into())
    }
}

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

/// An isolated place to run one child: a fresh temporary directory, removed
/// when the sandbox is dropped.
#[derive(Debug)]
pub struct Sandbox {
    dir: tempfile::TempDir,
    reaper: Option<PathBuf>,
}

impl Sandbox {
    /// Creates the temporary directory (under `TMPDIR`); the reaper is the
    /// one given to [`set_default_reaper`], if any.
    pub fn new() -> Result<Sandbox, SandboxError> {
        let dir = tempfile::Builder::new()
            .prefix("preflight-")
            .tempdir()
            .map_err(SandboxError::TempDir)?;
        Ok(Sandbox {
            dir,
            reaper: default_reaper(),
        })
    }

    /// Runs children under `reaper` (see [`set_default_reaper`]), or
    /// without one (`None`): then only the child's process group is held.
    pub fn with_reaper(mut self, reaper: Option<PathBuf>) -> Sandbox {
        self.reaper = reaper;
        self
    }

    /// The reaper children run under, if any.
    pub fn reaper(&self) -> Option<&Path> {
        self.reaper.as_deref()
    }

    /// The child's working directory, `PWD` and `TMPDIR`: write the driver script
    /// here, and read the result file from here after [`Sandbox::run`].
    pub fn dir(&self) -> &Path {
        self.dir.path()
    }

    /// Runs `cmd` in this sandbox under `limits` until it and every one of
    /// its descendants (with a reaper; its process group without one) are
    /// gone.
    ///
    /// Whatever the child does is reported in the [`RunReport`]; `Err` means
    /// a fault of the sandbox itself (the program or the reaper cannot be
    /// executed, a system call failed, the reaper was killed). A `cancel`
    /// already set returns `Cancelled` without starting anything.
    pub fn run(
        &self,
        cmd: &ChildCommand,
        limits: &Limits,
        cancel: &Cancel,
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
            });
        }
        let mut env: BTreeMap<OsString, OsString> = scrubbed_env().into_iter().collect();
        // The parent's PWD would name a directory the child is not in.
        for name in ["TMPDIR", "PWD"] {
            env.insert(name.into(), self.dir().into());
        }
        env.extend(cmd.env.iter().cloned());
        let prepared = spawn::Prepared::new(
            &cmd.program,
            &cmd.args,
            env,
            self.dir(),
            limits.max_open_files,
            self.reaper.as_deref(),
        )?;
        let spawned = spawn::spawn(&prepared)?;
        supervise::supervise(spawned, limits, cancel, start)
    }
}

/// The name of a signal: `"SIGSEGV"`, `"SIGRTMIN+2"`, or `"signal N"`.
pub fn signal_name(signal: i32) -> String {
    if let Ok(known) = nix::sys::signal::Signal::try_from(signal) {
        return known.as_str().to_owned();
    }
    let (min, max) = (libc::SIGRTMIN(), libc::SIGRTMAX());
    if (min..=max).contains(&signal) {
        format!("SIGRTMIN+{}", signal - min)
    } else {
        format!("signal {signal}")
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn termination_reads_as_a_phrase() {
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
    }

    #[test]
    fn signal_names() {
        assert_eq!(signal_name(libc::SIGSEGV), "SIGSEGV");
        assert_eq!(signal_name(libc::SIGRTMIN() + 2), "SIGRTMIN+2");
        assert_eq!(signal_name(999), "signal 999");
    }
}
