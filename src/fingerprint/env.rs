//! The environment variables that change how kernels compile, load or run.

use super::Sources;
use std::collections::BTreeMap;

/// Variables recorded by exact name.
pub const ENV_VARS: [&str; 12] = [
    "CUDA_VISIBLE_DEVICES",
    "CUDA_DEVICE_ORDER",
    "CUDA_HOME",
    "CUDA_PATH",
    "CUDA_MODULE_LOADING",
    "CUDA_DISABLE_PTX_JIT",
    "CUDA_FORCE_PTX_JIT",
    "TORCH_CUDA_ARCH_LIST",
    "NVCC_APPEND_FLAGS",
    "NVCC_PREPEND_FLAGS",
    "PYTHONPATH",
    "HIP_VISIBLE_DEVICES",
];

/// Variables recorded by prefix: Triton's (`TRITON_PTXAS_PATH`,
/// `TRITON_LIBCUDA_PATH`, `TRITON_OVERRIDE_ARCH`, `TRITON_INTERPRET`, …) and
/// CuTe DSL's (`CUTE_DSL_ARCH`, `CUTE_DSL_LIBS`, …), except those that only
/// move caches, dumps or logs (see [`IGNORED_SUFFIXES`]).
pub const ENV_PREFIXES: [&str; 2] = ["TRITON_", "CUTE_DSL_"];

/// Endings of prefixed variables that do not change what runs: where caches,
/// dumps and logs go, and how verbose they are.
pub const IGNORED_SUFFIXES: [&str; 6] = [
    "_CACHE_DIR",
    "_DUMP_DIR",
    "_LOG_LEVEL",
    "_DEBUG",
    "_PRINT_IR",
    "_HOME",
];

/// The recorded variables that are set (an empty value counts as set: it is
/// not the same as unset for `CUDA_VISIBLE_DEVICES`).
pub(crate) fn detect(src: &Sources) -> BTreeMap<String, String> {
    for name in ENV_VARS {
        src.raw_var(name);
    }
    for prefix in ENV_PREFIXES {
        crate::seen::prefix(prefix, &src.env);
    }
    src.env
        .iter()
        .filter(|(k, _)| {
            ENV_VARS.contains(&k.as_str())
                || (ENV_PREFIXES.iter().any(|p| k.starts_with(p))
                    && !IGNORED_SUFFIXES.iter().any(|s| k.ends_with(s)))
        })
        .map(|(k, v)| (k.clone(), v.clone()))
        .collect()
}
