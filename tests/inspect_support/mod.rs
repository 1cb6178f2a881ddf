//! Real CUDA fixtures for the `inspect` tests: built once per test binary
//! with the nvcc from the project's wheel environment (`scripts/setup-env.sh`).
//!
//! The invocation that works on a CPU-only Linux machine with gcc 12 is the
//! wheel's `nvcc` called by its full path with no extra flags: its
//! `nvcc.profile` finds cicc, ptxas, fatbinary, the headers and libcudart
//! relative to itself, and gcc comes from PATH.
#![allow(dead_code)]

use kernel_preflight::declared::arch::ImageKind;
use kernel_preflight::declared::embedded::FileImages;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::OnceLock;

/// A tool from the CUDA 13 wheels in the test environment.
pub fn cuda_tool(name: &str) -> PathBuf {
    venv_tool("nvidia/cu13/bin", name)
}

/// `ptxas` from the CUDA 12.9 wheel (`nvidia-cuda-nvcc-cu12`).
pub fn cuda12_ptxas() -> PathBuf {
    venv_tool("nvidia/cuda_nvcc/bin", "ptxas")
}

/// `site-packages/<dir>/<name>` in the test environment made by
/// `scripts/setup-env.sh` (`$PREFLIGHT_TEST_VENV`, else `.venv`). Missing
/// tools fail the test, never skip it.
fn venv_tool(dir: &str, name: &str) -> PathBuf {
    let venv = std::env::var_os("PREFLIGHT_TEST_VENV")
        .map(PathBuf::from)
        .unwrap_or_else(|| Path::new(env!("CARGO_MANIFEST_DIR")).join(".venv"));
    let lib = venv.join("lib");
    let found = std::fs::read_dir(&lib).ok().and_then(|dirs| {
        dirs.flatten()
            .map(|d| d.path().join("site-packages").join(dir).join(name))
            .find(|p| p.is_file())
    });
    found.unwrap_or_else(|| {
        panic!(
            "{dir}/{name} not found under {}: run scripts/setup-env.sh",
            lib.display()
        )
    })
}

/// Run a tool that must succeed.
pub fn run(cmd: &mut Command) {
    let out = cmd.output().unwrap_or_else(|e| panic!("{cmd:?}: {e}"));
    assert!(
        out.status.success(),
        "{cmd:?} failed:\n{}",
        String::from_utf8_lossy(&out.stderr)
    );
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

/// Build one fixture into `dir` with the wheel's nvcc.
pub fn build(spec: &Spec, dir: &Path) -> PathBuf {
    let sources = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/cuda");
    let out = dir.join(spec.name);
    run(Command::new(cuda_tool("nvcc"))
        .args(spec.args)
        .arg(sources.join(spec.source))
        .arg("-o")
        .arg(&out));
    out
}

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
        for spec in SPECS {
            build(spec, &dir);
        }
        cuda12_fixtures(&dir);
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

/// Cubins from CUDA 12.9's ptxas (V1 `e_flags` with the 0x800 `a` bit
/// below sm_100, V2 with the 0x8 bit from sm_100) and a compressed fatbin of
/// them made by CUDA 13's `fatbinary`. The PTX comes from nvcc 13.5 with its
/// `.version` lowered to 8.8, which this small kernel allows.
fn cuda12_fixtures(dir: &Path) {
    let ptx = std::fs::read_to_string(dir.join("compute90a.ptx")).expect("compute90a.ptx");
    let mut images = Vec::new();
    for arch in ["80", "90a", "100a", "100f"] {
        let text = ptx
            .replace(".version 9.5", ".version 8.8")
            .replace(".target sm_90a", &format!(".target sm_{arch}"));
        let source = dir.join(format!("cuda12_{arch}.ptx.src"));
        std::fs::write(&source, text).expect("write PTX");
        let cubin = dir.join(format!("cuda12_sm{arch}.cubin"));
        run(Command::new(cuda12_ptxas())
            .arg(format!("-arch=sm_{arch}"))
            .arg(&source)
            .arg("-o")
            .arg(&cubin));
        images.push(format!(
            "--image3=kind=elf,sm={arch},file={}",
            cubin.display()
        ));
    }
    run(Command::new(cuda_tool("fatbinary"))
        .args(["-64", "--compress-all"])
        .arg(format!("--create={}", dir.join("cuda12.fatbin").display()))
        .args(&images));
}

/// Every fixture file that holds CUDA images, by name, sorted.
pub fn cuda_fixture_names() -> Vec<String> {
    let mut names: Vec<String> = std::fs::read_dir(fixtures())
        .expect("fixture dir")
        .flatten()
        .map(|e| e.file_name().to_string_lossy().into_owned())
        .filter(|n| n.ends_with(".so") || n.ends_with(".cubin") || n.ends_with(".fatbin"))
        .filter(|n| n != "plain_c.so")
        .collect();
    names.sort();
    names
}

/// Path of one fixture.
pub fn fixture(name: &str) -> PathBuf {
    fixtures().join(name)
}

/// What cuobjdump lists, per kind, in its order: `sm_80`, `sm_90a`, …
pub fn cuobjdump(path: &Path) -> (Vec<String>, Vec<String>) {
    let out = Command::new(cuda_tool("cuobjdump"))
        .args(["--list-elf", "--list-ptx"])
        .arg(path)
        .output()
        .expect("run cuobjdump");
    let text = String::from_utf8_lossy(&out.stdout);
    let mut elf = Vec::new();
    let mut ptx = Vec::new();
    for line in text.lines() {
        let Some((head, name)) = line.split_once(':') else {
            continue;
        };
        let mut parts = name.trim().rsplit('.');
        let ext = parts.next().unwrap_or_default();
        let arch = parts.next().unwrap_or_default().to_string();
        match (
            head.starts_with("ELF file"),
            head.starts_with("PTX file"),
            ext,
        ) {
            (true, _, "cubin") => elf.push(arch),
            (_, true, "ptx") => ptx.push(arch),
            _ => panic!("unexpected cuobjdump line {line:?}"),
        }
    }
    (elf, ptx)
}

/// Our images in cuobjdump's spelling: PTX as `sm_…`, and SASS without the
/// `f` suffix, which cuobjdump drops.
pub fn in_cuobjdump_terms(file: &FileImages) -> (Vec<String>, Vec<String>) {
    let mut elf = Vec::new();
    let mut ptx = Vec::new();
    for image in &file.images {
        let t = image.target.to_string();
        match image.kind {
            ImageKind::Sass => elf.push(t.trim_end_matches('f').to_string()),
            ImageKind::Ptx => ptx.push(t.replace("compute_", "sm_")),
        }
    }
    (elf, ptx)
}
