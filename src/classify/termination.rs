//! How a child ended, when it reported no failure: one set of rules for
//! every executor (pass, deadline, cancel, signal, exit code), with the
//! child's stderr error lines consulted only here.

use super::machine::Machine;
use super::stderr::{decisive_lines, last_said};
use super::text::from_text;
use super::{Cause, Depth, Outcome, OutcomeKind, Phase, STDERR_TAIL_LINES, hints, strip_ansi};
use crate::protocol::{CHANNEL_LIMIT, Evidence, Report};
use crate::sandbox::{Exhausted, Termination};

/// The outcome of a child that reported no failure.
pub(super) fn decide(evidence: &Evidence, report: &Report, machine: &Machine) -> Outcome {
    let phase = report.last_phase.unwrap_or(Phase::Start);
    let from = |cause: Cause| Outcome::from_cause(cause, phase);
    match &evidence.termination {
        Termination::Exited { code: 0 } if report.done() => pass(report),
        // The evidence stands; what kept the interpreter alive is a fact
        // about the variant too.
        Termination::DidNotExit { within } if report.done() => {
            let mut outcome = pass(report);
            outcome.warning = Some(format!(
                "{} (it had not exited {:.1} s after its probe was done)",
                hints::WILL_NOT_EXIT,
                within.as_secs_f64()
            ));
            outcome
        }
        Termination::SandboxKilled { name, stopped, .. } => from(Cause::new(
            OutcomeKind::Crashed,
            if *stopped {
                format!(
                    "the kernel stopped its sandbox ({name}) in phase {}; it was killed",
                    phase.as_str()
                )
            } else {
                format!(
                    "the kernel killed its sandbox ({name}) in phase {}",
                    phase.as_str()
                )
            },
            hints::SANDBOX_KILLED,
        )),
        Termination::TimedOut { after, .. } | Termination::DidNotExit { within: after } => {
            from(Cause::new(
                OutcomeKind::Timeout,
                format!(
                    "no result within {:.1} s (still in phase {})",
                    after.as_secs_f64(),
                    phase.as_str()
                ),
                hints::TIMEOUT,
            ))
        }
        Termination::Cancelled => {
            let mut outcome = Outcome::probe_error(phase, "probe cancelled (interrupted)");
            outcome.hint = hints::CANCELLED.into();
            outcome.transient = true;
            outcome
        }
        Termination::Signaled { name, signal, .. } => {
            from(stderr_cause(evidence, phase, machine).unwrap_or_else(|| {
                Cause::new(
                    OutcomeKind::Crashed,
                    format!("killed by {name} in phase {}", phase.as_str()),
                    if *signal == libc::SIGKILL {
                        hints::KILLED
                    } else {
                        hints::CRASHED
                    },
                )
            }))
        }
        Termination::Exited { code: 0 } => match &evidence.channel.unreadable {
            Some(why) => Outcome::probe_error(
                phase,
                &format!("child exited 0 but its result channel is unreadable: {why}"),
            ),
            None if evidence.channel.truncated => Outcome::probe_error(
                phase,
                &format!(
                    "child exited 0 but its result channel passed {CHANNEL_LIMIT} bytes and was cut (last phase read: {})",
                    phase.as_str()
                ),
            ),
            // The driver never exits 0 before it reports a result: what
            // did was the code it was loading.
            None if report.last_phase.is_some() => from(Cause::new(
                OutcomeKind::Exited,
                format!(
                    "exited with code 0 in phase {} before reporting a result",
                    phase.as_str()
                ),
                hints::EXITED_EARLY,
            )),
            None => Outcome::probe_error(
                phase,
                &format!(
                    "child exited 0 without reporting a result (last phase: {})",
                    phase.as_str()
                ),
            ),
        },
        Termination::Exited { code } if report.last_phase.is_none() => Outcome::probe_error(
            Phase::Start,
            &format!(
                "the {} child did not start (exit {code}): {}",
                evidence.executor,
                last_line(&evidence.stderr).unwrap_or("no output")
            ),
        ),
        Termination::Exited { code } => {
            from(stderr_cause(evidence, phase, machine).unwrap_or_else(|| {
                let said = decisive_lines(&evidence.stderr)
                    .pop()
                    .or_else(|| last_said(&evidence.stderr));
                Cause::new(
                    OutcomeKind::Exited,
                    match said {
                        Some(line) => format!("exited with code {code}: {line}"),
                        None => format!("exited with code {code} without a message"),
                    },
                    hints::EXITED,
                )
            }))
        }
    }
}

/// A known cause in the error lines of stderr, last line first: what a
/// child that died without reporting said last is what killed it.
fn stderr_cause(evidence: &Evidence, phase: Phase, machine: &Machine) -> Option<Cause> {
    decisive_lines(&evidence.stderr)
        .iter()
        .rev()
        .find_map(|line| from_text(line, phase, machine))
}

fn pass(report: &Report) -> Outcome {
    let depth = report.done.unwrap_or(Depth::Load);
    let mut outcome = Outcome::new(OutcomeKind::Pass, Phase::Done, pass_message(report, depth));
    outcome.depth = Some(depth);
    outcome
}

/// What a pass did, from the facts the child reported.
fn pass_message(report: &Report, depth: Depth) -> String {
    let launches = report.launched.len();
    let what = if launches > 0 && depth == Depth::Verified {
        format!(
            "{launches} launch(es) verified ({} values)",
            report.compared
        )
    } else if launches > 0 {
        format!("{launches} launch(es) ran (nothing to verify)")
    } else if report.loaded {
        "module loaded (no launches)".to_owned()
    } else if report.module.is_none() && report.device.is_some() {
        "driver and device answered".to_owned()
    } else {
        match depth {
            Depth::Verified => "smoke workload verified against its reference",
            Depth::Smoke => "smoke workload ran (no reference to verify against)",
            Depth::Device if report.module.is_some() => {
                "imported; the device is usable (no smoke workload)"
            }
            Depth::Device => "imported; its device code loaded",
            Depth::Load => "imported (no smoke workload)",
        }
        .to_owned()
    };
    let what = match (&report.device, &report.runtime.device) {
        (Some(d), _) => format!("{what} on {} ({})", d.name, d.sm()),
        (None, Some(device)) => format!("{what} on {device}"),
        (None, None) => what,
    };
    match report.runtime.acceptance.as_deref() {
        Some("preflight") => format!("{what}; hub rules applied by preflight (no `kernels` here)"),
        Some(judge) => match super::unknown_loader(judge) {
            Some(why) => format!("{what}; hub rules applied by preflight ({why})"),
            None => format!("{what}; accepted by {judge}"),
        },
        None => what,
    }
}

/// What every outcome records of how the child ended: its exit code or
/// signal, and the tail of its stderr.
pub(super) fn record(outcome: &mut Outcome, evidence: &Evidence) {
    match &evidence.termination {
        Termination::Exited { code } => outcome.exit_code = Some(*code),
        Termination::Signaled { name, .. } | Termination::SandboxKilled { name, .. } => {
            outcome.signal = Some(name.clone())
        }
        Termination::TimedOut { .. } | Termination::Cancelled | Termination::DidNotExit { .. } => {}
    }
    let stderr = strip_ansi(&evidence.stderr);
    let lines: Vec<&str> = stderr.lines().collect();
    outcome.stderr_tail = lines[lines.len().saturating_sub(STDERR_TAIL_LINES)..].join("\n");
}

fn last_line(text: &str) -> Option<&str> {
    text.lines().map(str::trim).rfind(|l| !l.is_empty())
}

/// `outcome` named after the bound its probe reached, when it failed and
/// reached one (the sandbox counts them, `Exhausted`): the out-of-memory
/// killer at its memory bound is `out_of_memory`, whatever signal the
/// child died of; a refused fork or thread keeps its kind (the
/// `BlockingIOError` the variant's import raised is its `import_error`)
/// and says why it was refused. Either depends on what the machine left
/// the probe: transient.
pub(super) fn exhausted(outcome: &mut Outcome, evidence: &Evidence) {
    if outcome.kind.passed() {
        return;
    }
    for bound in &evidence.exhausted {
        match bound {
            Exhausted::Memory { .. } => {
                outcome.kind = OutcomeKind::OutOfMemory;
                outcome.message = format!(
                    "the out-of-memory killer ended it at {bound} in phase {} ({})",
                    outcome.phase.as_str(),
                    evidence.termination
                );
                outcome.hint = hints::PROBE_MEMORY.into();
            }
            Exhausted::Pids { .. } if outcome.kind != OutcomeKind::OutOfMemory => {
                outcome.message = format!("{} (it reached {bound})", outcome.message);
                outcome.hint = hints::PROBE_PIDS.into();
            }
            Exhausted::Pids { .. } => {}
        }
        outcome.transient = true;
    }
}
