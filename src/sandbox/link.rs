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
/// Longest report line accepted.
const LINE_LIMIT: usize = 64 * 1024;

/// The reaper process and what it has reported so far.
pub(crate) struct ReaperLink {
    reaper: Pid,
    control: UnixStream,
    /// Bytes of a report line not complete yet.
    pending: Vec<u8>,
    child: Option<Pid>,
    exit: Option<Exit>,
    leaks: Vec<Leak>,
    done: bool,
    /// Whether KILL was sent: the reaper obeys it once and exits.
    kill_sent: bool,
    /// End of file on the socket: the reaper is gone or going.
    closed: bool,
    reaped: bool,
}

impl ReaperLink {
    /// The freshly forked reaper `reaper`, on our end of its control socket.
    pub(crate) fn new(reaper: Pid, control: UnixStream) -> ReaperLink {
        ReaperLink {
            reaper,
            control,
            pending: Vec::new(),
            child: None,
            exit: None,
            leaks: Vec::new(),
            done: false,
            kill_sent: false,
            closed: false,
            reaped: false,
        }
    }

    /// Reads the reaper's first report, the child's pid. The exec status
    /// pipe has closed by now, which the reaper lets happen only after
    /// sending it (or by dying), so this does not block for long.
    pub(crate) fn wait_started(&mut self) -> Result<(), SandboxError> {
        while self.child.is_none() && !self.closed {
            self.read(true)?;
        }
        if self.child.is_none() {
            return Err(self.lost());
        }
        self.control
            .set_nonblocking(true)
            .map_err(|e| SandboxError::Io("fcntl(O_NONBLOCK) on the reaper's socket", e))
    }

    /// The reaper's pid, also the session id of the child.
    pub(crate) fn reaper(&self) -> Pid {
        self.reaper
    }

    /// The child's pid, also its process group id.
    pub(crate) fn child(&self) -> Pid {
        self.child.unwrap_or(self.reaper)
    }

    /// The socket, readable when a report (or the end) arrives.
    pub(crate) fn fd(&self) -> BorrowedFd<'_> {
        self.control.as_fd()
    }

    /// The child's end, once reported; reads the reports that have arrived.
    pub(crate) fn exit(&mut self) -> Result<Option<Exit>, SandboxError> {
        if self.exit.is_none() && !self.closed {
            self.read(false)?;
        }
        if self.exit.is_none() && self.closed {
            return Err(self.lost());
        }
        Ok(self.exit)
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
            let millis = u16::try_from(left.as_millis().max(1)).unwrap_or(u16::MAX);
            let mut fds = [nix::poll::PollFd::new(
                self.control.as_fd(),
                nix::poll::PollFlags::POLLIN,
            )];
            match nix::poll::poll(&mut fds, nix::poll::PollTimeout::from(millis)) {
                Ok(_) | Err(nix::errno::Errno::EINTR) => {}
                Err(e) => return Err(SandboxError::os("poll", e)),
            }
            self.read(false)?;
        }
        self.reap_reaper();
        match self.exit {
            Some(exit) => Ok((exit, std::mem::take(&mut self.leaks), self.done)),
            None => Err(self.lost()),
        }
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
                Report::Started { pid } => self.child = Some(Pid::from_raw(pid)),
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
    /// end (killed by the child, say): how it ended. Its child dies with it
    /// (parent-death signal); the child's group gets SIGKILL on the way out.
    fn lost(&mut self) -> SandboxError {
        if let Some(child) = self.child {
            let _ = killpg(child, Signal::SIGKILL);
        }
        let how = match self.reap_reaper() {
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
