//! Output of `preflight inspect`.

use crate::declared::arch::{ComputeCapability, PtxIsa, Verdict};
use crate::declared::embedded::FileImages;
use serde::Serialize;
use std::fmt::Write;
use std::path::PathBuf;

/// One inspected file with, when a GPU was given, the rule's verdict.
#[derive(Debug, Serialize)]
pub struct FileReport<'a> {
    /// What the file holds.
    #[serde(flatten)]
    pub file: &'a FileImages,
    /// Whether this file's images can run on the GPU asked about; absent
    /// without `--gpu` or when the file holds no CUDA code.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub verdict: Option<Verdict>,
}

/// The JSON document `inspect --json` prints.
#[derive(Debug, Serialize)]
pub struct InspectReport<'a> {
    /// The GPU judged against, if any.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub gpu: Option<ComputeCapability>,
    /// The driver's newest PTX ISA, if given.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub driver_ptx: Option<PtxIsa>,
    /// Every file, in the order given (directories expanded, sorted).
    pub files: Vec<FileReport<'a>>,
    /// Directories given that hold no file that could carry CUDA code.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub empty_dirs: Vec<PathBuf>,
}

impl<'a> InspectReport<'a> {
    /// Build the report, judging each file with CUDA code when `gpu` is set.
    pub fn new(
        files: &'a [FileImages],
        empty_dirs: Vec<PathBuf>,
        gpu: Option<ComputeCapability>,
        driver_ptx: Option<PtxIsa>,
    ) -> Self {
        let files = files
            .iter()
            .map(|file| FileReport {
                file,
                verdict: gpu
                    .filter(|_| file.has_cuda())
                    .map(|gpu| file.verdict(gpu, driver_ptx)),
            })
            .collect();
        InspectReport {
            gpu,
            driver_ptx,
            files,
            empty_dirs,
        }
    }

    /// Whether every file with CUDA code can run on the GPU (true without one).
    pub fn all_runnable(&self) -> bool {
        self.files
            .iter()
            .filter_map(|f| f.verdict.as_ref())
            .all(|v| v.runnable)
    }
}

/// `1.3 KiB`, `812 B`, `1.0 GiB`.
pub fn human_size(bytes: u64) -> String {
    const UNITS: [&str; 4] = ["KiB", "MiB", "GiB", "TiB"];
    if bytes < 1024 {
        return format!("{bytes} B");
    }
    let mut value = bytes as f64 / 1024.0;
    let mut unit = 0;
    while value >= 1024.0 && unit + 1 < UNITS.len() {
        value /= 1024.0;
        unit += 1;
    }
    format!("{value:.1} {}", UNITS[unit])
}

fn plural(n: usize, word: &str) -> String {
    if n == 1 {
        format!("1 {word}")
    } else {
        format!("{n} {word}s")
    }
}

/// The tables `inspect` prints for people: one per file.
pub fn table(report: &InspectReport<'_>) -> String {
    let mut out = String::new();
    for dir in &report.empty_dirs {
        let _ = writeln!(
            out,
            "{}: no .so, .cubin, .fatbin or .ptx files: no CUDA code\n",
            dir.display()
        );
    }
    for f in &report.files {
        let file = f.file;
        let path = file.path.display();
        let format = file.format.describe();
        if !file.has_cuda() {
            let why = if file.other_entries > 0 {
                format!(
                    "{} but no SASS or PTX image ({} only)",
                    plural(file.fatbins, "fatbin"),
                    plural(file.other_entries, "LTO IR or other entry")
                )
            } else {
                "no fatbin section".to_string()
            };
            let _ = writeln!(out, "{path}: {format} without CUDA code ({why})\n");
            continue;
        }
        let mut head = format!("{path}: {format}");
        if file.fatbins > 0 {
            let _ = write!(head, ", {}", plural(file.fatbins, "fatbin"));
        }
        let _ = write!(head, ", {}", plural(file.images.len(), "image"));
        if file.other_entries > 0 {
            let _ = write!(
                head,
                " (+{} skipped)",
                plural(file.other_entries, "other entry")
            );
        }
        let _ = writeln!(out, "{head}");
        let mut table = super::table(&["kind", "target", "PTX ISA", "compressed", "size"]);
        for image in &file.images {
            table.add_row(vec![
                image.kind.to_string(),
                image.target.to_string(),
                image
                    .ptx_isa
                    .map(|i| i.to_string())
                    .unwrap_or_else(|| "-".into()),
                match image.compressed {
                    Some(c) => format!("{c} ({})", human_size(image.stored_size)),
                    None => "no".to_string(),
                },
                human_size(image.size),
            ]);
        }
        let _ = writeln!(out, "{table}");
        if let Some(v) = &f.verdict {
            let mark = if v.runnable {
                "✓ runs"
            } else {
                "✗ cannot run"
            };
            let _ = writeln!(out, "{mark} on {}: {}", v.gpu, v.summary);
        }
        out.push('\n');
    }
    while out.ends_with('\n') {
        out.pop();
    }
    out
}
