//! A bench child: one sandboxed child of an executor (the python
//! executor's `bench.py`, or the cuda executor's bench mode) that stays alive
//! across rounds, so that its variant is imported, verified and warmed up
//! once and then timed in as many rounds as the caller asks for.
//!
//! The sandbox gives the child `/dev/null` as stdin and closes every other
//! descriptor, so the two sides talk through two FIFOs in the sandbox
//! directory instead: `preflight_commands` (one JSON line per round,
//! `{"round": N, "samples": K}`; end of file ends the run) and
//! `preflight_replies` (a line after the child is ready and after each
//! round, only to wake the parent). The facts themselves — the `bench`
//! event, the samples, a failure — travel in the ordinary channel file,
//! read as it grows. The parent blocks in `poll` on the replies, never
//! spinning, so that it takes no CPU from the child it is timing.

use super::python::{CHANNEL_NAME, PythonExecutor};
use super::{Executor, Job, ProbeError, SmokeSource, Subject, torch_device};
use crate::protocol::{
    BenchSetup, ChannelProblems, Event, Evidence, ExecutorKind, PROTOCOL_VERSION, Sample, Tail,
};
use crate::sandbox::{
    Cancel, ChildCommand, Limits, RunReport, Sandbox, SandboxError, Termination, View,
};
use nix::poll::{PollFd, PollFlags, PollTimeout, poll};
use std::fs::File;
use std::io::{Read, Write};
use std::os::fd::AsFd;
use std::os::unix::fs::OpenOptionsExt;
use std::path::{Path, PathBuf};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

const COMMANDS: &str = "preflight_commands";
const REPLIES: &str = "preflight_replies";
/// The longest the parent sleeps in `poll` before it looks at the child's
/// exit and the cancel flag again.
const TICK: Duration = Duration::from_millis(25);

/// What a bench child times.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum BenchRole {
    /// The variant's own call.
    Variant,
    /// The workload's reference computation (`verify_<workload>`), in a
    /// child of its own like any variant.
    Reference,
}

impl BenchRole {
    fn as_str(self) -> &'static str {
        match self {
            BenchRole::Variant => "variant",
            BenchRole::Reference => "reference",
        }
    }
}

/// How a bench child times.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct BenchSpec {
    /// What it times.
    pub role: BenchRole,
    /// The workload of the hub's benchmark convention (`benchmark_<w>`);
    /// `None`: the smoke file's `smoke`, or the smallest workload.
    pub workload: Option<String>,
    /// Whether the L2 cache is flushed before each sample on a GPU.
    pub flush_l2: bool,
}

/// The child stopped answering: it failed, exited, hung or was cancelled.
/// [`BenchChild::finish`] says how.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Stopped;

type Run = JoinHandle<(Sandbox, Result<RunReport, SandboxError>)>;

/// One live bench child.
#[derive(Debug)]
pub struct BenchChild {
    executor: ExecutorKind,
    commands: Option<File>,
    replies: File,
    /// The channel's name in the child's working directory, read through
    /// `view` while it runs.
    channel: PathBuf,
    view: View,
    tail: Tail,
    /// Every event but the samples, in order: the evidence of the run.
    events: Vec<Event>,
    problems: ChannelProblems,
    setup: Option<BenchSetup>,
    failed: bool,
    run: Option<Run>,
    own: Cancel,
    interrupt: Cancel,
    /// When the child stopped answering within its deadline, how long it was given.
    hung: Option<Duration>,
}

/// An executor that times its subjects in bench children: one shape for
/// both executors, so that a bench session starts every participant the
/// same way ([`crate::run::Executors::bench_executor`] picks the one).
pub trait BenchExecutor: Executor {
    /// Start one bench child for `jobs`, every one a subject this executor
    /// accepts, labelled `label` in its samples: a hub variant is one job
    /// (the python executor), a native target its module jobs, all loaded
    /// by one child and timed together (the cuda executor). The first
    /// job's device and limits are the child's; `interrupt` stops it with
    /// everything else.
    fn start_bench(
        &self,
        jobs: &[&Job],
        label: &str,
        spec: &BenchSpec,
        interrupt: &Cancel,
    ) -> Result<BenchChild, ProbeError>;
}

/// A hub variant is timed alone: one job, whose variant names its samples.
impl BenchExecutor for PythonExecutor {
    fn start_bench(
        &self,
        jobs: &[&Job],
        _label: &str,
        spec: &BenchSpec,
        interrupt: &Cancel,
    ) -> Result<BenchChild, ProbeError> {
        match jobs {
            [job] => self.bench(job, spec, interrupt),
            _ => Err(ProbeError::Unsupported {
                executor: ExecutorKind::Python,
                subject: format!("{} jobs in one bench child", jobs.len()),
            }),
        }
    }
}

impl PythonExecutor {
    /// Start a bench child for the hub variant of `job` (its smoke source
    /// is the workload); `interrupt` stops it with everything else.
    pub fn bench(
        &self,
        job: &Job,
        spec: &BenchSpec,
        interrupt: &Cancel,
    ) -> Result<BenchChild, ProbeError> {
        let Subject::Variant { name, path } = &job.subject else {
            return Err(ProbeError::Unsupported {
                executor: ExecutorKind::Python,
                subject: job.subject.describe(),
            });
        };
        let sandbox = super::kernel_sandbox(job.subject.protected())?;
        let dir = sandbox.dir().to_path_buf();
        let fifos = Fifos::make(&dir)?;
        let mut command = self.command(&dir, path, &torch_device(name, job.device), &job.smoke)?;
        command.args.extend(
            [
                "--bench",
                spec.role.as_str(),
                "--flush",
                if spec.flush_l2 { "yes" } else { "no" },
            ]
            .map(Into::into),
        );
        command.args.extend([
            "--commands".into(),
            fifos.commands_path.clone().into(),
            "--replies".into(),
            fifos.replies_path.clone().into(),
        ]);
        if let (Some(w), SmokeSource::Benchmarks { .. }) = (&spec.workload, &job.smoke) {
            command.args.extend(["--workload".into(), w.into()]);
        }
        BenchChild::spawn(
            ExecutorKind::Python,
            sandbox,
            fifos,
            command,
            job.limits.clone(),
            dir.join(CHANNEL_NAME),
            interrupt,
        )
    }
}

/// The two FIFOs of a bench child, made in its sandbox directory, with the
/// parent's ends open.
#[derive(Debug)]
pub(crate) struct Fifos {
    /// Where the child reads its commands.
    pub(crate) commands_path: PathBuf,
    /// Where the child writes its wake-up lines.
    pub(crate) replies_path: PathBuf,
    commands: File,
    replies: File,
}

impl Fifos {
    /// Make both FIFOs in `dir` and open the parent's ends.
    pub(crate) fn make(dir: &Path) -> Result<Fifos, ProbeError> {
        let fifo = |name: &str| {
            let path = dir.join(name);
            nix::unistd::mkfifo(
                &path,
                nix::sys::stat::Mode::S_IRUSR | nix::sys::stat::Mode::S_IWUSR,
            )
            .map_err(|e| ProbeError::Setup {
                path: path.clone(),
                source: e.into(),
            })?;
            Ok::<_, ProbeError>(path)
        };
        let (commands_path, replies_path) = (fifo(COMMANDS)?, fifo(REPLIES)?);
        // Read-write: the open does not wait for the child, and the child's
        // open for reading finds a writer. Its end of file is our close.
        let commands = open(&commands_path, libc::O_RDWR)?;
        // Non-blocking read end: the child's open for writing finds a reader.
        let replies = open(&replies_path, libc::O_RDONLY | libc::O_NONBLOCK)?;
        Ok(Fifos {
            commands_path,
            replies_path,
            commands,
            replies,
        })
    }
}

impl BenchChild {
    /// Run `command` in `sandbox` on a thread of its own: a bench child of
    /// `executor` that talks through `fifos` and writes its events to
    /// `channel`. What differs between executors is only the command.
    pub(crate) fn spawn(
        executor: ExecutorKind,
        sandbox: Sandbox,
        fifos: Fifos,
        command: ChildCommand,
        limits: Limits,
        channel: PathBuf,
        interrupt: &Cancel,
    ) -> Result<BenchChild, ProbeError> {
        let own = Cancel::new();
        let cancel = own.clone();
        let view = sandbox.view();
        let channel = channel
            .strip_prefix(sandbox.dir())
            .map(Path::to_path_buf)
            .unwrap_or(channel);
        let run = std::thread::Builder::new()
            .name("preflight-bench".into())
            .spawn(move || {
                let report = sandbox.run(&command, &limits, &cancel);
                (sandbox, report)
            })
            .map_err(|e| ProbeError::Sandbox(SandboxError::Io("spawning a thread", e)))?;
        Ok(BenchChild {
            executor,
            commands: Some(fifos.commands),
            replies: fifos.replies,
            channel,
            view,
            tail: Tail::default(),
            events: Vec::new(),
            problems: ChannelProblems::default(),
            setup: None,
            failed: false,
            run: Some(run),
            own,
            interrupt: interrupt.clone(),
            hung: None,
        })
    }
}

fn open(path: &Path, flags: libc::c_int) -> Result<File, ProbeError> {
    std::fs::OpenOptions::new()
        .read(true)
        .write(flags & libc::O_RDWR != 0)
        .custom_flags(flags & libc::O_NONBLOCK)
        .open(path)
        .map_err(|source| ProbeError::Setup {
            path: path.to_path_buf(),
            source,
        })
}

impl BenchChild {
    /// Wait until the child is verified and warmed up; `within` bounds the
    /// import, the verification and the warm-up together.
    pub fn ready(&mut self, within: Duration) -> Result<BenchSetup, Stopped> {
        let deadline = Instant::now() + within;
        let mut none = Vec::new();
        self.wait(deadline, within, &mut none, |me, _| me.setup.is_some())?;
        self.setup.clone().ok_or(Stopped)
    }

    /// Time one round of `samples` samples; a child that has not finished
    /// it `within` is taken as hung.
    pub fn round(
        &mut self,
        round: u32,
        samples: u32,
        within: Duration,
    ) -> Result<Vec<Sample>, Stopped> {
        self.send(&format!("{{\"round\":{round},\"samples\":{samples}}}\n"))?;
        let deadline = Instant::now() + within;
        let mut got = Vec::with_capacity(samples as usize);
        self.wait(deadline, within, &mut got, |_, got| {
            got.iter().filter(|s| s.round == round).count() >= samples as usize
        })?;
        got.retain(|s| s.round == round);
        Ok(got)
    }

    /// Make `calls` calls in a bare loop, timed as one by the child, and
    /// return their mean as one sample (wall and CPU time, ms): the
    /// baseline that the harness's own cost per sample is measured against
    /// (`benches/bench_overhead.rs`).
    pub fn bare_round(
        &mut self,
        round: u32,
        calls: u32,
        within: Duration,
    ) -> Result<Sample, Stopped> {
        self.send(&format!(
            "{{\"round\":{round},\"samples\":{calls},\"bare\":true}}\n"
        ))?;
        let deadline = Instant::now() + within;
        let mut got = Vec::with_capacity(1);
        self.wait(deadline, within, &mut got, |_, got| {
            got.iter().any(|s| s.round == round)
        })?;
        got.into_iter().find(|s| s.round == round).ok_or(Stopped)
    }

    /// Write one command line (shorter than `PIPE_BUF`: one atomic write,
    /// and the FIFO never fills, since the child reads each before it
    /// replies).
    fn send(&mut self, line: &str) -> Result<(), Stopped> {
        let sent = self
            .commands
            .as_mut()
            .is_some_and(|c| c.write_all(line.as_bytes()).is_ok());
        if sent { Ok(()) } else { Err(Stopped) }
    }

    /// Read the channel until `done`, a failure, the child's end, the
    /// deadline or an interrupt; samples go to `samples`.
    fn wait(
        &mut self,
        deadline: Instant,
        within: Duration,
        samples: &mut Vec<Sample>,
        done: impl Fn(&BenchChild, &[Sample]) -> bool,
    ) -> Result<(), Stopped> {
        loop {
            self.drain(samples);
            if done(self, samples) {
                return Ok(());
            }
            if self.failed || self.exited() {
                self.drain(samples);
                return if done(self, samples) {
                    Ok(())
                } else {
                    Err(Stopped)
                };
            }
            if self.interrupt.is_cancelled() {
                self.own.cancel();
                return Err(Stopped);
            }
            let now = Instant::now();
            if now >= deadline {
                self.hung = Some(within);
                self.own.cancel();
                return Err(Stopped);
            }
            self.sleep((deadline - now).min(TICK));
        }
    }

    fn exited(&self) -> bool {
        self.run.as_ref().is_none_or(JoinHandle::is_finished)
    }

    /// Sleep until the child replies or `at_most` passes.
    fn sleep(&mut self, at_most: Duration) {
        let mut fds = [PollFd::new(self.replies.as_fd(), PollFlags::POLLIN)];
        let timeout = PollTimeout::try_from(at_most).unwrap_or(PollTimeout::MAX);
        match poll(&mut fds, timeout) {
            Ok(n) if n > 0 => {
                let hung_up = fds[0]
                    .revents()
                    .is_some_and(|r| r.contains(PollFlags::POLLHUP));
                let mut buf = [0u8; 512];
                let read = self.replies.read(&mut buf).unwrap_or(0);
                // A hung-up FIFO stays readable: the child is gone, and its
                // exit is noticed within a tick.
                if hung_up && read == 0 {
                    std::thread::sleep(at_most.min(Duration::from_millis(5)));
                }
            }
            _ => {}
        }
    }

    /// Parse what the child appended to its channel since the last read.
    fn drain(&mut self, samples: &mut Vec<Sample>) {
        for line in self.tail.lines(&self.view.path(&self.channel)) {
            match serde_json::from_str::<Event>(&line) {
                Ok(Event::Sample(s)) => samples.push(s),
                Ok(Event::Unknown) => self.problems.unknown_events += 1,
                Ok(event) => {
                    if let Event::Hello { protocol, .. } = &event
                        && *protocol != PROTOCOL_VERSION
                    {
                        self.problems.version = Some(crate::protocol::VersionMismatch {
                            child: *protocol,
                            parent: PROTOCOL_VERSION,
                        });
                        self.failed = true;
                    }
                    match &event {
                        Event::Bench(setup) => self.setup = Some(setup.clone()),
                        Event::Failed { .. } => self.failed = true,
                        _ => {}
                    }
                    self.events.push(event);
                }
                Err(_) => self.problems.bad_lines += 1,
            }
        }
    }

    /// End the run: close the commands (the child verifies its result once
    /// more and exits), wait `within` for it, then collect the evidence. A
    /// child that hung, in a round or here, ends as timed out after the
    /// time it was given.
    pub fn finish(mut self, within: Duration) -> Result<Evidence, ProbeError> {
        self.commands = None;
        let deadline = Instant::now() + within;
        while self.hung.is_none() && !self.exited() {
            let now = Instant::now();
            if self.interrupt.is_cancelled() {
                self.own.cancel();
                break;
            }
            if now >= deadline {
                self.hung = Some(within);
                self.own.cancel();
                break;
            }
            self.sleep((deadline - now).min(TICK));
        }
        let Some(run) = self.run.take() else {
            return Err(ProbeError::Sandbox(SandboxError::Reaper(
                "bench child collected twice".into(),
            )));
        };
        let (sandbox, report) = run.join().map_err(|_| {
            ProbeError::Sandbox(SandboxError::Reaper("the bench thread panicked".into()))
        })?;
        let report = report?;
        self.drain(&mut Vec::new());
        let termination = match (self.hung, &report.termination) {
            // The sandbox saw a cancel; the cause was the deadline.
            (Some(after), Termination::Cancelled) if !self.interrupt.is_cancelled() => {
                Termination::TimedOut {
                    after,
                    needed_sigkill: true,
                }
            }
            (_, termination) => termination.clone(),
        };
        let leaked = report.leak_summary();
        drop(sandbox);
        Ok(Evidence {
            executor: self.executor,
            termination,
            events: std::mem::take(&mut self.events),
            channel: std::mem::take(&mut self.problems),
            stderr: report.stderr.text(),
            leaked,
            wall: report.wall,
            pid: report.pid,
            made: Default::default(),
        })
    }
}

impl Drop for BenchChild {
    /// A child that was never finished is killed and reaped here, so that
    /// none outlives its session.
    fn drop(&mut self) {
        if let Some(run) = self.run.take() {
            self.own.cancel();
            let _ = run.join();
        }
    }
}
