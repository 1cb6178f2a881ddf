//! The reaper (child side): `preflight __reaper -- PROGRAM ARG…`, a small
//! single-threaded process between the sandbox and its child that holds
//! every descendant of the child, wherever it goes.
//!
//! A process group cannot hold a process that calls `setpgid` or `setsid`
//! (a compile server, a worker pool, a daemon), and a process that closes
//! its output is invisible to the pipes. The reaper sees them all: it is a
//! child subreaper (`PR_SET_CHILD_SUBREAPER`), so every orphan among its
//! descendants is reparented to it instead of to init. When the parent
//! winds the run up, the reaper kills every descendant still alive,
//! reaps it, and reports it with its command line.
//!
//! The sandbox starts the reaper in the probe's session with descriptors
//! 0–2 for the child, `FAIL_FD` (the exec status pipe, see `spawn`) and
//! `CONTROL_FD` (a socket to the parent). The reaper forks the child into
//! a process group of its own in that session and executes it, then speaks
//! on the socket: JSON lines `Report` out, single command bytes in
//! (`TERMINATE`, `KILL`). End of file on the socket (the parent died,
//! even by SIGKILL), SIGHUP (its parent-death signal), SIGTERM or SIGINT
//! wind it up as `KILL` does; so does the end of the child when it
//! leaves no other process behind.
//!
//! Before anything else the reaper reads its set-up message from the socket.
//! When the sandbox made namespaces for the probe, the reaper is pid 1 of
//! the probe's pid namespace (every process of the probe dies with it, and
//! none can signal or stop it) and alone in a fresh mount namespace: it
//! builds the probe's file system (`sandbox::mounts`), and forks the child
//! into a user namespace of its own, where it holds no capability over the
//! reaper or its mounts. Signals from inside the probe never wind it up;
//! it is never dumpable, so a probe cannot read its memory or descriptors.

use super::leak::{Leak, Placement};
use super::mounts::{self, Built, Layout};
use super::privileges;
use super::procfs;
use super::spawn::{Step, report_errno, report_failure};
use serde::{Deserialize, Serialize};
use std::collections::BTreeSet;
use std::ffi::OsString;
use std::io::{Read, Write};
use std::os::fd::{AsRawFd, BorrowedFd, FromRawFd, OwnedFd, RawFd};
use std::os::unix::net::UnixStream;

mod child;
use child::fork_child;

/// The hidden subcommand of `preflight` that runs the reaper.
pub const ARG: &str = "__reaper";
/// The exec status pipe, handed on to the child (see `spawn`).
pub(crate) const FAIL_FD: RawFd = 3;
/// The socket to the parent.
pub(crate) const CONTROL_FD: RawFd = 4;
/// Command: SIGTERM to the child's process group (the timeout).
pub(crate) const TERMINATE: u8 = b'T';
/// Command: kill every descendant, report, exit.
pub(crate) const KILL: u8 = b'K';
/// Most leaks listed in one report; a fork bomb is not worth a megabyte.
const MAX_LEAKS: usize = 256;
/// Wind-up rounds in a row that find a child to wait for but none to kill
/// (only possible without a readable `/proc`) before the reaper gives up.
const MAX_FRUITLESS_ROUNDS: u32 = 50;

/// Longest set-up message accepted from the parent.
const SETUP_LIMIT: usize = 1 << 20;

/// What the parent tells the reaper first: a length (4 bytes, native
/// order), then this as JSON.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub(crate) struct Setup {
    /// The namespaces the sandbox made for the probe, if any.
    pub(crate) namespaces: Option<Namespaced>,
    /// Whether the child may hand its place over ([`Reaper::adopt`]): a
    /// forked probe's client (`probe::fork`).
    #[serde(default)]
    pub(crate) handoff: bool,
}

/// A probe in namespaces of its own: its file system, and its user.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub(crate) struct Namespaced {
    /// What the probe sees.
    pub(crate) layout: Layout,
    /// The child's user namespace maps every id to itself (the reaper is
    /// root of the machine); otherwise it maps `uid` and `gid`, the
    /// parent's, to the reaper's root, which they are.
    pub(crate) identity: bool,
    /// The parent's effective user id.
    pub(crate) uid: u32,
    /// The parent's effective group id.
    pub(crate) gid: u32,
    /// The probe's `RLIMIT_NPROC`, which its user namespace counts apart
    /// (but for root's, which nothing bounds: a cgroup does).
    pub(crate) pids: u64,
}

impl Setup {
    /// The message as sent on the socket.
    pub(crate) fn encode(&self) -> Vec<u8> {
        let json = serde_json::to_vec(self).unwrap_or_default();
        let mut message = (json.len() as u32).to_ne_bytes().to_vec();
        message.extend(json);
        message
    }
}

/// What the reaper tells the parent, one JSON object per line.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case", tag = "report")]
pub(crate) enum Report {
    /// The child was forked; its exec status follows on the exec status pipe.
    Started {
        /// The child's pid, also its process group id (in the probe's pid
        /// namespace, when it has one).
        pid: i32,
        /// The child's pid as the parent sees it, when it differs.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        host_pid: Option<i32>,
    },
    /// The child exited with this status.
    Exited {
        /// The exit status.
        code: i32,
    },
    /// A signal ended the child.
    Signaled {
        /// The signal.
        signal: i32,
        /// Whether the kernel reported a core dump.
        core_dumped: bool,
    },
    /// A descendant that was still alive at the wind-up, now killed.
    Leaked {
        /// What it was.
        leak: Leak,
    },
    /// Every descendant is dead and reaped; the reaper exits.
    Done,
    /// Linux refused an overlay: the probe got a private folder of the
    /// host's entries, read-only, in its place (`super::flat`).
    Flat {
        /// Why (`mount overlay: Operation not permitted`).
        reason: String,
    },
}

/// `preflight __reaper` run by hand: the descriptors it needs are not there.
#[derive(Debug, thiserror::Error)]
#[error(
    "`preflight {ARG}` is started by preflight's sandbox, not by hand (descriptor {CONTROL_FD} is not its control socket)"
)]
pub struct NotStarted;

/// Runs the reaper for `command` (program, then its arguments); the exit
/// status for the process. Set-up failures go to the parent on the exec
/// status pipe and end the process with status 127.
pub fn main(command: &[OsString]) -> Result<u8, NotStarted> {
    if !is_socket(CONTROL_FD) || command.is_empty() {
        return Err(NotStarted);
    }
    // SAFETY: the descriptors were checked above; set-up failures are
    // reported on the exec status pipe and end the process.
    let reaper = unsafe { Reaper::start(command) };
    Ok(reaper.serve())
}

fn is_socket(fd: RawFd) -> bool {
    // SAFETY: fstat fills the zeroed struct, or fails on a closed descriptor.
    unsafe {
        let mut stat: libc::stat = std::mem::zeroed();
        libc::fstat(fd, &mut stat) == 0 && stat.st_mode & libc::S_IFMT == libc::S_IFSOCK
    }
}

struct Reaper {
    me: i32,
    child: i32,
    /// The child's group and session, against which leaks are placed.
    placement: Placement,
    /// The inodes of the child's stdout and stderr pipes.
    pipes: Vec<u64>,
    control: UnixStream,
    signals: OwnedFd,
    child_reaped: bool,
    /// Whether the sandbox signalled the child's group: its members then
    /// die with the probe and are no leaks.
    group_signaled: bool,
    /// The probe's working directory, when the reaper built it.
    built: Option<Built>,
    /// The parent's pid, when the reaper sees it (no pid namespace).
    parent: i32,
    /// Whether the child may still hand its place over.
    handoff: bool,
}

impl Reaper {
    /// Becomes a subreaper, forks and executes the child, and tells the parent.
    ///
    /// # Safety
    /// Only in the reaper process, with [`FAIL_FD`] and [`CONTROL_FD`] set up.
    unsafe fn start(command: &[OsString]) -> Reaper {
        unsafe {
            // Neither may reach the child past its exec.
            for fd in [FAIL_FD, CONTROL_FD] {
                libc::fcntl(fd, libc::F_SETFD, libc::FD_CLOEXEC);
            }
            let mut control = UnixStream::from_raw_fd(CONTROL_FD);
            let Some(setup) = read_setup(&mut control) else {
                report_errno(FAIL_FD, Step::ReaperSetup, libc::EPROTO)
            };
            // A probe of the same user must not read the reaper's memory,
            // environment or descriptors.
            let _ = nix::sys::prctl::set_dumpable(false);
            let mut built = setup.namespaces.as_ref().map(|ns| {
                mounts::build(&ns.layout)
                    .unwrap_or_else(|f| report_errno(FAIL_FD, f.step, f.errno as i32))
            });
            if libc::prctl(libc::PR_SET_CHILD_SUBREAPER, 1) < 0 {
                report_failure(FAIL_FD, Step::Subreaper);
            }
            let mut mask: libc::sigset_t = std::mem::zeroed();
            libc::sigemptyset(&mut mask);
            for signal in [libc::SIGCHLD, libc::SIGHUP, libc::SIGTERM, libc::SIGINT] {
                libc::sigaddset(&mut mask, signal);
            }
            libc::sigprocmask(libc::SIG_BLOCK, &mask, std::ptr::null_mut());
            let signals = libc::signalfd(-1, &mask, libc::SFD_CLOEXEC | libc::SFD_NONBLOCK);
            if signals < 0 {
                report_failure(FAIL_FD, Step::ReaperSignals);
            }
            let signals = OwnedFd::from_raw_fd(signals);
            // Until now the parent's death SIGKILLed the reaper (set before
            // its exec) while nothing was forked. As pid 1 of the probe's
            // namespace it stays so: its death takes every process of the
            // probe with it. Without one it must wind up instead, so the
            // signal becomes one it reads.
            if setup.namespaces.is_none() {
                libc::prctl(libc::PR_SET_PDEATHSIG, libc::SIGHUP);
            }

            let pipes = [1, 2]
                .into_iter()
                .filter_map(|fd| procfs::pipe_inode(BorrowedFd::borrow_raw(fd)))
                .collect();
            let me = libc::getpid();
            let parent = libc::getppid();
            let host_proc = built.as_mut().and_then(Built::take_host_proc);
            let (child, host_pid, gate) =
                fork_child(command, me, setup.namespaces.as_ref(), host_proc.as_ref());
            drop(host_proc);
            let mut reaper = Reaper {
                me,
                child,
                placement: Placement {
                    pgrp: child,
                    session: libc::getsid(0),
                },
                pipes,
                control,
                signals,
                child_reaped: false,
                group_signaled: false,
                built,
                parent,
                handoff: setup.handoff,
            };
            if let Some(reason) = reaper.built.as_mut().and_then(|b| b.flat.take()) {
                reaper.send(&Report::Flat { reason });
            }
            reaper.send(&Report::Started {
                pid: child,
                host_pid,
            });
            // Only now may the child run its command: nothing it does
            // (killing this reaper, say) can come before its start is
            // reported.
            let _ = nix::unistd::write(&gate, b"g");
            drop(gate);
            libc::close(FAIL_FD);
            // The parent sees the end of the output once the child and its
            // descendants let go of it: the reaper must not hold it too.
            let null = libc::open(c"/dev/null".as_ptr(), libc::O_RDWR | libc::O_CLOEXEC);
            if null >= 0 {
                for fd in 0..=2 {
                    libc::dup2(null, fd);
                }
                libc::close(null);
            }
            reaper
        }
    }

    /// Waits for the child, relays its end, and obeys the parent.
    fn serve(mut self) -> u8 {
        loop {
            let mut fds = [
                libc::pollfd {
                    fd: self.control.as_raw_fd(),
                    events: libc::POLLIN,
                    revents: 0,
                },
                libc::pollfd {
                    fd: self.signals.as_raw_fd(),
                    events: libc::POLLIN,
                    revents: 0,
                },
            ];
            // SAFETY: two valid pollfd structs.
            if unsafe { libc::poll(fds.as_mut_ptr(), 2, -1) } < 0 {
                continue;
            }
            if fds[1].revents != 0 {
                for (signal, sender) in self.drain_signals() {
                    if signal != libc::SIGCHLD && self.obeys(sender) {
                        return self.wind_up();
                    }
                }
                // Nothing left to hold (the common end): finish without
                // waiting to be told, which spares the parent a round trip.
                // No process can appear later: only a descendant could
                // start one, and every orphan comes here before its
                // parent's end can be reaped.
                if !self.reap() && self.child_reaped {
                    return self.wind_up();
                }
            }
            if fds[0].revents != 0 {
                let mut buf = [0u8; 64];
                match self.control.read(&mut buf) {
                    // The parent is gone: nobody will ever say KILL.
                    Ok(0) => return self.wind_up(),
                    Ok(n) => {
                        for command in &buf[..n] {
                            match *command {
                                TERMINATE => self.terminate(),
                                KILL => return self.wind_up(),
                                _ => {}
                            }
                        }
                    }
                    Err(e) if e.kind() == std::io::ErrorKind::Interrupted => {}
                    Err(_) => return self.wind_up(),
                }
            }
        }
    }

    /// Whether a signal from `sender` winds the reaper up: one from
    /// outside the probe's pid namespace (pid 0 here), from the parent, or
    /// from the kernel; never one a probe sent.
    fn obeys(&self, sender: i32) -> bool {
        sender == 0 || (self.built.is_none() && sender == self.parent)
    }

    /// The signals pending on the signalfd, with their senders' pids.
    fn drain_signals(&self) -> Vec<(i32, i32)> {
        let mut found = Vec::new();
        loop {
            // SAFETY: reads whole signalfd_siginfo records into a zeroed one.
            let mut info: libc::signalfd_siginfo = unsafe { std::mem::zeroed() };
            let size = std::mem::size_of::<libc::signalfd_siginfo>();
            let n = unsafe { libc::read(self.signals.as_raw_fd(), (&raw mut info).cast(), size) };
            if n != size as isize {
                return found;
            }
            found.push((info.ssi_signo as i32, info.ssi_pid as i32));
        }
    }

    /// Reaps every child that has ended, relaying the child's own end;
    /// whether any child is left.
    fn reap(&mut self) -> bool {
        loop {
            let mut status = 0;
            // SAFETY: plain system call with a valid status pointer.
            let pid = unsafe { libc::waitpid(-1, &mut status, libc::WNOHANG) };
            if pid == 0 {
                return true;
            }
            if pid < 0 {
                if nix::errno::Errno::last() == nix::errno::Errno::EINTR {
                    continue;
                }
                return false;
            }
            if pid == self.child {
                if self.handoff && libc::WIFEXITED(status) && libc::WEXITSTATUS(status) == 0 {
                    self.handoff = false;
                    if self.adopt() {
                        continue;
                    }
                }
                self.child_reaped = true;
                let report = if libc::WIFEXITED(status) {
                    Report::Exited {
                        code: libc::WEXITSTATUS(status),
                    }
                } else {
                    Report::Signaled {
                        signal: libc::WTERMSIG(status),
                        core_dumped: libc::WCOREDUMP(status),
                    }
                };
                self.send(&report);
            }
        }
    }

    /// The child handed its place over: it exited with status 0 leaving
    /// one child of the reaper stopped, the probe a fork server forked into
    /// the probe's namespaces and that was reparented here when the
    /// process that forked it ended (`probe::fork`). That process becomes
    /// the child: its end is the probe's, its group is the one signalled,
    /// and it is let go on (`SIGCONT`). Whether there was one to adopt.
    ///
    /// Nothing else can be a stopped child here: the client forks nothing,
    /// and the probe, stopped before it ran anything, has forked nothing
    /// yet. Anything else (none, or more than one) is not adopted, and the
    /// child's own end is the run's.
    fn adopt(&mut self) -> bool {
        let stopped: Vec<procfs::Stat> = procfs::all()
            .into_iter()
            .filter(|stat| stat.ppid == self.me && stat.stopped && stat.pid != self.child)
            .collect();
        let [probe] = stopped.as_slice() else {
            return false;
        };
        self.child = probe.pid;
        self.placement = Placement {
            pgrp: probe.pgrp,
            session: probe.session,
        };
        // SAFETY: plain system call on our own unreaped child.
        unsafe { libc::kill(probe.pid, libc::SIGCONT) };
        true
    }

    /// SIGTERM to the child's group, while the child's zombie still holds
    /// the group id: once it is reaped the id may name someone else's group.
    fn terminate(&mut self) {
        self.group_signaled = true;
        if !self.child_reaped {
            // SAFETY: plain system call on our own unreaped child's group.
            unsafe { libc::killpg(self.child, libc::SIGTERM) };
        }
    }

    /// Kills the child's group, then every other descendant until none is
    /// left, reports the ones that outlived the child, and returns the exit
    /// status of the reaper. Without a readable `/proc` it cannot find what
    /// is left: it gives up after [`MAX_FRUITLESS_ROUNDS`] and does not say
    /// `done`.
    ///
    /// Only direct children are killed: their pids stay reserved until
    /// they are reaped here, so no signal can reach a stranger that reused
    /// a number. Their own children are reparented here as they die and
    /// are found in the next round.
    fn wind_up(mut self) -> u8 {
        if !self.child_reaped {
            self.group_signaled = true;
            // SAFETY: plain system calls on our own unreaped child.
            unsafe {
                libc::killpg(self.child, libc::SIGKILL);
                libc::kill(self.child, libc::SIGKILL);
            }
        }
        let mut leaks = Vec::new();
        let mut seen = BTreeSet::new();
        let mut fruitless = 0;
        let all_reaped = loop {
            if !self.reap() {
                break true;
            }
            let mut killed_any = false;
            for stat in procfs::all() {
                if stat.ppid != self.me || stat.zombie {
                    continue;
                }
                let probe = stat.pid == self.child
                    || (self.group_signaled && stat.pgrp == self.placement.pgrp);
                if seen.insert(stat.pid) && !probe && leaks.len() < MAX_LEAKS {
                    leaks.push(Leak::observe(&stat, self.placement, &self.pipes, true));
                }
                // SAFETY: our own child, unreaped: the pid is still its.
                unsafe { libc::kill(stat.pid, libc::SIGKILL) };
                killed_any = true;
            }
            if killed_any {
                fruitless = 0;
                self.wait_for_signal(100);
            } else {
                fruitless += 1;
                if fruitless > MAX_FRUITLESS_ROUNDS {
                    break false;
                }
                self.wait_for_signal(20);
            }
        };
        for leak in leaks {
            self.send(&Report::Leaked { leak });
        }
        if let Some(built) = &self.built {
            built.copy_back();
        }
        // Without `done` the parent does not claim containment.
        if all_reaped {
            self.send(&Report::Done);
        }
        0
    }

    /// Waits up to `millis` for a signal (a child's end), and drops it.
    fn wait_for_signal(&self, millis: i32) {
        let mut fd = libc::pollfd {
            fd: self.signals.as_raw_fd(),
            events: libc::POLLIN,
            revents: 0,
        };
        // SAFETY: one valid pollfd struct.
        unsafe { libc::poll(&mut fd, 1, millis) };
        self.drain_signals();
    }

    /// One report line to the parent; a parent that is gone is not an error.
    fn send(&mut self, report: &Report) {
        if let Ok(mut line) = serde_json::to_vec(report) {
            line.push(b'\n');
            let _ = self.control.write_all(&line);
        }
    }
}

/// Reads the set-up message from the parent, or `None` if it is not one.
fn read_setup(control: &mut UnixStream) -> Option<Setup> {
    let mut length = [0u8; 4];
    control.read_exact(&mut length).ok()?;
    let length = u32::from_ne_bytes(length) as usize;
    if length > SETUP_LIMIT {
        return None;
    }
    let mut json = vec![0u8; length];
    control.read_exact(&mut json).ok()?;
    serde_json::from_slice(&json).ok()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reports_are_json_lines() {
        let line = serde_json::to_string(&Report::Signaled {
            signal: 11,
            core_dumped: false,
        })
        .expect("json");
        assert_eq!(
            line,
            r#"{"report":"signaled","signal":11,"core_dumped":false}"#
        );
        for report in [
            Report::Started {
                pid: 7,
                host_pid: Some(4242),
            },
            Report::Exited { code: 3 },
            Report::Done,
        ] {
            let text = serde_json::to_string(&report).expect("json");
            assert_eq!(serde_json::from_str::<Report>(&text).ok(), Some(report));
        }
    }
}
