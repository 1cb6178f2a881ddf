use super::*;
use crate::classify::OutcomeKind;
use crate::run::fleet::VariantVerdict;

fn class(hash: &str, chosen: Option<&str>, kernel: &str) -> MachineClass {
    MachineClass {
        class: hash[..12].into(),
        fingerprint: hash.into(),
        facts: None,
        machine: "no GPU, Python 3.12.3 [x]".into(),
        kernels: vec![KernelVerdicts {
            kernel: kernel.into(),
            version: Some("v1".into()),
            chosen: chosen.map(Into::into),
            variants: vec![VariantVerdict {
                variant: "torch-universal".into(),
                outcome: if chosen.is_some() {
                    OutcomeKind::Pass
                } else {
                    OutcomeKind::ImportError
                },
                accepted: true,
            }],
        }],
    }
}

#[test]
fn classes_that_disagree_are_said_in_words_and_every_value_is_escaped() {
    let fleet = Fleet {
        classes: vec![
            class(&"a".repeat(64), Some("torch-universal"), "org/<b>k</b>"),
            class(&"b".repeat(64), None, "org/<b>k</b>"),
        ],
        refused: 0,
        here: Vec::new(),
    };
    let page = html(&fleet, "now");
    assert!(page.contains("org/&lt;b&gt;k&lt;/b&gt;@v1"), "{page}");
    assert!(!page.contains("<b>k"), "{page}");
    assert_eq!(page.matches("classes disagree").count(), 1, "{page}");
    assert!(page.contains("✗ nothing works"), "{page}");
    assert!(
        page.contains("✓ <span class=\"variant\">torch-universal</span>"),
        "{page}"
    );
    // fleet diff's answer for the pair, open on the page.
    assert!(page.contains("<details open>"), "{page}");
    assert!(page.contains("0 facts, 1 choice, 1 verdict"), "{page}");
}

#[test]
fn a_class_without_the_kernel_has_no_verdict_and_does_not_disagree() {
    let mut other = class(&"b".repeat(64), Some("torch-universal"), "org/other");
    other.kernels[0].version = None;
    let fleet = Fleet {
        classes: vec![
            class(&"a".repeat(64), Some("torch-universal"), "org/k"),
            other,
        ],
        refused: 2,
        here: Vec::new(),
    };
    let page = html(&fleet, "now");
    assert_eq!(page.matches(">no verdict<").count(), 2, "{page}");
    assert!(!page.contains("classes disagree"), "{page}");
    assert!(page.contains("2 entries refused"), "{page}");
}
