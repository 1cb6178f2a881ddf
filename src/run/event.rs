//! Events: what a command tells its caller as it goes, as one timed
//! stream. The run ([`RunEvent`]) and the bench ([`BenchEvent`]) each
//! speak to a sink of their own kind; a [`Stream`] is both, stamps every
//! event with the time it happened and the time since the command began
//! ([`Event`]), and hands it to a [`Listener`] — a progress display, a
//! JSON-lines recorder (`report::progress`, `report::events`), or both
//! ([`Tee`]). The library prints nothing itself: whoever makes the
//! listener chooses.

use super::plan::{Job, Plan};
use super::result::CheckResult;
use std::time::{Duration, Instant, SystemTime};

/// One thing that happened during a run.
#[derive(Debug, Clone, Copy)]
pub enum RunEvent<'a> {
    /// The targets were listed into jobs; nothing is answered yet. Comes
    /// once, first.
    Planned {
        /// The plan.
        plan: &'a Plan,
    },
    /// A job the plan skips (a variant for another OS or CPU) was answered.
    Skipped {
        /// The job.
        job: &'a Job,
        /// Its row.
        result: &'a CheckResult,
    },
    /// A job was answered from the outcome cache.
    Cached {
        /// The job.
        job: &'a Job,
        /// Its row.
        result: &'a CheckResult,
    },
    /// Every job was looked up; `count` of them will start a child. Comes
    /// once, after every `Skipped` and `Cached`, before any `Started` (but
    /// for a job another node of the fleet probed while this one waited
    /// for its lease: `Cached` after `Probing`, `"remote": true`).
    Probing {
        /// Jobs left to probe.
        count: usize,
    },
    /// A job's child is about to start.
    Started {
        /// The job.
        job: &'a Job,
    },
    /// A job's probe ended (from worker threads, in completion order).
    Finished {
        /// The job.
        job: &'a Job,
        /// Its row.
        result: &'a CheckResult,
    },
    /// Something went wrong that changes no result: a cache entry that was
    /// damaged, a cache that cannot be written (said once per run), a job
    /// whose identity could not be read (it is probed, not cached).
    Warning {
        /// The job concerned, when there is one.
        job: Option<&'a Job>,
        /// What happened.
        message: &'a str,
    },
}

/// What a bench tells its caller as it goes, once the check before it is
/// over.
#[derive(Debug, Clone, Copy)]
pub enum BenchEvent<'a> {
    /// Children are being started and warmed up, one after another.
    WarmingUp {
        /// The variant.
        variant: &'a str,
    },
    /// Rounds begin for this many participants.
    Timing {
        /// Variants (and the reference) being timed.
        participants: usize,
    },
    /// A participant finished a round.
    Round {
        /// The variant.
        variant: &'a str,
        /// The round.
        round: u32,
        /// Samples kept so far.
        samples: usize,
        /// Whether its stopper was satisfied in this round (said once; it
        /// stays in the rounds until every stopper is).
        done: bool,
    },
    /// A participant stopped answering and is excluded.
    Excluded {
        /// The variant.
        variant: &'a str,
        /// Its outcome, in one line.
        why: &'a str,
    },
}

/// Any event of a command: of its run, of its bench, or of the steps
/// around them.
#[derive(Debug, Clone, Copy)]
pub enum EventKind<'a> {
    /// The run's (`check`, `select`, `warmup`, and `bench`'s check).
    Run(RunEvent<'a>),
    /// The bench's.
    Bench(BenchEvent<'a>),
    /// `warmup --download` is fetching a kernel from the hub.
    Fetching {
        /// The repository, `ORG/NAME`.
        repo: &'a str,
        /// The revision or version asked for, as `get_kernel` takes it.
        revision: &'a str,
    },
}

/// One event, with when it happened.
#[derive(Debug, Clone, Copy)]
pub struct Event<'a> {
    /// The wall-clock time it happened.
    pub timestamp: SystemTime,
    /// The time since the command's stream began (a monotonic clock).
    pub elapsed: Duration,
    /// What happened.
    pub kind: EventKind<'a>,
}

/// Whatever consumes a run's events. Called from the run's worker threads.
pub trait Reporter: Sync {
    /// Take one event.
    fn report(&self, event: RunEvent<'_>);
}

impl<F: Fn(RunEvent<'_>) + Sync> Reporter for F {
    fn report(&self, event: RunEvent<'_>) {
        self(event)
    }
}

/// Hears a bench's events.
pub trait BenchReporter: Sync {
    /// One event.
    fn report(&self, event: BenchEvent<'_>);
}

/// Whatever consumes a command's timed events. Called from worker threads.
pub trait Listener: Sync {
    /// Take one event.
    fn event(&self, event: &Event<'_>);
}

/// Nothing listens.
impl Listener for () {
    fn event(&self, _: &Event<'_>) {}
}

/// Two listeners, each given every event in turn.
pub struct Tee<'a>(pub &'a dyn Listener, pub &'a dyn Listener);

impl Listener for Tee<'_> {
    fn event(&self, event: &Event<'_>) {
        self.0.event(event);
        self.1.event(event);
    }
}

/// One command's stream: stamps each event and hands it to its listener.
pub struct Stream<'l> {
    began: Instant,
    listener: &'l dyn Listener,
}

impl<'l> Stream<'l> {
    /// A stream whose elapsed times count from now.
    pub fn new(listener: &'l dyn Listener) -> Stream<'l> {
        Stream {
            began: Instant::now(),
            listener,
        }
    }

    /// A warning about no job in particular ([`RunEvent::Warning`]).
    pub fn warn(&self, message: &str) {
        self.emit(EventKind::Run(RunEvent::Warning { job: None, message }));
    }

    /// Stamp `kind` now and hand it on.
    pub fn emit(&self, kind: EventKind<'_>) {
        self.listener.event(&Event {
            timestamp: SystemTime::now(),
            elapsed: self.began.elapsed(),
            kind,
        });
    }
}

impl Reporter for Stream<'_> {
    fn report(&self, event: RunEvent<'_>) {
        self.emit(EventKind::Run(event));
    }
}

impl BenchReporter for Stream<'_> {
    fn report(&self, event: BenchEvent<'_>) {
        self.emit(EventKind::Bench(event));
    }
}
