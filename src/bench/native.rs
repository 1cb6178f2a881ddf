//! Native targets on the bench: each directory with a `preflight.toml` is
//! one participant, timed as a whole by one cuda bench child (every launch
//! of every module, in file order, in each sample). Several native targets
//! given together — the same kernel built two ways, or two sources of one
//! computation — are compared side by side as a hub kernel's variants are.
//!
//! A target takes part when every one of its modules passed its probe; the
//! first that did not excludes it, with that module's outcome.

use super::BenchError;
use super::result::{BenchReport, BenchStatus, VariantBench};
use super::rounds::{Participant, Turns, Unit, flushed, key_hex, result, start_each, time_all};
use super::session::BenchOptions;
use crate::discover::Target;
use crate::probe::{BenchRole, SmokeChoice};
use crate::run::BenchReporter;
use crate::run::{CheckReport, Executors, Job, Plan, TargetId};
use crate::sandbox::Cancel;
use std::collections::HashSet;

/// What a native target's samples are labelled: its `preflight.toml`
/// launches (the workload a report names).
pub(super) const LABEL: &str = "launches";

/// Refuse the options that name parts of a hub kernel (its workload, its
/// variants, the smoke `smoke` chose for hub variants), which a native
/// target does not have.
pub(super) fn refuse_hub_options(
    options: &BenchOptions,
    smoke: Option<&SmokeChoice>,
) -> Result<(), BenchError> {
    for (given, name) in [
        (options.workload.is_some(), "--workload"),
        (options.variants.is_some(), "--variants"),
        (smoke.is_some_and(|s| s.file.is_some()), "--smoke"),
        (smoke.is_some_and(|s| s.library.is_some()), "--smoke-as"),
    ] {
        if given {
            return Err(BenchError::HubOnly(name));
        }
    }
    Ok(())
}

/// Bench the native targets of `plan` side by side, after `check` answered
/// every module.
pub(super) fn bench(
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
        .any(|t| !matches!(t.target, Target::Native(_)))
    {
        return Err(BenchError::SeveralKernels);
    }
    refuse_hub_options(options, None)?;
    let mut seen = HashSet::new();
    for named in &plan.targets {
        if let Target::Native(t) = &named.target
            && !seen.insert(t.dir.clone())
        {
            return Err(BenchError::GivenTwice(named.given.clone()));
        }
    }

    let mut timed = Vec::new();
    let mut excluded = Vec::new();
    for (i, named) in plan.targets.iter().enumerate() {
        let id = TargetId(i);
        let jobs: Vec<&Job> = plan.jobs_of(id).collect();
        let key = plan
            .target_key(id)
            .as_ref()
            .map_or_else(String::new, key_hex);
        let failing = check
            .results
            .iter()
            .filter(|r| r.target_id == id)
            .find(|r| !r.outcome.kind.passed());
        if let Some(row) = failing {
            excluded.push(VariantBench {
                variant: named.given.clone(),
                job: key,
                status: BenchStatus::Excluded {
                    outcome: row.outcome.kind,
                    reason: format!("{}: {}", row.variant, row.outcome.message),
                },
                vs_fastest: None,
                vs_reference: None,
            });
            continue;
        }
        if jobs.is_empty() {
            continue;
        }
        timed.push(Participant::new(
            Unit::Native { jobs, key },
            named.given.clone(),
            options.criteria,
        ));
    }
    if timed.is_empty() {
        // A "no", with each target's reason: nothing is timed.
        return Ok(BenchReport::nothing_timed(
            given(plan),
            LABEL.to_owned(),
            plan.fingerprint.hash(),
            options.criteria,
            excluded,
            super::session::context(plan, None),
        ));
    }
    let participants = timed.len();
    let mut turns = Turns::default();
    start_each(
        &mut timed,
        BenchRole::Variant,
        participants,
        executors,
        options,
        interrupt,
        reporter,
        &mut turns,
    )?;
    time_all(
        &mut timed, &mut None, options, interrupt, reporter, &mut turns,
    )?;

    let mut report = BenchReport {
        target: given(plan),
        workload: LABEL.to_owned(),
        fingerprint: plan.fingerprint.hash(),
        device: device(plan),
        flush_l2: flushed(&timed),
        criteria: options.criteria,
        variants: timed.iter().map(|p| result(p, options.cpu_time)).collect(),
        reference: None,
        context: Some(super::session::context(plan, None)),
    };
    report.variants.append(&mut excluded);
    report.rank(options.seed);
    Ok(report)
}

/// The targets as given, for people.
fn given(plan: &Plan) -> String {
    plan.targets
        .iter()
        .map(|t| t.given.as_str())
        .collect::<Vec<_>>()
        .join(", ")
}

/// The device timed on, for people: the CUDA ordinal the modules ran on,
/// with the GPU's model where the fingerprint knows it.
fn device(plan: &Plan) -> String {
    let ordinal = plan.jobs.first().map_or(0, |j| j.probe.device.ordinal());
    let model = plan
        .fingerprint
        .gpus
        .devices
        .get(ordinal as usize)
        .and_then(|g| g.model.clone());
    match model {
        Some(model) => format!("cuda:{ordinal} ({model})"),
        None => format!("cuda:{ordinal}"),
    }
}
