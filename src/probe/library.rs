//! preflight's own smoke workloads for known hub kernels (`probes/kernels/`),
//! compiled into the binary.

const FLASH_ATTN: &str = include_str!("../../probes/kernels/flash-attn.py");
const TRITON_KERNELS: &str = include_str!("../../probes/kernels/triton-kernels.py");
const NVFP4: &str = include_str!("../../probes/kernels/nvfp4-gemm.py");

/// `(kernel name, smoke file text)` for every kernel with a library smoke:
/// the names are the kernels' own (`metadata.json`'s `name`, the last part
/// of the hub repo id), and the names transformers knows them by.
pub const LIBRARY: &[(&str, &str)] = &[
    (
        "activation",
        include_str!("../../probes/kernels/activation.py"),
    ),
    ("relu", include_str!("../../probes/kernels/relu.py")),
    (
        "deep-gemm",
        include_str!("../../probes/kernels/deep-gemm.py"),
    ),
    (
        "finegrained-fp8",
        include_str!("../../probes/kernels/finegrained-fp8.py"),
    ),
    (
        "sonic-moe",
        include_str!("../../probes/kernels/sonic-moe.py"),
    ),
    ("flash-attn", FLASH_ATTN),
    ("flash-attn2", FLASH_ATTN),
    ("flash-attn3", FLASH_ATTN),
    ("vllm-flash-attn3", FLASH_ATTN),
    ("nvfp4-gemm", NVFP4),
    ("nvfp4", NVFP4),
    ("gpt-oss-triton-kernels", TRITON_KERNELS),
    ("triton-kernels", TRITON_KERNELS),
];

/// The library smoke for a kernel, by its name (`activation`) or hub repo
/// id (`kernels-community/activation`); `-` and `_` are the same.
pub fn smoke_for(kernel: &str) -> Option<&'static str> {
    let name = kernel
        .rsplit('/')
        .next()
        .unwrap_or(kernel)
        .replace('_', "-");
    LIBRARY
        .iter()
        .find(|(known, _)| *known == name)
        .map(|(_, source)| *source)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn finds_by_name_and_repo_id() {
        assert!(smoke_for("activation").is_some());
        assert!(smoke_for("kernels-community/activation").is_some());
        assert!(smoke_for("kernels-community/relu").is_some());
        assert!(smoke_for("kernels-community/deep-gemm").is_some());
        assert!(smoke_for("vllm_flash_attn3").is_some());
        assert!(smoke_for("flash-attn4").is_none());
    }

    #[test]
    fn every_entry_defines_smoke() {
        for (name, source) in LIBRARY {
            assert!(source.contains("def smoke(kernel, device)"), "{name}");
        }
    }
}
