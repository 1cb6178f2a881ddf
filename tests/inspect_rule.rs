//! The compatibility rule (REFERENCE §3) as a table: which image runs on
//! which compute capability, and why not.

use kernel_preflight::declared::arch::{
    ComputeCapability, PtxIsa, Runnable, Target, driver_max_ptx_isa, verdict,
};

fn cc(s: &str) -> ComputeCapability {
    s.parse().unwrap()
}

fn t(s: &str) -> Target {
    s.parse().unwrap()
}

fn runs(target: &str, gpu: &str) -> bool {
    t(target).runs_on(cc(gpu))
}

#[test]
fn sass_runs_on_the_same_major_with_a_minor_at_least_as_high() {
    assert!(runs("sm_80", "8.0"));
    assert!(runs("sm_80", "8.6"));
    assert!(runs("sm_80", "8.9"));
    assert!(runs("sm_86", "8.9"));
    assert!(!runs("sm_86", "8.0"));
    assert!(!runs("sm_80", "9.0"), "never across majors");
    assert!(!runs("sm_90", "10.0"));
    assert!(runs("sm_100", "10.3"));
    assert!(runs("sm_120", "12.1"));
}

#[test]
fn desktop_sass_does_not_run_on_tegra() {
    assert!(!runs("sm_86", "8.7"), "sm_86 does not cover Orin 8.7");
    assert!(!runs("sm_80", "8.7"));
    assert!(runs("sm_87", "8.7"));
    assert!(!runs("sm_87", "8.9"));
    assert!(runs("compute_80", "8.7"), "PTX JIT crosses the boundary");
}

#[test]
fn arch_specific_runs_only_on_exactly_its_capability() {
    assert!(runs("sm_90a", "9.0"));
    assert!(!runs("sm_90a", "9.1"));
    assert!(runs("sm_100a", "10.0"));
    assert!(!runs("sm_100a", "10.3"));
    assert!(!runs("sm_120a", "12.1"));
    assert!(runs("compute_90a", "9.0"));
    assert!(
        !runs("compute_90a", "10.0"),
        "arch-specific PTX does not go forward"
    );
}

#[test]
fn family_runs_within_its_family() {
    for (target, yes, no) in [
        (
            "sm_100f",
            &["10.0", "10.3"][..],
            &["9.0", "11.0", "12.0"][..],
        ),
        ("sm_103f", &["10.3"][..], &["10.0", "11.0"][..]),
        ("sm_110f", &["11.0"][..], &["10.0", "10.3", "12.0"][..]),
        ("sm_120f", &["12.0", "12.1"][..], &["10.0", "11.0"][..]),
        ("sm_121f", &["12.1"][..], &["12.0"][..]),
        ("compute_100f", &["10.0", "10.3"][..], &["12.0"][..]),
    ] {
        for gpu in yes {
            assert!(runs(target, gpu), "{target} should run on {gpu}");
        }
        for gpu in no {
            assert!(!runs(target, gpu), "{target} should not run on {gpu}");
        }
    }
}

#[test]
fn plain_ptx_jits_on_any_later_capability() {
    assert!(runs("compute_80", "8.0"));
    assert!(runs("compute_80", "9.0"));
    assert!(runs("compute_90", "12.1"));
    assert!(!runs("compute_90", "8.9"));
}

fn images(list: &[(&str, Option<(u32, u32)>)]) -> Vec<(Target, Option<PtxIsa>)> {
    list.iter()
        .map(|(s, isa)| (t(s), isa.map(|(a, b)| PtxIsa::new(a, b))))
        .collect()
}

#[test]
fn flash_attn3_on_a_b200_has_no_image() {
    let set = images(&[("sm_80", None), ("sm_90a", None)]);
    let v = verdict(&set, cc("10.0"), None);
    assert!(!v.runnable);
    assert_eq!(v.how, Runnable::UnsupportedArch);
    assert_eq!(
        v.summary,
        "SASS for sm_80 and sm_90a, no PTX; this GPU is sm_100: no image can run here"
    );
    let v = verdict(&set, cc("9.0"), None);
    assert_eq!(
        v.how,
        Runnable::Sass {
            target: t("sm_90a")
        }
    );
    let v = verdict(&set, cc("8.6"), None);
    assert_eq!(v.how, Runnable::Sass { target: t("sm_80") });
}

#[test]
fn best_sass_is_preferred_over_ptx() {
    let set = images(&[
        ("sm_80", None),
        ("sm_90", None),
        ("sm_90a", None),
        ("compute_90", Some((8, 0))),
    ]);
    assert_eq!(
        verdict(&set, cc("9.0"), None).how,
        Runnable::Sass {
            target: t("sm_90a")
        }
    );
    assert_eq!(
        verdict(&set, cc("8.9"), None).how,
        Runnable::Sass { target: t("sm_80") }
    );
    let v = verdict(&set, cc("12.0"), Some(PtxIsa::new(8, 7)));
    assert_eq!(
        v.how,
        Runnable::PtxJit {
            target: t("compute_90"),
            isa: Some(PtxIsa::new(8, 0))
        }
    );
    assert!(
        v.summary
            .ends_with("JIT-compiles the compute_90 PTX (ISA 8.0)"),
        "{}",
        v.summary
    );
}

#[test]
fn ptx_newer_than_the_driver_is_ptx_too_new() {
    let set = images(&[("sm_90a", None), ("compute_90", Some((9, 5)))]);
    let v = verdict(&set, cc("10.3"), Some(PtxIsa::new(9, 0)));
    assert!(!v.runnable);
    assert_eq!(
        v.how,
        Runnable::PtxTooNew {
            target: t("compute_90"),
            isa: PtxIsa::new(9, 5),
            driver_max: PtxIsa::new(9, 0)
        }
    );
    assert!(
        v.summary.contains("newer than this driver's JIT (9.0)"),
        "{}",
        v.summary
    );
    // Unknown driver: assumed able, and said so.
    let v = verdict(&set, cc("10.3"), None);
    assert!(v.runnable);
    assert!(
        v.summary.ends_with("if the driver supports that ISA"),
        "{}",
        v.summary
    );
    // The older of two PTX images is picked when the newer is too new.
    let set = images(&[("compute_80", Some((8, 0))), ("compute_90", Some((9, 5)))]);
    let v = verdict(&set, cc("10.0"), Some(PtxIsa::new(8, 4)));
    assert_eq!(
        v.how,
        Runnable::PtxJit {
            target: t("compute_80"),
            isa: Some(PtxIsa::new(8, 0))
        }
    );
}

#[test]
fn no_images_is_its_own_answer() {
    let v = verdict(&[], cc("9.0"), None);
    assert!(!v.runnable);
    assert_eq!(v.how, Runnable::NoImages);
}

#[test]
fn driver_versions_map_to_ptx_isa() {
    for (driver, isa) in [
        ("520.61.05", (7, 8)),
        ("535.146.02", (8, 2)),
        ("550.54.14", (8, 4)),
        ("560.35.03", (8, 5)),
        ("570.86.10", (8, 7)),
        ("575.51.03", (8, 8)),
        ("580.65.06", (9, 0)),
        ("590.44.01", (9, 1)),
        ("610.43.02", (9, 3)),
    ] {
        assert_eq!(
            driver_max_ptx_isa(driver),
            Some(PtxIsa::new(isa.0, isa.1)),
            "{driver}"
        );
    }
    assert_eq!(driver_max_ptx_isa("515.65.01"), None);
    // Written without its patch, a version is every patch of its release.
    assert_eq!(driver_max_ptx_isa("580.65"), Some(PtxIsa::new(9, 0)));
    assert_eq!(driver_max_ptx_isa("570.86"), Some(PtxIsa::new(8, 7)));
}

#[test]
fn capabilities_parse_from_the_usual_spellings() {
    assert_eq!(cc("9.0"), ComputeCapability::new(9, 0));
    assert_eq!(cc("sm_121"), ComputeCapability::new(12, 1));
    assert_eq!(cc("103"), ComputeCapability::new(10, 3));
    for bad in ["", "9", "nine", "9.10", "0.0", "x.y"] {
        assert!(bad.parse::<ComputeCapability>().is_err(), "{bad:?} parsed");
    }
}
