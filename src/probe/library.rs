//! preflight's own smoke workloads for known hub kernels (`probes/kernels/`),
//! compiled into the binary.

/// `(kernel name, smoke file text)` for every kernel with a library smoke.
pub const LIBRARY: &[(&str, &str)] = &[
    (
        "activation",
        include_str!("../../probes/kernels/activation.py"),
    ),
    ("relu", include_str!("../../probes/kernels/relu.py")),
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
        assert!(smoke_for("flash-attn3").is_none());
    }

    #[test]
    fn every_entry_defines_smoke() {
        for (name, source) in LIBRARY {
            assert!(source.contains("def smoke(kernel, device)"), "{name}");
        }
    }
}
