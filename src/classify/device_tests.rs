//! One outcome from a compiled CUDA variant's two probes: the import and
//! the device load of its embedded code.

use super::*;
use crate::protocol::{CudaError, EmbeddedLoad};

fn outcome(kind: OutcomeKind, phase: Phase, depth: Option<Depth>) -> Outcome {
    let mut o = Outcome::new(kind, phase, format!("{kind} in {}", phase.as_str()));
    o.depth = depth;
    o
}

fn load(error: Option<i64>) -> EmbeddedLoad {
    EmbeddedLoad {
        file: "_ops.so".into(),
        images: "SASS for sm_80, no PTX".into(),
        loaded: u32::from(error.is_none()),
        relocatable: 0,
        other_gpus: 0,
        taken: None,
        load_ms: 1.0,
        jit_ms: None,
        error: error.map(|code| CudaError {
            call: "cuModuleLoadDataEx (_ops.so)".into(),
            code,
            name: String::new(),
            message: String::new(),
            log: None,
        }),
    }
}

fn device(kind: OutcomeKind, error: Option<i64>) -> Outcome {
    let mut o = outcome(kind, Phase::Load, None);
    if kind.passed() {
        o.depth = Some(Depth::Device);
    }
    o.embedded = vec![load(error)];
    o
}

#[test]
fn a_refused_load_is_the_answer_once_the_import_reached_the_device() {
    use OutcomeKind::*;
    let refused = || device(UnsupportedArch, Some(209));
    // Imported and the device confirmed: the load decides, before any
    // smoke, and the variant got as far as its import (its code never
    // loaded on the device).
    let o = with_device_code(outcome(Pass, Phase::Done, Some(Depth::Device)), refused());
    assert_eq!(
        (o.kind, o.phase, o.depth),
        (UnsupportedArch, Phase::Load, Some(Depth::Load))
    );
    assert_eq!(o.embedded, [load(Some(209))]);
    // A smoke that died (the kernel's exit(1)) is explained by the load.
    let o = with_device_code(outcome(Exited, Phase::Smoke, None), refused());
    assert_eq!(o.kind, UnsupportedArch);
    // What stopped the import first is the better answer.
    for early in [
        outcome(MissingDependency, Phase::Import, None),
        outcome(NoDevice, Phase::Load, None),
        outcome(ImportError, Phase::Start, None),
    ] {
        let kind = early.kind;
        let o = with_device_code(early, refused());
        assert_eq!(o.kind, kind);
        assert_eq!(o.embedded.len(), 1, "the loads travel with it");
    }
}

#[test]
fn a_pass_reaches_at_least_the_device_depth() {
    use OutcomeKind::*;
    let o = with_device_code(
        outcome(Pass, Phase::Done, Some(Depth::Device)),
        device(Pass, None),
    );
    assert_eq!((o.kind, o.depth), (Pass, Some(Depth::Device)));
    assert!(
        o.message
            .ends_with("its embedded CUDA code loaded (1 fatbin(s))"),
        "{}",
        o.message
    );
    let o = with_device_code(
        outcome(Pass, Phase::Done, Some(Depth::Verified)),
        device(Pass, None),
    );
    assert_eq!(o.depth, Some(Depth::Verified));
    // A smoke failure after a good load stays the smoke's.
    let o = with_device_code(
        outcome(WrongResult, Phase::Verify, None),
        device(Pass, None),
    );
    assert_eq!(o.kind, WrongResult);
    // A transient device failure keeps its transience (never cached).
    let mut busy = device(OutOfMemory, Some(2));
    busy.transient = true;
    let o = with_device_code(outcome(Pass, Phase::Done, Some(Depth::Device)), busy);
    assert!(o.transient && o.kind == OutOfMemory);
}
