//! Run events: what a run tells its caller as it goes, so that progress
//! bars, live tables or logs live in the caller (`cli`, `report`) and the
//! library prints nothing.

use super::plan::Job;
use super::result::CheckResult;

/// One thing that happened during a run.
#[derive(Debug, Clone, Copy)]
pub enum RunEvent<'a> {
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
    /// once, after every `Skipped` and `Cached`, before any `Started`.
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
