//! A kernel's own checks of its device: an import guard that refuses a
//! machine whose device is unusable (`requires CUDA, but CUDA is not
//! available`), or a GPU below the architecture it needs (`requires SM90 /
//! Hopper`), and a kernel that says at run time that this architecture is
//! unsupported. Never decided by a kernel's text alone: the device facts
//! the child reported (usable or not, its capability) must agree.

use super::machine::Machine;
use super::{Cause, OutcomeKind, Phase, hints, one_line};
use crate::declared::arch::{Suffix, Target};
use crate::fingerprint::ComputeCapability;
use crate::protocol::{DeviceState, ExceptionInfo, Report};

/// Architecture family names kernels use in their guards.
const FAMILIES: &[(&str, u32)] = &[
    ("volta", 70),
    ("turing", 75),
    ("ampere", 80),
    ("ada", 89),
    ("hopper", 90),
    ("blackwell", 100),
];

/// The architectures a text names (`SM90`, `sm_90a`, `sm100+`, `compute
/// capability 9.0`, `Hopper`), in order.
fn named_archs(text: &str) -> Vec<Target> {
    let lower = text.to_ascii_lowercase();
    let bytes = lower.as_bytes();
    let mut found = Vec::new();
    let word_start = |at: usize| at == 0 || !bytes[at - 1].is_ascii_alphanumeric();
    for (at, _) in lower.match_indices("sm") {
        if !word_start(at) {
            continue;
        }
        let rest = lower[at + 2..]
            .strip_prefix('_')
            .unwrap_or(&lower[at + 2..]);
        let digits: String = rest.chars().take_while(char::is_ascii_digit).collect();
        if !(2..=3).contains(&digits.len()) {
            continue;
        }
        let suffix = match rest[digits.len()..].chars().next() {
            Some('a') => Suffix::ArchSpecific,
            Some('f') => Suffix::Family,
            _ => Suffix::None,
        };
        if let Ok(sm) = digits.parse::<u32>() {
            found.push(target(sm, suffix));
        }
    }
    for (at, _) in lower.match_indices("capability") {
        let rest = lower[at + "capability".len()..].trim_start_matches([' ', ':', '>', '=']);
        let number: String = rest
            .chars()
            .take_while(|c| c.is_ascii_digit() || *c == '.')
            .collect();
        if let Ok(cap) = number.trim_end_matches('.').parse::<ComputeCapability>()
            && number.contains('.')
        {
            found.push(target(cap.sm(), Suffix::None));
        }
    }
    for (name, sm) in FAMILIES {
        if lower.match_indices(name).any(|(at, _)| {
            word_start(at)
                && !bytes
                    .get(at + name.len())
                    .is_some_and(u8::is_ascii_alphanumeric)
        }) {
            found.push(target(*sm, Suffix::None));
        }
    }
    found
}

fn target(sm: u32, suffix: Suffix) -> Target {
    Target {
        kind: crate::declared::arch::ImageKind::Sass,
        sm,
        suffix,
    }
}

/// The least architecture among those a guard names that is not the
/// device's own (`requires Hopper (SM90) or Blackwell (SM100); current
/// device is SM89` needs 9.0), if any.
fn required(text: &str, device: ComputeCapability) -> Option<Target> {
    named_archs(text)
        .into_iter()
        .filter(|t| t.capability() != device)
        .min_by_key(|t| t.sm)
}

/// Whether a GPU of capability `device` meets `needed` (an `a` target
/// exactly, otherwise at least).
fn meets(device: ComputeCapability, needed: &Target) -> bool {
    match needed.suffix {
        Suffix::ArchSpecific => device == needed.capability(),
        _ => device >= needed.capability(),
    }
}

/// Words that name a device kind in a guard's message.
fn names_device(text: &str, device: &str) -> bool {
    let lower = text.to_ascii_lowercase();
    let kind = device.split(':').next().unwrap_or(device);
    let words: &[&str] = match kind {
        "cuda" => &["cuda", "gpu", "nvidia", "rocm", "hip"],
        "xpu" => &["xpu", "gpu", "intel"],
        "mps" => &["mps", "metal", "gpu", "apple"],
        _ => &["gpu"],
    };
    words.iter().any(|w| lower.contains(w)) || lower.contains(kind) || !named_archs(text).is_empty()
}

/// What the guard said: its message, else its failing source line.
fn said(e: &ExceptionInfo) -> String {
    let message = e.message.trim();
    match e.raised_in() {
        Some(frame) if message.is_empty() => frame.source.clone(),
        Some(frame) => format!("{message}\n{}", frame.source),
        None => message.to_owned(),
    }
}

/// An exception raised while importing a variant whose device the child
/// then found unusable, or below the architecture the exception names.
pub(super) fn import_guard(
    e: &ExceptionInfo,
    phase: Phase,
    report: &Report,
    machine: &Machine,
) -> Option<Cause> {
    if phase != Phase::Import {
        return None;
    }
    let state = report.device_state.as_ref()?;
    let text = said(e);
    let quoted = one_line(&format!("{}: {}", e.qualified(), first_line(&text)));
    if let Some(device) = capability(state, machine)
        && let Some(needed) = required(&text, device)
        && !meets(device, &needed)
    {
        return Some(Cause::new(
            OutcomeKind::UnsupportedArch,
            format!(
                "the kernel refuses this GPU (sm_{}) at import, needing {}: {quoted}",
                device.sm(),
                needed_text(&needed)
            ),
            hints::GUARD_ARCH,
        ));
    }
    if !state.usable && names_device(&text, &state.device) {
        let found = state.said.as_deref().unwrap_or("it is not usable");
        return Some(Cause::new(
            OutcomeKind::NoDevice,
            format!(
                "the {} device is not usable: the kernel refuses to load ({quoted}); {found}",
                state.device
            ),
            hints::device_unusable(&state.device),
        ));
    }
    None
}

/// A kernel that says this GPU's architecture is unsupported at run time
/// (DeepGEMM's `Unsupported architecture or scaling factor types`), on a
/// GPU the machine's facts name.
pub(super) fn unsupported_here(
    e: &ExceptionInfo,
    report: &Report,
    machine: &Machine,
) -> Option<Cause> {
    let line = e
        .message
        .lines()
        .find(|l| l.to_ascii_lowercase().contains("unsupported arch"))?;
    let device = report
        .device
        .as_ref()
        .map(|d| d.capability())
        .or_else(|| report.device_state.as_ref().and_then(|s| s.capability))
        .or(machine.capability)?;
    Some(Cause::new(
        OutcomeKind::UnsupportedArch,
        format!(
            "the kernel does not support this GPU (sm_{}): {}",
            device.sm(),
            line.trim()
        ),
        hints::GUARD_ARCH,
    ))
}

fn capability(state: &DeviceState, machine: &Machine) -> Option<ComputeCapability> {
    state.capability.or(machine.capability)
}

fn needed_text(t: &Target) -> String {
    match t.suffix {
        Suffix::ArchSpecific => format!("exactly sm_{}a", t.sm),
        _ => format!("sm_{} or newer", t.sm),
    }
}

fn first_line(text: &str) -> &str {
    text.lines()
        .map(str::trim)
        .find(|l| !l.is_empty())
        .unwrap_or("")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn guards_name_architectures_in_the_ways_kernels_write_them() {
        let sms = |text: &str| {
            named_archs(text)
                .iter()
                .map(|t| t.to_string())
                .collect::<Vec<_>>()
        };
        assert_eq!(sms("requires SM90 / Hopper"), ["sm_90", "sm_90"]);
        assert_eq!(sms("needs sm_100a"), ["sm_100a"]);
        assert_eq!(sms("compute capability >= 9.0"), ["sm_90"]);
        assert_eq!(sms("compute capability 8.x"), Vec::<String>::new());
        assert!(sms("small tensors, smem").is_empty());
        assert!(sms("a Madagascar adapter").is_empty());
        let dg = "DeepGEMM requires Hopper (SM90) or Blackwell (SM100); current device is SM89.";
        let needed = required(dg, ComputeCapability::new(8, 9)).unwrap();
        assert_eq!(needed.to_string(), "sm_90");
        assert!(!meets(ComputeCapability::new(8, 9), &needed));
        assert!(meets(ComputeCapability::new(10, 0), &needed));
    }
}
