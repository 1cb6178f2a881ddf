//! `preflight fingerprint`

use super::{Answer, Failure, Internal, emit, emit_json};
use kernel_preflight::cache::Cache;
use kernel_preflight::fingerprint::{
    FactStore, Fingerprint, Hashed, Libcuda, PythonMeasured, Sources,
};
use kernel_preflight::probe::machine;
use kernel_preflight::report;
use std::path::PathBuf;

/// Arguments of `preflight fingerprint`.
#[derive(clap::Args)]
pub struct Args {
    /// Print JSON (every field and the hash) instead of a table.
    #[arg(long)]
    json: bool,
    /// Add the facts measured in child processes (compute capability and
    /// CUDA's device numbering, CUDA driver API version, Python's exact
    /// version, torch's ABI); cached after the first time.
    #[arg(long)]
    full: bool,
    /// The Python interpreter whose environment kernels load into (default:
    /// $VIRTUAL_ENV, $CONDA_PREFIX, python3 on PATH).
    #[arg(long)]
    python: Option<PathBuf>,
    /// Also report this package's version (a variant's python-depends);
    /// repeatable.
    #[arg(long = "package", value_name = "NAME")]
    packages: Vec<String>,
}

pub fn run(args: Args) -> Result<Answer, Failure> {
    let mut src = Sources::from_process();
    src.python = args.python;
    src.extra_packages = args.packages;
    let cache = Cache::from_env();
    let fp = if args.full {
        full(&src, &cache)?
    } else {
        Fingerprint::fast(&src, &cache)?
    };
    if args.json {
        emit_json(&Hashed::from(&fp));
    } else {
        emit(&table(&fp));
    }
    Ok(Answer::Yes)
}

/// The full fingerprint, its CUDA facts measured by this binary's own cuda
/// child (no Python needed), kept in `store` after the first time.
pub(super) fn full(src: &Sources, store: &dyn FactStore) -> Result<Fingerprint, Failure> {
    let preflight = kernel_preflight::fs::current_exe()
        .ok_or_else(|| Internal("cannot find the preflight binary (/proc/self/exe)".into()))?;
    Ok(machine::full_fingerprint(src, store, &preflight)?)
}

fn table(fp: &Fingerprint) -> String {
    let mut t = report::table(&["fact", "this machine"]);
    let g = &fp.gpus;
    let gpus = if g.devices.is_empty() {
        "none (no GPU bound to the NVIDIA driver)".to_string()
    } else {
        g.devices
            .iter()
            .map(|d| {
                let index = d
                    .cuda_index
                    .map_or("hidden".to_string(), |i| format!("cuda:{i}"));
                let model = d.model.as_deref().unwrap_or("NVIDIA GPU");
                let cc = d
                    .compute_capability
                    .map_or(String::new(), |c| format!(", compute {c}"));
                format!("{index}  {model} [{}] at {}{cc}", d.device_id, d.pci_bus_id)
            })
            .collect::<Vec<_>>()
            .join("\n")
    };
    t.add_row(vec!["GPU".to_string(), gpus]);
    t.add_row(vec![
        "driver".to_string(),
        g.driver
            .clone()
            .unwrap_or_else(|| "none (no NVIDIA kernel module loaded)".into()),
    ]);
    let state = match &g.libcuda {
        None => Some("not measured (use --full)".to_string()),
        Some(Libcuda::Ok) => None,
        Some(Libcuda::Missing) => Some("none (libcuda.so.1 not installed)".into()),
        Some(l @ Libcuda::InitFailed { code }) => Some(format!(
            "cuInit failed with CUresult {code}{}",
            if l.is_settled() {
                ""
            } else {
                " (a passing state: measured again next time)"
            }
        )),
        Some(Libcuda::NotMeasured { reason }) => Some(format!("not measured: {reason}")),
    };
    let api = match (g.cuda_driver_api, state) {
        (Some(v), None) => v.to_string(),
        (Some(v), Some(state)) => format!("{v}; {state}"),
        (None, Some(state)) => state,
        (None, None) => "unknown".into(),
    };
    t.add_row(vec!["CUDA driver API".to_string(), api]);
    let tk = &fp.toolkits;
    let toolkits = if tk.found.is_empty() {
        "none found (CUDA_HOME, CUDA_PATH, PATH, /usr/local/cuda, pip wheels)".to_string()
    } else {
        tk.found
            .iter()
            .map(|k| {
                let mark = if tk.active.as_ref() == Some(&k.root) {
                    "* "
                } else {
                    "  "
                };
                let version = k.version.as_deref().unwrap_or("version unknown");
                let via = serde_json::to_value(k.found_via)
                    .ok()
                    .and_then(|v| v.as_str().map(str::to_string))
                    .unwrap_or_default();
                let problem = match (&k.problem, &k.nvcc, &k.ptxas) {
                    (Some(p), _, _) => format!(" — {p}"),
                    (None, None, Some(_)) => " — ptxas only, no nvcc".to_string(),
                    _ => String::new(),
                };
                format!("{mark}{version}  {} ({via}){problem}", k.root.display())
            })
            .collect::<Vec<_>>()
            .join("\n")
    };
    t.add_row(vec!["CUDA toolkits".to_string(), toolkits]);
    let home = match (&tk.visible, tk.visible_nvcc(), tk.wheel_nvcc()) {
        (Some(home), Some(_), _) => format!("{} (with bin/nvcc)", home.display()),
        (Some(home), None, _) => format!("{} (no bin/nvcc in it)", home.display()),
        (None, _, Some(wheel)) => format!(
            "none: the nvcc in {} is only in a pip wheel (CUDA_HOME={} makes it visible)",
            wheel.root.display(),
            wheel.root.display()
        ),
        (None, _, None) => "none (CUDA_HOME, CUDA_PATH, nvcc on PATH, /usr/local/cuda)".into(),
    };
    t.add_row(vec!["CUDA home a kernel sees".to_string(), home]);
    for (name, libs) in [("NVRTC", &tk.nvrtc), ("CUDA runtime", &tk.cudart)] {
        let text = if libs.is_empty() {
            "none found".to_string()
        } else {
            libs.iter()
                .map(|l| format!("{}  {}", l.version, l.path.display()))
                .collect::<Vec<_>>()
                .join("\n")
        };
        t.add_row(vec![name.to_string(), text]);
    }
    match &fp.python {
        None => {
            t.add_row(vec![
                "Python".to_string(),
                "none (no interpreter: --python, VIRTUAL_ENV, CONDA_PREFIX, python3 on PATH)"
                    .to_string(),
            ]);
        }
        Some(p) => {
            let mut python = format!(
                "{}  {}",
                p.version.as_deref().unwrap_or("version unknown"),
                p.interpreter.display()
            );
            if p.real_path != p.interpreter {
                python.push_str(&format!(" → {}", p.real_path.display()));
            }
            if let Some(PythonMeasured::NotMeasured { reason }) = &p.measured {
                python.push_str(&format!("\nnot measured: {reason}"));
            }
            t.add_row(vec!["Python".to_string(), python]);
            let packages = p
                .packages
                .iter()
                .map(|(name, v)| {
                    let mut line = format!("{name} {}", v.as_deref().unwrap_or("—"));
                    if let (Some(torch), "torch") = (&p.torch, name.as_str()) {
                        let backend = match (&torch.cuda, &torch.hip, &torch.xpu) {
                            (Some(c), _, _) => format!("CUDA {c}"),
                            (_, Some(h), _) => format!("ROCm {h}"),
                            (_, _, Some(x)) => format!("XPU {x}"),
                            _ => "CPU".to_string(),
                        };
                        let abi = match torch.cxx11_abi {
                            Some(true) => "cxx11 ABI",
                            Some(false) => "pre-cxx11 ABI",
                            None => "ABI unknown",
                        };
                        line.push_str(&format!(" ({backend}, {abi})"));
                    }
                    line
                })
                .collect::<Vec<_>>()
                .join("\n");
            t.add_row(vec!["packages".to_string(), packages]);
        }
    }
    let h = &fp.host;
    t.add_row(vec![
        "host".to_string(),
        format!(
            "{} {}, {}, glibc {}\nISA: {}",
            h.os,
            h.arch,
            h.cpu_model.as_deref().unwrap_or("CPU model unknown"),
            h.glibc.as_deref().unwrap_or("none"),
            if h.cpu_flags.is_empty() {
                "none known".to_string()
            } else {
                h.cpu_flags.join(" ")
            }
        ),
    ]);
    if !fp.env.is_empty() {
        let env = fp
            .env
            .iter()
            .map(|(k, v)| format!("{k}={v}"))
            .collect::<Vec<_>>()
            .join("\n");
        t.add_row(vec!["environment".to_string(), env]);
    }
    // The hash on a line of its own, under the table: 64 characters that
    // a cell of an 80-column table would have to break.
    format!(
        "{t}\nhash ({}):\n{}",
        if fp.depth == kernel_preflight::fingerprint::Depth::Full {
            "full"
        } else {
            "fast"
        },
        fp.hash()
    )
}
