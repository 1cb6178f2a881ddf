//! One supervision loop per child: drains stdout and stderr, notices the
//! exit, enforces the deadline and the grace period, watches cancellation,
//! and kills what holds the child (its process group, or everything under
//! the reaper) before it returns.

use super::capture::Capture;
use super::held::Held;
use super::leak::{Leak, Placement};
use super::procfs;
use super::spawn::Spawned;
use super::{Cancel, Isolation, Limits, RunReport, SandboxError, Termination};
use nix::errno::Errno;
use nix::poll::{PollFd, PollFlags, PollTimeout, poll};
use std::os::fd::{AsFd, OwnedFd};
use std::time::{Duration, Instant};

/// How often a waiting loop looks at the cancel flag.
const CANCEL_TICK: Duration = Duration::from_millis(25);
/// How often the exit is polled where pidfds are unavailable.
const EXIT_TICK: Duration = Duration::from_millis(5);
/// Bytes read per `read` call.
const CHUNK: usize = 64 * 1024;
/// Longer limits are treated as this one: "never" without overflowing `Instant`.
const FOREVER: Duration = Duration::from_secs(100 * 365 * 24 * 3600);

/// How a child ended, as the kernel reports it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Exit {
    Code(i32),
    Signal {
        signal: i32,
        core_dumped: bool,
    },
    /// The reaper died by `signal` (or was stopped by it, and killed)
    /// before the child's end was known.
    SandboxKilled {
        signal: i32,
        stopped: bool,
    },
}

/// One output stream being drained.
struct Stream {
    fd: Option<OwnedFd>,
    capture: Capture,
}

impl Stream {
    /// Reads one chunk; closes the stream at end of file.
    fn read_some(&mut self, buf: &mut [u8]) -> Result<(), SandboxError> {
        let Some(fd) = &self.fd else { return Ok(()) };
        match nix::unistd::read(fd, buf) {
            Ok(0) => self.fd = None,
            Ok(n) => self.capture.push(&buf[..n]),
            Err(Errno::EINTR | Errno::EAGAIN) => {}
            Err(e) => return Err(SandboxError::os("reading the child's output", e)),
        }
        Ok(())
    }
}

/// Supervises a spawned child until it and its output are done. Once
/// `settled` says the child's work is done, the child gets
/// [`Limits::linger`] to exit by itself.
pub(crate) fn supervise(
    spawned: Spawned,
    limits: &Limits,
    cancel: &Cancel,
    start: Instant,
    settled: &mut dyn FnMut() -> bool,
    isolation: Isolation,
) -> Result<RunReport, SandboxError> {
    let Spawned {
        mut held,
        stdout,
        stderr,
    } = spawned;
    let pid = held.child();
    let placement = held.placement();
    let pipes: Vec<u64> = [&stdout, &stderr]
        .into_iter()
        .filter_map(|fd| procfs::pipe_inode(fd.as_fd()))
        .collect();
    let mut streams = [stdout, stderr].map(|fd| Stream {
        fd: Some(fd),
        capture: Capture::new(limits.output_head, limits.output_tail),
    });
    let mut buf = vec![0u8; CHUNK];

    let grace = limits.grace.min(FOREVER);
    let linger = limits.linger.min(FOREVER);
    let pipe_close_wait = limits.pipe_close_wait.min(FOREVER);
    let deadline = start + limits.timeout.min(FOREVER);
    let mut exit: Option<(Exit, Instant)> = None;
    let mut cancelled = false;
    let mut sigterm_at: Option<Instant> = None;
    let mut needed_sigkill = false;
    // When everything held was killed because the pipes stayed open after the exit.
    let mut pipes_killed_at: Option<Instant> = None;
    // When `settled` first said yes, and when it was last asked.
    let mut settled_at: Option<Instant> = None;
    let mut asked_at: Option<Instant> = None;
    let mut lingered = false;
    let mut leaked: Vec<Leak> = Vec::new();

    loop {
        if exit.is_none() {
            exit = held.try_exit()?.map(|e| (e, Instant::now()));
        }
        let open = streams.iter().any(|s| s.fd.is_some());
        if exit.is_some() && !open {
            break;
        }

        let now = Instant::now();
        let mut wake = now + CANCEL_TICK;
        match exit {
            None => {
                held.kill_if_stopped();
                if cancel.is_cancelled() && !cancelled {
                    held.kill();
                    cancelled = true;
                }
                if settled_at.is_none() && asked_at.is_none_or(|at| now >= at + CANCEL_TICK) {
                    asked_at = Some(now);
                    if settled() {
                        settled_at = Some(now);
                    }
                }
                match settled_at {
                    Some(at) if !lingered && sigterm_at.is_none() && now >= at + linger => {
                        held.kill();
                        lingered = true;
                    }
                    Some(at) if !lingered => wake = wake.min(at + linger),
                    _ => {}
                }
                if !cancelled && !lingered {
                    match sigterm_at {
                        None if now >= deadline => {
                            held.terminate();
                            sigterm_at = Some(now);
                        }
                        None => wake = wake.min(deadline),
                        Some(at) if !needed_sigkill && now >= at + grace => {
                            held.kill();
                            needed_sigkill = true;
                        }
                        Some(at) if !needed_sigkill => wake = wake.min(at + grace),
                        Some(_) => {}
                    }
                }
                if held.exit_fd().is_none() {
                    wake = wake.min(now + EXIT_TICK);
                }
            }
            Some((_, exited_at)) => {
                // The child is gone but something still holds its pipes:
                // a descendant. Give it `pipe_close_wait`, then kill.
                let pipes_deadline = if cancel.is_cancelled() {
                    now
                } else {
                    exited_at + pipe_close_wait
                };
                match pipes_killed_at {
                    None if now >= pipes_deadline => {
                        // The reaper finds its own leaks; a group is looked
                        // at before it is killed.
                        if let Held::Group(_) = held {
                            leaked.extend(group_members(placement, &pipes));
                        }
                        held.kill();
                        pipes_killed_at = Some(now);
                    }
                    None => wake = wake.min(pipes_deadline),
                    Some(at) if now >= at + pipe_close_wait => {
                        // Only a process the kill could not reach can still
                        // hold them (one that left the group, without a
                        // reaper): name it and stop waiting for it.
                        let listed: Vec<i32> = leaked.iter().map(|l| l.pid).collect();
                        leaked.extend(
                            pipe_holders(&pipes)
                                .filter(|s| !listed.contains(&s.pid))
                                .map(|s| Leak::observe(&s, placement, &pipes, false)),
                        );
                        break;
                    }
                    Some(at) => wake = wake.min(at + pipe_close_wait),
                }
            }
        }

        let timeout = wake.saturating_duration_since(Instant::now());
        let mut fds: Vec<PollFd> = streams
            .iter()
            .filter_map(|s| s.fd.as_ref())
            .map(|fd| PollFd::new(fd.as_fd(), PollFlags::POLLIN))
            .collect();
        if let (None, Some(fd)) = (exit, held.exit_fd()) {
            fds.push(PollFd::new(fd, PollFlags::POLLIN));
        }
        let millis = u16::try_from(timeout.as_millis().max(1)).unwrap_or(u16::MAX);
        match poll(&mut fds, PollTimeout::from(millis)) {
            Ok(_) | Err(Errno::EINTR) => {}
            Err(e) => return Err(SandboxError::os("poll", e)),
        }
        let ready: Vec<bool> = fds.iter().map(|fd| fd.any().unwrap_or(false)).collect();
        drop(fds);
        let mut ready = ready.into_iter();
        for stream in streams.iter_mut().filter(|s| s.fd.is_some()) {
            if ready.next().unwrap_or(false) {
                stream.read_some(&mut buf)?;
            }
        }
    }

    let Some((exit, _)) = exit else {
        return Err(SandboxError::Io(
            "supervising the child",
            std::io::Error::other("supervision ended before the child exited"),
        ));
    };
    let contained = match &mut held {
        Held::Group(group) => {
            group.kill_and_reap();
            false
        }
        Held::Reaper(link) => {
            let (_, found, done) = link.finish()?;
            // The reaper's word on a process it killed beats ours on one
            // that still held the pipes while it was at work.
            leaked.retain(|ours| found.iter().all(|theirs| theirs.pid != ours.pid));
            leaked.splice(0..0, found);
            done
        }
    };
    let wall = start.elapsed();
    let termination = match exit {
        Exit::SandboxKilled { signal, stopped } => Termination::SandboxKilled {
            signal,
            name: super::signal_name(signal),
            stopped,
        },
        _ if cancelled => Termination::Cancelled,
        _ if sigterm_at.is_some() => Termination::TimedOut {
            after: sigterm_at.unwrap_or(start).saturating_duration_since(start),
            needed_sigkill,
        },
        _ if lingered => Termination::DidNotExit { within: linger },
        Exit::Code(code) => Termination::Exited { code },
        Exit::Signal {
            signal,
            core_dumped,
        } => Termination::Signaled {
            signal,
            name: super::signal_name(signal),
            core_dumped,
        },
    };
    let [stdout, stderr] = streams.map(|s| s.capture.finish());
    Ok(RunReport {
        termination,
        stdout,
        stderr,
        leaked,
        contained,
        wall,
        pid: Some(pid.as_raw()),
        isolation,
        exhausted: Vec::new(),
    })
}

/// Live members of the child's process group other than the child, as
/// leaks about to be killed with the group.
fn group_members(placement: Placement, pipes: &[u64]) -> Vec<Leak> {
    procfs::all()
        .into_iter()
        .filter(|s| !s.zombie && s.pgrp == placement.pgrp && s.pid != placement.pgrp)
        .map(|s| Leak::observe(&s, placement, pipes, true))
        .collect()
}

/// Live processes other than this one that hold one of `pipes`.
fn pipe_holders(pipes: &[u64]) -> impl Iterator<Item = procfs::Stat> + '_ {
    let me = std::process::id() as i32;
    procfs::all()
        .into_iter()
        .filter(move |s| !s.zombie && s.pid != me && procfs::holds_pipe(s.pid, pipes))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::sandbox::held::Held;
    use crate::sandbox::spawn::{Prepared, spawn};
    use std::collections::BTreeMap;

    /// The loop without a pidfd (old kernels, seccomp): exits and timeouts
    /// are still noticed.
    #[test]
    fn works_without_pidfd() {
        let dir = tempfile::tempdir().expect("temp dir");
        let env: BTreeMap<_, _> = crate::sandbox::scrubbed_env().into_iter().collect();
        let run = |script: &str, timeout: Duration| {
            let args = ["-c".into(), script.into()];
            let prepared = Prepared::new("sh".as_ref(), &args, env.clone(), dir.path(), 64, None)
                .expect("prepare");
            let Ok(mut spawned) = spawn(&prepared) else {
                panic!("spawn");
            };
            let Held::Group(group) = &mut spawned.held else {
                panic!("no reaper was asked for");
            };
            group.forget_pidfd();
            let limits = Limits {
                timeout,
                grace: Duration::from_secs(5),
                ..Limits::default()
            };
            let isolation = Isolation::Session {
                reason: "no reaper".into(),
            };
            supervise(
                spawned,
                &limits,
                &Cancel::new(),
                Instant::now(),
                &mut || false,
                isolation,
            )
            .expect("supervise")
        };
        let done = run("echo hi; exit 3", Duration::from_secs(30));
        assert_eq!(done.termination, Termination::Exited { code: 3 });
        assert_eq!(done.stdout.text(), "hi\n");
        let hung = run("exec sleep 3600", Duration::from_millis(200));
        assert!(
            matches!(
                hung.termination,
                Termination::TimedOut {
                    needed_sigkill: false,
                    ..
                }
            ),
            "{:?}",
            hung.termination
        );
    }
}
