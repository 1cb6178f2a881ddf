//! Real Triton, no torch, no GPU: Triton from PyPI (`.venv-triton`, made by
//! `scripts/setup-env.sh` from `scripts/requirements-triton.txt`) judged
//! the way a user's machine without a GPU would. The kernels are Triton
//! code in the hub layout, built like kernel-builder builds a noarch
//! kernel (`hub_build`), and the hub loader of the same interpreter is the
//! oracle: what preflight passes, `kernels.get_local_kernel` loads.
//!
//! Triton's own messages are read from Triton at test time where a test
//! compares them, so that a new Triton that words them differently fails
//! here rather than in a user's hands.

mod hub_build;

use hub_build::{HubKernel, assert_agrees_with_the_hub, preflight_json, triton_python};
use serde_json::Value;
use std::path::{Path, PathBuf};
use std::process::Command;

/// Element-wise addition in Triton (after Triton's vector-add tutorial),
/// with the host function a kernel exposes.
const VECTOR_ADD: &str = r#"import triton
import triton.language as tl


@triton.jit
def _add_kernel(x_ptr, y_ptr, out_ptr, n, BLOCK: tl.constexpr):
    pid = tl.program_id(axis=0)
    offsets = pid * BLOCK + tl.arange(0, BLOCK)
    mask = offsets < n
    x = tl.load(x_ptr + offsets, mask=mask)
    y = tl.load(y_ptr + offsets, mask=mask)
    tl.store(out_ptr + offsets, x + y, mask=mask)


def add(x, y, out, n):
    _add_kernel[(triton.cdiv(n, 1024),)](x, y, out, n, BLOCK=1024)
    return out
"#;

/// A smoke that launches the kernel. Without torch there is no tensor to
/// give it; Triton asks for its driver before it looks at the arguments.
const LAUNCH: &str = "def smoke(kernel, device):\n    kernel.add(0, 0, 0, 4)\n";

fn triton(args: &str) -> String {
    let out = Command::new(triton_python())
        .args(["-c", args])
        .env_remove("PYTHONPATH")
        .output()
        .expect("the Triton venv's python runs");
    format!(
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    )
}

/// The installed Triton's version, as its distribution says.
fn triton_version() -> String {
    triton("import importlib.metadata as m; print(m.version('triton'))")
        .trim()
        .to_owned()
}

/// What Triton itself raises on this machine when asked for its driver.
fn tritons_no_driver_message() -> String {
    let said = triton(
        "from triton.runtime import driver\ntry:\n    driver.active.get_current_target()\nexcept Exception as e:\n    print(f'{type(e).__name__}: {e}')\nelse:\n    print('a driver')",
    );
    let said = said.trim().to_owned();
    assert!(
        said.starts_with("RuntimeError: 0 active drivers"),
        "this machine has a GPU Triton can use? {said}"
    );
    said
}

fn check(cache: &Path, target: &Path, extra: &[&str]) -> (Vec<(PathBuf, Value)>, Option<i32>) {
    let python = triton_python();
    let mut args = vec!["check", "--json", "--timeout", "120", "--python"];
    args.push(python.to_str().unwrap());
    args.push(target.to_str().unwrap());
    args.extend_from_slice(extra);
    let (doc, code) = preflight_json(cache, &args);
    let results = doc["results"]
        .as_array()
        .expect("results")
        .iter()
        .map(|r| {
            (
                PathBuf::from(r["path"].as_str().expect("a path")),
                r["outcome"].clone(),
            )
        })
        .collect();
    (results, code)
}

/// The hub's reason as an outcome names it: the missing module's name.
fn hub_reason(refusal: &str) -> String {
    match refusal.split_once("No module named '") {
        Some((_, rest)) => rest.trim_end_matches('\'').to_owned(),
        None => refusal.to_owned(),
    }
}

fn only<'a>(results: &'a [(PathBuf, Value)], variant: &str) -> &'a Value {
    &results
        .iter()
        .find(|(p, _)| p.ends_with(variant))
        .unwrap_or_else(|| panic!("no {variant} in {results:?}"))
        .1
}

#[test]
fn a_torch_cuda_triton_kernel_without_a_gpu_is_no_device_in_tritons_words() {
    let tmp = tempfile::tempdir().unwrap();
    let python = triton_python();
    let mut k = HubKernel::new(tmp.path(), "vector-add");
    let m = k.metadata("cuda");
    k.variant("torch-cuda", &[("__init__.py", VECTOR_ADD)], m);
    let repo = k.finish(&python);
    let cache = tmp.path().join("cache");
    let (results, code) = check(&cache, &repo, &[]);
    assert_eq!(code, Some(1), "{results:?}");
    let outcome = only(&results, "torch-cuda");
    assert_eq!(outcome["kind"], "no_device", "{outcome}");
    // The import finished before the device was found unusable (DESIGN:
    // a failure's depth is that of the phases it finished).
    assert_eq!(outcome["depth"], "load", "{outcome}");
    let message = outcome["message"].as_str().unwrap();
    let expected = format!(
        "triton {} has no usable driver: {}",
        triton_version(),
        tritons_no_driver_message()
    );
    assert!(message.ends_with(&expected), "{message:?} vs {expected:?}");
    // The hub loads it: only the device depth tells it cannot run here.
    let (hub, kernels) = hub_build::get_local_kernel(&python, &[results[0].0.clone()]);
    assert_eq!(
        hub,
        [None],
        "kernels {kernels} loads a Triton kernel without a GPU"
    );
    assert_agrees_with_the_hub(&python, &results, hub_reason);
    // Nothing to select, with or without overruling names.
    for extra in [&[][..], &["--overrule-names"][..]] {
        let mut args = vec!["select", "--json", "--python", python.to_str().unwrap()];
        args.push(repo.to_str().unwrap());
        args.extend_from_slice(extra);
        let (doc, code) = preflight_json(&cache, &args);
        assert_eq!(code, Some(1), "{doc}");
        assert_eq!(doc["variant"], Value::Null, "{doc}");
        assert_eq!(doc["alternatives"][0]["cached"], true, "{doc}");
    }
}

#[test]
fn a_launch_without_a_gpu_is_no_device_in_smoke_never_missing_dependency() {
    let tmp = tempfile::tempdir().unwrap();
    let python = triton_python();
    let mut k = HubKernel::new(tmp.path(), "vector-add");
    let m = k.metadata("cpu");
    k.variant("torch-universal", &[("__init__.py", VECTOR_ADD)], m);
    let smoke = k.file("smoke/launch.py", LAUNCH);
    let repo = k.finish(&python);
    let (results, _) = check(
        &tmp.path().join("cache"),
        &repo,
        &["--smoke", smoke.to_str().unwrap()],
    );
    let outcome = only(&results, "torch-universal");
    assert_eq!(outcome["kind"], "no_device", "{outcome}");
    assert_eq!(outcome["phase"], "smoke", "{outcome}");
    let triton_said = tritons_no_driver_message();
    let reason = triton_said.trim_start_matches("RuntimeError: ");
    assert_eq!(outcome["message"], reason, "{outcome}");
    assert_agrees_with_the_hub(&python, &results, hub_reason);
}

#[test]
fn a_module_the_installed_triton_lacks_is_dependency_version_naming_its_version() {
    let tmp = tempfile::tempdir().unwrap();
    let python = triton_python();
    // Triton 3.x before 3.3 had `triton.tools.experimental_descriptor`
    // (TMA descriptors); kernels written for it import it at the top.
    let missing = "triton.tools.experimental_descriptor";
    let said = triton(&format!("import {missing}"));
    assert!(
        said.contains(&format!("No module named '{missing}'")),
        "the installed Triton has {missing}? {said}"
    );
    let mut k = HubKernel::new(tmp.path(), "tma-add");
    let m = k.metadata("cpu");
    let init = format!("from {missing} import create_2d_tma_descriptor\n{VECTOR_ADD}");
    k.variant("torch-universal", &[("__init__.py", &init)], m);
    let repo = k.finish(&python);
    let (results, code) = check(&tmp.path().join("cache"), &repo, &[]);
    assert_eq!(code, Some(1));
    let outcome = only(&results, "torch-universal");
    assert_eq!(outcome["kind"], "dependency_version", "{outcome}");
    assert_eq!(
        outcome["message"],
        format!(
            "`triton` {} is installed but has no module `{missing}`",
            triton_version()
        )
    );
    let hint = outcome["hint"].as_str().unwrap();
    assert!(!hint.contains("pip install triton"), "{hint}");
    assert_agrees_with_the_hub(&python, &results, hub_reason);
}

/// A smoke that compiles `kernel` for an sm_90 GPU with Triton's own
/// compiler (no GPU needed: Triton ships ptxas) and returns whether a
/// cubin came out.
fn compile_smoke(kernel: &str) -> String {
    format!(
        r#"import triton
import triton.language as tl
from triton.backends.compiler import GPUTarget
from triton.compiler import ASTSource

{kernel}

def smoke(kernel, device):
    src = ASTSource(fn=_kernel, signature={{"x_ptr": "*i32"}}, constexprs={{}})
    compiled = triton.compile(src, target=GPUTarget("cuda", 90, 32))
    return ("cubin" in compiled.asm, True)
"#
    )
}

#[test]
fn tritons_compiler_runs_without_a_gpu_and_its_errors_are_jit_compile_errors() {
    let tmp = tempfile::tempdir().unwrap();
    let python = triton_python();
    let mut k = HubKernel::new(tmp.path(), "vector-add");
    let m = k.metadata("cpu");
    k.variant("torch-universal", &[("__init__.py", VECTOR_ADD)], m);
    let good = k.file(
        "smoke/good.py",
        &compile_smoke(
            "@triton.jit\ndef _kernel(x_ptr):\n    offsets = tl.arange(0, 16)\n    tl.store(x_ptr + offsets, offsets)\n",
        ),
    );
    // `tl.arange` needs a power of two: Triton's frontend refuses 10.
    let bad = k.file(
        "smoke/bad.py",
        &compile_smoke(
            "@triton.jit\ndef _kernel(x_ptr):\n    offsets = tl.arange(0, 10)\n    tl.store(x_ptr + offsets, offsets)\n",
        ),
    );
    let repo = k.finish(&python);
    let cache = tmp.path().join("cache");
    let (results, code) = check(&cache, &repo, &["--smoke", good.to_str().unwrap()]);
    let outcome = only(&results, "torch-universal");
    assert_eq!(code, Some(0), "{outcome}");
    assert_eq!(outcome["kind"], "pass", "{outcome}");
    assert_eq!(outcome["depth"], "verified", "{outcome}");
    assert_agrees_with_the_hub(&python, &results, hub_reason);

    let (results, code) = check(&cache, &repo, &["--smoke", bad.to_str().unwrap()]);
    assert_eq!(code, Some(1));
    let outcome = only(&results, "torch-universal");
    assert_eq!(outcome["kind"], "jit_compile_error", "{outcome}");
    assert_eq!(outcome["phase"], "smoke", "{outcome}");
    assert_eq!(
        outcome["message"],
        "triton.compiler.errors.CompilationError: arange's range must be a power of 2 (at 2:14: `offsets = tl.arange(0, 10)`)"
    );
}

#[test]
fn a_universal_kernel_with_its_cuda_twin_selects_the_same_cold_and_warm() {
    // kernel-builder's noarch layout: the same files under torch-cuda and
    // torch-universal, told apart only by metadata.json.
    let tmp = tempfile::tempdir().unwrap();
    let python = triton_python();
    let mut k = HubKernel::new(tmp.path(), "vector-add");
    for (variant, backend) in [("torch-cuda", "cuda"), ("torch-universal", "cpu")] {
        let m = k.metadata(backend);
        k.variant(variant, &[("__init__.py", VECTOR_ADD)], m);
    }
    let repo = k.finish(&python);
    let cache = tmp.path().join("cache");
    let args = [
        "select",
        "--json",
        "--python",
        python.to_str().unwrap(),
        repo.to_str().unwrap(),
    ];
    let (cold, code) = preflight_json(&cache, &args);
    assert_eq!(code, Some(0), "{cold}");
    assert_eq!(cold["variant"], "torch-universal", "{cold}");
    assert_eq!(cold["cached"], false, "{cold}");
    let (warm, _) = preflight_json(&cache, &args);
    assert_eq!(warm["variant"], cold["variant"], "{warm}");
    assert_eq!(warm["outcome"], cold["outcome"], "{warm}");
    assert_eq!(warm["cached"], true, "{warm}");
    let twin = warm["alternatives"]
        .as_array()
        .unwrap()
        .iter()
        .find(|a| a["variant"] == "torch-cuda")
        .expect("torch-cuda listed");
    assert_eq!(twin["outcome"]["kind"], "no_device", "{twin}");
    let results: Vec<(PathBuf, Value)> = warm["alternatives"]
        .as_array()
        .unwrap()
        .iter()
        .map(|a| {
            (
                PathBuf::from(a["path"].as_str().unwrap()),
                a["outcome"].clone(),
            )
        })
        .collect();
    assert_agrees_with_the_hub(&python, &results, hub_reason);
}

/// What a Triton kernel's probe compiles lands in preflight's store of that
/// kernel's JIT caches (docs/sandbox.md, "JIT caches"), never in the
/// user's `~/.triton`; its next probe finds it there warm. Prints what the
/// cold cache cost (docs/performance.md).
#[test]
fn a_triton_kernels_jit_cache_is_its_own_and_warm_for_its_next_probe() {
    let tmp = tempfile::tempdir().unwrap();
    let python = triton_python();
    let mut k = HubKernel::new(tmp.path(), "vector-add");
    let m = k.metadata("cpu");
    k.variant("torch-universal", &[("__init__.py", VECTOR_ADD)], m);
    let good = k.file(
        "smoke/good.py",
        &compile_smoke(
            "@triton.jit\ndef _kernel(x_ptr):\n    offsets = tl.arange(0, 16)\n    tl.store(x_ptr + offsets, offsets)\n",
        ),
    );
    let repo = k.finish(&python);
    let cache = tmp.path().join("cache");
    let user = std::env::var_os("TRITON_CACHE_DIR").map_or_else(
        || PathBuf::from(std::env::var_os("HOME").expect("HOME")).join(".triton/cache"),
        PathBuf::from,
    );
    let listing = |dir: &Path| -> Vec<PathBuf> {
        let mut all: Vec<PathBuf> = std::fs::read_dir(dir)
            .into_iter()
            .flatten()
            .flatten()
            .map(|e| e.path())
            .collect();
        all.sort();
        all
    };
    let before = listing(&user);
    let args = ["--no-cache", "--smoke", good.to_str().unwrap()];
    let timed = || {
        let start = std::time::Instant::now();
        let (results, code) = check(&cache, &repo, &args);
        assert_eq!(code, Some(0), "{results:?}");
        start.elapsed()
    };
    // The first run also makes the fingerprint preflight caches; the JIT
    // store emptied after it, the third run pays for Triton's cache alone.
    let first = timed();
    std::fs::remove_dir_all(cache.join("jit")).expect("empty the store");
    let (cold, warm) = (timed(), timed());
    // One folder of the store per kernel, Triton's entries in it.
    let kernels = listing(&cache.join("jit"));
    assert_eq!(kernels.len(), 1, "{kernels:?}");
    // `~/.triton/cache` by default, the folder `TRITON_CACHE_DIR` names
    // when set.
    let compiled = [
        listing(&kernels[0].join("triton/cache")),
        listing(&kernels[0].join("triton_cache_dir")),
    ]
    .concat();
    assert!(!compiled.is_empty(), "Triton's entries are in the store");
    assert_eq!(
        listing(&user),
        before,
        "the user's Triton cache is as it was"
    );
    eprintln!(
        "check with Triton's compile: first {first:?}, cold JIT cache {cold:?}, warm {warm:?}"
    );
}
