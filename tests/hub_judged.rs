//! Verdicts judged ahead (`PythonExecutor::judge_ahead`): one child judges
//! the hub's acceptance of many variants, each probe child replays its own.
//! A replayed verdict must give the very outcome a probe that judges itself
//! gives, with the real `kernels` as the judge and with preflight's copy of
//! its rules; a verdict on other bytes of `metadata.json` is never used; the
//! judge stops where its next verdict might not be a fresh interpreter's.

mod probe_fixtures;

use kernel_preflight::classify::OutcomeKind;
use kernel_preflight::probe::{PythonExecutor, SmokeSource};
use kernel_preflight::sandbox::Cancel;
use probe_fixtures::{
    Repo, bare_python, job, metadata, probe_job, probe_job_fresh, python, quick_limits,
};
use serde_json::{Value, json};
use std::path::{Path, PathBuf};

/// A variant's import fails when the hub's validators were imported in its
/// own child: it passes only when its child replayed a verdict.
const ONLY_JUDGED_AHEAD: &str = "import sys\n\
if 'kernels.validate' in sys.modules:\n    raise RuntimeError('judged in this child')\n";

fn dirty() -> Value {
    json!({
        "kernel-builder": {"version": "0.17.0", "sha": "d0610aa58db33b142c86b59598a2a1c730f52996", "dirty": true},
        "kernel": {"sha": "d45addadb0c380f3d7cc2813310b3bcd75f8aa9a", "dirty": true},
    })
}

/// Metadata of the cases, by name: how each differs from a good one.
fn case(name: &str) -> Value {
    let mut m = metadata("torch-universal");
    match name {
        "good" => {}
        "minver-newer-than-installed" => m["kernels-minver"] = json!("99.0.0"),
        "no-license" => {
            m.as_object_mut().unwrap().remove("license");
        }
        "allowed-dependency-not-installed" => m["python-depends"] = json!(["einops"]),
        "dependency-not-allowed" => m["python-depends"] = json!(["numpy"]),
        "dirty-provenance" => m["provenance"] = dirty(),
        "version-as-a-string" => m["version"] = json!("1"),
        other => panic!("no case {other}"),
    }
    m
}

const CASES: &[&str] = &[
    "good",
    "minver-newer-than-installed",
    "no-license",
    "allowed-dependency-not-installed",
    "dependency-not-allowed",
    "dirty-provenance",
    "version-as-a-string",
];

/// One repo per case, so that every variant can be `torch-universal`.
fn variants(names: &[&str], init: &str) -> (Vec<Repo>, Vec<PathBuf>) {
    let repos: Vec<Repo> = names.iter().map(|_| Repo::new()).collect();
    let paths = repos
        .iter()
        .zip(names)
        .map(|(repo, name)| repo.variant_with("torch-universal", init, case(name)))
        .collect();
    (repos, paths)
}

fn judged(python: &Path, variants: &[PathBuf]) -> (PythonExecutor, usize) {
    let executor = PythonExecutor::new(python).judging();
    let count = executor
        .judge_ahead(variants, &quick_limits(), &Cancel::new())
        .expect("the judge runs");
    (executor, count)
}

/// Every case, judged alone ahead of its probe, gives the outcome (and the
/// judge's name) of a probe that judges itself.
fn replayed_verdicts_change_no_outcome(python: &Path) {
    let (_repos, paths) = variants(CASES, "X = 1\n");
    for (name, variant) in CASES.iter().zip(&paths) {
        let (executor, count) = judged(python, std::slice::from_ref(variant));
        let expect = if *name == "dirty-provenance" { 0 } else { 1 };
        assert_eq!(count, expect, "{name}: verdicts judged ahead");
        let job = job(variant, SmokeSource::LoadOnly, quick_limits());
        let (replayed, replayed_outcome) = probe_job(&executor, &job);
        let (own, own_outcome) = probe_job(&PythonExecutor::new(python), &job);
        assert_eq!(replayed_outcome, own_outcome, "{name}");
        assert_eq!(
            replayed.report.runtime.acceptance, own.report.runtime.acceptance,
            "{name}"
        );
    }
}

#[test]
fn with_kernels_a_replayed_verdict_is_the_hubs_own() {
    replayed_verdicts_change_no_outcome(&python());
}

#[test]
fn without_kernels_a_replayed_verdict_is_preflights_rules() {
    replayed_verdicts_change_no_outcome(&bare_python());
}

#[test]
fn a_probe_replays_the_verdict_instead_of_judging_again() {
    let (_repos, paths) = variants(&["good"], ONLY_JUDGED_AHEAD);
    let job = job(&paths[0], SmokeSource::LoadOnly, quick_limits());
    let (_, own) = probe_job(&PythonExecutor::new(python()), &job);
    assert_ne!(own.kind, OutcomeKind::Pass, "judged in its own child");
    let (executor, count) = judged(&python(), &paths);
    assert_eq!(count, 1);
    // A forked probe starts with `kernels` imported by its server: what
    // this variant checks for is there in any case.
    let (run, replayed) = probe_job_fresh(&executor, &job);
    assert_eq!(replayed.kind, OutcomeKind::Pass, "{replayed:?}");
    assert!(
        run.report
            .runtime
            .acceptance
            .as_deref()
            .is_some_and(|a| a.starts_with("kernels ")),
        "{:?}",
        run.report.runtime.acceptance
    );
}

#[test]
fn a_verdict_on_other_metadata_is_not_used() {
    let (_repos, paths) = variants(&["good"], ONLY_JUDGED_AHEAD);
    let (executor, count) = judged(&python(), &paths);
    assert_eq!(count, 1);
    // Changed after the judge read it: the probe judges the new bytes itself.
    std::fs::write(
        paths[0].join("metadata.json"),
        case("minver-newer-than-installed").to_string(),
    )
    .unwrap();
    let (_, outcome) = probe_job(
        &executor,
        &job(&paths[0], SmokeSource::LoadOnly, quick_limits()),
    );
    assert_eq!(outcome.kind, OutcomeKind::DependencyVersion, "{outcome:?}");
}

#[test]
fn the_judge_goes_on_only_while_a_fresh_interpreter_would_say_the_same() {
    let count = |names: &[&str]| {
        let (_repos, paths) = variants(names, "X = 1\n");
        judged(&python(), &paths).1
    };
    // The parser's and the minver check's refusals leave no trace.
    assert_eq!(
        count(&[
            "version-as-a-string",
            "minver-newer-than-installed",
            "no-license",
            "good"
        ]),
        4
    );
    // A dependency refusal may come from a failed import: the rest judge themselves.
    assert_eq!(count(&["good", "dependency-not-allowed", "good"]), 2);
    // What a judgment prints is its probe's evidence.
    assert_eq!(count(&["good", "dirty-provenance", "good"]), 1);
    assert_eq!(judged(&python(), &[]).1, 0);
}
