//! What the bench keeps: each timed variant's result, under its job and
//! workload for `select --fastest`, through `run`'s seam to the cache
//! ([`Plan::keep_bench`](crate::run::Plan)).

use super::result::{BenchReport, BenchStatus, Timer};
use crate::discover::Target;
use crate::run::{BenchRecord, DEFAULT_WORKLOAD, Plan, TargetId};

/// Keep each timed variant's result in the cache under its job and
/// `workload` (as asked for: `None` is [`DEFAULT_WORKLOAD`]); `Err` says
/// why the cache could not be written.
pub(super) fn store(
    plan: &Plan,
    report: &BenchReport,
    workload: Option<&str>,
) -> Result<(), String> {
    for row in &report.variants {
        let BenchStatus::Timed(t) = &row.status else {
            continue;
        };
        // A hub variant is one job; a native target (named as given) is
        // kept under the key of all its modules together.
        let native = plan
            .targets
            .iter()
            .position(|t| matches!(t.target, Target::Native(_)) && t.given == row.variant);
        let key = match native {
            Some(target) => plan.target_key(TargetId(target)),
            None => plan
                .jobs
                .iter()
                .find(|j| j.name == row.variant)
                .and_then(|j| j.key.clone()),
        };
        let Some(key) = key else {
            continue;
        };
        let record = BenchRecord {
            variant: row.variant.clone(),
            label: report.workload.clone(),
            summary: t.summary,
            samples_ms: t.samples_ms.clone(),
            rounds: t.rounds.clone(),
            stop: t.stop,
            dropped_throttled: t.dropped_throttled,
            timer: match t.timer {
                Timer::DeviceEvents => "device_events",
                Timer::HostClock => "host_clock",
                Timer::CpuTime => "cpu_time",
            }
            .into(),
            flush_l2: report.flush_l2,
            // The run's line of the machine, set where it is kept.
            machine: String::new(),
        };
        plan.keep_bench(&key, workload.unwrap_or(DEFAULT_WORKLOAD), record)?;
    }
    Ok(())
}
