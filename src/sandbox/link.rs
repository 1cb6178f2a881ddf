//! The parent's side of the reaper: command bytes out, report lines in.

use super::SandboxError;
use super::held::reap;
use super::leak::Leak;
use super::reaper::{KILL, Report, TERMINATE};
use super::supervise::Exit;
use nix::sys::signal::{Signal, kill, killpg};
use nix::sys::wait::{WaitPidFlag, WaitStatus, waitpid};
use nix::unistd::Pid;
use std::io::{ErrorKind, Read};
use std::net::Shutdown;
use std::os::fd::{AsFd, AsRawFd, BorrowedFd};
use std::os::unix::net::UnixStream;
use std::time::{Duration, Instant};

/// Longest wait for the reaper to kill and reap everything once told to:
/// only a process stuck in the kernel (state D) takes longer.
const WIND_UP_LIMIT: Duration = Duration::from_secs(10);
/// Longest wait for the reaper to start the child: it builds the probe's
/// file system first, which takes milliseconds.
pub(crate) const START_LIMIT: Duration = Duration::from_secs(30);
/// How often a wait on the reaper looks whether it was stopped.
pub(crate) const STOP_TICK: Duration = Duration::from_millis(25);
/// Longest report line accepted.
const LINE_LIMIT: usize = 64 * 1024;

/// The reaper process and what it has reported so far.
pub(crate) struct ReaperLink {
    reaper: Pid,
    control: UnixStream,
    /// Bytes of a report line not complete yet.
    pending: Vec<u8>,
    /// The child's pid as the reaper reported it (its own number for it,
    /// in the probe's pid namespace when there is one).
    child: Option<Pid>,
    /// The child's pid as this process sees it, when known.
    host_child: Option<Pid>,
    /// Whether the reaper is pid 1 of the probe's pid namespace.
    namespaced: bool,
    /// The signal that stopped the reaper, which was then killed for it.
    stopped: Option<i32>,
    exit: Option<Exit>,
    leaks: Vec<Leak>,
    done: bool,
    /// Whether KILL was sent: the reaper obeys it once and exits.
    kill_sent: bool,
    /// End of file on the socket: the reaper is gone or going.
    closed: bool,
    reaped: bool,
    /// How the reaper ended, once reaped and not yet reported.
    status: Option<WaitStatus>,
}

impl ReaperLink {
    /// The freshly forked reaper `reaper`, on our end of its control socket.
    pub(crate) fn new(reaper: Pid, control: UnixStream, namespaced: bool) -> ReaperLink {
        ReaperLink {
            reaper,
            control,
            pending: Vec::new(),
            child: None,
            host_child: None,
            namespaced,
            stopped: None,
            exit: None,
            leaks: Vec::new(),
            done: false,
            kill_sent: false,
            closed: false,
            reaped: false,
            status: None,
        }
    }

    /// Reads the reaper's first report, the child's pid. The exec status
    /// pipe has closed by now, which the reaper lets happen only after
    /// sending it (or by dying), so this does not wait for long; a reaper
    /// that stays silent past [`START_LIMIT`] (stopped, say) is killed.
    pub(crate) fn wait_started(&mut self) -> Result<(), SandboxError> {
        self.control
            .set_nonblocking(true)
            .map_err(|e| SandboxError::Io("fcntl(O_NONBLOCK) on the reaper's socket", e))?;
        let deadline = Instant::now() + START_LIMIT;
        while self.child.is_none() && !self.closed {
            if Instant::now() >= deadline {
                let _ = kill(self.reaper, Signal::SIGKILL);
            }
            self.wait_readable(STOP_TICK)?;
            self.read(false)?;
        }
        if self.child.is_none() {
            return Err(self.lost());
        }
        Ok(())
    }

    /// Waits until the socket is readable or `at_most` has passed.
    fn wait_readable(&self, at_most: Duration) -> Result<(), SandboxError> {
        let millis = u16::try_from(at_most.as_millis().max(1)).unwrap_or(u16::MAX);
        let mut fds = [nix::poll::PollFd::new(
            self.control.as_fd(),
            nix::poll::PollFlags::POLLIN,
        )];
        match nix::poll::poll(&mut fds, nix::poll::PollTimeout::from(millis)) {
            Ok(_) | Err(nix::errno::Errno::EINTR) => Ok(()),
            Err(e) => Err(SandboxError::os("poll", e)),
        }
    }

    /// Kills the reaper if a signal stopped it: a stopped reaper answers
    /// nothing and holds the probe forever. Its end then shows on the
    /// socket, and [`ReaperLink::exit`] reports it.
    pub(crate) fn kill_if_stopped(&mut self) {
        if self.stopped.is_some() || self.reaped {
            return;
        }
        // SAFETY: waitid fills the zeroed siginfo; WNOWAIT leaves the state.
        let stopped = unsafe {
            let mut info: libc::siginfo_t = std::mem::zeroed();
            let rc = libc::waitid(
                libc::P_PID,
                self.reaper.as_raw() as libc::id_t,
                &mut info,
                libc::WSTOPPED | libc::WNOHANG | libc::WNOWAIT,
            );
            (rc == 0 && info.si_pid() != 0 && info.si_code == libc::CLD_STOPPED)
                .then(|| info.si_status())
        };
        if let Some(signal) = stopped {
            self.stopped = Some(signal);
            let _ = kill(self.reaper, Signal::SIGKILL);
        }
    }

    /// The reaper's pid, also the session id of the child.
    pub(crate) fn reaper(&self) -> Pid {
        self.reaper
    }

    /// The child's pid as this process sees it, also its process group
    /// id; the reaper's when the child's is not known.
    pub(crate) fn child(&self) -> Pid {
        self.host_child.unwrap_or(self.reaper)
    }

    /// The socket, readable when a report (or the end) arrives.
    pub(crate) fn fd(&self) -> BorrowedFd<'_> {
        self.control.as_fd()
    }

    /// The child's end, once reported; reads the reports that have
    /// arrived. A reaper that a signal ended (or that was stopped, and
    /// killed for it) before it reported the child's end ends the run as
    /// [`Exit::SandboxKilled`]: something in the probe did it.
    pub(crate) fn exit(&mut self) -> Result<Option<Exit>, SandboxError> {
        if self.exit.is_none() && !self.closed {
            self.read(false)?;
        }
        if self.exit.is_none() && self.closed {
            self.exit = Some(self.lost_exit()?);
        }
        Ok(self.exit)
    }

    /// How the run ends when the reaper went away before the child's end
    /// was known: killed by a signal, a verdict on the probe; anything
    /// else, a fault of the sandbox.
    fn lost_exit(&mut self) -> Result<Exit, SandboxError> {
        match self.reap_reaper() {
            Some(WaitStatus::Signaled(_, signal, _)) => {
                if !self.namespaced
                    && let Some(child) = self.host_child
                {
                    let _ = killpg(child, Signal::SIGKILL);
                }
                Ok(Exit::SandboxKilled {
                    signal: self.stopped.unwrap_or(signal as i32),
                    stopped: self.stopped.is_some(),
                })
            }
            status => {
                self.status = status;
                Err(self.lost())
            }
        }
    }

    /// SIGTERM to the child's process group.
    pub(crate) fn terminate(&self) {
        self.send(TERMINATE);
    }

    /// Every descendant killed, then the reaper reports and exits.
    pub(crate) fn kill(&mut self) {
        if !self.kill_sent {
            self.kill_sent = true;
            self.send(KILL);
        }
    }

    /// Winds the run up: tells the reaper to kill everything, waits until
    /// it has, and reaps it. Returns the child's end, the leaks, and
    /// whether the reaper finished its work (false when it had to be
    /// killed after [`WIND_UP_LIMIT`]).
    pub(crate) fn finish(&mut self) -> Result<(Exit, Vec<Leak>, bool), SandboxError> {
        self.kill();
        let deadline = Instant::now() + WIND_UP_LIMIT;
        while !self.closed {
            let left = deadline.saturating_duration_since(Instant::now());
            if left.is_zero() {
                let _ = kill(self.reaper, Signal::SIGKILL);
                break;
            }
            self.kill_if_stopped();
            self.wait_readable(left.min(STOP_TICK))?;
            self.read(false)?;
        }
        let exit = match self.exit {
            Some(exit) => exit,
            None => self.lost_exit()?,
        };
        self.reap_reaper();
        Ok((exit, std::mem::take(&mut self.leaks), self.done))
    }

    /// Reads what the socket holds (one read when `block`) and takes in
    /// every complete report.
    fn read(&mut self, block: bool) -> Result<(), SandboxError> {
        let mut buf = [0u8; 4096];
        loop {
            match self.control.read(&mut buf) {
                // A reaper that exits with a command unread resets the
                // connection instead of closing it: the same end.
                Ok(0) => {
                    self.closed = true;
                    return Ok(());
                }
                Err(e) if e.kind() == ErrorKind::ConnectionReset => {
                    self.closed = true;
                    return Ok(());
                }
                Ok(n) => {
                    self.pending.extend_from_slice(&buf[..n]);
                    self.absorb()?;
                    if block {
                        return Ok(());
                    }
                }
                Err(e) if e.kind() == ErrorKind::WouldBlock => return Ok(()),
                Err(e) if e.kind() == ErrorKind::Interrupted => {}
                Err(e) => return Err(SandboxError::Io("reading the reaper's reports", e)),
            }
        }
    }

    fn absorb(&mut self) -> Result<(), SandboxError> {
        while let Some(end) = self.pending.iter().position(|b| *b == b'\n') {
            let line: Vec<u8> = self.pending.drain(..=end).collect();
            let report: Report = serde_json::from_slice(&line).map_err(|e| {
                SandboxError::Reaper(format!(
                    "(pid {}) sent an unreadable report: {e}",
                    self.reaper
                ))
            })?;
            match report {
                Report::Started { pid, host_pid } => {
                    self.child = Some(Pid::from_raw(pid));
                    self.host_child = match host_pid {
                        Some(host) => Some(Pid::from_raw(host)),
                        None if !self.namespaced => Some(Pid::from_raw(pid)),
                        None => None,
                    };
                }
                Report::Exited { code } => self.exit = Some(Exit::Code(code)),
                Report::Signaled {
                    signal,
                    core_dumped,
                } => {
                    self.exit = Some(Exit::Signal {
                        signal,
                        core_dumped,
                    })
                }
                Report::Leaked { leak } => self.leaks.push(leak),
                Report::Done => self.done = true,
                Report::Flat { reason } => super::flat::record(reason),
            }
        }
        if self.pending.len() > LINE_LIMIT {
            return Err(SandboxError::Reaper(format!(
                "(pid {}) sent a report line over {LINE_LIMIT} bytes",
                self.reaper
            )));
        }
        Ok(())
    }

    /// The error for a reaper that went away before reporting the child's
    /// end, and not by a signal: how it ended. Its child dies with it
    /// (parent-death signal); the child's group gets SIGKILL on the way
    /// out (in a pid namespace, everything in it died with the reaper).
    fn lost(&mut self) -> SandboxError {
        if !self.namespaced
            && let Some(child) = self.host_child
        {
            let _ = killpg(child, Signal::SIGKILL);
        }
        let status = match self.status.take() {
            Some(status) => Some(status),
            None => self.reap_reaper(),
        };
        let how = match status {
            Some(WaitStatus::Exited(_, code)) => format!("exited with code {code}"),
            Some(WaitStatus::Signaled(_, signal, _)) => format!("was killed by {signal}"),
            _ => "went away".to_owned(),
        };
        SandboxError::Reaper(format!(
            "(pid {}) {how} before the child's end was known",
            self.reaper
        ))
    }

    fn reap_reaper(&mut self) -> Option<WaitStatus> {
        if self.reaped {
            return None;
        }
        self.reaped = true;
        reap(self.reaper)
    }

    /// One command byte; a reaper that is gone is not an error here (its
    /// end shows on the socket).
    fn send(&self, command: u8) {
        // MSG_NOSIGNAL: a library user's process may not ignore SIGPIPE.
        // SAFETY: plain system call on our own socket with a one-byte buffer.
        unsafe {
            libc::send(
                self.control.as_raw_fd(),
                (&raw const command).cast(),
                1,
                libc::MSG_NOSIGNAL,
            );
        }
    }
}

impl Drop for ReaperLink {
    /// End of file on its socket winds the reaper up; give it
    /// [`WIND_UP_LIMIT`], then SIGKILL.
    fn drop(&mut self) {
        if self.reaped {
            return;
        }
        let _ = self.control.shutdown(Shutdown::Both);
        let deadline = Instant::now() + WIND_UP_LIMIT;
        loop {
            match waitpid(self.reaper, Some(WaitPidFlag::WNOHANG)) {
                Ok(WaitStatus::StillAlive) if Instant::now() < deadline => {
                    std::thread::sleep(Duration::from_millis(2));
                }
                Ok(WaitStatus::StillAlive) => {
                    let _ = kill(self.reaper, Signal::SIGKILL);
                    reap(self.reaper);
                    break;
                }
                Err(nix::errno::Errno::EINTR) => {}
                _ => break,
            }
        }
        self.reaped = true;
    }
}
