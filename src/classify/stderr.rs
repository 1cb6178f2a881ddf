//! Which lines of a child's stderr may decide its outcome: the exception
//! line that ends each Python traceback, and lines that report an error.
//! Warnings never do, even when they quote an error (torch's `UserWarning:
//! Failed to initialize NumPy: No module named 'numpy'` is not a missing
//! dependency), and neither do traceback frames or source lines.

use super::strip_ansi;

/// Words that make a line an error report (compared in lower case).
const ERROR_WORDS: &[&str] = &[
    "error",
    "fatal",
    "fail",
    "abort",
    "exception",
    "cannot",
    "can't",
    "unable",
    "not found",
    "no such file",
    "undefined symbol",
    "terminate called",
    "what():",
    "no kernel image",
    "out of memory",
    "unsupported",
    "insufficient",
    "not compiled with",
    "no nvidia driver",
    "no cuda-capable device",
    "stub library",
    "is not set",
    "not compatible",
    "too old",
    "no module named",
];

/// The decisive lines of `stderr`, in order, without ANSI codes.
pub(super) fn decisive_lines(stderr: &str) -> Vec<String> {
    said(stderr)
        .into_iter()
        .filter_map(|(line, decisive)| decisive.then_some(line))
        .collect()
}

/// The last line a child said in its own words: not a warning, a frame or
/// a source line, decisive or not.
pub(super) fn last_said(stderr: &str) -> Option<String> {
    said(stderr).pop().map(|(line, _)| line)
}

/// Every line outside warnings and stacks, with whether it is decisive.
fn said(stderr: &str) -> Vec<(String, bool)> {
    let text = strip_ansi(stderr);
    let mut lines = Vec::new();
    // Inside a block whose indented lines are not reports: a traceback's
    // frames, a warning's source line, faulthandler's stack.
    let mut block = Block::None;
    for raw in text.lines() {
        let indented = raw.starts_with([' ', '\t']);
        let line = raw.trim();
        if line.is_empty() {
            continue;
        }
        if indented && block != Block::None {
            continue;
        }
        if line.starts_with("Traceback (most recent call last)") {
            block = Block::Traceback;
            continue;
        }
        if is_warning(line) {
            block = Block::Warning;
            continue;
        }
        if is_stack_header(line) {
            block = Block::Stack;
            continue;
        }
        if block == Block::Traceback && !indented {
            // The exception that ends the traceback.
            block = Block::None;
            lines.push((line.to_owned(), true));
            continue;
        }
        block = Block::None;
        let lower = line.to_ascii_lowercase();
        let decisive = ERROR_WORDS.iter().any(|w| lower.contains(w));
        lines.push((line.to_owned(), decisive));
    }
    lines
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Block {
    None,
    Traceback,
    Warning,
    Stack,
}

/// `…: UserWarning: …`, `warnings.warn(…)`, `nvcc warning : …`, `[W …]`.
fn is_warning(line: &str) -> bool {
    let lower = line.to_ascii_lowercase();
    lower.starts_with("warning")
        || lower.starts_with("[w")
        || lower.contains("warnings.warn(")
        || lower
            .match_indices("warning")
            .any(|(at, _)| lower[at + "warning".len()..].trim_start().starts_with(':'))
}

/// faulthandler's `Current thread 0x… (most recent call first):` and
/// `Thread 0x…` headers, and the "During handling" lines between chained
/// tracebacks.
fn is_stack_header(line: &str) -> bool {
    line.ends_with("(most recent call first):")
        || line.starts_with("During handling of the above exception")
        || line.starts_with("The above exception was the direct cause")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn warnings_and_frames_do_not_count() {
        let stderr = "/site-packages/torch/_subclasses/functional_tensor.py:276: UserWarning: Failed to initialize NumPy: No module named 'numpy' (Triggered internally at /pytorch/torch/csrc/utils/tensor_numpy.cpp:81.)\n  cpu = _conversion_method_template(device=torch.device(\"cpu\"))\nnvcc warning : The 'compute_75' target is deprecated\nsomething went wrong\n";
        assert!(
            decisive_lines(stderr).is_empty(),
            "{:?}",
            decisive_lines(stderr)
        );
    }

    #[test]
    fn the_exception_line_of_each_traceback_counts() {
        let stderr = "Traceback (most recent call last):\n  File \"x.py\", line 1, in <module>\n    import einops\nModuleNotFoundError: No module named 'einops'\n\nThe above exception was the direct cause of the following exception:\n\nTraceback (most recent call last):\n  File \"y.py\", line 2\nRuntimeError: CUDA error: no kernel image is available for execution on the device\n";
        assert_eq!(
            decisive_lines(stderr),
            [
                "ModuleNotFoundError: No module named 'einops'",
                "RuntimeError: CUDA error: no kernel image is available for execution on the device"
            ]
        );
    }

    #[test]
    fn error_lines_count_and_faulthandler_frames_do_not() {
        let stderr = "CUDA error (flash_fwd_launch_template.h:180): no kernel image is available for execution on the device\nFatal Python error: Segmentation fault\n\nCurrent thread 0x00007f (most recent call first):\n  File \"/v/nvcc_error.py\", line 3 in relu\nterminate called after throwing an instance of 'c10::Error'\n  what():  CUDA error: out of memory\n";
        assert_eq!(
            decisive_lines(stderr),
            [
                "CUDA error (flash_fwd_launch_template.h:180): no kernel image is available for execution on the device",
                "Fatal Python error: Segmentation fault",
                "terminate called after throwing an instance of 'c10::Error'",
                "what():  CUDA error: out of memory"
            ]
        );
    }
}
