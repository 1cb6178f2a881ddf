//! `preflight fleet report --html FILE`: the fleet as one self-contained
//! HTML page, from the values `fleet ls` and `fleet diff` print. No
//! script and nothing fetched: a matrix of kernels (rows) against machine
//! classes (columns, their facts in the header), each cell the variant
//! chosen or that nothing works, its verdicts one click away; rows where
//! classes disagree marked in words; every pair of classes' differences;
//! and plain anchors that filter it by kernel or by class (CSS `:target`).
//! maud escapes every value written into it.

use super::fleet::{at, note};
use crate::run::fleet::{Fleet, FleetDiff, KernelVerdicts, MachineClass};
use maud::{DOCTYPE, Markup, PreEscaped, html};
use std::collections::BTreeSet;

/// Light and dark themes on opaque backgrounds; the filters (`:target`,
/// `:has`) hide what was not picked where a browser supports them, and
/// only highlight it where not.
const STYLE: &str = r#"
:root { color-scheme: light dark; --bg: #ffffff; --fg: #1f2328; --muted: #57606a; --rule: #d0d7de;
  --head: #f6f8fa; --ok: #1a7f37; --none: #cf222e; --odd: #fff8c5; --odd-fg: #7d4e00; }
@media (prefers-color-scheme: dark) {
  :root { --bg: #0d1117; --fg: #e6edf3; --muted: #9198a1; --rule: #3d444d; --head: #151b23;
    --ok: #3fb950; --none: #f85149; --odd: #3b2e0a; --odd-fg: #e3b341; }
}
body { background: var(--bg); color: var(--fg); margin: 0 auto; padding: 16px; max-width: 1200px;
  font: 14px/1.45 system-ui, -apple-system, "Segoe UI", "DejaVu Sans", sans-serif; }
code, .variant { font-family: "DejaVu Sans Mono", Menlo, Consolas, monospace; font-size: 13px; }
h1 { font-size: 20px; margin: 0 0 4px; } h2 { font-size: 16px; margin: 24px 0 8px; }
.muted { color: var(--muted); }
nav { display: flex; gap: 16px; flex-wrap: wrap; margin: 12px 0; }
nav details { border: 1px solid var(--rule); border-radius: 6px; padding: 4px 10px; background: var(--head); }
nav ul { margin: 6px 0; padding-left: 18px; }
.scroll { overflow-x: auto; }
table { border-collapse: collapse; background: var(--bg); }
th, td { border: 1px solid var(--rule); padding: 6px 8px; text-align: left; vertical-align: top; }
thead th { background: var(--head); min-width: 9em; max-width: 20em; font-weight: normal; }
tbody th { background: var(--head); max-width: 16em; overflow-wrap: anywhere; }
td.ok summary { color: var(--ok); } td.none summary { color: var(--none); }
td.unknown { color: var(--muted); }
tr.disagree th, tr.disagree td { background: var(--odd); }
.badge { display: inline-block; margin-top: 4px; padding: 0 6px; border-radius: 10px; font-size: 12px;
  background: var(--odd); color: var(--odd-fg); border: 1px solid var(--odd-fg); }
summary { cursor: pointer; }
dl { display: grid; grid-template-columns: auto 1fr; gap: 0 8px; margin: 4px 0; font-size: 12px; }
dt { color: var(--muted); } dd { margin: 0; }
:target { outline: 2px solid var(--ok); }
tbody:has(tr:target) tr:not(:target) { display: none; }
main:has(section.class:target) section.class:not(:target) { display: none; }
"#;

/// The page, for `generated` (RFC 3339) as its date.
pub fn html(fleet: &Fleet, generated: &str) -> String {
    let kernels = fleet.kernels();
    let classes = &fleet.classes;
    let title = format!(
        "Fleet: {} × {}",
        super::count(kernels.len(), "kernel"),
        super::count(classes.len(), "machine class|machine classes")
    );
    let page = html! {
        (DOCTYPE)
        html lang="en" {
            head {
                meta charset="utf-8";
                meta name="viewport" content="width=device-width, initial-scale=1";
                title { (title) }
                style { (PreEscaped(STYLE)) }
            }
            body {
                h1 { (title) }
                p.muted {
                    "From the fleet's remote store, as " code { "preflight fleet ls" } " sees it, "
                    (generated) ". " (super::count(fleet.refused, "entry|entries"))
                    " refused (not sealed by the fleet)."
                }
                nav {
                    details {
                        summary { "Filter by kernel" }
                        ul {
                            li { a href="#matrix" { "every kernel" } }
                            @for (i, (kernel, version)) in kernels.iter().enumerate() {
                                li { a href={ "#k" (i) } { (at(kernel, version.as_deref())) } }
                            }
                        }
                    }
                    details {
                        summary { "Filter by machine class" }
                        ul {
                            li { a href="#classes" { "every class" } }
                            @for c in classes {
                                li { a href={ "#class-" (c.class) } { (c.class) " " span.muted { (gpu(c)) } } }
                            }
                        }
                    }
                }
                main {
                    h2 id="matrix" { "Which variant each class chooses" }
                    @if classes.is_empty() {
                        p { "No machine class has published a verdict yet." }
                    } @else {
                        div.scroll { (matrix(fleet, &kernels)) }
                    }
                    (differences(fleet))
                    h2 id="classes" { "Machine classes" }
                    @for c in classes { (class_section(c)) }
                }
            }
        }
    };
    page.into_string() + "\n"
}

fn find<'a>(
    class: &'a MachineClass,
    kernel: &(String, Option<String>),
) -> Option<&'a KernelVerdicts> {
    class
        .kernels
        .iter()
        .find(|k| k.kernel == kernel.0 && k.version == kernel.1)
}

/// A class's GPU, for a list (the machine line when it sent no facts).
fn gpu(class: &MachineClass) -> String {
    match &class.facts {
        Some(f) if f.gpu == "-" => "no GPU".to_string(),
        Some(f) => f.gpu.clone(),
        None => class.machine.clone(),
    }
}

/// A class's facts in one line for a column's header: GPU, driver,
/// torch, Python (the facts a `-` says it lacks left out, the GPU aside).
fn summary(class: &MachineClass) -> String {
    let Some(f) = &class.facts else {
        return class.machine.clone();
    };
    let named = [
        ("driver ", &f.driver),
        ("torch ", &f.torch),
        ("Python ", &f.python),
    ];
    std::iter::once(gpu(class))
        .chain(
            named
                .into_iter()
                .filter(|(_, v)| v.as_str() != "-")
                .map(|(n, v)| format!("{n}{v}")),
        )
        .collect::<Vec<_>>()
        .join(" · ")
}

/// The class's facts as a list: what hovering the header shows too.
fn facts(class: &MachineClass) -> Markup {
    html! {
        @match &class.facts {
            Some(facts) => dl { @for (name, value) in facts.named() { dt { (name) } dd { (value) } } },
            None => dl { dt { "machine" } dd { (class.machine) } },
        }
    }
}

fn hover(class: &MachineClass) -> String {
    match &class.facts {
        Some(f) => f
            .named()
            .iter()
            .map(|(n, v)| format!("{n}: {v}"))
            .collect::<Vec<_>>()
            .join("\n"),
        None => class.machine.clone(),
    }
}

fn matrix(fleet: &Fleet, kernels: &[(String, Option<String>)]) -> Markup {
    html! {
        table {
            thead {
                tr {
                    th { "kernel @ version" }
                    @for c in &fleet.classes {
                        th title=(hover(c)) {
                            a href={ "#class-" (c.class) } { code { (c.class) } }
                            @for h in fleet.here.iter().filter(|h| h.class == c.class) {
                                br;
                                span.badge { "this machine" }
                                " " code { "--python " (h.python.display()) }
                            }
                            br;
                            span.muted { (summary(c)) }
                            details { summary.muted { "every fact" } (facts(c)) }
                        }
                    }
                }
            }
            tbody {
                @for (i, kernel) in kernels.iter().enumerate() {
                    @let cells: Vec<Option<&KernelVerdicts>> = fleet.classes.iter().map(|c| find(c, kernel)).collect();
                    @let choices: BTreeSet<Option<&str>> = cells.iter().flatten().map(|k| k.chosen.as_deref()).collect();
                    @let disagree = choices.len() > 1;
                    tr id={ "k" (i) } class=[disagree.then_some("disagree")] {
                        th {
                            (at(&kernel.0, kernel.1.as_deref()))
                            @if disagree { br; span.badge { "classes disagree" } }
                        }
                        @for cell in &cells { (verdict_cell(*cell)) }
                    }
                }
            }
        }
    }
}

/// One class's answer for one kernel: the variant chosen, or that nothing
/// works, with every variant's outcome one click away.
fn verdict_cell(kernel: Option<&KernelVerdicts>) -> Markup {
    let Some(k) = kernel else {
        return html! { td.unknown { "no verdict" } };
    };
    html! {
        td class=(if k.chosen.is_some() { "ok" } else { "none" }) {
            details {
                summary {
                    @match &k.chosen {
                        Some(v) => { "✓ " span.variant { (v) } },
                        None => "✗ nothing works",
                    }
                }
                (verdicts(k))
            }
        }
    }
}

/// A kernel's variants in the hub's preference order, with their outcomes.
fn verdicts(k: &KernelVerdicts) -> Markup {
    html! {
        table {
            tr { th { "variant" } th { "outcome" } th { "note" } }
            @for v in &k.variants {
                tr {
                    td.variant { (v.variant) }
                    td { (v.outcome) }
                    td { (note(k, v)) }
                }
            }
        }
    }
}

/// What `fleet diff` says of every pair of classes that differ.
fn differences(fleet: &Fleet) -> Markup {
    let classes = &fleet.classes;
    let pairs: Vec<FleetDiff> = classes
        .iter()
        .enumerate()
        .flat_map(|(i, a)| classes[i + 1..].iter().map(move |b| (a, b)))
        .map(|(a, b)| fleet.diff(a, b))
        .filter(|d| !(d.facts.is_empty() && d.chosen.is_empty() && d.verdicts.is_empty()))
        .collect();
    html! {
        @if classes.len() > 1 {
            h2 id="differences" { "What differs between classes" }
            @if pairs.is_empty() {
                p { "No two classes differ in a fact or a verdict shown here." }
            }
            @for d in &pairs {
                // A few pairs are shown open: the differences are the point.
                details open[pairs.len() <= 3] {
                    summary {
                        code { (d.a) } " and " code { (d.b) } ": "
                        (super::count(d.facts.len(), "fact")) ", "
                        (super::count(d.chosen.len(), "choice")) ", "
                        (super::count(d.verdicts.len(), "verdict"))
                    }
                    (diff_tables(d))
                }
            }
        }
    }
}

fn diff_tables(d: &FleetDiff) -> Markup {
    let none = "-";
    html! {
        @if !d.facts.is_empty() {
            table {
                tr { th { "fact" } th { code { (d.a) } } th { code { (d.b) } } }
                @for f in &d.facts {
                    tr { td { (f.fact) } td { (f.a.as_deref().unwrap_or(none)) } td { (f.b.as_deref().unwrap_or(none)) } }
                }
            }
        }
        @if !d.chosen.is_empty() || !d.verdicts.is_empty() {
            table {
                tr { th { "kernel" } th { "variant" } th { code { (d.a) } } th { code { (d.b) } } }
                @for c in &d.chosen {
                    tr {
                        td { (at(&c.kernel, c.version.as_deref())) } td { "(chosen)" }
                        td.variant { (c.a.as_deref().unwrap_or("none")) } td.variant { (c.b.as_deref().unwrap_or("none")) }
                    }
                }
                @for v in &d.verdicts {
                    tr {
                        td { (at(&v.kernel, v.version.as_deref())) } td.variant { (v.variant) }
                        td { (v.a.map_or_else(|| none.to_string(), |k| k.to_string())) }
                        td { (v.b.map_or_else(|| none.to_string(), |k| k.to_string())) }
                    }
                }
            }
        }
    }
}

/// A class as `fleet ls` lists it: its facts, then each kernel's choice
/// and verdicts.
fn class_section(c: &MachineClass) -> Markup {
    html! {
        section.class id={ "class-" (c.class) } {
            h2 { "Machine class " code { (c.class) } }
            (facts(c))
            @for k in &c.kernels {
                details {
                    summary {
                        (at(&k.kernel, k.version.as_deref())) " → "
                        @match &k.chosen { Some(v) => span.variant { (v) }, None => "nothing works" }
                    }
                    (verdicts(k))
                }
            }
        }
    }
}

#[cfg(test)]
#[path = "fleet_page_tests.rs"]
mod tests;
