//! The host: operating system, CPU architecture, CPU model and the ISA
//! extensions kernels dispatch on, and the C library version.

use super::{FingerprintError, Sources};
use serde::{Deserialize, Serialize};
use std::io::{BufRead, BufReader};
use std::path::Path;

/// CPU flags (as `/proc/cpuinfo` spells them) that kernels select code paths
/// by; other flags are left out so that microcode noise does not change the
/// hash. Prefix entries end in `*`.
pub const ISA_FLAGS: [&str; 14] = [
    "sse4_2", "avx", "avx2", "fma", "f16c", "avx512*", "amx*", "avx_vnni", "sve", "sve2", "asimd",
    "asimdhp", "asimddp", "bf16",
];

/// The host machine.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Host {
    /// `linux`, `macos`, …
    pub os: String,
    /// `x86_64`, `aarch64`, …
    pub arch: String,
    /// `model name` (x86) or the implementer/part pair (ARM), when known.
    pub cpu_model: Option<String>,
    /// The [`ISA_FLAGS`] this CPU has, sorted.
    pub cpu_flags: Vec<String>,
    /// glibc version (`2.36`); `None` for another C library.
    pub glibc: Option<String>,
}

/// Describe the host, honouring overrides.
pub(crate) fn detect(src: &Sources) -> Result<Host, FingerprintError> {
    let (model, flags) = cpuinfo(&src.proc_root);
    let mut host = Host {
        os: std::env::consts::OS.to_string(),
        arch: std::env::consts::ARCH.to_string(),
        cpu_model: model,
        cpu_flags: flags,
        glibc: glibc_version(),
    };
    if let Some(v) = src.var("PREFLIGHT_OS") {
        host.os = v.to_string();
    }
    if let Some(v) = src.var("PREFLIGHT_ARCH") {
        host.arch = v.to_string();
    }
    if let Some(v) = src.override_opt("PREFLIGHT_CPU_MODEL") {
        host.cpu_model = v.map(str::to_string);
    }
    if let Some(v) = src.override_opt("PREFLIGHT_CPU_FLAGS") {
        host.cpu_flags = select_flags(v.unwrap_or("").split([' ', ',']));
    }
    if let Some(v) = src.override_opt("PREFLIGHT_GLIBC") {
        host.glibc = v.map(str::to_string);
    }
    Ok(host)
}

/// Model and ISA flags from the first processor of `/proc/cpuinfo`; reading
/// stops at the first blank line, so that a machine with hundreds of cores
/// costs no more than one with two.
fn cpuinfo(proc: &Path) -> (Option<String>, Vec<String>) {
    let Ok(file) = std::fs::File::open(proc.join("cpuinfo")) else {
        return (None, Vec::new());
    };
    let mut model = None;
    let mut implementer = None;
    let mut part = None;
    let mut flags = Vec::new();
    for line in BufReader::new(file).lines() {
        let Ok(line) = line else { break };
        if line.trim().is_empty() {
            if model.is_some() || !flags.is_empty() {
                break;
            }
            continue;
        }
        let Some((key, value)) = line.split_once(':') else {
            continue;
        };
        let value = value.trim();
        match key.trim() {
            "model name" => model = Some(value.to_string()),
            "CPU implementer" => implementer = Some(value.to_string()),
            "CPU part" => part = Some(value.to_string()),
            "flags" | "Features" => flags = select_flags(value.split_whitespace()),
            _ => {}
        }
    }
    let model = model.or_else(|| Some(format!("implementer {} part {}", implementer?, part?)));
    (model, flags)
}

fn select_flags<'a>(all: impl Iterator<Item = &'a str>) -> Vec<String> {
    let mut out: Vec<String> = all
        .filter(|f| {
            ISA_FLAGS.iter().any(|want| match want.strip_suffix('*') {
                Some(prefix) => f.starts_with(prefix),
                None => f == want,
            })
        })
        .map(str::to_string)
        .collect();
    out.sort();
    out.dedup();
    out
}

/// The glibc this process runs on, which is the one every Python and kernel
/// on the machine loads (conda and venvs bring none of their own).
#[cfg(target_env = "gnu")]
fn glibc_version() -> Option<String> {
    // SAFETY: gnu_get_libc_version returns a pointer to a static,
    // NUL-terminated string owned by glibc.
    let version = unsafe { std::ffi::CStr::from_ptr(libc::gnu_get_libc_version()) };
    version.to_str().ok().map(str::to_string)
}

#[cfg(not(target_env = "gnu"))]
fn glibc_version() -> Option<String> {
    None
}
