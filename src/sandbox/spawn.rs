//! fork + exec of one child into its own session, with everything it needs
//! prepared before the fork.
//!
//! The parent is multi-threaded (rayon workers, other sandboxes), so between
//! `fork` and `execve` the child may only make async-signal-safe calls: no
//! allocation, no locks. Every C string and pointer array is therefore built
//! in the parent, and the child speaks raw `libc` system calls only.

use super::SandboxError;
use nix::fcntl::OFlag;
use nix::sys::signal::{Signal, killpg};
use nix::unistd::{ForkResult, Pid, fork, pipe2};
use std::collections::BTreeMap;
use std::ffi::{CString, OsStr, OsString};
use std::io;
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd, RawFd};
use std::os::unix::ffi::OsStrExt;
use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};

/// A set-up step in the child that can fail before `execve`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[repr(u32)]
enum Step {
    Session = 1,
    CoreLimit = 2,
    FileLimit = 3,
    WorkingDir = 4,
    Redirect = 5,
    Exec = 6,
}

impl Step {
    fn from_code(code: u32) -> Option<Step> {
        [
            Step::Session,
            Step::CoreLimit,
            Step::FileLimit,
            Step::WorkingDir,
            Step::Redirect,
            Step::Exec,
        ]
        .into_iter()
        .find(|s| *s as u32 == code)
    }

    fn describe(self) -> &'static str {
        match self {
            Step::Session => "setsid (own session and process group)",
            Step::CoreLimit => "setrlimit(RLIMIT_CORE, 0)",
            Step::FileLimit => "setrlimit(RLIMIT_NOFILE)",
            Step::WorkingDir => "chdir to the sandbox directory",
            Step::Redirect => "redirecting stdin/stdout/stderr",
            Step::Exec => "execve",
        }
    }
}

/// Everything the child needs, built before the fork.
pub(crate) struct Prepared {
    program: PathBuf,
    program_c: CString,
    _argv: Vec<CString>,
    argv: Vec<*const libc::c_char>,
    _envp: Vec<CString>,
    envp: Vec<*const libc::c_char>,
    cwd: CString,
    nofile: libc::rlimit,
    /// Highest descriptor to close one by one where `close_range` is missing.
    fd_scan_limit: libc::c_int,
    parent: libc::pid_t,
}

impl Prepared {
    /// Resolves the program (bare names through the child's `PATH`) and
    /// encodes argv, envp and the working directory as C strings.
    pub(crate) fn new(
        program: &Path,
        args: &[OsString],
        env: BTreeMap<OsString, OsString>,
        cwd: &Path,
        max_open_files: u64,
    ) -> Result<Prepared, SandboxError> {
        let program = resolve_program(program, env.get(OsStr::new("PATH")))?;
        let c = |what: &str, s: &OsStr| {
            CString::new(s.as_bytes()).map_err(|_| SandboxError::NulByte {
                program: program.clone(),
                what: what.to_owned(),
            })
        };
        let program_c = c("the program path", program.as_os_str())?;
        let mut argv_c = vec![program_c.clone()];
        for arg in args {
            argv_c.push(c("an argument", arg)?);
        }
        let mut envp_c = Vec::with_capacity(env.len());
        for (name, value) in &env {
            let mut pair = name.clone();
            pair.push("=");
            pair.push(value);
            envp_c.push(c("an environment variable", &pair)?);
        }
        let cwd = c("the sandbox directory", cwd.as_os_str())?;

        let (soft, hard) =
            nix::sys::resource::getrlimit(nix::sys::resource::Resource::RLIMIT_NOFILE)
                .map_err(|e| SandboxError::os("getrlimit(RLIMIT_NOFILE)", e))?;
        // An unprivileged process cannot raise its hard limit; clamp instead of failing.
        let limit = max_open_files.min(hard);
        let nofile = libc::rlimit {
            rlim_cur: limit,
            rlim_max: limit,
        };
        Ok(Prepared {
            argv: nul_terminated(&argv_c),
            _argv: argv_c,
            envp: nul_terminated(&envp_c),
            _envp: envp_c,
            program,
            program_c,
            cwd,
            nofile,
            fd_scan_limit: soft.min(65_536) as libc::c_int,
            parent: std::process::id() as libc::pid_t,
        })
    }
}

fn nul_terminated(strings: &[CString]) -> Vec<*const libc::c_char> {
    strings
        .iter()
        .map(|s| s.as_ptr())
        .chain(std::iter::once(std::ptr::null()))
        .collect()
}

/// Finds a bare program name in `path`; makes a relative path absolute
/// against the parent's working directory (the child's is the sandbox).
fn resolve_program(program: &Path, path: Option<&OsString>) -> Result<PathBuf, SandboxError> {
    if program.as_os_str().is_empty() {
        return Err(SandboxError::NotFound {
            program: program.to_path_buf(),
            path: None,
        });
    }
    if program.as_os_str().as_bytes().contains(&b'/') {
        if program.is_absolute() {
            return Ok(program.to_path_buf());
        }
        let here = std::env::current_dir()
            .map_err(|e| SandboxError::Io("reading the current directory", e))?;
        return Ok(here.join(program));
    }
    let found = path.and_then(|path| {
        std::env::split_paths(path)
            .filter(|dir| !dir.as_os_str().is_empty())
            .map(|dir| dir.join(program))
            .find(|candidate| {
                candidate
                    .metadata()
                    .is_ok_and(|m| m.is_file() && m.permissions().mode() & 0o111 != 0)
            })
    });
    found.ok_or_else(|| SandboxError::NotFound {
        program: program.to_path_buf(),
        path: path.cloned(),
    })
}

/// A started child: its process group and the read ends of its stdout and
/// stderr.
pub(crate) struct Spawned {
    pub(crate) group: Group,
    pub(crate) stdout: OwnedFd,
    pub(crate) stderr: OwnedFd,
}

/// Forks and executes the prepared child; returns once `execve` succeeded,
/// or with a precise error when it or a set-up step before it failed.
pub(crate) fn spawn(p: &Prepared) -> Result<Spawned, SandboxError> {
    // O_CLOEXEC everywhere: a sandbox forking on another thread must not
    // inherit these ends, or our child's EOF would wait for its exec.
    let pipe = || pipe2(OFlag::O_CLOEXEC).map_err(|e| SandboxError::os("pipe2", e));
    let (out_r, out_w) = pipe()?;
    let (err_r, err_w) = pipe()?;
    let (fail_r, fail_w) = pipe()?;
    let stdin = nix::fcntl::open(
        "/dev/null",
        OFlag::O_RDONLY | OFlag::O_CLOEXEC,
        nix::sys::stat::Mode::empty(),
    )
    .map_err(|e| SandboxError::os("open /dev/null", e))?;

    // SAFETY: the child runs `exec_child` only, which makes async-signal-safe
    // calls on memory prepared before the fork and never returns.
    match unsafe { fork() }.map_err(|e| SandboxError::os("fork", e))? {
        ForkResult::Child => unsafe {
            exec_child(
                p,
                [stdin.as_raw_fd(), out_w.as_raw_fd(), err_w.as_raw_fd()],
                fail_w.as_raw_fd(),
            )
        },
        ForkResult::Parent { child } => {
            drop((out_w, err_w, fail_w, stdin));
            // From here on, every way out kills and reaps the child.
            let group = Group {
                pid: child,
                reaped: false,
            };
            match read_failure(&fail_r) {
                Ok(None) => Ok(Spawned {
                    group,
                    stdout: out_r,
                    stderr: err_r,
                }),
                Ok(Some((step, errno))) => {
                    let source = io::Error::from_raw_os_error(errno);
                    let program = p.program.clone();
                    Err(match step {
                        Some(Step::Exec) | None => SandboxError::Exec { program, source },
                        Some(step) => SandboxError::ChildSetup {
                            program,
                            step: step.describe(),
                            source,
                        },
                    })
                }
                Err(e) => Err(SandboxError::Io("reading the child's exec status", e)),
            }
        }
    }
}

/// Reads the child's report from the CLOEXEC pipe: end of file means
/// `execve` succeeded; 8 bytes are a failed step and its errno.
fn read_failure(fail_r: &OwnedFd) -> io::Result<Option<(Option<Step>, i32)>> {
    let mut buf = [0u8; 8];
    let mut got = 0;
    while got < buf.len() {
        match nix::unistd::read(fail_r, &mut buf[got..]) {
            Ok(0) => break,
            Ok(n) => got += n,
            Err(nix::errno::Errno::EINTR) => continue,
            Err(e) => return Err(e.into()),
        }
    }
    match got {
        0 => Ok(None),
        8 => {
            let step = u32::from_ne_bytes([buf[0], buf[1], buf[2], buf[3]]);
            let errno = i32::from_ne_bytes([buf[4], buf[5], buf[6], buf[7]]);
            Ok(Some((Step::from_code(step), errno)))
        }
        n => Err(io::Error::new(
            io::ErrorKind::UnexpectedEof,
            format!("short exec status report ({n} of 8 bytes)"),
        )),
    }
}

/// The child's process group, from the moment `fork` returns; killed and
/// reaped on drop, so no way out — an error, an early return, a panic —
/// leaves a process behind.
pub(crate) struct Group {
    pid: Pid,
    reaped: bool,
}

impl Group {
    /// The leader's pid: also the group and session id.
    pub(crate) fn pid(&self) -> Pid {
        self.pid
    }

    /// Sends `signal` to every process of the group.
    pub(crate) fn signal(&self, signal: Signal) {
        // ESRCH (nobody left) is the only expected failure, and harmless.
        let _ = killpg(self.pid, signal);
    }

    /// Kills what is left of the group, then reaps the leader. Until the
    /// leader is reaped its zombie keeps the group id reserved, so the kill
    /// cannot hit an unrelated process that reused the number.
    pub(crate) fn kill_and_reap(&mut self) {
        if !self.reaped {
            self.signal(Signal::SIGKILL);
            // The leader too, in case it failed before `setsid`.
            let _ = nix::sys::signal::kill(self.pid, Signal::SIGKILL);
            reap(self.pid);
            self.reaped = true;
        }
    }
}

impl Drop for Group {
    fn drop(&mut self) {
        self.kill_and_reap();
    }
}

/// Waits for `pid` and discards its status, retrying on EINTR.
fn reap(pid: Pid) {
    while let Err(nix::errno::Errno::EINTR) = nix::sys::wait::waitpid(pid, None) {}
}

/// The child side: set up, then `execve`. Never returns.
///
/// # Safety
/// Only to be called in the child right after `fork`.
unsafe fn exec_child(p: &Prepared, stdio: [RawFd; 3], fail: RawFd) -> ! {
    unsafe {
        // A descriptor that is itself 0, 1 or 2 (a parent started with a
        // closed stdin) would be clobbered by the dup2 calls below: move
        // every one above 2 first, the failure pipe before anything else.
        let fail = match move_above_stdio(fail) {
            Some(fd) => fd,
            None => report_failure(fail, Step::Redirect),
        };
        let mut stdio = stdio;
        for fd in &mut stdio {
            *fd = move_above_stdio(*fd).unwrap_or_else(|| report_failure(fail, Step::Redirect));
        }

        // Ignored signals and the mask survive exec: undo what the parent
        // set. Rust ignores SIGPIPE (a child inheriting that never dies of a
        // closed pipe), and an ignored SIGTERM would defeat the grace period.
        let mut empty: libc::sigset_t = std::mem::zeroed();
        libc::sigemptyset(&mut empty);
        libc::sigprocmask(libc::SIG_SETMASK, &empty, std::ptr::null_mut());
        for signal in [libc::SIGPIPE, libc::SIGTERM, libc::SIGINT, libc::SIGHUP] {
            libc::signal(signal, libc::SIG_DFL);
        }

        // Dies with the parent's thread even if the parent is SIGKILLed; the
        // check closes the race with a parent that died before prctl.
        libc::prctl(libc::PR_SET_PDEATHSIG, libc::SIGKILL);
        if libc::getppid() != p.parent {
            libc::_exit(127);
        }

        if libc::setsid() < 0 {
            report_failure(fail, Step::Session);
        }
        let no_core = libc::rlimit {
            rlim_cur: 0,
            rlim_max: 0,
        };
        if libc::setrlimit(libc::RLIMIT_CORE, &no_core) < 0 {
            report_failure(fail, Step::CoreLimit);
        }
        if libc::setrlimit(libc::RLIMIT_NOFILE, &p.nofile) < 0 {
            report_failure(fail, Step::FileLimit);
        }
        if libc::chdir(p.cwd.as_ptr()) < 0 {
            report_failure(fail, Step::WorkingDir);
        }
        for (target, fd) in stdio.into_iter().enumerate() {
            if libc::dup2(fd, target as libc::c_int) < 0 {
                report_failure(fail, Step::Redirect);
            }
        }
        // Every other descriptor closes; `fail` is CLOEXEC and closes at exec.
        close_fds(3, fail, p.fd_scan_limit);
        close_fds(fail + 1, libc::c_int::MAX, p.fd_scan_limit);

        libc::execve(p.program_c.as_ptr(), p.argv.as_ptr(), p.envp.as_ptr());
        report_failure(fail, Step::Exec)
    }
}

/// `fd` itself when above 2, else a CLOEXEC duplicate above 2.
unsafe fn move_above_stdio(fd: RawFd) -> Option<RawFd> {
    if fd > 2 {
        return Some(fd);
    }
    let moved = unsafe { libc::fcntl(fd, libc::F_DUPFD_CLOEXEC, 3) };
    (moved >= 0).then_some(moved)
}

/// Sends the failed step and `errno` to the parent, then exits the child.
unsafe fn report_failure(fail: RawFd, step: Step) -> ! {
    unsafe {
        let errno = *libc::__errno_location();
        let mut msg = [0u8; 8];
        msg[..4].copy_from_slice(&(step as u32).to_ne_bytes());
        msg[4..].copy_from_slice(&errno.to_ne_bytes());
        libc::write(fail, msg.as_ptr().cast(), msg.len());
        libc::_exit(127)
    }
}

/// Closes descriptors `from..to` (to exclusive) in the child.
unsafe fn close_fds(from: RawFd, to: RawFd, scan_limit: libc::c_int) {
    if from >= to {
        return;
    }
    unsafe {
        let done = libc::syscall(
            libc::SYS_close_range,
            from as libc::c_uint,
            (to - 1) as libc::c_uint,
            0 as libc::c_uint,
        ) == 0;
        if !done {
            for fd in from..to.min(scan_limit) {
                libc::close(fd);
            }
        }
    }
}

/// A pidfd for `pid` (Linux 5.3+): readable once the child has exited, so
/// one `poll` waits for output and exit together. `None` where the kernel or
/// a seccomp filter refuses it; the caller then polls `waitid` on a tick.
pub(crate) fn pidfd_open(pid: Pid) -> Option<OwnedFd> {
    // SAFETY: plain system call; a non-negative result is a fresh descriptor we own.
    let fd = unsafe { libc::syscall(libc::SYS_pidfd_open, pid.as_raw(), 0) };
    (fd >= 0).then(|| unsafe { OwnedFd::from_raw_fd(fd as RawFd) })
}
