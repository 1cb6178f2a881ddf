//! Native targets (a directory with a `preflight.toml`): every module
//! probed by the cuda executor in its own child, each classified, and one
//! verdict for the target.

use crate::classify::{self, Depth, Outcome, OutcomeKind, Phase, Timings};
use crate::probe::native::{NativeModule, NativeTarget};
use crate::probe::{Executor, Job, Placement, ProbeError};
use crate::protocol::Report;
use crate::sandbox::{Cancel, Limits};

/// What one module's probe showed.
#[derive(Debug, Clone)]
pub struct ModuleRun {
    /// The verdict.
    pub outcome: Outcome,
    /// Wall time, module load and launch time.
    pub timings: Timings,
    /// What its events said, folded.
    pub report: Report,
    /// Processes that outlived the child and were killed, if any.
    pub leaked: Option<String>,
}

/// The result of probing one native target.
#[derive(Debug, Clone)]
pub struct NativeReport {
    /// Each module with its run, in manifest order.
    pub modules: Vec<(NativeModule, ModuleRun)>,
    /// The target's verdict: the first module that did not pass, else a pass.
    pub outcome: Outcome,
    /// Summed wall and load times; the first module's launch time.
    pub timings: Timings,
}

/// Probes every module of `target` on device `device`, each in its own
/// child of `executor`.
pub fn probe(
    target: &NativeTarget,
    executor: &dyn Executor,
    limits: &Limits,
    device: u32,
    cancel: &Cancel,
) -> Result<NativeReport, ProbeError> {
    let mut modules = Vec::new();
    for module in &target.modules {
        let job = Job {
            device: Placement::Ordinal(device),
            limits: limits.clone(),
            ..Job::new(module.subject())
        };
        let evidence = executor.run(&job, cancel)?;
        let run = ModuleRun {
            outcome: classify::classify(&evidence),
            timings: evidence.timings(),
            report: evidence.report(),
            leaked: evidence.leaked,
        };
        modules.push((module.clone(), run));
    }
    let outcome = summarise(&modules);
    let sum = |f: fn(&Timings) -> Option<f64>| {
        let values: Vec<f64> = modules.iter().filter_map(|(_, r)| f(&r.timings)).collect();
        (!values.is_empty()).then(|| values.iter().sum())
    };
    let timings = Timings {
        total_ms: modules.iter().map(|(_, r)| r.timings.total_ms).sum(),
        import_ms: sum(|t| t.import_ms),
        smoke_ms: modules.iter().find_map(|(_, r)| r.timings.smoke_ms),
    };
    Ok(NativeReport {
        modules,
        outcome,
        timings,
    })
}

fn summarise(modules: &[(NativeModule, ModuleRun)]) -> Outcome {
    if let Some((module, run)) = modules.iter().find(|(_, r)| !r.outcome.kind.passed()) {
        let mut outcome = run.outcome.clone();
        outcome.message = classify::one_line(&format!("{}: {}", module.name(), outcome.message));
        return outcome;
    }
    let depth = modules
        .iter()
        .filter_map(|(_, r)| r.outcome.depth)
        .min()
        .unwrap_or(Depth::Load);
    let mut outcome = classify::outcome(
        OutcomeKind::Pass,
        Phase::Done,
        &format!(
            "{} module(s) passed: {}",
            modules.len(),
            modules
                .iter()
                .map(|(_, r)| r.outcome.message.as_str())
                .collect::<Vec<_>>()
                .join("; ")
        ),
        "",
    );
    outcome.depth = Some(depth);
    outcome
}
