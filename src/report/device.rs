//! The device depth of compiled variants in `check`'s output: one line per
//! shared object whose embedded CUDA code was loaded on the device.

use crate::protocol::EmbeddedLoad;
use crate::run::CheckResult;
use std::fmt::Write;

fn ms(v: f64) -> String {
    if v >= 1000.0 {
        format!("{:.2} s", v / 1000.0)
    } else if v >= 10.0 {
        format!("{v:.0} ms")
    } else {
        format!("{v:.2} ms")
    }
}

/// What loading one file showed, in a line.
pub fn describe(load: &EmbeddedLoad) -> String {
    let mut parts: Vec<String> = Vec::new();
    match &load.error {
        Some(e) => {
            let name = if e.name.is_empty() {
                "CUresult"
            } else {
                &e.name
            };
            parts.push(format!("refused: {name} ({})", e.code));
        }
        None if load.loaded > 0 => {
            let taken = load
                .taken
                .as_deref()
                .map(|t| format!(", the driver took {t} (inferred)"))
                .unwrap_or_default();
            parts.push(format!(
                "{} fatbin(s) loaded in {}{taken}",
                load.loaded,
                ms(load.load_ms)
            ));
            if let Some(jit) = load.jit_ms {
                parts.push(format!("PTX JIT {}", ms(jit)));
            }
        }
        None if load.relocatable == 0 => parts.push("no CUDA code to load".into()),
        None => {}
    }
    if load.other_gpus > 0 && load.loaded > 0 {
        parts.push(format!(
            "{} fatbin(s) for other GPUs, not loaded here (209, as the driver's rule says)",
            load.other_gpus
        ));
    }
    if load.relocatable > 0 {
        parts.push(format!(
            "{} relocatable (-rdc) fatbin(s): not loadable alone",
            load.relocatable
        ));
    }
    format!("{}: {}; {}", load.file, load.images, parts.join("; "))
}

/// One line per shared object of each row's device depth.
pub fn lines(out: &mut String, rows: &[&CheckResult]) {
    for r in rows {
        for load in &r.outcome.embedded {
            let _ = writeln!(out, "  {}/{}", r.variant, describe(load));
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::protocol::CudaError;

    fn load() -> EmbeddedLoad {
        EmbeddedLoad {
            file: "_ops.so".into(),
            images: "no SASS, PTX for compute_80".into(),
            loaded: 2,
            relocatable: 0,
            other_gpus: 0,
            taken: Some("compute_80 PTX, JIT".into()),
            load_ms: 152.5,
            jit_ms: Some(148.25),
            error: None,
        }
    }

    #[test]
    fn a_line_says_what_loaded_what_was_taken_and_what_failed() {
        assert_eq!(
            describe(&load()),
            "_ops.so: no SASS, PTX for compute_80; 2 fatbin(s) loaded in 152 ms, the driver took compute_80 PTX, JIT (inferred); PTX JIT 148 ms"
        );
        let refused = EmbeddedLoad {
            loaded: 0,
            taken: None,
            jit_ms: None,
            relocatable: 1,
            other_gpus: 0,
            error: Some(CudaError {
                call: "cuModuleLoadDataEx".into(),
                code: 209,
                name: "CUDA_ERROR_NO_BINARY_FOR_GPU".into(),
                message: String::new(),
                log: None,
            }),
            ..load()
        };
        assert_eq!(
            describe(&refused),
            "_ops.so: no SASS, PTX for compute_80; refused: CUDA_ERROR_NO_BINARY_FOR_GPU (209); 1 relocatable (-rdc) fatbin(s): not loadable alone"
        );
        let multi = EmbeddedLoad {
            images: "SASS for sm_90 and sm_100a, no PTX".into(),
            loaded: 1,
            other_gpus: 1,
            taken: Some("sm_90 SASS".into()),
            jit_ms: None,
            load_ms: 0.5,
            ..load()
        };
        assert_eq!(
            describe(&multi),
            "_ops.so: SASS for sm_90 and sm_100a, no PTX; 1 fatbin(s) loaded in 0.50 ms, the driver took sm_90 SASS (inferred); 1 fatbin(s) for other GPUs, not loaded here (209, as the driver's rule says)"
        );
    }
}
