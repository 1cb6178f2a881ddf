//! What a sandboxed run is given and what it gives back: its bounds
//! ([`Limits`]), the command ([`ChildCommand`]), how it ended
//! ([`Termination`], [`RunReport`]) and the sandbox's own faults
//! ([`SandboxError`]).

use super::{Captured, Exhausted, Isolation, Leak, leak};
use std::ffi::OsString;
use std::io;
use std::path::PathBuf;
use std::time::Duration;

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
    /// Bytes the child may write into its folder, `/tmp`, `TMPDIR` and
    /// `/dev/shm` together, where it runs in namespaces of its own (a
    /// memory-backed file system: pages are used only as written).
    pub scratch: u64,
    /// How long a child whose work is done ([`Sandbox::run_until`](super::Sandbox::run_until)) gets to
    /// exit by itself before it is killed ([`Termination::DidNotExit`]).
    pub linger: Duration,
    /// Processes and threads the child and its descendants may hold at
    /// once: in a cgroup of the probe's own where one can be made, and in
    /// its own user namespace (`RLIMIT_NPROC`) where it has one and is not
    /// root. At most half of what the cgroups around this process leave.
    pub pids: u64,
    /// Bytes of memory the child and its descendants may hold, where a
    /// cgroup of their own can be made; at most half of what the cgroups
    /// around this process (or the machine) leave.
    pub memory: u64,
}

impl Default for Limits {
    /// 60 s timeout, 5 s grace, 64 KiB head and tail, 4096 files, 500 ms
    /// pipe wait, 1 GiB scratch, 3 s linger, 4096 processes, no memory
    /// bound of its own (half of what is left).
    fn default() -> Limits {
        Limits {
            timeout: Duration::from_secs(60),
            grace: Duration::from_secs(5),
            output_head: 64 * 1024,
            output_tail: 64 * 1024,
            max_open_files: 4096,
            pipe_close_wait: Duration::from_millis(500),
            scratch: 1 << 30,
            linger: Duration::from_secs(3),
            pids: 4096,
            memory: u64::MAX,
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
    /// Variables set on top of [`scrubbed_env`](super::scrubbed_env) (and override it).
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
    /// The run was cancelled ([`Cancel`](super::Cancel)); everything held got SIGKILL.
    Cancelled,
    /// The child's work was done ([`Sandbox::run_until`](super::Sandbox::run_until)), then it did not
    /// exit within [`Limits::linger`]; it and everything it held got
    /// SIGKILL.
    DidNotExit {
        /// The time it was given.
        within: Duration,
    },
    /// The reaper holding the child was killed by a signal, or stopped by
    /// one and then killed, before the child's end was known: only
    /// something inside the sandbox does that (and only where the probe
    /// has no pid namespace of its own).
    SandboxKilled {
        /// The signal.
        signal: i32,
        /// Its name.
        name: String,
        /// Whether the signal stopped the reaper (and the sandbox killed it).
        stopped: bool,
    },
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
            Termination::DidNotExit { within } => write!(
                f,
                "finished, then did not exit within {:.1} s (killed)",
                within.as_secs_f64()
            ),
            Termination::SandboxKilled {
                name,
                stopped: false,
                ..
            } => write!(f, "its sandbox was killed by {name}"),
            Termination::SandboxKilled {
                name,
                stopped: true,
                ..
            } => write!(f, "its sandbox was stopped by {name} (killed)"),
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
    /// its session id), as this process sees it; `None` when the run was
    /// cancelled before it started, or when the child ended before its
    /// number could be learnt from its pid namespace. Leaks are listed
    /// with the numbers they had there.
    pub pid: Option<i32>,
    /// How the child was isolated.
    pub isolation: Isolation,
    /// The bounds of [`Limits::pids`] and [`Limits::memory`] the child
    /// reached, where it had a cgroup of its own to count them.
    pub exhausted: Vec<Exhausted>,
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
    /// Whether the machine refused the child a process or memory
    /// (`EAGAIN`, `ENOMEM` from a fork, the reaper's included): what
    /// another probe may hold for a while, and let go when it ends.
    pub fn is_exhaustion(&self) -> bool {
        let source = match self {
            SandboxError::ChildSetup { source, .. }
            | SandboxError::Exec { source, .. }
            | SandboxError::Io(_, source) => source,
            _ => return false,
        };
        matches!(source.raw_os_error(), Some(libc::EAGAIN | libc::ENOMEM))
    }

    pub(super) fn os(what: &'static str, errno: nix::errno::Errno) -> SandboxError {
        SandboxError::Io(what, errno.into())
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
