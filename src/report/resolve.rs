//! Output of `preflight resolve`.

use crate::declared::{Decision, Rules, System};
use crate::discover::{Discovery, FoundVariant, MetadataStatus};
use serde::Serialize;
use std::fmt::Write;

/// One decision, with what the variant's directory declares when there is one.
#[derive(Serialize)]
pub struct DecisionRow<'a> {
    #[serde(flatten)]
    decision: &'a Decision,
    #[serde(skip_serializing_if = "Option::is_none")]
    path: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    metadata: Option<&'a MetadataStatus>,
}

/// The JSON document `resolve --json` prints.
#[derive(Serialize)]
pub struct ResolveJson<'a> {
    decisions: Vec<DecisionRow<'a>>,
    system: &'a System,
    /// Whose rules decided: the release installed in the probed Python,
    /// else the newest supported.
    rules: RulesJson,
    #[serde(skip_serializing_if = "Vec::is_empty")]
    warnings: Vec<String>,
}

fn found<'a>(discovery: Option<&'a Discovery>, d: &Decision) -> Option<&'a FoundVariant> {
    discovery?.variants.iter().find(|v| v.name == d.variant)
}

/// `rules` in the JSON document.
#[derive(Serialize)]
struct RulesJson {
    /// The release whose rules applied (`0.19.1`).
    release: String,
    /// The kernels installed in the probed Python, if any.
    installed: Option<String>,
    /// Whether the installed release is a supported one (`false` when none is).
    installed_supported: bool,
    /// The line the table prints.
    why: String,
}

impl RulesJson {
    fn new(rules: &Rules) -> RulesJson {
        RulesJson {
            release: rules.release.tested().to_string(),
            installed: rules.installed.clone(),
            installed_supported: rules.installed_is_supported(),
            why: rules.to_string(),
        }
    }
}

/// Build the `resolve --json` document.
pub fn json<'a>(
    decisions: &'a [Decision],
    discovery: Option<&'a Discovery>,
    system: &'a System,
) -> ResolveJson<'a> {
    ResolveJson {
        decisions: decisions
            .iter()
            .map(|d| {
                let v = found(discovery, d);
                DecisionRow {
                    decision: d,
                    path: v.map(|v| v.path.display().to_string()),
                    metadata: v.map(|v| &v.metadata),
                }
            })
            .collect(),
        system,
        rules: RulesJson::new(&system.rules()),
        warnings: discovery.map(|d| d.warnings.clone()).unwrap_or_default(),
    }
}

/// Describe a system on one line: `cuda 12.8 · torch 2.9 (cxx11) · x86_64-linux`.
pub fn system_line(s: &System) -> String {
    let mut line = match s.backend.version() {
        Some(v) => format!("{} {v}", s.backend.kind()),
        None => s.backend.kind().to_string(),
    };
    match s.torch {
        Some(t) => {
            let _ = write!(line, " · torch {t}");
            if let Some(abi) = s.cxx11_abi {
                line.push_str(if abi { " (cxx11)" } else { " (cxx98)" });
            }
        }
        None => line.push_str(" · no torch"),
    }
    if let Some(t) = s.tvm_ffi {
        let _ = write!(line, " · tvm-ffi {t}");
    }
    if let Some(m) = s.macos {
        let _ = write!(line, " · macOS {m}");
    }
    if let Some(p) = s.python {
        let _ = write!(line, " · Python {p}");
        if s.free_threaded {
            line.push_str(" (free-threaded)");
        }
    }
    if s.mlx {
        line.push_str(" · mlx");
    }
    let _ = write!(line, " · {}-{}", s.cpu, s.os);
    line
}

/// The table `resolve` prints for people.
pub fn table(decisions: &[Decision], discovery: Option<&Discovery>, system: &System) -> String {
    let with_dirs = discovery.is_some();
    let mut header = vec!["#", "variant", "decision"];
    if with_dirs {
        header.extend(["archs", "python deps"]);
    }
    let mut table = super::table(&header);
    let mut rank = 0;
    for d in decisions {
        let mut row = Vec::new();
        if d.accepted() {
            rank += 1;
            row.push(rank.to_string());
        } else {
            row.push(String::new());
        }
        row.push(d.variant.to_string());
        let mut decision = match &d.rejection {
            None if rank == 1 => "accepted (preferred)".to_string(),
            None => "accepted".to_string(),
            Some(r) => format!("rejected: {r}"),
        };
        if with_dirs {
            let v = found(discovery, d);
            let metadata = v.map(|v| &v.metadata);
            if let Some(finding) = metadata.and_then(MetadataStatus::finding) {
                let _ = write!(decision, "\n⚠ {finding}");
            }
            let meta = metadata.and_then(MetadataStatus::metadata);
            row.push(decision);
            row.push(match meta.and_then(|m| m.backend.archs.as_ref()) {
                Some(archs) => archs.join(" "),
                None => meta.map_or("?", |m| m.backend.kind.as_str()).to_string(),
            });
            row.push(match meta {
                Some(m) if m.python_depends.is_empty() => "-".to_string(),
                Some(m) => m.python_depends.join(" "),
                None => "?".to_string(),
            });
        } else {
            row.push(decision);
        }
        table.add_row(row);
    }
    let mut out = String::new();
    if let Some(d) = discovery {
        let kernel = d.kernel.as_deref().unwrap_or("kernel");
        let _ = writeln!(
            out,
            "{kernel}: {} in {}",
            super::count(d.variants.len(), "variant"),
            d.root.display()
        );
    }
    let _ = writeln!(out, "system: {}", system_line(system));
    let _ = writeln!(out, "rules: {}", system.rules());
    let _ = writeln!(out, "{table}");
    let accepted = decisions.iter().filter(|d| d.accepted()).count();
    let _ = write!(
        out,
        "{accepted} of {} accepted by name",
        super::count(decisions.len(), "variant")
    );
    if let Some(best) = decisions.first().filter(|d| d.accepted()) {
        let _ = write!(out, "; the hub loader would pick {}", best.variant);
    }
    out
}
