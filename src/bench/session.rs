//! One bench session: the passing variants of one kernel, each in a bench
//! child of its own, timed in interleaved rounds until each one's
//! [`Stopper`] is satisfied.
//!
//! Children are started and warmed up one after another, and rounds run
//! one child at a time (A B C A B C …), so that no two variants ever time
//! — or autotune — on one device at once, whatever `--jobs` says: `--jobs`
//! only applies to the probes that come first. Interleaving spreads the
//! machine's drift (clocks, other load) over every variant alike; so does
//! keeping every variant in the rounds until the last stopper is satisfied
//! (each variant's stop rule is the one that was satisfied first for it,
//! and the session ends at the latest when the slowest reaches its
//! `--timeout`).

use super::BenchError;
use super::result::{BenchReport, BenchStatus, Timed, Timer, VariantBench};
use crate::classify::{Outcome, classify};
use crate::probe::{BenchChild, BenchRole, BenchSpec, Evidence, ProbeError, SmokeSource, Subject};
use crate::protocol::BenchSetup;
use crate::run::{CheckReport, Executors, Job, JobKey, Plan};
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

/// How to bench.
#[derive(Debug, Clone)]
pub struct BenchOptions {
    /// The hub benchmark workload (`benchmark_<w>`); `None`: the smoke.
    pub workload: Option<String>,
    /// Only these variants (names); `None`: every one that passes.
    pub variants: Option<Vec<String>>,
    /// When each variant is done.
    pub criteria: StopCriteria,
    /// Flush the L2 cache before each sample on a GPU.
    pub flush_l2: bool,
    /// The seed of the bootstrap comparisons.
    pub seed: u64,
    /// Time variants on the host by their process's CPU time instead of
    /// the wall clock (device events are kept where a child has them).
    pub cpu_time: bool,
}

/// What a session tells its caller as it goes (for a progress bar).
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

/// Hears a session's events.
pub trait BenchReporter: Sync {
    /// One event.
    fn report(&self, event: BenchEvent<'_>);
}

/// What one participant is: a hub variant (the python executor's bench
/// child), or a native target as a whole (the cuda executor's, loading
/// every module of it).
pub(super) enum Unit<'p> {
    /// A hub variant's job.
    Variant(&'p Job),
    /// A native target's module jobs, and the key of the target as a whole.
    Native {
        jobs: Vec<&'p Job>,
        key: Option<JobKey>,
    },
}

impl Unit<'_> {
    /// The job whose limits and device the child takes.
    fn first(&self) -> Option<&Job> {
        match self {
            Unit::Variant(job) => Some(job),
            Unit::Native { jobs, .. } => jobs.first().copied(),
        }
    }

    /// The job identity key, hex, as reports show it.
    fn key_hex(&self) -> String {
        let key = match self {
            Unit::Variant(job) => job.key.as_ref(),
            Unit::Native { key, .. } => key.as_ref(),
        };
        key.map_or_else(String::new, |k| k.outcome().key.to_string())
    }
}

/// One child being timed.
pub(super) struct Participant<'p> {
    pub(super) name: String,
    unit: Unit<'p>,
    child: Option<BenchChild>,
    setup: Option<BenchSetup>,
    stopper: Stopper,
    samples: Vec<f64>,
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

/// Bench the passing variants of `plan`'s first target, after `check`
/// answered every job. The caller's `interrupt` stops every child.
pub fn bench(
    plan: &Plan,
    check: &CheckReport,
    executors: &Executors,
    options: &BenchOptions,
    interrupt: &Cancel,
    reporter: &dyn BenchReporter,
) -> Result<BenchReport, BenchError> {
    if plan
        .targets
        .iter()
        .any(|t| matches!(t.target, crate::discover::Target::Native(_)))
    {
        return super::native::bench(plan, check, executors, options, interrupt, reporter);
    }
    if plan.targets.len() > 1 {
        return Err(BenchError::SeveralKernels);
    }
    let wanted = |name: &str| {
        options
            .variants
            .as_ref()
            .is_none_or(|v| v.iter().any(|w| w == name))
    };
    if let Some(names) = &options.variants
        && let Some(unknown) = names
            .iter()
            .find(|n| !plan.jobs.iter().any(|j| &j.name == *n))
    {
        return Err(BenchError::UnknownVariant {
            variant: unknown.clone(),
            known: plan.jobs.iter().map(|j| j.name.clone()).collect(),
        });
    }
    let mut variants = Vec::new();
    let mut passing = Vec::new();
    for row in &check.results {
        let job = &plan.jobs[row.job.0];
        if !wanted(&row.variant) || job.skip.is_some() {
            continue;
        }
        if row.outcome.kind.passed() {
            passing.push(job);
        } else {
            variants.push(excluded(job, &row.outcome));
        }
    }
    let Some(first) = passing.first() else {
        return Err(BenchError::NothingPasses);
    };
    match (&first.probe.smoke, &options.workload) {
        (SmokeSource::LoadOnly, _) => return Err(BenchError::NoWorkload),
        (SmokeSource::Benchmarks { dir, .. }, Some(w)) => {
            let known = workloads(dir);
            if !known.contains(w) {
                return Err(BenchError::UnknownWorkload {
                    workload: w.clone(),
                    dir: dir.clone(),
                    known,
                });
            }
        }
        (SmokeSource::Benchmarks { .. }, None) | (_, None) => {}
        (_, Some(w)) => return Err(BenchError::WorkloadWithoutBenchmarks(w.clone())),
    }
    let participant = |job, name| Participant::new(Unit::Variant(job), name, options.criteria);
    let mut timed: Vec<Participant> = passing
        .iter()
        .map(|job| participant(job, job.name.clone()))
        .collect();
    for p in &mut timed {
        start(p, BenchRole::Variant, executors, options, interrupt, reporter)?;
    }
    // The reference computation, in a child of its own (in the first
    // variant's company: the workload's setup may use it), when a variant
    // said its workload has one (`verify_<workload>` of the hub's convention).
    let mut reference = timed
        .iter()
        .any(|p| p.setup.as_ref().is_some_and(|s| s.has_reference))
        .then(|| participant(first, "reference".into()));
    if let Some(p) = &mut reference {
        start(
            p,
            BenchRole::Reference,
            executors,
            options,
            interrupt,
            reporter,
        )?;
    }
    time_all(&mut timed, &mut reference, options, interrupt, reporter)?;

    let workload = timed
        .iter()
        .find_map(|p| p.setup.as_ref())
        .map_or_else(|| "smoke".to_owned(), |s| s.label.clone());
    let mut report = BenchReport {
        target: plan
            .targets
            .get(first.target.0)
            .map_or_else(String::new, |t| t.given.clone()),
        workload,
        fingerprint: plan.fingerprint.hash(),
        device: device(plan, &timed),
        flush_l2: flushed(&timed),
        criteria: options.criteria,
        variants: timed.iter().map(|p| result(p, options.cpu_time)).collect(),
        reference: reference.as_ref().map(|p| result(p, options.cpu_time)),
    };
    report.variants.append(&mut variants);
    report.rank(options.seed);
    Ok(report)
}

/// Whether the samples were taken after an L2 flush: only a child timing
/// a GPU flushes (it says how many bytes).
pub(super) fn flushed(timed: &[Participant]) -> bool {
    timed
        .iter()
        .filter_map(|p| p.setup.as_ref())
        .any(|s| s.flush_bytes > 0)
}

/// Time every started participant (and the reference) in interleaved
/// rounds until each one's stopper is satisfied, then end every child.
pub(super) fn time_all<'p>(
    timed: &mut [Participant<'p>],
    reference: &mut Option<Participant<'p>>,
    options: &BenchOptions,
    interrupt: &Cancel,
    reporter: &dyn BenchReporter,
) -> Result<(), BenchError> {
    reporter.report(BenchEvent::Timing {
        participants: timed.iter().chain(reference.iter()).filter(|p| p.live()).count(),
    });

    let mut round = 0u32;
    // A participant whose stopper is satisfied keeps its place in the
    // rounds until every one's is: then all samples span the same stretch
    // of time, and the machine's drift weighs on every median alike.
    while timed.iter().chain(reference.iter()).any(Participant::wants_more) {
        for p in timed.iter_mut().chain(reference.iter_mut()).filter(|p| p.live()) {
            let satisfied = p.stop.is_some();
            time_round(p, round, options, interrupt)?;
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

/// The workloads the scripts of a `benchmarks/` folder define, read from
/// their text (`def benchmark_<w>(`), sorted: enough to refuse a misspelt
/// `--workload` before any child starts.
fn workloads(dir: &std::path::Path) -> Vec<String> {
    let mut found: Vec<String> = std::fs::read_dir(dir)
        .into_iter()
        .flatten()
        .filter_map(Result::ok)
        .map(|e| e.path())
        .filter(|p| {
            p.file_name()
                .and_then(|n| n.to_str())
                .is_some_and(|n| n.starts_with("benchmark") && n.ends_with(".py"))
        })
        .filter_map(|p| std::fs::read_to_string(p).ok())
        .flat_map(|text| {
            text.split("def benchmark_")
                .skip(1)
                .filter_map(|rest| {
                    let name: String = rest
                        .chars()
                        .take_while(|c| c.is_alphanumeric() || *c == '_')
                        .collect();
                    rest[name.len()..]
                        .trim_start()
                        .starts_with('(')
                        .then_some(name)
                })
                .collect::<Vec<_>>()
        })
        .collect();
    found.sort();
    found.dedup();
    found
}

/// Start `p`'s child and wait until it is verified and warmed up (or
/// excluded by how it ended).
pub(super) fn start(
    p: &mut Participant,
    role: BenchRole,
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
    let mut child = match &p.unit {
        Unit::Variant(job) => executors
            .python
            .as_ref()
            .ok_or(BenchError::NoExecutor("python"))?
            .bench(&job.probe, &spec, interrupt)?,
        Unit::Native { jobs, .. } => {
            let probes: Vec<&crate::probe::Job> = jobs.iter().map(|j| &j.probe).collect();
            executors
                .cuda
                .as_ref()
                .ok_or(BenchError::NoExecutor("cuda"))?
                .bench(&probes, super::native::LABEL, &spec, interrupt)?
        }
    };
    let within = p
        .unit
        .first()
        .map_or(HANG_FLOOR, |j| j.probe.limits.timeout);
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

/// A variant that is not timed, with the outcome that excludes it.
fn excluded(job: &Job, outcome: &Outcome) -> VariantBench {
    VariantBench {
        variant: job.name.clone(),
        job: Unit::Variant(job).key_hex(),
        status: BenchStatus::Excluded {
            outcome: outcome.kind.as_str().to_owned(),
            reason: outcome.message.clone(),
        },
        vs_fastest: None,
        vs_reference: None,
    }
}

/// One round of one participant: as many samples as fill
/// [`ROUND_TARGET`], each pushed to its stopper until it says stop.
fn time_round(
    p: &mut Participant,
    round: u32,
    options: &BenchOptions,
    interrupt: &Cancel,
) -> Result<(), BenchError> {
    let (Some(child), Some(setup)) = (p.child.as_mut(), p.setup.as_ref()) else {
        return Ok(());
    };
    let estimate = Duration::from_secs_f64(setup.estimate_ms.max(1e-6) / 1e3);
    let samples = (ROUND_TARGET.as_secs_f64() / estimate.as_secs_f64()).clamp(1.0, 10_000.0) as u32;
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
        if p.stop.is_none() {
            p.stop = p.stopper.push(ms, p.timed);
        }
    }
    if p.stop.is_none() && p.stopper.timed_out(p.timed) {
        p.stop = Some(StopRule::Timeout);
    }
    Ok(())
}

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
            outcome: outcome.kind.as_str().to_owned(),
            reason: outcome.message.clone(),
        },
        (None, Some(summary), Some(stop)) => BenchStatus::Timed(Timed {
            summary,
            stop,
            samples_ms: p.samples.clone(),
            dropped_throttled: p.throttled,
            timer: match p.setup.as_ref().map(|s| s.timer.as_str()) {
                Some("device_events") => Timer::DeviceEvents,
                _ if cpu_time => Timer::CpuTime,
                _ => Timer::HostClock,
            },
        }),
        (None, _, _) => BenchStatus::Excluded {
            outcome: "probe_error".into(),
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

/// The device timed on, for people: the framework device the children
/// reported, with the GPU's model where there is one.
fn device(plan: &Plan, timed: &[Participant]) -> String {
    let torch = timed
        .iter()
        .find_map(|p| match p.unit.first().map(|j| (&j.probe.subject, j.probe.device)) {
            Some((Subject::Variant { name, .. }, device)) => {
                Some(crate::probe::torch_device(name, device))
            }
            _ => None,
        })
        .unwrap_or_else(|| "cpu".into());
    // A universal variant's child chooses its device itself (`auto`): the
    // timer it reported says which it took.
    let on_device = timed
        .iter()
        .any(|p| p.setup.as_ref().is_some_and(|s| s.timer == "device_events"));
    let torch = match torch.as_str() {
        "auto" if on_device => "cuda".to_owned(),
        "auto" => "cpu".to_owned(),
        _ => torch,
    };
    match plan
        .fingerprint
        .gpus
        .devices
        .first()
        .and_then(|g| g.model.clone())
    {
        Some(model) if torch.starts_with("cuda") => {
            format!("{torch} ({model})")
        }
        _ => torch,
    }
}

impl From<ProbeError> for BenchError {
    fn from(e: ProbeError) -> BenchError {
        BenchError::Probe(e)
    }
}
