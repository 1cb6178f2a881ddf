//! fork + exec of one child into its own session — or of the reaper, which
//! forks the child in turn — with everything prepared before the fork.
//! When the probe gets namespaces, the fork is a `clone` into new pid and
//! mount namespaces (and a user namespace, whose id maps the child writes
//! before it executes the reaper): the reaper is pid 1 there.
//!
//! The parent is multi-threaded (rayon workers, other sandboxes), so between
//! `fork` and `execve` the child may only make async-signal-safe calls: no
//! allocation, no locks. Every C string and pointer array is therefore built
//! in the parent, and the child speaks raw `libc` system calls only.

use super::SandboxError;
use super::held::{Group, Held};
use super::isolation::Mode;
use super::link::{ReaperLink, START_LIMIT, STOP_TICK};
use super::reaper::{CONTROL_FD, FAIL_FD};
use nix::fcntl::OFlag;
use nix::unistd::{ForkResult, Pid, fork, pipe2};
use std::collections::BTreeMap;
use std::ffi::{CString, OsStr, OsString};
use std::io::{self, Write};
use std::os::fd::{AsRawFd, OwnedFd, RawFd};
use std::os::unix::ffi::OsStrExt;
use std::os::unix::fs::PermissionsExt;
use std::os::unix::net::UnixStream;
use std::path::{Path, PathBuf};

/// A set-up step, in the child or in the reaper, that can fail before the
/// child's `execve`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[repr(u32)]
pub(crate) enum Step {
    Session = 1,
    CoreLimit = 2,
    FileLimit = 3,
    WorkingDir = 4,
    Redirect = 5,
    Exec = 6,
    ExecReaper = 7,
    Subreaper = 8,
    ReaperSignals = 9,
    ReaperFork = 10,
    ProcessGroup = 11,
    UserMap = 12,
    ReaperSetup = 13,
    MountPropagation = 14,
    MountProc = 15,
    MountScratch = 16,
    CopyIn = 17,
    ProbeUserNamespace = 18,
    ProbeUserMap = 19,
    MountWalls = 20,
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
            Step::ExecReaper,
            Step::Subreaper,
            Step::ReaperSignals,
            Step::ReaperFork,
            Step::ProcessGroup,
            Step::UserMap,
            Step::ReaperSetup,
            Step::MountPropagation,
            Step::MountProc,
            Step::MountScratch,
            Step::CopyIn,
            Step::ProbeUserNamespace,
            Step::ProbeUserMap,
            Step::MountWalls,
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
            Step::Exec | Step::ExecReaper => "execve",
            Step::Subreaper => "prctl(PR_SET_CHILD_SUBREAPER) in the reaper",
            Step::ReaperSignals => "signalfd in the reaper",
            Step::ReaperFork => "fork in the reaper",
            Step::ProcessGroup => "setpgid (own process group under the reaper)",
            Step::UserMap => "writing the id maps of the probe's user namespace",
            Step::ReaperSetup => "reading the reaper's set-up message",
            Step::MountPropagation => "making the probe's mounts private (MS_SLAVE)",
            Step::MountProc => "mounting the probe's /proc",
            Step::MountScratch => "mounting the probe's scratch (tmpfs, overlays)",
            Step::CopyIn => "carrying the sandbox's files into the probe's folder",
            Step::ProbeUserNamespace => "unshare(CLONE_NEWUSER) for the probe",
            Step::ProbeUserMap => "writing the id maps of the probe's own user namespace",
            Step::MountWalls => {
                "making the host's file system read-only (mount_setattr, Linux 5.12+) and the probe's /dev"
            }
        }
    }

    /// Whether this step only exists because the probe has namespaces:
    /// its failure means they cannot be had here, and the sandbox runs
    /// the probe without them.
    fn is_namespace(self) -> bool {
        matches!(
            self,
            Step::UserMap
                | Step::MountPropagation
                | Step::MountProc
                | Step::MountScratch
                | Step::MountWalls
                | Step::ProbeUserNamespace
                | Step::ProbeUserMap
        )
    }
}

/// Why no child was started.
pub(crate) enum SpawnError {
    /// A fault of the sandbox, as reported to the caller.
    Sandbox(SandboxError),
    /// Linux refused the namespaces (clone, a mount, an id map), and why:
    /// the sandbox runs the probe without them instead.
    Refused(String),
}

impl From<SandboxError> for SpawnError {
    fn from(e: SandboxError) -> SpawnError {
        SpawnError::Sandbox(e)
    }
}

/// The namespaces a child is cloned into, with everything its set-up
/// needs built before the clone.
pub(crate) struct Namespaces {
    pub(crate) mode: Mode,
    /// `setgroups`, `uid_map` and `gid_map` of the new user namespace
    /// (user mode): the reaper becomes its root, mapped to our ids.
    id_maps: Option<[CString; 3]>,
}

impl Namespaces {
    pub(crate) fn new(mode: Mode) -> Namespaces {
        let id_maps = (mode == Mode::User).then(|| {
            let uid = nix::unistd::geteuid().as_raw();
            let gid = nix::unistd::getegid().as_raw();
            let c = |s: String| CString::new(s).unwrap_or_default();
            [
                c("deny".to_owned()),
                c(format!("0 {uid} 1\n")),
                c(format!("0 {gid} 1\n")),
            ]
        });
        Namespaces { mode, id_maps }
    }
}

/// The stack of a cloned child until its `execve`: the set-up calls need
/// a few hundred bytes.
const CLONE_STACK: usize = 64 * 1024;

/// Everything the child needs, built before the fork.
pub(crate) struct Prepared {
    program: PathBuf,
    /// The reaper executed in the child's place, when there is one.
    reaper: Option<PathBuf>,
    /// What `execve` runs: the program, or the reaper.
    exec_c: CString,
    _argv: Vec<CString>,
    argv: Vec<*const libc::c_char>,
    _envp: Vec<CString>,
    envp: Vec<*const libc::c_char>,
    cwd: CString,
    nofile: libc::rlimit,
    /// Highest descriptor to close one by one where `close_range` is missing.
    fd_scan_limit: libc::c_int,
    parent: libc::pid_t,
    /// What the reaper reads first on its socket ([`super::reaper::Setup`]).
    setup: Vec<u8>,
    /// The namespaces to clone the reaper into, if any.
    namespaces: Option<Namespaces>,
    /// The child's standard input; `/dev/null` when `None`.
    stdin: Option<RawFd>,
}

impl Prepared {
    /// Resolves the program (and the reaper, if any; bare names through the
    /// child's `PATH`) and encodes argv, envp and the working directory as
    /// C strings. With a reaper, the reaper is executed with the program and
    /// its arguments after `__reaper --`, and reads `setup` first.
    pub(crate) fn new(
        program: &Path,
        args: &[OsString],
        env: BTreeMap<OsString, OsString>,
        cwd: &Path,
        max_open_files: u64,
        reaper: Option<(&Path, Vec<u8>)>,
    ) -> Result<Prepared, SandboxError> {
        let (reaper, setup) = match reaper {
            Some((path, setup)) => (Some(path), setup),
            None => (None, Vec::new()),
        };
        let path = env.get(OsStr::new("PATH"));
        let program = resolve_program(program, path)?;
        let reaper = reaper.map(|r| resolve_program(r, path)).transpose()?;
        let c = |what: &str, s: &OsStr| {
            CString::new(s.as_bytes()).map_err(|_| SandboxError::NulByte {
                program: program.clone(),
                what: what.to_owned(),
            })
        };
        let program_c = c("the program path", program.as_os_str())?;
        let mut argv_c = Vec::with_capacity(args.len() + 4);
        let exec_c = match &reaper {
            Some(reaper) => {
                let reaper_c = c("the reaper path", reaper.as_os_str())?;
                argv_c.push(reaper_c.clone());
                argv_c.push(c("an argument", OsStr::new(super::reaper::ARG))?);
                argv_c.push(c("an argument", OsStr::new("--"))?);
                reaper_c
            }
            None => program_c.clone(),
        };
        argv_c.push(program_c);
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
            reaper,
            exec_c,
            cwd,
            nofile,
            fd_scan_limit: soft.min(65_536) as libc::c_int,
            parent: std::process::id() as libc::pid_t,
            setup,
            namespaces: None,
            stdin: None,
        })
    }

    /// Clones the reaper into `namespaces` instead of forking it.
    /// The child reads `fd` (a duplicate of it) as its standard input.
    pub(crate) fn with_stdin(mut self, fd: Option<RawFd>) -> Prepared {
        self.stdin = fd;
        self
    }

    pub(crate) fn in_namespaces(mut self, namespaces: Namespaces) -> Prepared {
        self.namespaces = Some(namespaces);
        self
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

/// A started child, held by its process group or by the reaper, and the
/// read ends of its stdout and stderr.
pub(crate) struct Spawned {
    pub(crate) held: Held,
    pub(crate) stdout: OwnedFd,
    pub(crate) stderr: OwnedFd,
}

/// Forks and executes the prepared child (through the reaper, if there is
/// one); returns once the child's `execve` succeeded, or with a precise
/// error when it or a set-up step before it failed.
pub(crate) fn spawn(p: &Prepared) -> Result<Spawned, SpawnError> {
    // O_CLOEXEC everywhere: a sandbox forking on another thread must not
    // inherit these ends, or our child's EOF would wait for its exec.
    let pipe = || pipe2(OFlag::O_CLOEXEC).map_err(|e| SandboxError::os("pipe2", e));
    let (out_r, out_w) = pipe()?;
    let (err_r, err_w) = pipe()?;
    let (fail_r, fail_w) = pipe()?;
    let stdin = match p.stdin {
        Some(fd) => {
            // SAFETY: the caller keeps `fd` open while the child is spawned.
            let borrowed = unsafe { std::os::fd::BorrowedFd::borrow_raw(fd) };
            borrowed
                .try_clone_to_owned()
                .map_err(|e| SandboxError::Io("duplicating the child's stdin", e))?
        }
        None => nix::fcntl::open(
            "/dev/null",
            OFlag::O_RDONLY | OFlag::O_CLOEXEC,
            nix::sys::stat::Mode::empty(),
        )
        .map_err(|e| SandboxError::os("open /dev/null", e))?,
    };
    let control = match p.reaper {
        Some(_) => {
            let (mut ours, theirs) =
                UnixStream::pair().map_err(|e| SandboxError::Io("socketpair for the reaper", e))?;
            // Waits in the socket until the reaper reads it.
            ours.write_all(&p.setup)
                .map_err(|e| SandboxError::Io("writing the reaper's set-up", e))?;
            Some((ours, theirs))
        }
        None => None,
    };
    let stdio = [stdin.as_raw_fd(), out_w.as_raw_fd(), err_w.as_raw_fd()];
    let control_fd = control.as_ref().map(|(_, theirs)| theirs.as_raw_fd());

    let child = match &p.namespaces {
        // SAFETY: the child runs `exec_child` only, which makes
        // async-signal-safe calls on memory prepared before the fork and
        // never returns.
        None => match unsafe { fork() }.map_err(|e| SandboxError::os("fork", e))? {
            ForkResult::Child => unsafe { exec_child(p, stdio, fail_w.as_raw_fd(), control_fd) },
            ForkResult::Parent { child } => child,
        },
        Some(ns) => {
            let mut stack = vec![0u8; CLONE_STACK];
            let fail = fail_w.as_raw_fd();
            // SAFETY: as for the fork above; the child runs on `stack`.
            let cloned = unsafe {
                nix::sched::clone(
                    Box::new(|| exec_child(p, stdio, fail, control_fd)),
                    &mut stack,
                    ns.mode.flags(),
                    Some(libc::SIGCHLD),
                )
            };
            match cloned {
                Ok(child) => child,
                Err(e) if super::isolation::refusal(e) => {
                    return Err(SpawnError::Refused(format!("clone: {}", e.desc())));
                }
                Err(e) => return Err(SandboxError::os("clone", e).into()),
            }
        }
    };
    drop((out_w, err_w, fail_w, stdin));
    // From here on, every way out kills and reaps the child.
    let mut held = match control {
        None => Held::Group(Group::new(child)),
        Some((ours, theirs)) => {
            drop(theirs);
            Held::Reaper(ReaperLink::new(child, ours, p.namespaces.is_some()))
        }
    };
    let failure = read_failure(&fail_r, child, &mut held)
        .map_err(|e| SandboxError::Io("reading the child's exec status", e))?;
    if let Some((step, errno)) = failure {
        let source = io::Error::from_raw_os_error(errno);
        let program = p.program.clone();
        return Err(match (step, &p.reaper) {
            (Some(step), _) if step.is_namespace() => {
                SpawnError::Refused(format!("{}: {source}", step.describe()))
            }
            (Some(Step::ExecReaper), Some(reaper)) => SandboxError::Exec {
                program: reaper.clone(),
                source,
            }
            .into(),
            (Some(Step::Exec | Step::ExecReaper) | None, _) => {
                SandboxError::Exec { program, source }.into()
            }
            (Some(step), _) => SandboxError::ChildSetup {
                program,
                step: step.describe(),
                source,
            }
            .into(),
        });
    }
    if let Held::Reaper(link) = &mut held {
        link.wait_started()?;
    }
    Ok(Spawned {
        held,
        stdout: out_r,
        stderr: err_r,
    })
}

/// Reads the child's report from the CLOEXEC pipe: end of file means
/// `execve` succeeded; 8 bytes are a failed step and its errno. The
/// reaper holds the pipe open until it has started the child, so the
/// child can stop it first (`kill -STOP $PPID`): while this waits, a
/// stopped reaper is killed ([`Held::kill_if_stopped`]), and `forked` (the
/// process forked, reaper or child) is killed once silent past
/// [`START_LIMIT`]; either end closes the pipe.
fn read_failure(
    fail_r: &OwnedFd,
    forked: Pid,
    held: &mut Held,
) -> io::Result<Option<(Option<Step>, i32)>> {
    use nix::poll::{PollFd, PollFlags, PollTimeout, poll};
    use std::os::fd::AsFd;
    let deadline = std::time::Instant::now() + START_LIMIT;
    let mut buf = [0u8; 8];
    let mut got = 0;
    while got < buf.len() {
        let mut fds = [PollFd::new(fail_r.as_fd(), PollFlags::POLLIN)];
        match poll(
            &mut fds,
            PollTimeout::try_from(STOP_TICK).unwrap_or(PollTimeout::MAX),
        ) {
            Ok(0) => {
                held.kill_if_stopped();
                if std::time::Instant::now() >= deadline {
                    let _ = nix::sys::signal::kill(forked, nix::sys::signal::Signal::SIGKILL);
                }
                continue;
            }
            Ok(_) => {}
            Err(nix::errno::Errno::EINTR) => continue,
            Err(e) => return Err(e.into()),
        }
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

/// The child side: set up, then `execve` the program, or the reaper with
/// the exec status pipe on [`FAIL_FD`] and `control` on [`CONTROL_FD`].
/// Never returns.
///
/// # Safety
/// Only to be called in the child right after `fork`.
unsafe fn exec_child(p: &Prepared, stdio: [RawFd; 3], fail: RawFd, control: Option<RawFd>) -> ! {
    // Descriptors below this are about to be overwritten.
    let low = if control.is_some() { CONTROL_FD + 1 } else { 3 };
    unsafe {
        // A descriptor that is itself 0, 1 or 2 (a parent started with a
        // closed stdin), or the reaper's 3 or 4, would be clobbered by the
        // dup2 calls below: move every one above first, the failure pipe
        // before anything else.
        let mut fail = match move_above(fail, low) {
            Some(fd) => fd,
            None => report_failure(fail, Step::Redirect),
        };
        let mut stdio = stdio;
        for fd in &mut stdio {
            *fd = move_above(*fd, low).unwrap_or_else(|| report_failure(fail, Step::Redirect));
        }
        let control = control
            .map(|fd| move_above(fd, low).unwrap_or_else(|| report_failure(fail, Step::Redirect)));

        // Ignored signals and the mask survive exec: undo what the parent
        // set. Rust ignores SIGPIPE (a child inheriting that never dies of a
        // closed pipe), and an ignored SIGTERM would defeat the grace period.
        let mut empty: libc::sigset_t = std::mem::zeroed();
        libc::sigemptyset(&mut empty);
        libc::sigprocmask(libc::SIG_SETMASK, &empty, std::ptr::null_mut());
        for signal in [libc::SIGPIPE, libc::SIGTERM, libc::SIGINT, libc::SIGHUP] {
            libc::signal(signal, libc::SIG_DFL);
        }

        // A new user namespace maps nobody until its id maps are written:
        // the reaper becomes its root, which is us.
        if let Some(maps) = p.namespaces.as_ref().and_then(|ns| ns.id_maps.as_ref()) {
            let files = [
                c"/proc/self/setgroups",
                c"/proc/self/uid_map",
                c"/proc/self/gid_map",
            ];
            for (file, text) in files.iter().zip(maps) {
                if !write_file(file, text) {
                    report_failure(fail, Step::UserMap);
                }
            }
        }

        // Dies with the parent's thread even if the parent is SIGKILLed; the
        // check closes the race with a parent that died before prctl. (The
        // reaper turns this into a signal it catches once it is ready.) In
        // a pid namespace the parent is out of sight; the reaper then finds
        // its socket closed instead.
        libc::prctl(libc::PR_SET_PDEATHSIG, libc::SIGKILL);
        if p.namespaces.is_none() && libc::getppid() != p.parent {
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
        match control {
            None => {
                // Every other descriptor closes; `fail` is CLOEXEC and closes at exec.
                close_fds(3, fail, p.fd_scan_limit);
                close_fds(fail + 1, libc::c_int::MAX, p.fd_scan_limit);
            }
            Some(control) => {
                // dup2 clears CLOEXEC: both stay open in the reaper, which
                // hands the failure pipe on to the child.
                if libc::dup2(fail, FAIL_FD) < 0 || libc::dup2(control, CONTROL_FD) < 0 {
                    report_failure(fail, Step::Redirect);
                }
                fail = FAIL_FD;
                close_fds(CONTROL_FD + 1, libc::c_int::MAX, p.fd_scan_limit);
            }
        }

        libc::execve(p.exec_c.as_ptr(), p.argv.as_ptr(), p.envp.as_ptr());
        let step = match control {
            None => Step::Exec,
            Some(_) => Step::ExecReaper,
        };
        report_failure(fail, step)
    }
}

/// Writes `text` to the file `path` in one `write`; whether all of it went.
///
/// # Safety
/// Async-signal-safe.
unsafe fn write_file(path: &std::ffi::CStr, text: &CString) -> bool {
    unsafe {
        let fd = libc::open(path.as_ptr(), libc::O_WRONLY | libc::O_CLOEXEC);
        if fd < 0 {
            return false;
        }
        let bytes = text.as_bytes();
        let written = libc::write(fd, bytes.as_ptr().cast(), bytes.len());
        libc::close(fd);
        written == bytes.len() as isize
    }
}

/// `fd` itself when at least `low`, else a CLOEXEC duplicate at or above `low`.
unsafe fn move_above(fd: RawFd, low: RawFd) -> Option<RawFd> {
    if fd >= low {
        return Some(fd);
    }
    let moved = unsafe { libc::fcntl(fd, libc::F_DUPFD_CLOEXEC, low) };
    (moved >= 0).then_some(moved)
}

/// Sends the failed step and `errno` to the parent, then exits the process.
///
/// # Safety
/// Async-signal-safe; ends the calling process.
pub(crate) unsafe fn report_failure(fail: RawFd, step: Step) -> ! {
    unsafe { report_errno(fail, step, *libc::__errno_location()) }
}

/// [`report_failure`] with the error given.
///
/// # Safety
/// Async-signal-safe; ends the calling process.
pub(crate) unsafe fn report_errno(fail: RawFd, step: Step, errno: i32) -> ! {
    unsafe {
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
