//! A view of the fleet from its remote store: per machine class, per
//! kernel and version, the variant `select` would choose from the class's
//! verdicts and every variant's outcome (`fleet ls`); and what differs
//! between two classes, in verdicts and in facts (`fleet diff`).
//!
//! Only entries the fleet sealed count; the others are counted as refused.
//! Nothing here measures this machine: the view is of what was published.

use super::cached::remote::{self, Published};
use super::select::{Names, may_choose};
use super::{Session, SessionError};
use crate::classify::OutcomeKind;
use crate::fingerprint::ClassFacts;
use serde::Serialize;
use std::collections::{BTreeMap, BTreeSet};

/// How many hex digits of the fingerprint hash name a class.
const SHORT: usize = 12;

/// The fleet as its remote store shows it.
#[derive(Debug, Clone, Serialize)]
pub struct Fleet {
    /// Every machine class that published a verdict, by hash.
    pub classes: Vec<MachineClass>,
    /// Entries that were not believed (forged, truncated, another schema).
    pub refused: usize,
    /// The environments of this machine that were measured, with their
    /// class: which columns are this machine's, and the `--python` that
    /// reaches each.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub here: Vec<Here>,
}

/// One measured environment of this machine.
#[derive(Debug, Clone, Serialize)]
pub struct Here {
    /// Its machine class (the full fingerprint's first 12 hex digits).
    pub class: String,
    /// Its interpreter, as `--python` takes it.
    pub python: std::path::PathBuf,
}

/// One machine class and its verdicts.
#[derive(Debug, Clone, Serialize)]
pub struct MachineClass {
    /// The full fingerprint hash's first 12 digits (what `diff` takes, and
    /// the `machine-class` label's value).
    pub class: String,
    /// The full fingerprint hash.
    pub fingerprint: String,
    /// Its facts, as the newest of its entries tells them (`None`: only
    /// entries of earlier builds, which did not send them).
    pub facts: Option<ClassFacts>,
    /// Its machine in one line.
    pub machine: String,
    /// Its kernels, by name and version.
    pub kernels: Vec<KernelVerdicts>,
}

/// One kernel at one version, on one machine class.
#[derive(Debug, Clone, Serialize)]
pub struct KernelVerdicts {
    /// `ORG/NAME` (or its folder's name); `-` for native modules and
    /// entries of earlier builds.
    pub kernel: String,
    /// The hub revision (12 digits), when it lay in the hub cache.
    pub version: Option<String>,
    /// The variant `select` chooses from these verdicts: the first in the
    /// hub's preference order that is accepted by name and passes.
    pub chosen: Option<String>,
    /// Every variant with a verdict, in preference order.
    pub variants: Vec<VariantVerdict>,
}

/// One variant's verdict on one machine class.
#[derive(Debug, Clone, Serialize)]
pub struct VariantVerdict {
    /// The variant's name.
    pub variant: String,
    /// Its outcome.
    pub outcome: OutcomeKind,
    /// Whether the hub loader accepts it by name on that class.
    pub accepted: bool,
}

/// What differs between two machine classes.
#[derive(Debug, Clone, Serialize)]
pub struct FleetDiff {
    /// The first class.
    pub a: String,
    /// The second class.
    pub b: String,
    /// The facts that differ.
    pub facts: Vec<FactDiff>,
    /// The choices that differ, per kernel and version.
    pub chosen: Vec<ChoiceDiff>,
    /// The verdicts that differ (or that one class has and the other not).
    pub verdicts: Vec<VerdictDiff>,
    /// Entries that were not believed.
    pub refused: usize,
}

/// One fact that differs.
#[derive(Debug, Clone, Serialize)]
pub struct FactDiff {
    /// Its name (`driver`, `torch`, …).
    pub fact: String,
    /// On the first class (`None`: it sent no facts).
    pub a: Option<String>,
    /// On the second class.
    pub b: Option<String>,
}

/// A kernel whose chosen variant differs.
#[derive(Debug, Clone, Serialize)]
pub struct ChoiceDiff {
    /// The kernel.
    pub kernel: String,
    /// Its version.
    pub version: Option<String>,
    /// Chosen on the first class (`None`: none works there, or no
    /// verdict).
    pub a: Option<String>,
    /// Chosen on the second class.
    pub b: Option<String>,
}

/// A variant whose verdict differs.
#[derive(Debug, Clone, Serialize)]
pub struct VerdictDiff {
    /// The kernel.
    pub kernel: String,
    /// Its version.
    pub version: Option<String>,
    /// The variant.
    pub variant: String,
    /// On the first class (`None`: no verdict there).
    pub a: Option<OutcomeKind>,
    /// On the second class.
    pub b: Option<OutcomeKind>,
}

/// The two classes `fleet diff` compares: hashes or unique prefixes.
#[derive(Debug, Clone)]
pub struct DiffOptions {
    /// The first class.
    pub a: String,
    /// The second class.
    pub b: String,
}

impl Session {
    /// The fleet as the remote store shows it (`fleet ls`). Without a
    /// remote store, or one that cannot be listed, the request is refused
    /// (bad input: the setting is the user's).
    pub fn fleet(&self) -> Result<Fleet, SessionError> {
        let (published, refused) = remote::published(&self.cache).map_err(SessionError::Refused)?;
        Ok(Fleet {
            classes: classes(published),
            refused,
            here: self.here()?,
        })
    }

    /// This machine's measured environments (its own interpreter's first)
    /// and their classes, read from the cache: no child is started.
    fn here(&self) -> Result<Vec<Here>, SessionError> {
        let mut pythons: Vec<_> = self.interpreter()?.into_iter().collect();
        pythons.extend(self.measured_elsewhere()?);
        let mut here = Vec::new();
        for python in pythons {
            if let Some(fp) = self.with_python(python.clone()).kept_fingerprint()? {
                here.push(Here {
                    class: fp.hash().chars().take(SHORT).collect(),
                    python,
                });
            }
        }
        Ok(here)
    }

    /// What differs between two machine classes of the fleet (`fleet
    /// diff`); a class that names none, or more than one, is refused.
    pub fn fleet_diff(&self, options: DiffOptions) -> Result<FleetDiff, SessionError> {
        let fleet = self.fleet()?;
        let a = find(&fleet.classes, &options.a)?;
        let b = find(&fleet.classes, &options.b)?;
        Ok(diff(a, b, fleet.refused))
    }
}

impl Fleet {
    /// What differs between two of its classes, as `fleet diff` says it.
    pub fn diff(&self, a: &MachineClass, b: &MachineClass) -> FleetDiff {
        diff(a, b, self.refused)
    }

    /// Every kernel and version some class has verdicts for, sorted.
    pub fn kernels(&self) -> Vec<(String, Option<String>)> {
        let set: BTreeSet<(String, Option<String>)> = self
            .classes
            .iter()
            .flat_map(|c| {
                c.kernels
                    .iter()
                    .map(|k| (k.kernel.clone(), k.version.clone()))
            })
            .collect();
        set.into_iter().collect()
    }
}

/// Group `published` by class, kernel and version; the newest verdict of
/// a variant answers for it.
fn classes(mut published: Vec<Published>) -> Vec<MachineClass> {
    published.sort_by_key(|p| p.created);
    type Group = BTreeMap<(String, Option<String>), BTreeMap<String, (u32, VariantVerdict, bool)>>;
    let mut by_class: BTreeMap<String, (Option<ClassFacts>, String, Group)> = BTreeMap::new();
    for p in published {
        let class = by_class
            .entry(p.fingerprint)
            .or_insert_with(|| (None, String::new(), BTreeMap::new()));
        if p.class.is_some() {
            class.0 = p.class;
        }
        class.1 = p.machine;
        let (kernel, version, accepted, preference) = match p.placement {
            Some(at) => (at.kernel, at.version, at.accepted, at.preference),
            None => ("-".into(), None, false, u32::MAX),
        };
        let choosable = may_choose(&p.outcome, accepted, Names::Decide);
        class.2.entry((kernel, version)).or_default().insert(
            p.variant.clone(),
            (
                preference,
                VariantVerdict {
                    variant: p.variant,
                    outcome: p.outcome.kind,
                    accepted,
                },
                choosable,
            ),
        );
    }
    by_class
        .into_iter()
        .map(|(fingerprint, (facts, machine, kernels))| MachineClass {
            class: fingerprint.chars().take(SHORT).collect(),
            fingerprint,
            facts,
            machine,
            kernels: kernels
                .into_iter()
                .map(|((kernel, version), variants)| {
                    let mut variants: Vec<_> = variants.into_values().collect();
                    variants.sort_by(|a, b| (a.0, &a.1.variant).cmp(&(b.0, &b.1.variant)));
                    KernelVerdicts {
                        kernel,
                        version,
                        chosen: variants.iter().find(|v| v.2).map(|v| v.1.variant.clone()),
                        variants: variants.into_iter().map(|v| v.1).collect(),
                    }
                })
                .collect(),
        })
        .collect()
}

/// The one class `given` (a hash or a prefix of one) names.
fn find<'a>(classes: &'a [MachineClass], given: &str) -> Result<&'a MachineClass, SessionError> {
    let prefix = given.to_ascii_lowercase();
    if prefix.is_empty() || !prefix.bytes().all(|b| b.is_ascii_hexdigit()) {
        return Err(SessionError::Refused(format!(
            "invalid machine class {given:?}: expected hex digits of a fingerprint hash (see \
             `preflight fleet ls`)"
        )));
    }
    let matches: Vec<&MachineClass> = classes
        .iter()
        .filter(|c| c.fingerprint.starts_with(&prefix))
        .collect();
    match matches.as_slice() {
        [one] => Ok(one),
        [] => Err(SessionError::Refused(format!(
            "no machine class {given:?} in the remote store ({} known; see `preflight fleet ls`)",
            classes.len()
        ))),
        many => Err(SessionError::Refused(format!(
            "machine class {given:?} is ambiguous: it starts {} classes ({})",
            many.len(),
            many.iter()
                .map(|c| c.class.as_str())
                .collect::<Vec<_>>()
                .join(", ")
        ))),
    }
}

fn diff(a: &MachineClass, b: &MachineClass, refused: usize) -> FleetDiff {
    let facts = match (&a.facts, &b.facts) {
        (Some(fa), Some(fb)) => fact_diffs(fa, fb),
        (None, None) => Vec::new(),
        (fa, fb) => vec![FactDiff {
            fact: "facts".into(),
            a: fa.as_ref().map(|_| "sent".into()),
            b: fb.as_ref().map(|_| "sent".into()),
        }],
    };
    let kernels = |c: &MachineClass| -> BTreeMap<(String, Option<String>), KernelVerdicts> {
        c.kernels
            .iter()
            .map(|k| ((k.kernel.clone(), k.version.clone()), k.clone()))
            .collect()
    };
    let (ka, kb) = (kernels(a), kernels(b));
    let mut names: Vec<&(String, Option<String>)> = ka.keys().chain(kb.keys()).collect();
    names.sort();
    names.dedup();
    let mut chosen = Vec::new();
    let mut verdicts = Vec::new();
    for name in names {
        let (x, y) = (ka.get(name), kb.get(name));
        let choice = |k: Option<&KernelVerdicts>| k.and_then(|k| k.chosen.clone());
        if choice(x) != choice(y) {
            chosen.push(ChoiceDiff {
                kernel: name.0.clone(),
                version: name.1.clone(),
                a: choice(x),
                b: choice(y),
            });
        }
        let outcomes = |k: Option<&KernelVerdicts>| -> Vec<(String, OutcomeKind)> {
            k.map(|k| {
                k.variants
                    .iter()
                    .map(|v| (v.variant.clone(), v.outcome))
                    .collect()
            })
            .unwrap_or_default()
        };
        let (ox, oy) = (outcomes(x), outcomes(y));
        let mut variants: Vec<&String> = ox.iter().chain(&oy).map(|(v, _)| v).collect();
        let mut seen = BTreeSet::new();
        variants.retain(|v| seen.insert(*v));
        for variant in variants {
            let of =
                |o: &[(String, OutcomeKind)]| o.iter().find(|(v, _)| v == variant).map(|v| v.1);
            let (va, vb) = (of(&ox), of(&oy));
            if va != vb {
                verdicts.push(VerdictDiff {
                    kernel: name.0.clone(),
                    version: name.1.clone(),
                    variant: variant.clone(),
                    a: va,
                    b: vb,
                });
            }
        }
    }
    FleetDiff {
        a: a.class.clone(),
        b: b.class.clone(),
        facts,
        chosen,
        verdicts,
        refused,
    }
}

/// The facts that differ between `a` and `b`, in `a`'s order then `b`'s
/// (an environment variable set on one class only is `None` on the other).
fn fact_diffs(a: &ClassFacts, b: &ClassFacts) -> Vec<FactDiff> {
    let (a, b) = (a.named(), b.named());
    let get = |facts: &[(String, String)], name: &str| {
        facts
            .iter()
            .find(|(n, _)| n == name)
            .map(|(_, v)| v.clone())
    };
    let mut names: Vec<&String> = a.iter().chain(&b).map(|(n, _)| n).collect();
    let mut seen = BTreeSet::new();
    names.retain(|n| seen.insert(*n));
    names
        .into_iter()
        .filter_map(|name| {
            let (x, y) = (get(&a, name), get(&b, name));
            (x != y).then(|| FactDiff {
                fact: name.clone(),
                a: x,
                b: y,
            })
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn class(fingerprint: &str) -> MachineClass {
        MachineClass {
            class: fingerprint.chars().take(SHORT).collect(),
            fingerprint: fingerprint.into(),
            facts: None,
            machine: String::new(),
            kernels: Vec::new(),
        }
    }

    #[test]
    fn a_class_is_named_by_a_unique_prefix() {
        let classes = [class("abc123"), class("abd456"), class("ff0000")];
        let found = |given: &str| find(&classes, given).map(|c| c.fingerprint.clone());
        assert_eq!(found("ABC").unwrap(), "abc123");
        assert_eq!(found("ff0000").unwrap(), "ff0000");
        let message = |given: &str| found(given).unwrap_err().to_string();
        assert_eq!(
            message("ab"),
            "machine class \"ab\" is ambiguous: it starts 2 classes (abc123, abd456)"
        );
        assert!(message("0").starts_with("no machine class \"0\""));
        assert!(message("").starts_with("invalid machine class"));
        assert!(message("g1").starts_with("invalid machine class"));
    }
}
