//! Stand-ins for packages this machine does not have (a GPU build of
//! torch, Triton, CuTe-DSL), written into a [`Site`] for the child's
//! `PYTHONPATH`. They have the real packages' module layout, class names
//! and messages, and nothing else.

use super::Site;

/// torch built for CUDA `cuda` (`None`: a CPU-only build) that sees
/// `devices` GPUs.
pub fn torch(site: &Site, cuda: Option<&str>, devices: u32) {
    let available = if devices > 0 { "True" } else { "False" };
    site.file(
        "torch/__init__.py",
        "from types import SimpleNamespace\n__version__ = '2.8.0+fake'\nfrom . import backends, cuda, version\n_C = SimpleNamespace()\n",
    )
    .file(
        "torch/version.py",
        &format!(
            "cuda = {}\nhip = None\n",
            cuda.map_or("None".to_owned(), |v| format!("{v:?}"))
        ),
    )
    .file(
        "torch/cuda.py",
        &format!(
            "def is_available():\n    return {available}\n\ndef device_count():\n    return {devices}\n\ndef synchronize():\n    pass\n\ndef get_device_capability():\n    return (9, 0)\n"
        ),
    )
    .file("torch/backends/__init__.py", "from . import mps\n")
    .file(
        "torch/backends/mps.py",
        "def is_available():\n    return False\n",
    );
}

/// Triton `version`, installed with its dist-info, whose driver finds no
/// active backend (what Triton says on a machine without a usable GPU),
/// with its compiler's error class and a `tools` package without
/// `experimental_descriptor` (dropped in newer releases).
pub fn triton(site: &Site, version: &str) {
    site.file(
        "triton/__init__.py",
        &format!("__version__ = {version:?}\n"),
    )
    .file("triton/runtime/__init__.py", "from .driver import driver\n")
    .file(
        "triton/runtime/driver.py",
        "def _create_driver():\n    active_drivers = []\n    raise RuntimeError(f\"{len(active_drivers)} active drivers ({active_drivers}). There should only be one.\")\n\n\nclass DriverConfig:\n    @property\n    def active(self):\n        return _create_driver()\n\n\ndriver = DriverConfig()\n",
    )
    .file("triton/compiler/__init__.py", "")
    .file(
        "triton/compiler/errors.py",
        "class CompilationError(Exception):\n    pass\n",
    )
    .file("triton/tools/__init__.py", "")
    .file(
        &format!("triton-{version}.dist-info/METADATA"),
        &format!("Metadata-Version: 2.1\nName: triton\nVersion: {version}\n"),
    )
    .file(&format!("triton-{version}.dist-info/top_level.txt"), "triton\n");
}

/// CuTe-DSL's error classes (`nvidia-cutlass-dsl`: the `cutlass` package).
pub fn cutlass_dsl(site: &Site) {
    site.file("cutlass/__init__.py", "")
        .file("cutlass/base_dsl/__init__.py", "")
        .file(
            "cutlass/base_dsl/common.py",
            "class DSLBaseError(Exception):\n    pass\n\n\nclass DSLRuntimeError(DSLBaseError):\n    pass\n",
        );
}
