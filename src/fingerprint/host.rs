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

/// Model and ISA flags from the first processor of `/proc/cpuinfo`. The
/// kernel formats the file one processor at a time, as far as each `read`
/// asks (on x86 with a measurement of the clock on that CPU), so it is
/// read 1 KiB at a time and no further than the first processor's model
/// and flags: a machine with hundreds of cores costs no more than one
/// with one, and this one a third less than reading 8 KiB.
fn cpuinfo(proc: &Path) -> (Option<String>, Vec<String>) {
    if crate::seen::recording() {
        // Its first block holds the CPU's clock of the moment: what vouches
        // for the model and flags is the boot, within which they stay.
        let witness = if proc == Path::new("/proc") {
            proc.join("sys/kernel/random/boot_id")
        } else {
            proc.join("cpuinfo")
        };
        let _ = crate::fs::read_small(&witness);
    }
    let Ok(file) = std::fs::File::open(proc.join("cpuinfo")) else {
        return (None, Vec::new());
    };
    let mut model = None;
    let mut implementer = None;
    let mut part = None;
    let mut flags = None;
    for line in BufReader::with_capacity(1024, file).lines() {
        let Ok(line) = line else { break };
        if line.trim().is_empty() {
            if model.is_some() || flags.is_some() {
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
            "flags" | "Features" => flags = Some(select_flags(value.split_whitespace())),
            _ => {}
        }
        // x86 names the model before the flags; ARM names its part after.
        if model.is_some() && flags.is_some() {
            break;
        }
    }
    let model = model.or_else(|| Some(format!("implementer {} part {}", implementer?, part?)));
    (model, flags.unwrap_or_default())
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
    if crate::seen::recording() {
        witness_libc();
    }
    version.to_str().ok().map(str::to_string)
}

/// Record the `stat` of the C library this process loaded (an upgraded
/// glibc is another version for the next process).
#[cfg(target_env = "gnu")]
fn witness_libc() {
    let mut info: libc::Dl_info = unsafe { std::mem::zeroed() };
    // SAFETY: dladdr only reads the address and fills `info`; the name it
    // gives is owned by the dynamic loader and valid while libc is loaded
    // (for the whole process).
    let found =
        unsafe { libc::dladdr(libc::gnu_get_libc_version as *const libc::c_void, &mut info) };
    if found == 0 || info.dli_fname.is_null() {
        crate::seen::taint("the C library's file cannot be found");
        return;
    }
    // SAFETY: as above, a NUL-terminated string of the loader's.
    let name = unsafe { std::ffi::CStr::from_ptr(info.dli_fname) };
    let path = std::path::PathBuf::from(
        <std::ffi::OsStr as std::os::unix::ffi::OsStrExt>::from_bytes(name.to_bytes()),
    );
    let _ = crate::seen::metadata(&path);
}

#[cfg(not(target_env = "gnu"))]
fn glibc_version() -> Option<String> {
    None
}

#[cfg(test)]
mod tests {
    use super::cpuinfo;

    fn parse(text: &str) -> (Option<String>, Vec<String>) {
        let proc = tempfile::tempdir().unwrap();
        std::fs::write(proc.path().join("cpuinfo"), text).unwrap();
        cpuinfo(proc.path())
    }

    #[test]
    fn x86_model_and_flags_of_the_first_processor_across_read_chunks() {
        // A flags line longer than one 1 KiB read, as on CPUs with AVX-512.
        let padding = (0..150).map(|i| format!(" pad{i}")).collect::<String>();
        let text = format!(
            "processor\t: 0\nmodel name\t: Intel(R) Xeon(R) Platinum 8480+\n\
             flags\t\t: fpu{padding} avx512f amx_tile avx2\nbugs\t\t: spectre_v1\n\n\
             processor\t: 1\nmodel name\t: Other\nflags\t\t: sse4_2\n\n"
        );
        let (model, flags) = parse(&text);
        assert_eq!(model.as_deref(), Some("Intel(R) Xeon(R) Platinum 8480+"));
        assert_eq!(flags, ["amx_tile", "avx2", "avx512f"]);
    }

    #[test]
    fn arm_part_after_the_features_line() {
        let text = "processor\t: 0\nBogoMIPS\t: 2000.00\nFeatures\t: fp asimd asimddp sve sve2 bf16\n\
                    CPU implementer\t: 0x41\nCPU architecture: 8\nCPU variant\t: 0x0\nCPU part\t: 0xd4f\n\n\
                    processor\t: 1\nFeatures\t: fp\nCPU implementer\t: 0x00\nCPU part\t: 0x000\n\n";
        let (model, flags) = parse(text);
        assert_eq!(model.as_deref(), Some("implementer 0x41 part 0xd4f"));
        assert_eq!(flags, ["asimd", "asimddp", "bf16", "sve", "sve2"]);
    }

    #[test]
    fn no_flags_line_reads_the_first_processor_only() {
        let text = "processor\t: 0\nmodel name\t: Plain\n\nprocessor\t: 1\nflags\t\t: avx2\n\n";
        assert_eq!(parse(text), (Some("Plain".to_string()), Vec::new()));
    }
}
