//! What holds a started child until the run ends: its process group, or
//! the reaper between the sandbox and the child. Either one kills and reaps
//! on drop, so no way out — an error, an early return, a panic — leaves a
//! process behind.

use super::SandboxError;
use super::leak::Placement;
use super::link::ReaperLink;
use super::supervise::Exit;
use nix::errno::Errno;
use nix::sys::signal::{Signal, killpg};
use nix::unistd::Pid;
use std::os::fd::{AsFd, BorrowedFd, FromRawFd, OwnedFd, RawFd};

/// A started child and what holds it.
pub(crate) enum Held {
    /// No reaper: the child leads its own session and process group, and
    /// group signals are all the sandbox has.
    Group(Group),
    /// The reaper holds the child and every descendant of it.
    Reaper(ReaperLink),
}

impl Held {
    /// The child's pid, also its process group id.
    pub(crate) fn child(&self) -> Pid {
        match self {
            Held::Group(group) => group.pid(),
            Held::Reaper(link) => link.child(),
        }
    }

    /// The child's process group and session, against which leaks are placed.
    pub(crate) fn placement(&self) -> Placement {
        let pgrp = self.child().as_raw();
        let session = match self {
            Held::Group(_) => pgrp,
            Held::Reaper(link) => link.reaper().as_raw(),
        };
        Placement { pgrp, session }
    }

    /// The child's end, if it has come.
    pub(crate) fn try_exit(&mut self) -> Result<Option<Exit>, SandboxError> {
        match self {
            Held::Group(group) => try_wait(group.pid),
            Held::Reaper(link) => link.exit(),
        }
    }

    /// A descriptor that turns readable when the child's end comes (a
    /// pidfd, the reaper's socket); `None` where the kernel refuses pidfds,
    /// and the exit must be polled on a tick.
    pub(crate) fn exit_fd(&self) -> Option<BorrowedFd<'_>> {
        match self {
            Held::Group(group) => group.pidfd.as_ref().map(|fd| fd.as_fd()),
            Held::Reaper(link) => Some(link.fd()),
        }
    }

    /// SIGTERM to the child's process group: the timeout.
    pub(crate) fn terminate(&mut self) {
        match self {
            Held::Group(group) => group.signal(Signal::SIGTERM),
            Held::Reaper(link) => link.terminate(),
        }
    }

    /// SIGKILL to everything held: the child's group, and under a reaper
    /// every other descendant too.
    pub(crate) fn kill(&mut self) {
        match self {
            Held::Group(group) => group.signal(Signal::SIGKILL),
            Held::Reaper(link) => link.kill(),
        }
    }

    /// Kills a reaper that a signal stopped (see
    /// [`ReaperLink::kill_if_stopped`]); nothing without one.
    pub(crate) fn kill_if_stopped(&mut self) {
        if let Held::Reaper(link) = self {
            link.kill_if_stopped();
        }
    }
}

/// The child's process group, from the moment `fork` returns.
pub(crate) struct Group {
    pid: Pid,
    pidfd: Option<OwnedFd>,
    reaped: bool,
}

impl Group {
    /// The group of the child `pid`, which leads it once it ran `setsid`.
    pub(crate) fn new(pid: Pid) -> Group {
        Group {
            pid,
            pidfd: pidfd_open(pid),
            reaped: false,
        }
    }

    /// Watches the exit on a tick, as where the kernel refuses pidfds.
    #[cfg(test)]
    pub(crate) fn forget_pidfd(&mut self) {
        self.pidfd = None;
    }

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

/// Waits for `pid`, retrying on EINTR; its status, or `None` when it is
/// not (or no longer) a child of this process.
pub(crate) fn reap(pid: Pid) -> Option<nix::sys::wait::WaitStatus> {
    loop {
        match nix::sys::wait::waitpid(pid, None) {
            Err(nix::errno::Errno::EINTR) => continue,
            Ok(status) => return Some(status),
            Err(_) => return None,
        }
    }
}

/// A pidfd for `pid` (Linux 5.3+): readable once the child has exited, so
/// one `poll` waits for output and exit together. `None` where the kernel or
/// a seccomp filter refuses it; the caller then polls `waitid` on a tick.
fn pidfd_open(pid: Pid) -> Option<OwnedFd> {
    // SAFETY: plain system call; a non-negative result is a fresh descriptor we own.
    let fd = unsafe { libc::syscall(libc::SYS_pidfd_open, pid.as_raw(), 0) };
    (fd >= 0).then(|| unsafe { OwnedFd::from_raw_fd(fd as RawFd) })
}

/// The child's exit, if it has exited, without reaping it (`WNOWAIT`): its
/// zombie keeps the process group id reserved until the group is killed.
fn try_wait(pid: Pid) -> Result<Option<Exit>, SandboxError> {
    // SAFETY: waitid fills the zeroed siginfo; si_pid/si_status are valid for SIGCHLD.
    unsafe {
        let mut info: libc::siginfo_t = std::mem::zeroed();
        loop {
            let rc = libc::waitid(
                libc::P_PID,
                pid.as_raw() as libc::id_t,
                &mut info,
                libc::WEXITED | libc::WNOHANG | libc::WNOWAIT,
            );
            if rc == 0 {
                break;
            }
            match Errno::last() {
                Errno::EINTR => continue,
                e => return Err(SandboxError::os("waitid", e)),
            }
        }
        if info.si_pid() == 0 {
            return Ok(None);
        }
        let status = info.si_status();
        Ok(Some(match info.si_code {
            libc::CLD_EXITED => Exit::Code(status),
            code => Exit::Signal {
                signal: status,
                core_dumped: code == libc::CLD_DUMPED,
            },
        }))
    }
}
