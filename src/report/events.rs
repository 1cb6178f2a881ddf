//! The event log (`--events FILE` of `check`, `warmup` and `bench`): one
//! listener of a command's timed event stream ([`crate::run::event`]) that
//! writes each event as one JSON object on a line of its own, as it
//! happens, so that a tool (or a fleet) can read what a run did, when, and
//! how long it took. The schema is versioned ([`SCHEMA`]) and documented
//! in `docs/events.md`.
//!
//! The file is created before anything runs (a path that cannot be written
//! is refused at once) and each line is written whole as its event
//! happens, so the log can be followed while the run goes on; a command
//! that fails removes it ([`Recorder::discard`]), so that no log of a run
//! that did not answer is left behind.

use crate::run::{BenchEvent, CheckResult, Event, EventKind, Listener, RunEvent};
use serde::Serialize;
use std::io::Write;
use std::path::{Path, PathBuf};
use std::sync::Mutex;

/// The version of the lines' schema, in every line (`"schema": 1`): a
/// change that is not an addition of fields or events raises it.
pub const SCHEMA: u32 = 1;

/// An event log that cannot be created.
#[derive(Debug, thiserror::Error)]
#[error("{}: cannot write the event log here: {source}", path.display())]
pub struct EventsError {
    /// The path asked for.
    pub path: PathBuf,
    /// Why.
    pub source: std::io::Error,
}

/// One line of the log.
#[derive(Debug, Serialize)]
pub struct Line<'a> {
    /// [`SCHEMA`].
    pub schema: u32,
    /// When it happened: RFC 3339, UTC, to the microsecond.
    pub timestamp: String,
    /// Seconds since the command's stream began (a monotonic clock).
    pub elapsed: f64,
    /// What happened; its `event` field names the kind.
    #[serde(flatten)]
    pub kind: Kind<'a>,
}

/// One job of a plan, as the `planned` line lists it.
#[derive(Debug, Serialize)]
pub struct PlannedJob<'a> {
    /// The job's number in the plan, which later lines name it by.
    pub job: usize,
    /// The target it belongs to, as given.
    pub target: &'a str,
    /// The variant's name, or a native module's file name.
    pub variant: &'a str,
    /// The variant's directory, or the module's file.
    pub path: String,
}

/// What a line says happened.
#[derive(Debug, Serialize)]
#[serde(tag = "event", rename_all = "snake_case")]
pub enum Kind<'a> {
    /// The targets were listed into jobs.
    Planned {
        /// Every job, in plan order.
        jobs: Vec<PlannedJob<'a>>,
    },
    /// A job the plan skips (another OS or CPU) was answered.
    Skipped {
        /// The job's number.
        job: usize,
        /// Its row, as `check --json` prints it.
        result: &'a CheckResult,
    },
    /// A job was answered from the outcome cache.
    Cached {
        /// The job's number.
        job: usize,
        /// Its row, as `check --json` prints it.
        result: &'a CheckResult,
    },
    /// This many jobs will start a child.
    Probing {
        /// Jobs left to probe.
        count: usize,
    },
    /// A job's child is about to start.
    Started {
        /// The job's number.
        job: usize,
    },
    /// A job's probe ended.
    Finished {
        /// The job's number.
        job: usize,
        /// Its row, as `check --json` prints it.
        result: &'a CheckResult,
    },
    /// Something went wrong that changes no result.
    Warning {
        /// The job concerned, when there is one.
        job: Option<usize>,
        /// What happened.
        message: &'a str,
    },
    /// `warmup --download` is fetching a kernel from the hub.
    Fetching {
        /// `ORG/NAME`.
        repo: &'a str,
        /// The revision or version asked for.
        revision: &'a str,
    },
    /// A bench child is being started and warmed up.
    BenchWarmingUp {
        /// The variant (or native target, or `reference`).
        variant: &'a str,
    },
    /// The bench's rounds begin.
    BenchTiming {
        /// Participants being timed.
        participants: usize,
    },
    /// A participant finished a round.
    BenchRound {
        /// The participant.
        variant: &'a str,
        /// The round.
        round: u32,
        /// Samples kept so far.
        samples: usize,
        /// Whether its stopper was satisfied in this round.
        done: bool,
    },
    /// A participant stopped answering and is excluded.
    BenchExcluded {
        /// The participant.
        variant: &'a str,
        /// Its outcome, in one line.
        why: &'a str,
    },
}

impl<'a> Line<'a> {
    /// The line of `event`.
    pub fn of(event: &Event<'a>) -> Line<'a> {
        let kind = match event.kind {
            EventKind::Run(run) => match run {
                RunEvent::Planned { plan } => Kind::Planned {
                    jobs: plan
                        .jobs
                        .iter()
                        .map(|j| PlannedJob {
                            job: j.id.0,
                            target: &plan.targets[j.target.0].given,
                            variant: &j.name,
                            path: j.path.display().to_string(),
                        })
                        .collect(),
                },
                RunEvent::Skipped { job, result } => Kind::Skipped {
                    job: job.id.0,
                    result,
                },
                RunEvent::Cached { job, result } => Kind::Cached {
                    job: job.id.0,
                    result,
                },
                RunEvent::Probing { count } => Kind::Probing { count },
                RunEvent::Started { job } => Kind::Started { job: job.id.0 },
                RunEvent::Finished { job, result } => Kind::Finished {
                    job: job.id.0,
                    result,
                },
                RunEvent::Warning { job, message } => Kind::Warning {
                    job: job.map(|j| j.id.0),
                    message,
                },
            },
            EventKind::Bench(bench) => match bench {
                BenchEvent::WarmingUp { variant } => Kind::BenchWarmingUp { variant },
                BenchEvent::Timing { participants } => Kind::BenchTiming { participants },
                BenchEvent::Round {
                    variant,
                    round,
                    samples,
                    done,
                } => Kind::BenchRound {
                    variant,
                    round,
                    samples,
                    done,
                },
                BenchEvent::Excluded { variant, why } => Kind::BenchExcluded { variant, why },
            },
            EventKind::Fetching { repo, revision } => Kind::Fetching { repo, revision },
        };
        Line {
            schema: SCHEMA,
            timestamp: humantime::format_rfc3339_micros(event.timestamp).to_string(),
            elapsed: event.elapsed.as_secs_f64(),
            kind,
        }
    }
}

/// Writes every event to a file as a JSON line, as it happens.
pub struct Recorder {
    path: PathBuf,
    file: Mutex<std::fs::File>,
    /// The first write that failed, said once at the end.
    failed: Mutex<Option<String>>,
}

impl Recorder {
    /// Create (or truncate) the log at `path`, before anything runs.
    pub fn create(path: &Path) -> Result<Recorder, EventsError> {
        let file = std::fs::File::create(path).map_err(|source| EventsError {
            path: path.to_path_buf(),
            source,
        })?;
        Ok(Recorder {
            path: path.to_path_buf(),
            file: Mutex::new(file),
            failed: Mutex::new(None),
        })
    }

    /// Why a line could not be written, if one could not (the log is then
    /// incomplete).
    pub fn failure(&self) -> Option<String> {
        let failed = self.failed.lock().ok()?.clone()?;
        Some(format!(
            "{}: the event log is incomplete: {failed}",
            self.path.display()
        ))
    }

    /// Remove the log: the command did not answer.
    pub fn discard(self) {
        drop(self.file);
        let _ = std::fs::remove_file(&self.path);
    }
}

impl Listener for Recorder {
    fn event(&self, event: &Event<'_>) {
        let mut line = match serde_json::to_vec(&Line::of(event)) {
            Ok(line) => line,
            Err(e) => return self.fail(e.to_string()),
        };
        line.push(b'\n');
        // One write per line, under the lock: lines from worker threads
        // never interleave, and a reader following the file sees whole ones.
        let written = match self.file.lock() {
            Ok(mut file) => file.write_all(&line),
            Err(_) => return,
        };
        if let Err(e) = written {
            self.fail(e.to_string());
        }
    }
}

impl Recorder {
    fn fail(&self, why: String) {
        if let Ok(mut failed) = self.failed.lock() {
            failed.get_or_insert(why);
        }
    }
}
