//! Detect the [`System`] the hub's resolver would see, by asking the Python
//! interpreter the way the hub loader does (torch's build, tvm-ffi, cudart).

use super::system::System;
use crate::variant::{Backend, Version};
use std::io::Read;
use std::path::Path;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

const QUERY: &str = r#"
import json, platform
out = {"torch": None, "cxx11": None, "cuda": None, "hip": None, "xpu": None,
       "mps": False, "tvm_ffi": None, "cudart": None,
       "macos": platform.mac_ver()[0] or None}
try:
    import torch
    out["torch"] = torch.__version__
    out["cuda"] = torch.version.cuda
    out["hip"] = torch.version.hip
    out["xpu"] = getattr(torch.version, "xpu", None)
    out["cxx11"] = bool(torch.compiled_with_cxx11_abi())
    try:
        out["mps"] = bool(torch.backends.mps.is_available())
    except Exception:
        pass
except Exception:
    pass
try:
    import tvm_ffi
    out["tvm_ffi"] = tvm_ffi.__version__
except Exception:
    pass
if out["torch"] is None:
    try:
        import ctypes, ctypes.util
        name = ctypes.util.find_library("cudart")
        if name:
            v = ctypes.c_int(0)
            if ctypes.CDLL(name).cudaRuntimeGetVersion(ctypes.byref(v)) == 0:
                out["cudart"] = "%d.%d" % (v.value // 1000, (v.value % 1000) // 10)
    except Exception:
        pass
print(json.dumps(out))
"#;

#[derive(serde::Deserialize, Default)]
struct Answer {
    torch: Option<String>,
    cxx11: Option<bool>,
    cuda: Option<String>,
    hip: Option<String>,
    xpu: Option<String>,
    mps: bool,
    tvm_ffi: Option<String>,
    cudart: Option<String>,
    macos: Option<String>,
}

/// Detect the system: the host's CPU and OS, and what `python` reports about
/// torch and tvm-ffi. Without a working Python the system has no torch and
/// the `cpu` backend; a failure here is never fatal.
pub fn detect(python: &Path, timeout: Duration) -> System {
    let mut system = System::bare_host();
    let Some(answer) = ask(python, timeout) else {
        return system;
    };
    let version = |s: &Option<String>| s.as_deref().and_then(|s| s.parse::<Version>().ok());
    system.torch = version(&answer.torch);
    system.tvm_ffi = version(&answer.tvm_ffi);
    system.macos = version(&answer.macos);
    system.cxx11_abi = if system.os == "linux" {
        answer.cxx11
    } else {
        None
    };
    system.backend = if system.torch.is_some() {
        if let Some(v) = version(&answer.cuda) {
            Backend::Cuda(v)
        } else if let Some(v) = answer
            .hip
            .as_deref()
            .and_then(|h| h.split('-').next()?.parse().ok())
        {
            Backend::Rocm(v)
        } else if answer.mps {
            Backend::Metal
        } else if let Some(v) = answer.xpu.as_deref().and_then(xpu_version) {
            Backend::Xpu(v)
        } else {
            Backend::Cpu
        }
    } else {
        version(&answer.cudart).map_or(Backend::Cpu, Backend::Cuda)
    };
    system
}

/// `torch.version.xpu` is `YYYYMMDD…`; the hub reads `YYYY.M` from it.
fn xpu_version(s: &str) -> Option<Version> {
    Some(Version::new(
        s.get(0..4)?.parse().ok()?,
        s.get(5..6)?.parse().ok()?,
    ))
}

fn ask(python: &Path, timeout: Duration) -> Option<Answer> {
    let mut child = Command::new(python)
        .args(["-c", QUERY])
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .ok()?;
    let deadline = Instant::now() + timeout;
    loop {
        match child.try_wait() {
            Ok(Some(_)) => break,
            Ok(None) if Instant::now() < deadline => std::thread::sleep(Duration::from_millis(10)),
            _ => {
                let _ = child.kill();
                let _ = child.wait();
                return None;
            }
        }
    }
    let mut out = String::new();
    child.stdout.take()?.read_to_string(&mut out).ok()?;
    serde_json::from_str(out.trim()).ok()
}
