//! The rounds of a session: its participants (a hub variant, or a native
//! target as a whole), each started in a bench child of its executor and
//! warmed up, then timed one round at a time in turn until every one's
//! [`Stopper`] is satisfied, and ended with its outcome classified.

use super::BenchError;
use super::result::{BenchStatus, Timed, Timer, VariantBench};
use super::session::BenchOptions;
use crate::classify::{Outcome, classify};
use crate::probe::{BenchChild, BenchRole, BenchSpec, Evidence};
use crate::protocol::BenchSetup;
use crate::run::{BenchEvent, BenchReporter};
use crate::run::{Executors, Job, JobKey};
use crate::sandbox::Cancel;
use crate::stats::{MAX_SAMPLES, StopCriteria, StopRule, Stopper, Summary};
use std::time::{Duration, Instant};

/// How long one round aims to take: short enough that drift hits every
/// variant alike, long enough that the round trip is negligible.
const ROUND_TARGET: Duration = Duration::from_millis(10);
/// A round that takes this many times longer than expected is a hang…
const HANG_FACTOR: u32 = 20;
/// …once it has also had this long, or the variant's whole `--timeout`
/// if that is shorter.
const HANG_FLOOR: Duration = Duration::from_secs(10);
/// Time for a child's last verification and exit.
const FINISH_WITHIN: Duration = Duration::from_secs(30);

/// What one participant is: a hub variant (the python executor's bench
/// child), or a native target as a whole (the cuda executor's, loading
/// every module of it).
pub(super) enum Unit<'p> {
    /// A hub variant's job.
    Variant(&'p Job),
    /// A native target's module jobs, and the key of the target as a
    /// whole (hex; empty when a module is not cached).
    Native { jobs: Vec<&'p Job>, key: String },
}

impl Unit<'_> {
    /// The job whose limits and device the child takes.
    pub(super) fn first(&self) -> Option<&Job> {
        match self {
            Unit::Variant(job) => Some(job),
            Unit::Native { jobs, .. } => jobs.first().copied(),
        }
    }

    /// The job identity key, hex, as reports show it.
    pub(super) fn key_hex(&self) -> String {
        match self {
            Unit::Variant(job) => job.key.as_ref().map_or_else(String::new, key_hex),
            Unit::Native { key, .. } => key.clone(),
        }
    }
}

/// A job key as reports show it.
pub(super) fn key_hex(key: &JobKey) -> String {
    key.outcome().key.to_string()
}

/// One child being timed.
pub(super) struct Participant<'p> {
    pub(super) name: String,
    pub(super) unit: Unit<'p>,
    child: Option<BenchChild>,
    pub(super) setup: Option<BenchSetup>,
    stopper: Stopper,
    samples: Vec<f64>,
    /// The round of each of `samples`.
    rounds: Vec<u32>,
    throttled: u32,
    timed: Duration,
    stop: Option<StopRule>,
    /// Why it was excluded: an outcome, once known.
    excluded: Option<Outcome>,
}

impl<'p> Participant<'p> {
    pub(super) fn new(unit: Unit<'p>, name: String, criteria: StopCriteria) -> Participant<'p> {
        Participant {
            name,
            unit,
            child: None,
            setup: None,
            stopper: Stopper::new(criteria),
            samples: Vec::new(),
            rounds: Vec::new(),
            throttled: 0,
            timed: Duration::ZERO,
            stop: None,
            excluded: None,
        }
    }

    /// Still in the rounds: its child answers, and it has room for more
    /// samples (a satisfied variant of a very short kernel would otherwise
    /// pile them up while a slow one finishes).
    fn live(&self) -> bool {
        self.excluded.is_none() && self.child.is_some() && self.samples.len() < MAX_SAMPLES
    }

    /// In the rounds, and its stopper not yet satisfied.
    fn wants_more(&self) -> bool {
        self.live() && self.stop.is_none()
    }
}

/// Whether the samples were taken after an L2 flush: only a child timing
/// a GPU flushes (it says how many bytes).
pub(super) fn flushed(timed: &[Participant]) -> bool {
    timed
        .iter()
        .filter_map(|p| p.setup.as_ref())
        .any(|s| s.flush_bytes > 0)
}

/// Where a session stands with its device.
#[derive(Debug, Default)]
pub(super) struct Turns {
    /// The device admits one process's context at a time: participants
    /// are timed one after another ([`start_each`]).
    exclusive: bool,
    /// The round the next participant timed starts at, so that rounds of
    /// participants timed one after another never share a number (a
    /// round-by-round comparison pairs only rounds taken together).
    next_round: u32,
}

/// Time every started participant (and the reference) in interleaved
/// rounds until each one's stopper is satisfied, then end every child.
pub(super) fn time_all<'p>(
    timed: &mut [Participant<'p>],
    reference: &mut Option<Participant<'p>>,
    options: &BenchOptions,
    interrupt: &Cancel,
    reporter: &dyn BenchReporter,
    turns: &mut Turns,
) -> Result<(), BenchError> {
    if !timed.iter().chain(reference.iter()).any(Participant::live) {
        // Each was timed alone already (`start_each`), or none started.
        return Ok(());
    }
    reporter.report(BenchEvent::Timing {
        participants: timed
            .iter()
            .chain(reference.iter())
            .filter(|p| p.live())
            .count(),
    });

    let slowest = timed
        .iter()
        .chain(reference.iter())
        .filter(|p| p.live())
        .filter_map(|p| p.setup.as_ref().map(|s| s.estimate_ms))
        .fold(0.0_f64, f64::max);
    let mut round = turns.next_round;
    // A participant whose stopper is satisfied keeps its place in the
    // rounds until every one's is: then all samples span the same stretch
    // of time, and the machine's drift weighs on every median alike.
    while timed
        .iter()
        .chain(reference.iter())
        .any(Participant::wants_more)
    {
        // Each round starts one participant further on, so that no
        // participant always runs right after the same one (a steady bias
        // of its place in the round, which pairing by round cannot
        // cancel, now weighs on every participant in turn).
        let mut order: Vec<&mut Participant<'p>> = timed
            .iter_mut()
            .chain(reference.iter_mut())
            .filter(|p| p.live())
            .collect();
        if !order.is_empty() {
            let start = round as usize % order.len();
            order.rotate_left(start);
        }
        for p in order {
            let satisfied = p.stop.is_some();
            time_round(p, round, slowest, options, interrupt)?;
            if let Some(outcome) = &p.excluded {
                reporter.report(BenchEvent::Excluded {
                    variant: &p.name,
                    why: &outcome.message,
                });
            }
            reporter.report(BenchEvent::Round {
                variant: &p.name,
                round,
                samples: p.samples.len(),
                done: !satisfied && p.stop.is_some(),
            });
        }
        if interrupt.is_cancelled() {
            return Err(BenchError::Interrupted);
        }
        round += 1;
    }
    turns.next_round = round;
    for p in timed.iter_mut().chain(reference.iter_mut()) {
        if let Some(child) = p.child.take() {
            let outcome = end(child, interrupt)?;
            if !outcome.kind.passed() {
                p.excluded = Some(outcome);
            }
        }
    }
    if interrupt.is_cancelled() {
        return Err(BenchError::Interrupted);
    }
    Ok(())
}

/// Start the child of each of `ps` in turn ([`start`]), one of
/// `participants` in the session. Where a child says its device admits one
/// process's context at a time (EXCLUSIVE_PROCESS: a second child's context
/// would be refused with 46, and read as no device), that child and each
/// one after it is timed alone to the end, its child ended, before the
/// next starts; `turns` says whether that happened, and carries it over to
/// a later call (the reference) and to [`time_all`].
#[allow(clippy::too_many_arguments)]
pub(super) fn start_each(
    ps: &mut [Participant],
    role: BenchRole,
    participants: usize,
    executors: &Executors,
    options: &BenchOptions,
    interrupt: &Cancel,
    reporter: &dyn BenchReporter,
    turns: &mut Turns,
) -> Result<(), BenchError> {
    for p in ps {
        start(
            p,
            role,
            participants,
            executors,
            options,
            interrupt,
            reporter,
        )?;
        turns.exclusive |= p.setup.as_ref().is_some_and(|s| s.exclusive);
        if turns.exclusive {
            time_all(
                std::slice::from_mut(p),
                &mut None,
                options,
                interrupt,
                reporter,
                turns,
            )?;
        }
    }
    Ok(())
}

/// Start `p`'s child, one of `participants` in the session, and wait
/// until it is verified and warmed up (or excluded by how it ended).
fn start(
    p: &mut Participant,
    role: BenchRole,
    participants: usize,
    executors: &Executors,
    options: &BenchOptions,
    interrupt: &Cancel,
    reporter: &dyn BenchReporter,
) -> Result<(), BenchError> {
    reporter.report(BenchEvent::WarmingUp { variant: &p.name });
    let spec = BenchSpec {
        role,
        workload: options.workload.clone(),
        flush_l2: options.flush_l2,
    };
    let within = p
        .unit
        .first()
        .map_or(HANG_FLOOR, |j| j.probe.limits.timeout);
    // The probe timeout bounds the import and the warm-up (`ready`), and
    // the parent's deadline each round; the child itself lives through
    // every participant's warm-up and the whole session, so its sandbox
    // only stops one that outlives all of that.
    let participants = u32::try_from(participants.max(1)).unwrap_or(u32::MAX);
    let lifetime = (within + options.criteria.timeout * 2)
        .saturating_mul(participants)
        .saturating_add(FINISH_WITHIN);
    let probe = |job: &Job| {
        let mut probe = job.probe.clone();
        probe.limits.timeout = lifetime;
        probe
    };
    // Every participant starts the same way: its jobs, to the executor
    // that accepts them (a variant alone; a native target's modules in one
    // child, labelled as the target).
    let (jobs, label, kind) = match &p.unit {
        Unit::Variant(job) => (vec![probe(job)], p.name.as_str(), "python"),
        Unit::Native { jobs, .. } => (
            jobs.iter().map(|j| probe(j)).collect(),
            super::native::LABEL,
            "cuda",
        ),
    };
    let jobs: Vec<&crate::probe::Job> = jobs.iter().collect();
    let executor = jobs
        .first()
        .and_then(|job| executors.bench_executor(&job.subject))
        .ok_or(BenchError::NoExecutor(kind))?;
    let mut child = executor.start_bench(&jobs, label, &spec, interrupt)?;
    match child.ready(within) {
        Ok(setup) => {
            p.setup = Some(setup);
            p.child = Some(child);
        }
        Err(_) => p.excluded = Some(end(child, interrupt)?),
    }
    if interrupt.is_cancelled() {
        return Err(BenchError::Interrupted);
    }
    Ok(())
}

/// One round of one participant: as many samples as fill
/// [`ROUND_TARGET`], each pushed to its stopper until it says stop.
fn time_round(
    p: &mut Participant,
    round: u32,
    slowest_ms: f64,
    options: &BenchOptions,
    interrupt: &Cancel,
) -> Result<(), BenchError> {
    let (Some(child), Some(setup)) = (p.child.as_mut(), p.setup.as_ref()) else {
        return Ok(());
    };
    let estimate = Duration::from_secs_f64(setup.estimate_ms.max(1e-6) / 1e3);
    let samples = samples_per_round(setup.estimate_ms, slowest_ms);
    let within = (estimate * samples * HANG_FACTOR).max(HANG_FLOOR.min(options.criteria.timeout));
    let started = Instant::now();
    let got = match child.round(round, samples, within) {
        Ok(got) => got,
        Err(_) => {
            if let Some(child) = p.child.take() {
                p.excluded = Some(end(child, interrupt)?);
            }
            return Ok(());
        }
    };
    // The stopper's clock is the wall time this participant was timed,
    // spread evenly over the round's samples.
    let per_sample = started.elapsed() / samples.max(1);
    for sample in got {
        p.timed += per_sample;
        if sample.throttled {
            p.throttled += 1;
            continue;
        }
        let ms = match sample.cpu_ms {
            Some(cpu) if options.cpu_time => cpu,
            _ => sample.ms,
        };
        p.samples.push(ms);
        p.rounds.push(sample.round);
        if p.stop.is_none() {
            p.stop = p.stopper.push(ms, p.timed);
        }
    }
    if p.stop.is_none() && p.stopper.timed_out(p.timed) {
        p.stop = Some(StopRule::Timeout);
    }
    Ok(())
}

/// How many samples a participant whose one call is estimated at
/// `estimate_ms` takes in a round, when the round's slowest participant's
/// is `slowest_ms`: as many as fill [`ROUND_TARGET`], except that every
/// participant within [`SHARED_BATCH`]× of the slowest takes the slowest's
/// count. A batch's later calls find warmer caches than its first, so two
/// participants taking 2 and 1 calls a round differ by that alone: two
/// identical variants whose estimates fell either side of a boundary
/// (10 ms / 4.99 ms against 10 ms / 5.01 ms) came out 3 % apart, steadily,
/// and were called "slower". Far apart (a 1 µs kernel beside a 10 ms one)
/// each keeps its own count: that bias is nothing beside their difference,
/// and one call a round would starve the fast one of samples.
fn samples_per_round(estimate_ms: f64, slowest_ms: f64) -> u32 {
    let fill =
        |ms: f64| (ROUND_TARGET.as_secs_f64() * 1e3 / ms.max(1e-6)).clamp(1.0, 10_000.0) as u32;
    if slowest_ms > 0.0 && estimate_ms * SHARED_BATCH >= slowest_ms {
        fill(slowest_ms)
    } else {
        fill(estimate_ms)
    }
}

/// How far below the slowest participant's estimate a participant still
/// takes the slowest's count of samples a round ([`samples_per_round`]).
const SHARED_BATCH: f64 = 4.0;

/// Close a child and classify how it ended.
fn end(child: BenchChild, interrupt: &Cancel) -> Result<Outcome, BenchError> {
    let evidence: Evidence = child.finish(FINISH_WITHIN)?;
    if interrupt.is_cancelled() {
        return Err(BenchError::Interrupted);
    }
    Ok(classify(&evidence))
}

/// A participant's row.
pub(super) fn result(p: &Participant, cpu_time: bool) -> VariantBench {
    let status = match (&p.excluded, Summary::of(&p.samples), p.stop) {
        (Some(outcome), _, _) => BenchStatus::Excluded {
            outcome: outcome.kind,
            reason: outcome.message.clone(),
        },
        (None, Some(summary), Some(stop)) => BenchStatus::Timed(Timed {
            summary,
            stop,
            samples_ms: p.samples.clone(),
            rounds: p.rounds.clone(),
            dropped_throttled: p.throttled,
            timer: match p.setup.as_ref().map(|s| s.timer.as_str()) {
                Some("device_events") => Timer::DeviceEvents,
                _ if cpu_time => Timer::CpuTime,
                _ => Timer::HostClock,
            },
        }),
        (None, _, _) => BenchStatus::Excluded {
            outcome: crate::classify::OutcomeKind::ProbeError,
            reason: format!("no sample was kept ({} throttled)", p.throttled),
        },
    };
    VariantBench {
        variant: p.name.clone(),
        job: p.unit.key_hex(),
        status,
        vs_fastest: None,
        vs_reference: None,
    }
}

#[cfg(test)]
mod tests {
    use super::samples_per_round;

    #[test]
    fn participants_near_the_slowest_take_its_count_far_ones_their_own() {
        // Two identical variants either side of a boundary: one count.
        assert_eq!(samples_per_round(4.99, 5.01), samples_per_round(5.01, 5.01));
        assert_eq!(samples_per_round(4.99, 5.01), 1);
        // Within 4x of the slowest: the slowest's count.
        assert_eq!(samples_per_round(1.3, 5.0), 2);
        // Far below it: its own, to fill the round.
        assert_eq!(samples_per_round(0.001, 5.0), 10_000);
        assert_eq!(samples_per_round(1.0, 5.0), 10);
        // Alone (or no estimate known): its own.
        assert_eq!(samples_per_round(2.0, 0.0), 5);
    }
}
