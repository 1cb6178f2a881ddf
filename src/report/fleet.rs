//! Output of `preflight fleet ls` and `preflight fleet diff`.

use super::grid::Grid;
use crate::run::fleet::{Fleet, FleetDiff, KernelVerdicts, MachineClass, VariantVerdict};

/// Per machine class: its facts, then a table of its kernels' variants
/// (the chosen one marked) in the hub's preference order.
pub fn list(fleet: &Fleet) -> String {
    let mut out = format!(
        "{} in the remote store, {} refused\n",
        super::count(fleet.classes.len(), "machine class|machine classes"),
        fleet.refused
    );
    for h in &fleet.here {
        // The path on a line of its own: it is as long as it is.
        out.push_str(&format!(
            "this machine's environment of class {}:\n  --python {}\n",
            h.class,
            h.python.display()
        ));
    }
    for class in &fleet.classes {
        out.push('\n');
        out.push_str(&facts(class));
        for kernel in &class.kernels {
            let chosen = kernel.chosen.as_deref().unwrap_or("none works");
            out.push_str(&format!("{} → {chosen}\n", name(kernel)));
            out.push_str(&format!("{}\n", verdicts(kernel)));
        }
    }
    out.trim_end().to_string()
}

/// A kernel's variants, each with its outcome in the hub's preference
/// order, the chosen one marked.
fn verdicts(kernel: &KernelVerdicts) -> Grid {
    let mut table = super::table(&["variant", "outcome", "note"]);
    for v in &kernel.variants {
        table.add_row(vec![
            v.variant.clone(),
            v.outcome.to_string(),
            note(kernel, v).to_string(),
        ]);
    }
    table
}

/// What a variant's row notes: chosen, or not accepted by name.
pub(super) fn note(kernel: &KernelVerdicts, v: &VariantVerdict) -> &'static str {
    if kernel.chosen.as_deref() == Some(v.variant.as_str()) {
        "chosen"
    } else if !v.accepted {
        "not accepted by name"
    } else {
        ""
    }
}

/// The facts and verdicts that differ between two classes.
pub fn diff(diff: &FleetDiff) -> String {
    let (a, b) = (diff.a.as_str(), diff.b.as_str());
    if a == b {
        return format!("classes {a} and {b} are one class");
    }
    let mut out = format!(
        "classes {a} and {b} differ in {}, {}, {}\n",
        super::count(diff.facts.len(), "fact"),
        super::count(diff.chosen.len(), "choice"),
        super::count(diff.verdicts.len(), "verdict"),
    );
    let none = || "-".to_string();
    if diff.facts.is_empty() {
        out.push_str(
            "no fact shown here differs: their fingerprints differ in what it leaves out\n\
             (CPU, C library, installed packages, …)\n",
        );
    } else {
        let mut table = super::table(&["fact", a, b]);
        for f in &diff.facts {
            table.add_row(vec![
                f.fact.clone(),
                f.a.clone().unwrap_or_else(none),
                f.b.clone().unwrap_or_else(none),
            ]);
        }
        out.push_str(&format!("{table}\n"));
    }
    if !diff.chosen.is_empty() || !diff.verdicts.is_empty() {
        let mut table = super::table(&["kernel", "variant", a, b]);
        for c in &diff.chosen {
            table.add_row(vec![
                at(&c.kernel, c.version.as_deref()),
                "(chosen)".into(),
                c.a.clone().unwrap_or_else(|| "none".into()),
                c.b.clone().unwrap_or_else(|| "none".into()),
            ]);
        }
        for v in &diff.verdicts {
            table.add_row(vec![
                at(&v.kernel, v.version.as_deref()),
                v.variant.clone(),
                v.a.map_or_else(none, |k| k.to_string()),
                v.b.map_or_else(none, |k| k.to_string()),
            ]);
        }
        out.push_str(&format!("{table}\n"));
    }
    out.trim_end().to_string()
}

/// A class's heading and its facts, one a line.
fn facts(class: &MachineClass) -> String {
    let mut out = format!("machine class {}\n", class.class);
    match &class.facts {
        Some(facts) => {
            for (name, value) in facts.named() {
                out.push_str(&format!("  {name:<8} {value}\n"));
            }
        }
        None => out.push_str(&format!("  machine  {}\n", class.machine)),
    }
    out
}

fn name(kernel: &KernelVerdicts) -> String {
    at(&kernel.kernel, kernel.version.as_deref())
}

/// `kernel@version`, or the kernel alone without a version.
pub(super) fn at(kernel: &str, version: Option<&str>) -> String {
    match version {
        Some(v) => format!("{kernel}@{v}"),
        None => kernel.to_string(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::classify::OutcomeKind;

    fn verdict(variant: &str, outcome: OutcomeKind, accepted: bool) -> VariantVerdict {
        VariantVerdict {
            variant: variant.into(),
            outcome,
            accepted,
        }
    }

    #[test]
    fn a_kernels_table_fits_80_columns() {
        let kernel = KernelVerdicts {
            kernel: "kernels-community/activation".into(),
            version: Some("0123456789ab".into()),
            chosen: Some("torch28-cxx11-cu128-x86_64-linux".into()),
            variants: vec![
                verdict(
                    "torch28-cxx11-cu129-x86_64-linux",
                    OutcomeKind::UnsupportedArch,
                    true,
                ),
                verdict("torch28-cxx11-cu128-x86_64-linux", OutcomeKind::Pass, true),
                verdict(
                    "torch27-cxx11-cu126-x86_64-linux",
                    OutcomeKind::MissingDependency,
                    true,
                ),
                verdict("torch-universal", OutcomeKind::Pass, false),
            ],
        };
        let mut table = verdicts(&kernel);
        table.set_width(80);
        let expected = "\
┌──────────────────────────────────┬────────────────────┬──────────────────────┐
│ variant                          ┆ outcome            ┆ note                 │
╞══════════════════════════════════╪════════════════════╪══════════════════════╡
│ torch28-cxx11-cu129-x86_64-linux ┆ unsupported_arch   ┆                      │
│ torch28-cxx11-cu128-x86_64-linux ┆ pass               ┆ chosen               │
│ torch27-cxx11-cu126-x86_64-linux ┆ missing_dependency ┆                      │
│ torch-universal                  ┆ pass               ┆ not accepted by name │
└──────────────────────────────────┴────────────────────┴──────────────────────┘";
        let text = table.to_string();
        assert!(text.lines().all(|l| l.chars().count() <= 80), "{text}");
        assert_eq!(text, expected, "{text}");
    }
}
