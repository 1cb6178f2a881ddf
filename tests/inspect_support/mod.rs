//! Real CUDA fixtures for the `inspect` tests: built once per test binary
//! with the nvcc from the project's wheel environment (`scripts/setup-env.sh`).
//!
//! The invocation that works on a CPU-only Linux machine with gcc 12 is the
//! wheel's `nvcc` called by its full path with no extra flags: its
//! `nvcc.profile` finds cicc, ptxas, fatbinary, the headers and libcudart
//! relative to itself, and gcc comes from PATH.
#![allow(dead_code)]

use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::OnceLock;

/// A tool from the CUDA 13 wheels: `$PREFLIGHT_CUDA_BIN/<name>`, else the
/// project's `.venv`.
pub fn cuda_tool(name: &str) -> PathBuf {
    if let Some(dir) = std::env::var_os("PREFLIGHT_CUDA_BIN") {
        return Path::new(&dir).join(name);
    }
    let lib = Path::new(env!("CARGO_MANIFEST_DIR")).join(".venv/lib");
    let found = std::fs::read_dir(&lib).ok().and_then(|dirs| {
        dirs.flatten()
            .map(|d| d.path().join("site-packages/nvidia/cu13/bin").join(name))
            .find(|p| p.is_file())
    });
    found.unwrap_or_else(|| {
        panic!(
            "{name} not found under {}: run scripts/setup-env.sh (or set PREFLIGHT_CUDA_BIN)",
            lib.display()
        )
    })
}

/// One fixture: a file name and the nvcc arguments that build it from
/// `tests/fixtures/cuda/add.cu` (or `host_only.cu`).
pub struct Spec {
    pub name: &'static str,
    pub source: &'static str,
    pub args: &'static [&'static str],
}

const SHARED: [&str; 3] = ["-Xcompiler", "-fPIC", "-shared"];

/// Every fixture the tests use, with a target mix each.
pub const SPECS: &[Spec] = &[
    Spec {
        name: "sm80.cubin",
        source: "add.cu",
        args: &["-cubin", "-arch=sm_80"],
    },
    Spec {
        name: "sm90a.cubin",
        source: "add.cu",
        args: &["-cubin", "-arch=sm_90a"],
    },
    Spec {
        name: "sm100f.cubin",
        source: "add.cu",
        args: &["-cubin", "-arch=sm_100f"],
    },
    Spec {
        name: "sm121a.cubin",
        source: "add.cu",
        args: &["-cubin", "-arch=sm_121a"],
    },
    Spec {
        name: "compute90a.ptx",
        source: "add.cu",
        args: &["-ptx", "-arch=compute_90a"],
    },
    Spec {
        name: "ptx90.fatbin",
        source: "add.cu",
        args: &["-fatbin", "-gencode", "arch=compute_90,code=compute_90"],
    },
    Spec {
        name: "mixed.fatbin",
        source: "add.cu",
        args: &[
            "-fatbin",
            "--compress-mode=none",
            "-gencode",
            "arch=compute_80,code=sm_80",
            "-gencode",
            "arch=compute_90a,code=[sm_90a,compute_90a]",
            "-gencode",
            "arch=compute_100f,code=sm_100f",
            "-gencode",
            "arch=compute_120,code=compute_120",
        ],
    },
    Spec {
        name: "family.fatbin",
        source: "add.cu",
        args: &[
            "-fatbin",
            "-gencode",
            "arch=compute_103f,code=sm_103f",
            "-gencode",
            "arch=compute_110f,code=sm_110f",
            "-gencode",
            "arch=compute_121f,code=[sm_121f,compute_121f]",
            "-gencode",
            "arch=compute_120a,code=sm_120a",
        ],
    },
    Spec {
        name: "zstd.fatbin",
        source: "add.cu",
        args: &[
            "-fatbin",
            "--compress-mode=size",
            "-gencode",
            "arch=compute_100f,code=sm_100f",
            "-gencode",
            "arch=compute_90,code=compute_90",
            "-gencode",
            "arch=compute_90a,code=compute_90a",
        ],
    },
    Spec {
        name: "lz4.fatbin",
        source: "add.cu",
        args: &[
            "-fatbin",
            "--compress-mode=speed",
            "-gencode",
            "arch=compute_86,code=sm_86",
            "-gencode",
            "arch=compute_90,code=compute_90",
        ],
    },
    Spec {
        name: "concat.fatbin",
        source: "add.cu",
        args: &[
            "-fatbin",
            "--concat",
            "--compress-mode=size",
            "-gencode",
            "arch=compute_90,code=[sm_90,compute_90]",
            "-gencode",
            "arch=compute_100a,code=[sm_100a,compute_100a]",
            "-gencode",
            "arch=compute_120,code=[sm_120,compute_120]",
            "-gencode",
            "arch=compute_80,code=sm_80",
        ],
    },
    Spec {
        name: "lto.fatbin",
        source: "add.cu",
        args: &[
            "-fatbin",
            "-gencode",
            "arch=compute_90,code=lto_90",
            "-gencode",
            "arch=compute_80,code=sm_80",
        ],
    },
    Spec {
        name: "two_gencodes.so",
        source: "add.cu",
        args: &[
            SHARED[0],
            SHARED[1],
            SHARED[2],
            "-gencode",
            "arch=compute_80,code=sm_80",
            "-gencode",
            "arch=compute_90a,code=sm_90a",
        ],
    },
    Spec {
        name: "ptx_only.so",
        source: "add.cu",
        args: &[
            SHARED[0],
            SHARED[1],
            SHARED[2],
            "-gencode",
            "arch=compute_90,code=compute_90",
        ],
    },
    Spec {
        name: "host_only.so",
        source: "host_only.cu",
        args: &[SHARED[0], SHARED[1], SHARED[2]],
    },
];

/// The fixture directory, with every fixture built (once per process).
pub fn fixtures() -> &'static Path {
    static DIR: OnceLock<PathBuf> = OnceLock::new();
    DIR.get_or_init(|| {
        let exe = std::env::current_exe().expect("test binary path");
        let stem = exe
            .file_stem()
            .map_or("tests".into(), |s| s.to_string_lossy().into_owned());
        let dir = Path::new(env!("CARGO_TARGET_TMPDIR")).join(format!("inspect-fixtures-{stem}"));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(&dir).expect("create fixture dir");
        let sources = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/cuda");
        let nvcc = cuda_tool("nvcc");
        for spec in SPECS {
            let out = Command::new(&nvcc)
                .args(spec.args)
                .arg(sources.join(spec.source))
                .arg("-o")
                .arg(dir.join(spec.name))
                .output()
                .expect("run nvcc");
            assert!(
                out.status.success(),
                "nvcc {:?} failed:\n{}",
                spec.args,
                String::from_utf8_lossy(&out.stderr)
            );
        }
        let c = Command::new("cc")
            .args(["-shared", "-fPIC", "-x", "c", "-", "-o"])
            .arg(dir.join("plain_c.so"))
            .stdin(std::process::Stdio::piped())
            .spawn()
            .and_then(|mut child| {
                use std::io::Write;
                child
                    .stdin
                    .take()
                    .expect("stdin")
                    .write_all(b"int answer(void) { return 42; }\n")?;
                child.wait()
            })
            .expect("run cc");
        assert!(c.success(), "cc failed to build plain_c.so");
        dir
    })
}

/// Path of one fixture.
pub fn fixture(name: &str) -> PathBuf {
    fixtures().join(name)
}
