//! `preflight fingerprint` on machines described by fake `/sys` and `/proc`
//! roots, fake toolkits (scripts printing real `nvcc --version` texts), the
//! real nvcc / NVRTC from the NVIDIA wheels in `.venv`, and fake
//! site-packages. Every run starts from an empty environment.

use kernel_preflight::fingerprint::{Depth, Fingerprint, FoundVia, Libcuda, VersionFrom};
use std::collections::BTreeMap;
use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};
use std::process::{Command, Output};

const NVCC_11_8: &str = "nvcc: NVIDIA (R) Cuda compiler driver
Copyright (c) 2005-2022 NVIDIA Corporation
Built on Wed_Sep_21_10:33:58_PDT_2022
Cuda compilation tools, release 11.8, V11.8.89
Build cuda_11.8.r11.8/compiler.31833905_0";

const NVCC_12_8: &str = "nvcc: NVIDIA (R) Cuda compiler driver
Copyright (c) 2005-2025 NVIDIA Corporation
Built on Fri_Feb_21_20:23:50_PST_2025
Cuda compilation tools, release 12.8, V12.8.93
Build cuda_12.8.r12.8/compiler.35583870_0";

const NVCC_13_0: &str = "nvcc: NVIDIA (R) Cuda compiler driver
Copyright (c) 2005-2025 NVIDIA Corporation
Built on Wed_Aug_20_01:58:59_PM_PDT_2025
Cuda compilation tools, release 13.0, V13.0.88
Build cuda_13.0.r13.0/compiler.36424714_0";

const PROC_PROPRIETARY: &str =
    "NVRM version: NVIDIA UNIX x86_64 Kernel Module  535.146.02  Thu Dec 19 18:56:32 UTC 2023
GCC version:  gcc version 12.3.0 (Ubuntu 12.3.0-1ubuntu1~22.04)
";

const PROC_OPEN: &str = "NVRM version: NVIDIA UNIX Open Kernel Module for x86_64  550.54.15  Release Build  (dvs-builder@U16-A24-23-2)  Tue Mar  5 22:15:33 UTC 2024
GCC version:  gcc version 12.2.0 (Debian 12.2.0-14)
";

const CPUINFO: &str = "processor\t: 0
vendor_id\t: GenuineIntel
model name\t: Intel(R) Xeon(R) Platinum 8480+
flags\t\t: fpu vme sse4_2 avx avx2 fma f16c avx512f avx512bw avx512_bf16 amx_tile amx_bf16 hypervisor

processor\t: 1
vendor_id\t: GenuineIntel
model name\t: Intel(R) Xeon(R) Platinum 8480+
flags\t\t: fpu vme sse4_2 avx avx2 fma f16c avx512f avx512bw avx512_bf16 amx_tile amx_bf16 hypervisor
";

/// A machine in a temp dir: `/sys`, `/proc`, a bin dir on PATH, a home, a
/// cache, and whatever toolkits and environments a test adds.
struct Machine {
    dir: tempfile::TempDir,
    env: BTreeMap<String, String>,
}

impl Machine {
    fn new() -> Machine {
        let dir = tempfile::tempdir().expect("temp dir");
        let root = dir.path();
        for d in ["sys/bus/pci/devices", "proc", "bin", "home", "cache"] {
            std::fs::create_dir_all(root.join(d)).expect("mkdir");
        }
        std::fs::write(root.join("proc/cpuinfo"), CPUINFO).expect("cpuinfo");
        let p = |s: &str| root.join(s).to_string_lossy().into_owned();
        let env = BTreeMap::from([
            ("PATH".to_string(), p("bin")),
            ("HOME".to_string(), p("home")),
            ("PREFLIGHT_CACHE".to_string(), p("cache")),
            ("PREFLIGHT_SYSFS_ROOT".to_string(), p("sys")),
            ("PREFLIGHT_PROCFS_ROOT".to_string(), p("proc")),
            (
                "PREFLIGHT_CUDA_DEFAULT_ROOT".to_string(),
                p("no-usr-local-cuda"),
            ),
        ]);
        Machine { dir, env }
    }

    fn path(&self, rel: &str) -> PathBuf {
        self.dir.path().join(rel)
    }

    fn write(&self, rel: &str, text: &str) -> PathBuf {
        let path = self.path(rel);
        std::fs::create_dir_all(path.parent().expect("parent")).expect("mkdir");
        std::fs::write(&path, text).expect("write");
        path
    }

    fn script(&self, rel: &str, body: &str) -> PathBuf {
        let path = self.write(rel, &format!("#!/bin/sh\n{body}\n"));
        std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o755)).expect("chmod");
        path
    }

    fn set(&mut self, key: &str, value: impl AsRef<str>) -> &mut Self {
        self.env.insert(key.to_string(), value.as_ref().to_string());
        self
    }

    fn unset(&mut self, key: &str) -> &mut Self {
        self.env.remove(key);
        self
    }

    /// A PCI function under the fake `/sys`.
    fn pci(&self, bus: &str, vendor: &str, device: &str, class: &str) {
        self.write(
            &format!("sys/bus/pci/devices/{bus}/vendor"),
            &format!("{vendor}\n"),
        );
        self.write(
            &format!("sys/bus/pci/devices/{bus}/device"),
            &format!("{device}\n"),
        );
        self.write(
            &format!("sys/bus/pci/devices/{bus}/class"),
            &format!("{class}\n"),
        );
    }

    /// An NVIDIA GPU with the driver's `information` file.
    fn gpu(&self, bus: &str, device: &str, model: &str) {
        self.pci(bus, "0x10de", device, "0x030200");
        self.write(
            &format!("proc/driver/nvidia/gpus/{bus}/information"),
            &format!(
                "Model: \t\t {model}\nIRQ:   \t\t 139\nGPU UUID: \t GPU-5c3a1e2b-0000-0000-0000-000000000000\nBus Type: \t PCIe\nBus Location: \t {bus}\nDevice Minor: \t 0\n"
            ),
        );
    }

    /// A toolkit root with a `bin/nvcc` script printing `text`; each run
    /// appends a line to `<root>/runs`.
    fn toolkit(&self, rel: &str, text: &str) -> PathBuf {
        let root = self.path(rel);
        let runs = root.join("runs");
        self.script(
            &format!("{rel}/bin/nvcc"),
            &format!(
                "echo run >> '{}'\n/bin/cat <<'EOF'\n{text}\nEOF",
                runs.display()
            ),
        );
        self.write(&format!("{rel}/bin/ptxas"), "");
        root
    }

    /// A virtual environment with `pyvenv.cfg` and empty site-packages; its
    /// `bin/python` is a placeholder (the fast fingerprint never runs it).
    fn venv(&self, rel: &str, version: &str) -> PathBuf {
        self.venv_of(rel, Path::new("/usr/bin"), version)
    }

    fn venv_of(&self, rel: &str, home: &Path, version: &str) -> PathBuf {
        let root = self.path(rel);
        self.write(
            &format!("{rel}/pyvenv.cfg"),
            &format!(
                "home = {}\ninclude-system-site-packages = false\nversion = {version}\n",
                home.display()
            ),
        );
        self.script(&format!("{rel}/bin/python"), "exit 3");
        let minor: Vec<&str> = version.split('.').take(2).collect();
        std::fs::create_dir_all(root.join(format!("lib/python{}/site-packages", minor.join("."))))
            .expect("mkdir");
        root
    }

    fn dist(&self, site: &Path, dir_name: &str) {
        std::fs::create_dir_all(site.join(dir_name)).expect("mkdir");
        std::fs::write(
            site.join(dir_name).join("METADATA"),
            "Metadata-Version: 2.1\n",
        )
        .expect("write");
    }

    fn run(&self, args: &[&str]) -> Output {
        Command::new(env!("CARGO_BIN_EXE_preflight"))
            .arg("fingerprint")
            .args(args)
            .env_clear()
            .envs(&self.env)
            .output()
            .expect("run preflight")
    }

    /// `fingerprint --json` (plus `args`), parsed; with its printed hash.
    fn fingerprint(&self, args: &[&str]) -> (Fingerprint, String) {
        let mut all = vec!["--json"];
        all.extend_from_slice(args);
        let out = self.run(&all);
        assert!(
            out.status.success(),
            "preflight fingerprint failed: {}",
            String::from_utf8_lossy(&out.stderr)
        );
        let json: serde_json::Value = serde_json::from_slice(&out.stdout).expect("JSON");
        let hash = json["hash"].as_str().expect("hash").to_string();
        let fp: Fingerprint = serde_json::from_value(json).expect("a fingerprint");
        assert_eq!(
            fp.hash(),
            hash,
            "printed hash is the hash of the printed fields"
        );
        (fp, hash)
    }

    fn hash(&self) -> String {
        self.fingerprint(&[]).1
    }
}

fn venv_site(venv: &Path) -> PathBuf {
    std::fs::read_dir(venv.join("lib"))
        .expect("lib")
        .flatten()
        .map(|e| e.path().join("site-packages"))
        .find(|p| p.is_dir())
        .expect("site-packages")
}

/// The real interpreter (links resolved) and its version.
fn real_python() -> (PathBuf, String) {
    let out = Command::new("python3")
        .args([
            "-c",
            "import os, platform, sys; print(os.path.realpath(sys.executable)); print(platform.python_version())",
        ])
        .output()
        .expect("python3 on PATH (tests of the full fingerprint need one)");
    let text = String::from_utf8_lossy(&out.stdout);
    let mut lines = text.lines();
    let path = PathBuf::from(lines.next().unwrap_or_default());
    (path, lines.next().unwrap_or_default().to_string())
}

/// The project venv made by `scripts/setup-env.sh`, with NVIDIA's wheels.
fn project_venv() -> PathBuf {
    let venv = Path::new(env!("CARGO_MANIFEST_DIR")).join(".venv");
    assert!(
        venv.join("pyvenv.cfg").is_file(),
        "{} is missing: run scripts/setup-env.sh first",
        venv.display()
    );
    venv
}

#[test]
fn a_bare_machine_is_described_plainly_and_the_command_succeeds() {
    let mut m = Machine::new();
    m.set("PREFLIGHT_PYTHON", "none");
    let (fp, _) = m.fingerprint(&[]);
    assert_eq!(fp.depth, Depth::Fast);
    assert_eq!(fp.gpus.driver, None);
    assert!(fp.gpus.devices.is_empty());
    assert!(fp.toolkits.found.is_empty());
    assert_eq!(fp.toolkits.active, None);
    assert!(fp.python.is_none());
    assert_eq!(
        fp.host.cpu_model.as_deref(),
        Some("Intel(R) Xeon(R) Platinum 8480+")
    );
    assert_eq!(
        fp.host.cpu_flags,
        [
            "amx_bf16",
            "amx_tile",
            "avx",
            "avx2",
            "avx512_bf16",
            "avx512bw",
            "avx512f",
            "f16c",
            "fma",
            "sse4_2"
        ]
    );

    let out = m.run(&[]);
    assert!(out.status.success());
    let table = String::from_utf8_lossy(&out.stdout);
    assert!(
        table.contains("none (no NVIDIA GPU on the PCI bus)"),
        "{table}"
    );
    assert!(
        table.contains("none (no NVIDIA kernel module loaded)"),
        "{table}"
    );
    assert!(table.contains("none found"), "{table}");
    assert!(table.contains(&fp.hash()), "{table}");
}

#[test]
fn driver_version_from_sys_else_both_proc_formats() {
    let mut m = Machine::new();
    m.set("PREFLIGHT_PYTHON", "none");
    m.write("proc/driver/nvidia/version", PROC_PROPRIETARY);
    assert_eq!(
        m.fingerprint(&[]).0.gpus.driver.as_deref(),
        Some("535.146.02")
    );
    m.write("proc/driver/nvidia/version", PROC_OPEN);
    assert_eq!(
        m.fingerprint(&[]).0.gpus.driver.as_deref(),
        Some("550.54.15")
    );
    m.write("sys/module/nvidia/version", "570.86.10\n");
    assert_eq!(
        m.fingerprint(&[]).0.gpus.driver.as_deref(),
        Some("570.86.10")
    );
    m.set("PREFLIGHT_NVIDIA_DRIVER", "none");
    assert_eq!(m.fingerprint(&[]).0.gpus.driver, None);
}

#[test]
fn gpus_on_the_pci_bus_in_bus_order_with_cuda_visible_devices_applied() {
    let mut m = Machine::new();
    m.set("PREFLIGHT_PYTHON", "none");
    m.write("sys/module/nvidia/version", "550.54.15\n");
    m.gpu("0000:c1:00.0", "0x2330", "NVIDIA H100 80GB HBM3");
    m.gpu("0000:41:00.0", "0x2330", "NVIDIA H100 80GB HBM3");
    m.pci("0000:81:00.0", "0x10de", "0x2901", "0x030000");
    // Not GPUs: the GPU's audio function, a NIC, an AMD display controller.
    m.pci("0000:41:00.1", "0x10de", "0x22a3", "0x040300");
    m.pci("0000:05:00.0", "0x15b3", "0x1021", "0x020000");
    m.pci("0000:06:00.0", "0x1002", "0x74a1", "0x030200");

    let (fp, _) = m.fingerprint(&[]);
    let buses: Vec<&str> = fp
        .gpus
        .devices
        .iter()
        .map(|g| g.pci_bus_id.as_str())
        .collect();
    assert_eq!(buses, ["0000:41:00.0", "0000:81:00.0", "0000:c1:00.0"]);
    let ids: Vec<&str> = fp
        .gpus
        .devices
        .iter()
        .map(|g| g.device_id.as_str())
        .collect();
    assert_eq!(ids, ["0x2330", "0x2901", "0x2330"]);
    assert_eq!(
        fp.gpus.devices[0].model.as_deref(),
        Some("NVIDIA H100 80GB HBM3")
    );
    assert_eq!(fp.gpus.devices[1].model, None, "no information file");
    let index = |fp: &Fingerprint| -> Vec<Option<u32>> {
        fp.gpus.devices.iter().map(|g| g.cuda_index).collect()
    };
    assert_eq!(index(&fp), [Some(0), Some(1), Some(2)]);

    m.set("CUDA_VISIBLE_DEVICES", "2,0");
    let (fp, _) = m.fingerprint(&[]);
    assert_eq!(index(&fp), [Some(1), None, Some(0)]);
    assert_eq!(
        fp.env.get("CUDA_VISIBLE_DEVICES").map(String::as_str),
        Some("2,0")
    );

    // CUDA stops at the first entry that names no device.
    m.set("CUDA_VISIBLE_DEVICES", "1,7,0");
    assert_eq!(index(&m.fingerprint(&[]).0), [None, Some(0), None]);
    m.set("CUDA_VISIBLE_DEVICES", "");
    assert_eq!(index(&m.fingerprint(&[]).0), [None, None, None]);
    m.set("CUDA_VISIBLE_DEVICES", "GPU-5c3a1e2b");
    assert_eq!(index(&m.fingerprint(&[]).0), [None, None, None]);

    let out = m.unset("CUDA_VISIBLE_DEVICES").run(&[]);
    let table = String::from_utf8_lossy(&out.stdout);
    assert!(
        table.contains("cuda:2  NVIDIA H100 80GB HBM3 [0x2330] at 0000:c1:00.0"),
        "{table}"
    );
    assert!(table.contains("550.54.15"), "{table}");
}

#[test]
fn one_gpu_and_overrides_of_gpu_facts() {
    let mut m = Machine::new();
    m.set("PREFLIGHT_PYTHON", "none");
    m.gpu("0000:01:00.0", "0x2b85", "NVIDIA GeForce RTX 5090");
    let (fp, _) = m.fingerprint(&[]);
    assert_eq!(fp.gpus.devices.len(), 1);
    assert_eq!(
        fp.gpus.devices[0].compute_capability, None,
        "fast: not measured"
    );

    m.set("PREFLIGHT_COMPUTE_CAPABILITY", "12.0");
    m.set("PREFLIGHT_CUDA_DRIVER_API", "12.8");
    let (fp, _) = m.fingerprint(&[]);
    assert_eq!(
        fp.gpus.devices[0].compute_capability.as_deref(),
        Some("12.0")
    );
    assert_eq!(fp.gpus.cuda_driver_api.as_deref(), Some("12.8"));

    m.set(
        "PREFLIGHT_GPUS",
        r#"[{"pci_bus_id":"0000:02:00.0","device_id":"0x2330","model":"NVIDIA H100","cuda_index":null,"compute_capability":null},
            {"pci_bus_id":"0000:01:00.0","device_id":"0x2330","model":"NVIDIA H100","cuda_index":null,"compute_capability":null}]"#,
    );
    m.set("PREFLIGHT_COMPUTE_CAPABILITY", "9.0,8.0");
    let (fp, _) = m.fingerprint(&[]);
    let cc: Vec<_> = fp
        .gpus
        .devices
        .iter()
        .map(|g| {
            (
                g.pci_bus_id.as_str(),
                g.compute_capability.as_deref(),
                g.cuda_index,
            )
        })
        .collect();
    assert_eq!(
        cc,
        [
            ("0000:01:00.0", Some("9.0"), Some(0)),
            ("0000:02:00.0", Some("8.0"), Some(1))
        ]
    );
}

#[test]
fn a_bad_override_is_bad_input_and_names_the_variable() {
    for (key, value) in [
        ("PREFLIGHT_GPUS", "[{]"),
        ("PREFLIGHT_COMPUTE_CAPABILITY", "sm90"),
        ("PREFLIGHT_CUDA_DRIVER_API", "twelve"),
        ("PREFLIGHT_TORCH_CXX11_ABI", "maybe"),
    ] {
        let mut m = Machine::new();
        m.set(key, value);
        let out = m.run(&["--json"]);
        assert_eq!(out.status.code(), Some(2), "{key}={value}");
        let err = String::from_utf8_lossy(&out.stderr);
        assert!(err.contains(key), "{key}: {err}");
    }
    let m = Machine::new();
    let out = m.run(&["--python", "/nonexistent/python3"]);
    assert_eq!(out.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&out.stderr).contains("/nonexistent/python3"));
}

#[test]
fn toolkits_in_kernel_lookup_order_with_versions_from_nvcc() {
    let mut m = Machine::new();
    m.set("PREFLIGHT_PYTHON", "none");
    let home = m.toolkit("cuda-12.8", NVCC_12_8);
    let path = m.toolkit("opt/cuda-11.8", NVCC_11_8);
    let default = m.toolkit("usr-local-cuda", NVCC_13_0);
    m.set("CUDA_HOME", home.to_string_lossy());
    m.set(
        "PATH",
        format!("{}:{}", m.path("bin").display(), path.join("bin").display()),
    );
    m.set("PREFLIGHT_CUDA_DEFAULT_ROOT", default.to_string_lossy());

    let (fp, _) = m.fingerprint(&[]);
    let found: Vec<_> = fp
        .toolkits
        .found
        .iter()
        .map(|t| (t.found_via, t.version.as_deref(), t.version_from))
        .collect();
    assert_eq!(
        found,
        [
            (FoundVia::CudaHome, Some("12.8.93"), Some(VersionFrom::Nvcc)),
            (FoundVia::Path, Some("11.8.89"), Some(VersionFrom::Nvcc)),
            (
                FoundVia::DefaultRoot,
                Some("13.0.88"),
                Some(VersionFrom::Nvcc)
            ),
        ]
    );
    assert_eq!(fp.toolkits.active.as_deref(), Some(home.as_path()));
    assert_eq!(fp.toolkits.found[0].ptxas, Some(home.join("bin/ptxas")));
    assert_eq!(
        fp.env.get("CUDA_HOME"),
        Some(&home.to_string_lossy().into_owned())
    );

    // CUDA_PATH comes after CUDA_HOME, and the same root is listed once.
    m.set("CUDA_PATH", default.to_string_lossy());
    let (fp, _) = m.fingerprint(&[]);
    let via: Vec<_> = fp.toolkits.found.iter().map(|t| t.found_via).collect();
    assert_eq!(
        via,
        [FoundVia::CudaHome, FoundVia::CudaPath, FoundVia::Path]
    );

    // Without CUDA_HOME / CUDA_PATH, nvcc on PATH is the active one.
    m.unset("CUDA_HOME").unset("CUDA_PATH");
    let (fp, _) = m.fingerprint(&[]);
    assert_eq!(fp.toolkits.active.as_deref(), Some(path.as_path()));
}

#[test]
fn nvcc_is_asked_once_per_stat() {
    let mut m = Machine::new();
    m.set("PREFLIGHT_PYTHON", "none");
    let root = m.toolkit("cuda", NVCC_12_8);
    m.set("CUDA_HOME", root.to_string_lossy());
    let runs = || {
        std::fs::read_to_string(root.join("runs"))
            .unwrap_or_default()
            .lines()
            .count()
    };
    let first = m.hash();
    assert_eq!(runs(), 1);
    assert_eq!(m.hash(), first);
    assert_eq!(runs(), 1, "an unchanged nvcc is not run again");

    // A replaced nvcc (new size, new inode) is asked again.
    std::fs::remove_file(root.join("bin/nvcc")).expect("rm");
    m.toolkit("cuda", NVCC_13_0);
    let (fp, hash) = m.fingerprint(&[]);
    assert_eq!(runs(), 2);
    assert_eq!(fp.toolkits.found[0].version.as_deref(), Some("13.0.88"));
    assert_ne!(hash, first);

    // The cache is private: 0700 folder, 0600 file.
    let dir = m.path("cache/fingerprint-v1");
    let mode = |p: &Path| std::fs::metadata(p).expect("stat").permissions().mode() & 0o777;
    assert_eq!(mode(&dir), 0o700);
    assert_eq!(mode(&dir.join("tools.json")), 0o600);
}

#[test]
fn version_files_win_over_nvcc_and_a_broken_nvcc_is_a_plain_fact() {
    let mut m = Machine::new();
    m.set("PREFLIGHT_PYTHON", "none");
    let json = m.toolkit("cuda-json", NVCC_11_8);
    m.write(
        "cuda-json/version.json",
        r#"{"cuda":{"name":"CUDA SDK","version":"12.8.1"},"cuda_nvcc":{"name":"CUDA NVCC","version":"12.8.93"},"cuda_nvrtc":{"name":"CUDA NVRTC","version":"12.8.93"}}"#,
    );
    m.set("CUDA_HOME", json.to_string_lossy());
    let (fp, _) = m.fingerprint(&[]);
    let t = &fp.toolkits.found[0];
    assert_eq!(
        (t.version.as_deref(), t.version_from),
        (Some("12.8.93"), Some(VersionFrom::VersionJson))
    );
    assert!(
        !json.join("runs").exists(),
        "nvcc not run when version.json says"
    );

    let txt = m.toolkit("cuda-10", NVCC_11_8);
    m.write("cuda-10/version.txt", "CUDA Version 10.0.130\n");
    m.set("CUDA_HOME", txt.to_string_lossy());
    let t = m.fingerprint(&[]).0.toolkits.found.remove(0);
    assert_eq!(
        (t.version.as_deref(), t.version_from),
        (Some("10.0.130"), Some(VersionFrom::VersionTxt))
    );

    let broken = m.path("cuda-broken");
    m.script(
        "cuda-broken/bin/nvcc",
        "echo 'nvcc: error while loading shared libraries: libnvvm.so.4' >&2\nexit 127",
    );
    m.write(
        "cuda-broken/include/cuda.h",
        "#ifndef __cuda_cuda_h__\n#define CUDA_VERSION 12040\n#endif\n",
    );
    m.set("CUDA_HOME", broken.to_string_lossy());
    let (fp, _) = m.fingerprint(&[]);
    let t = &fp.toolkits.found[0];
    assert_eq!(
        (t.version.as_deref(), t.version_from),
        (Some("12.4"), Some(VersionFrom::CudaH))
    );
    let problem = t.problem.as_deref().unwrap_or("");
    assert!(
        problem.contains("exit status 127") && problem.contains("libnvvm.so.4"),
        "{problem}"
    );

    m.set("CUDA_HOME", m.path("no-such-cuda").to_string_lossy());
    let (fp, _) = m.fingerprint(&[]);
    assert!(
        fp.toolkits.found[0]
            .problem
            .as_deref()
            .unwrap_or("")
            .contains("not a directory")
    );
    assert_eq!(fp.toolkits.active, None);
    assert!(m.run(&[]).status.success());
}

#[test]
fn real_nvcc_and_nvrtc_from_the_nvidia_wheels() {
    let venv = project_venv();
    let mut m = Machine::new();
    m.set("VIRTUAL_ENV", venv.to_string_lossy());
    let (fp, _) = m.fingerprint(&[]);
    let python = fp.python.as_ref().expect("the venv");
    assert_eq!(python.interpreter, venv.join("bin/python"));
    let wheel = python.site_packages[0].join("nvidia/cu13");
    let t = &fp.toolkits.found[0];
    assert_eq!(t.root, wheel);
    assert_eq!(t.found_via, FoundVia::PipWheel);
    assert_eq!(
        (t.version.as_deref(), t.version_from),
        (Some("13.5.37"), Some(VersionFrom::Nvcc))
    );
    assert_eq!(t.ptxas, Some(wheel.join("bin/ptxas")));
    assert_eq!(fp.toolkits.active, Some(wheel.clone()));
    assert_eq!(fp.toolkits.nvrtc.len(), 1);
    assert_eq!(fp.toolkits.nvrtc[0].path, wheel.join("lib/libnvrtc.so.13"));
    assert_eq!(fp.toolkits.nvrtc[0].version, "13.5.37");
    assert_eq!(
        fp.toolkits.cudart[0].path,
        wheel.join("lib/libcudart.so.13")
    );
    assert_eq!(
        python.packages.get("kernels"),
        Some(&Some("0.17.2".to_string()))
    );

    // The same nvcc through CUDA_HOME: active, and listed once.
    m.set("CUDA_HOME", wheel.to_string_lossy());
    let (fp, _) = m.fingerprint(&[]);
    assert_eq!(fp.toolkits.found.len(), 1);
    assert_eq!(fp.toolkits.found[0].found_via, FoundVia::CudaHome);
    assert_eq!(fp.toolkits.found[0].version.as_deref(), Some("13.5.37"));
}

#[test]
fn python_packages_and_torch_build_from_site_packages() {
    let mut m = Machine::new();
    let venv = m.venv("venv", "3.12.4");
    let site = venv_site(&venv);
    m.dist(&site, "torch-2.9.0+cu128.dist-info");
    m.dist(&site, "triton-3.5.0.dist-info");
    m.dist(&site, "einops-0.8.1.dist-info");
    m.dist(&site, "nvidia_cutlass_dsl-4.2.1.dist-info");
    m.dist(&site, "apache_tvm_ffi-0.1.0b2.dist-info");
    m.dist(&site, "Foo.Bar-1.2.egg-info");
    m.write(
        "venv/lib/python3.12/site-packages/torch/version.py",
        "from typing import Optional\n\n__all__ = ['__version__', 'debug', 'cuda', 'git_version', 'hip', 'xpu']\n__version__ = '2.9.0+cu128'\ndebug = False\ncuda: Optional[str] = '12.8'\ngit_version = '0fabc3ba44823f257e70ce397d989c8de5e362c1'\nhip: Optional[str] = None\nxpu: Optional[str] = None\n",
    );
    m.write(
        "venv/lib/python3.12/site-packages/torch/share/cmake/Torch/TorchConfig.cmake",
        "if(CMAKE_SYSTEM_NAME STREQUAL \"Linux\")\n  set(TORCH_CXX_FLAGS \"-D_GLIBCXX_USE_CXX11_ABI=1\")\nendif()\n",
    );
    m.set("VIRTUAL_ENV", venv.to_string_lossy());
    let (fp, _) = m.fingerprint(&["--package", "foo-bar", "--package", "helion"]);
    let p = fp.python.expect("python");
    assert_eq!(
        p.found_via,
        kernel_preflight::fingerprint::PythonVia::VirtualEnv
    );
    assert_eq!(p.version.as_deref(), Some("3.12.4"));
    assert_eq!(p.site_packages, std::slice::from_ref(&site));
    let packages: Vec<(&str, Option<&str>)> = p
        .packages
        .iter()
        .map(|(k, v)| (k.as_str(), v.as_deref()))
        .collect();
    assert_eq!(
        packages,
        [
            ("apache-tvm-ffi", Some("0.1.0b2")),
            ("einops", Some("0.8.1")),
            ("foo-bar", Some("1.2")),
            ("helion", None),
            ("kernels", None),
            ("nvidia-cutlass-dsl", Some("4.2.1")),
            ("torch", Some("2.9.0+cu128")),
            ("triton", Some("3.5.0")),
        ]
    );
    let torch = p.torch.expect("torch build");
    assert_eq!(torch.cuda.as_deref(), Some("12.8"));
    assert_eq!(torch.hip, None);
    assert_eq!(torch.cxx11_abi, Some(true));

    // PYTHONPATH comes first in import order, and wins.
    let extra = m.path("pythonpath");
    m.dist(&extra, "triton-3.4.0.dist-info");
    m.set("PYTHONPATH", extra.to_string_lossy());
    let p = m.fingerprint(&[]).0.python.expect("python");
    assert_eq!(p.site_packages, [extra, site]);
    assert_eq!(p.packages["triton"].as_deref(), Some("3.4.0"));

    // --python wins over VIRTUAL_ENV.
    let other = m.venv("other", "3.10.14");
    let python = other.join("bin/python");
    let p = m
        .fingerprint(&["--python", &python.to_string_lossy()])
        .0
        .python
        .expect("python");
    assert_eq!(p.interpreter, python);
    assert_eq!(p.version.as_deref(), Some("3.10.14"));
    assert_eq!(p.packages["torch"], None);
}

#[test]
fn the_hash_is_stable_for_an_unchanged_machine() {
    let mut m = Machine::new();
    m.write("sys/module/nvidia/version", "550.54.15\n");
    m.gpu("0000:41:00.0", "0x2330", "NVIDIA H100 80GB HBM3");
    m.gpu("0000:01:00.0", "0x2330", "NVIDIA H100 80GB HBM3");
    let venv = m.venv("venv", "3.12.4");
    m.dist(&venv_site(&venv), "torch-2.9.0.dist-info");
    m.set("VIRTUAL_ENV", venv.to_string_lossy());
    let cuda = m.toolkit("cuda", NVCC_12_8);
    m.set("CUDA_HOME", cuda.to_string_lossy());
    let first = m.hash();
    assert_eq!(first.len(), 64);
    for _ in 0..3 {
        assert_eq!(m.hash(), first);
    }
    // The same machine described in this process gives the same hash.
    let mut src = kernel_preflight::fingerprint::Sources::from_vars(m.env.clone());
    src.python = None;
    assert_eq!(Fingerprint::fast(&src).expect("fingerprint").hash(), first);
    // Variables that change nothing that runs leave it alone.
    m.set("TRITON_CACHE_DIR", "/tmp/elsewhere");
    m.set("UNRELATED", "1");
    assert_eq!(m.hash(), first);
}

#[test]
fn the_hash_changes_with_every_field() {
    type Change = Box<dyn Fn(&mut Machine)>;
    let base = |m: &mut Machine| {
        m.write("sys/module/nvidia/version", "550.54.15\n");
        m.gpu("0000:01:00.0", "0x2330", "NVIDIA H100 80GB HBM3");
        let venv = m.venv("venv", "3.12.4");
        let site = venv_site(&venv);
        for d in [
            "torch-2.9.0+cu128.dist-info",
            "triton-3.5.0.dist-info",
            "einops-0.8.1.dist-info",
        ] {
            m.dist(&site, d);
        }
        m.write(
            "venv/lib/python3.12/site-packages/torch/version.py",
            "cuda: Optional[str] = '12.8'\nhip: Optional[str] = None\n",
        );
        m.write(
            "venv/lib/python3.12/site-packages/torch/share/cmake/Torch/TorchConfig.cmake",
            "set(TORCH_CXX_FLAGS \"-D_GLIBCXX_USE_CXX11_ABI=1\")\n",
        );
        m.set("VIRTUAL_ENV", venv.to_string_lossy());
        let cuda = m.toolkit("cuda", NVCC_12_8);
        m.write("cuda/lib64/libnvrtc.so.12", "");
        m.set("CUDA_HOME", cuda.to_string_lossy());
    };
    let site = "venv/lib/python3.12/site-packages";
    let changes: Vec<(&str, Change)> = vec![
        (
            "driver version",
            Box::new(|m| drop(m.write("sys/module/nvidia/version", "570.86.10\n"))),
        ),
        (
            "another GPU",
            Box::new(|m| m.gpu("0000:02:00.0", "0x2330", "NVIDIA H100 80GB HBM3")),
        ),
        (
            "GPU model",
            Box::new(|m| m.gpu("0000:01:00.0", "0x2335", "NVIDIA H200")),
        ),
        (
            "GPU hidden",
            Box::new(|m| {
                m.set("CUDA_VISIBLE_DEVICES", "");
            }),
        ),
        (
            "compute capability",
            Box::new(|m| {
                m.set("PREFLIGHT_COMPUTE_CAPABILITY", "9.0");
            }),
        ),
        (
            "CUDA driver API",
            Box::new(|m| {
                m.set("PREFLIGHT_CUDA_DRIVER_API", "12.8");
            }),
        ),
        (
            "nvcc version",
            Box::new(|m| {
                let _ = std::fs::remove_file(m.path("cuda/bin/nvcc"));
                m.toolkit("cuda", NVCC_13_0);
            }),
        ),
        (
            "no ptxas",
            Box::new(|m| drop(std::fs::remove_file(m.path("cuda/bin/ptxas")))),
        ),
        (
            "second toolkit",
            Box::new(|m| {
                let p = m.toolkit("cuda-11", NVCC_11_8);
                m.set("CUDA_PATH", p.to_string_lossy());
            }),
        ),
        (
            "NVRTC",
            Box::new(|m| drop(m.write("cuda/lib64/libnvrtc.so.13", ""))),
        ),
        (
            "CUDA runtime",
            Box::new(|m| drop(m.write("cuda/lib64/libcudart.so.12", ""))),
        ),
        (
            "python version",
            Box::new(|m| {
                m.write(
                    "venv/pyvenv.cfg",
                    "home = /usr/bin\ninclude-system-site-packages = false\nversion = 3.12.5\n",
                );
            }),
        ),
        (
            "torch version",
            Box::new(move |m| {
                std::fs::rename(
                    m.path(&format!("{site}/torch-2.9.0+cu128.dist-info")),
                    m.path(&format!("{site}/torch-2.9.1+cu128.dist-info")),
                )
                .expect("mv");
            }),
        ),
        (
            "torch CUDA",
            Box::new(move |m| {
                drop(m.write(
                    &format!("{site}/torch/version.py"),
                    "cuda: Optional[str] = '13.0'\n",
                ))
            }),
        ),
        (
            "torch ABI",
            Box::new(move |m| {
                m.write(
                    &format!("{site}/torch/share/cmake/Torch/TorchConfig.cmake"),
                    "set(TORCH_CXX_FLAGS \"-D_GLIBCXX_USE_CXX11_ABI=0\")\n",
                );
            }),
        ),
        (
            "package added",
            Box::new(move |m| m.dist(&m.path(site), "kernels-0.17.2.dist-info")),
        ),
        (
            "package removed",
            Box::new(move |m| {
                drop(std::fs::remove_dir_all(
                    m.path(&format!("{site}/einops-0.8.1.dist-info")),
                ))
            }),
        ),
        (
            "CPU model",
            Box::new(|m| drop(m.write("proc/cpuinfo", &CPUINFO.replace("8480+", "8490H")))),
        ),
        (
            "CPU flag",
            Box::new(|m| drop(m.write("proc/cpuinfo", &CPUINFO.replace(" amx_tile", "")))),
        ),
        (
            "glibc",
            Box::new(|m| {
                m.set("PREFLIGHT_GLIBC", "2.17");
            }),
        ),
        (
            "arch",
            Box::new(|m| {
                m.set("PREFLIGHT_ARCH", "aarch64");
            }),
        ),
        (
            "TORCH_CUDA_ARCH_LIST",
            Box::new(|m| {
                m.set("TORCH_CUDA_ARCH_LIST", "9.0a");
            }),
        ),
        (
            "TRITON_PTXAS_PATH",
            Box::new(|m| {
                m.set("TRITON_PTXAS_PATH", "/opt/ptxas");
            }),
        ),
        (
            "CUTE_DSL_ARCH",
            Box::new(|m| {
                m.set("CUTE_DSL_ARCH", "sm_100a");
            }),
        ),
        (
            "CUDA_DISABLE_PTX_JIT",
            Box::new(|m| {
                m.set("CUDA_DISABLE_PTX_JIT", "1");
            }),
        ),
    ];
    for (name, change) in &changes {
        let mut m = Machine::new();
        base(&mut m);
        let before = m.hash();
        change(&mut m);
        assert_ne!(m.hash(), before, "{name} did not change the hash");
    }
}

fn cc(args: &[&str]) {
    let out = Command::new("cc")
        .args(args)
        .output()
        .expect("a C compiler (cc)");
    assert!(
        out.status.success(),
        "cc failed: {}",
        String::from_utf8_lossy(&out.stderr)
    );
}

fn fake_libcuda(m: &Machine, source: &str) -> PathBuf {
    let dir = m.path("libcuda");
    std::fs::create_dir_all(&dir).expect("mkdir");
    let src = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("tests/fixtures/fingerprint")
        .join(source);
    cc(&[
        "-shared",
        "-fPIC",
        "-o",
        &dir.join("libcuda.so.1").to_string_lossy(),
        &src.to_string_lossy(),
    ]);
    dir
}

/// A venv whose `bin/python` is the real interpreter, so that the measuring
/// child runs.
fn runnable_venv(m: &Machine) -> PathBuf {
    let (python, version) = real_python();
    let home = python.parent().expect("bin dir");
    let venv = m.venv_of("venv", home, &version);
    std::fs::remove_file(venv.join("bin/python")).expect("rm");
    std::os::unix::fs::symlink(&python, venv.join("bin/python")).expect("symlink");
    venv
}

#[test]
fn full_fingerprint_measures_devices_through_libcuda_and_caches_them() {
    let mut m = Machine::new();
    m.write("sys/module/nvidia/version", "570.86.10\n");
    m.gpu("0000:01:00.0", "0x2901", "NVIDIA B200");
    m.gpu("0000:41:00.0", "0x2330", "NVIDIA H100 80GB HBM3");
    let libcuda = fake_libcuda(&m, "fake_libcuda.c");
    m.set("LD_LIBRARY_PATH", libcuda.to_string_lossy());
    let venv = runnable_venv(&m);
    m.set("VIRTUAL_ENV", venv.to_string_lossy());

    let (fast, fast_hash) = m.fingerprint(&[]);
    let (full, full_hash) = m.fingerprint(&["--full"]);
    assert_eq!(full.depth, Depth::Full);
    assert_ne!(full_hash, fast_hash);
    assert_eq!(full.gpus.libcuda, Some(Libcuda::Ok));
    assert_eq!(full.gpus.cuda_driver_api.as_deref(), Some("12.8"));
    // CUDA's ordinals are not bus order here; facts are matched by bus id,
    // and CUDA's own numbering replaces the one inferred from files.
    let cc: Vec<_> = full
        .gpus
        .devices
        .iter()
        .map(|g| {
            (
                g.pci_bus_id.as_str(),
                g.compute_capability.as_deref(),
                g.cuda_index,
            )
        })
        .collect();
    assert_eq!(
        cc,
        [
            ("0000:01:00.0", Some("10.0"), Some(1)),
            ("0000:41:00.0", Some("9.0"), Some(0))
        ]
    );
    let (_, real_version) = real_python();
    assert_eq!(
        full.python.as_ref().and_then(|p| p.version.clone()),
        Some(real_version)
    );
    assert_eq!(fast.gpus.devices[0].compute_capability, None);

    // Measured once: with libcuda gone the cached facts still answer.
    std::fs::remove_file(libcuda.join("libcuda.so.1")).expect("rm");
    let (again, again_hash) = m.fingerprint(&["--full"]);
    assert_eq!(again_hash, full_hash);
    assert_eq!(again.gpus.libcuda, Some(Libcuda::Ok));
    let cached = m.path(&format!("cache/fingerprint-v1/full-{fast_hash}.json"));
    assert_eq!(
        std::fs::metadata(&cached)
            .expect("cache file")
            .permissions()
            .mode()
            & 0o777,
        0o600
    );

    // A fresh cache measures again, and finds no libcuda: a plain fact.
    std::fs::remove_file(&cached).expect("rm");
    let (missing, _) = m.fingerprint(&["--full"]);
    assert_eq!(missing.gpus.libcuda, Some(Libcuda::Missing));
    assert_eq!(missing.gpus.devices[0].compute_capability, None);
    let out = m.run(&["--full"]);
    assert!(out.status.success());
    assert!(String::from_utf8_lossy(&out.stdout).contains("libcuda.so.1 not installed"));

    // Overrides win over what was measured.
    m.set("PREFLIGHT_CUDA_DRIVER_API", "13.0");
    assert_eq!(
        m.fingerprint(&["--full"]).0.gpus.cuda_driver_api.as_deref(),
        Some("13.0")
    );
}

#[test]
fn full_fingerprint_reports_a_failed_cu_init() {
    let mut m = Machine::new();
    let libcuda = fake_libcuda(&m, "init_fails_libcuda.c");
    m.set("LD_LIBRARY_PATH", libcuda.to_string_lossy());
    let venv = runnable_venv(&m);
    m.set("VIRTUAL_ENV", venv.to_string_lossy());
    let (fp, _) = m.fingerprint(&["--full"]);
    assert_eq!(fp.gpus.libcuda, Some(Libcuda::InitFailed { code: 100 }));
    assert_eq!(fp.gpus.cuda_driver_api.as_deref(), Some("13.0"));
}

#[test]
fn a_measurement_that_fails_or_hangs_is_a_fact_and_is_not_cached() {
    let mut m = Machine::new();
    let venv = m.venv("venv", "3.12.4");
    m.set("VIRTUAL_ENV", venv.to_string_lossy());
    // bin/python exits 3.
    let (fp, _) = m.fingerprint(&["--full"]);
    match fp.gpus.libcuda {
        Some(Libcuda::NotMeasured { reason }) => assert!(reason.contains("status 3"), "{reason}"),
        other => panic!("expected not_measured, got {other:?}"),
    }
    let cached = std::fs::read_dir(m.path("cache/fingerprint-v1"))
        .map(|d| {
            d.flatten()
                .filter(|e| e.file_name().to_string_lossy().starts_with("full-"))
                .count()
        })
        .unwrap_or(0);
    assert_eq!(cached, 0);

    // A child that hangs (and leaves a grandchild holding its pipes) is killed.
    m.script("venv/bin/python", "/bin/sleep 600 &\n/bin/sleep 600");
    m.set("PREFLIGHT_FULL_TIMEOUT", "0.5");
    let (fp, _) = m.fingerprint(&["--full"]);
    match fp.gpus.libcuda {
        Some(Libcuda::NotMeasured { reason }) => assert!(reason.contains("timed out"), "{reason}"),
        other => panic!("expected not_measured, got {other:?}"),
    }

    // No Python at all.
    m.unset("VIRTUAL_ENV").set("PREFLIGHT_PYTHON", "none");
    let (fp, _) = m.fingerprint(&["--full"]);
    assert!(matches!(fp.gpus.libcuda, Some(Libcuda::NotMeasured { .. })));
    assert!(m.run(&["--full"]).status.success());
}
