//! `preflight fingerprint` on machines described by fake `/sys` and `/proc`
//! roots, fake toolkits (scripts printing real `nvcc --version` texts), the
//! real nvcc / NVRTC from the NVIDIA wheels in `.venv`, and fake
//! site-packages. Every run starts from an empty environment.

mod common;
#[path = "fixtures/fingerprint/machine.rs"]
mod machine;

use kernel_preflight::fingerprint::python::distributions_digest;
use kernel_preflight::fingerprint::{ComputeCapability, Depth, Fingerprint, FoundVia, VersionFrom};
use kernel_preflight::variant::Version;
use machine::*;
use std::os::unix::fs::PermissionsExt;
use std::path::Path;

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
        table.contains("none (no GPU bound to the NVIDIA driver)"),
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
fn gpus_bound_to_the_nvidia_driver_in_bus_order_with_cuda_visible_devices_applied() {
    let mut m = Machine::new();
    m.set("PREFLIGHT_PYTHON", "none");
    m.write("sys/module/nvidia/version", "550.54.15\n");
    m.gpu("0000:c1:00.0", "0x2330", "NVIDIA H100 80GB HBM3");
    m.gpu("0000:41:00.0", "0x2330", "NVIDIA H100 80GB HBM3");
    m.pci("0000:81:00.0", "0x10de", "0x2901", "0x030000");
    m.bind_nvidia("0000:81:00.0");
    // The driver's folder for it, without an information file.
    std::fs::create_dir_all(m.path("proc/driver/nvidia/gpus/0000:81:00.0")).unwrap();
    // Not GPUs CUDA can number: one bound to vfio-pci (not to the NVIDIA
    // driver), an NVSwitch the driver binds, the GPU's audio function, a
    // NIC, an AMD display controller.
    m.pci("0000:82:00.0", "0x10de", "0x2901", "0x030000");
    m.pci("0000:a1:00.0", "0x10de", "0x22a4", "0x068000");
    m.bind_nvidia("0000:a1:00.0");
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
    // UUIDs (or unique prefixes of them) name GPUs as indices do; the
    // driver's information files tell them, though they are never printed.
    m.set(
        "CUDA_VISIBLE_DEVICES",
        format!("{},0", &gpu_uuid("0000:c1:00.0")[..10]),
    );
    let (fp, _) = m.fingerprint(&[]);
    assert_eq!(index(&fp), [Some(1), None, Some(0)]);
    assert!(fp.gpus.devices.iter().all(|g| g.uuid.is_none()));
    // A prefix that names two GPUs, a GPU without an information file, a
    // MIG instance: files cannot tell which device it is, so the numbering
    // stops there.
    m.set("CUDA_VISIBLE_DEVICES", "0,GPU-0000");
    assert_eq!(index(&m.fingerprint(&[]).0), [Some(0), None, None]);
    m.set("CUDA_VISIBLE_DEVICES", "GPU-000081");
    assert_eq!(index(&m.fingerprint(&[]).0), [None, None, None]);
    m.set("CUDA_VISIBLE_DEVICES", "2,MIG-5c3a1e2b,0");
    assert_eq!(index(&m.fingerprint(&[]).0), [None, None, Some(0)]);
    // The fast fingerprint cannot rank GPUs by speed: FASTEST_FIRST (the
    // default) is bus order there, as PCI_BUS_ID is.
    m.set("CUDA_VISIBLE_DEVICES", "1");
    m.set("CUDA_DEVICE_ORDER", "FASTEST_FIRST");
    assert_eq!(index(&m.fingerprint(&[]).0), [None, Some(0), None]);
    m.unset("CUDA_DEVICE_ORDER");

    let out = m.unset("CUDA_VISIBLE_DEVICES").run(&[]);
    let table = String::from_utf8_lossy(&out.stdout);
    assert!(
        table.contains("cuda:2  NVIDIA H100 80GB HBM3 [0x2330] at 0000:c1:00.0"),
        "{table}"
    );
    assert!(table.contains("550.54.15"), "{table}");
}

#[test]
fn a_container_given_one_gpu_of_eight_counts_and_numbers_that_one() {
    // /sys is the host's: eight H200s bound to the driver. The container
    // runtime gave this container the fourth alone: the driver's folder in
    // /proc lists it alone, and /dev holds its node alone.
    let mut m = Machine::new();
    m.set("PREFLIGHT_PYTHON", "none");
    let bus = |i: u32| format!("0000:{:02x}:00.0", 0x18 + 0x10 * i);
    for i in 0..8 {
        m.gpu_minor(&bus(i), "0x2335", "NVIDIA H200", i);
    }
    let (fp, _) = m.fingerprint(&[]);
    assert_eq!(fp.gpus.devices.len(), 8, "a host: every GPU counts");
    for i in (0..8).filter(|&i| i != 3) {
        std::fs::remove_dir_all(m.path(&format!("proc/driver/nvidia/gpus/{}", bus(i)))).unwrap();
    }
    m.write("dev/nvidiactl", "");
    m.write("dev/nvidia3", "");
    let (fp, _) = m.fingerprint(&[]);
    let seen: Vec<(&str, Option<u32>)> = fp
        .gpus
        .devices
        .iter()
        .map(|g| (g.pci_bus_id.as_str(), g.cuda_index))
        .collect();
    assert_eq!(seen, [(bus(3).as_str(), Some(0))]);
    // The node alone tells too, where /proc lists every GPU.
    for i in 0..8 {
        m.gpu_minor(&bus(i), "0x2335", "NVIDIA H200", i);
    }
    let (fp, _) = m.fingerprint(&[]);
    let buses: Vec<&str> = fp
        .gpus
        .devices
        .iter()
        .map(|g| g.pci_bus_id.as_str())
        .collect();
    assert_eq!(buses, [bus(3).as_str()]);
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
        fp.gpus.devices[0].compute_capability,
        Some(ComputeCapability::new(12, 0))
    );
    assert_eq!(fp.gpus.cuda_driver_api, Some(Version::new(12, 8)));

    m.set(
        "PREFLIGHT_GPUS",
        r#"[{"pci_bus_id":"0000:02:00.0","device_id":"0x2330","model":"NVIDIA H100"},
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
                g.compute_capability.map(|c| c.to_string()),
                g.cuda_index,
            )
        })
        .collect();
    assert_eq!(
        cc,
        [
            ("0000:01:00.0", Some("9.0".to_string()), Some(0)),
            ("0000:02:00.0", Some("8.0".to_string()), Some(1))
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
    let mut m = Machine::new();
    m.set("PREFLIGHT_FULL_TIMEOUT", "soon");
    let out = m.run(&["--full"]);
    assert_eq!(out.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&out.stderr).contains("PREFLIGHT_FULL_TIMEOUT"));
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

    // A toolkit's libraries are links to fully versioned files.
    m.write("cuda-12.8/targets/x86_64-linux/lib/libnvrtc.so.12.8.93", "");
    m.write(
        "cuda-12.8/targets/x86_64-linux/lib/libcudart.so.12.8.90",
        "",
    );
    std::os::unix::fs::symlink("targets/x86_64-linux/lib", home.join("lib64")).expect("ln");
    let lib = home.join("targets/x86_64-linux/lib");
    std::os::unix::fs::symlink("libnvrtc.so.12.8.93", lib.join("libnvrtc.so.12")).expect("ln");
    std::os::unix::fs::symlink("libnvrtc.so.12", lib.join("libnvrtc.so")).expect("ln");
    std::os::unix::fs::symlink("libcudart.so.12.8.90", lib.join("libcudart.so.12")).expect("ln");
    let tk = m.fingerprint(&[]).0.toolkits;
    let libs: Vec<_> = tk
        .nvrtc
        .iter()
        .chain(&tk.cudart)
        .map(|l| (l.path.clone(), l.version.as_str()))
        .collect();
    assert_eq!(
        libs,
        [
            (home.join("lib64/libnvrtc.so.12"), "12.8.93"),
            (home.join("lib64/libcudart.so.12"), "12.8.90"),
        ]
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
        std::fs::read_to_string(m.runs("cuda"))
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

    // The cache is private: 0700 folders, 0600 files; one entry per tool.
    let dir = m.path("cache/fingerprints-v2/tools");
    let mode = |p: &Path| std::fs::metadata(p).expect("stat").permissions().mode() & 0o777;
    assert_eq!(mode(&dir), 0o700);
    let shards: Vec<_> = std::fs::read_dir(&dir).expect("tools").flatten().collect();
    assert_eq!(shards.len(), 1);
    assert_eq!(mode(&shards[0].path()), 0o700);
    let entries: Vec<_> = std::fs::read_dir(shards[0].path())
        .expect("shard")
        .flatten()
        .collect();
    assert_eq!(entries.len(), 1);
    assert_eq!(mode(&entries[0].path()), 0o600);
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
        !m.runs("cuda-json").exists(),
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
        problem.contains("exited with code 127") && problem.contains("libnvvm.so.4"),
        "{problem}"
    );

    // An nvcc that leaves a background process holding its output open
    // still answers; the straggler is killed with its process group.
    let lingering = m.path("cuda-lingering");
    m.script(
        "cuda-lingering/bin/nvcc",
        &format!("/bin/sleep 600 &\n/bin/cat <<'EOF'\n{NVCC_12_8}\nEOF"),
    );
    m.set("CUDA_HOME", lingering.to_string_lossy());
    let t = m.fingerprint(&[]).0.toolkits.found.remove(0);
    assert_eq!(t.version.as_deref(), Some("12.8.93"));

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
    let listed: Vec<_> = fp
        .toolkits
        .found
        .iter()
        .filter(|t| t.root == wheel)
        .map(|t| (t.found_via, t.version.as_deref()))
        .collect();
    assert_eq!(listed, [(FoundVia::CudaHome, Some("13.5.37"))]);
    assert_eq!(fp.toolkits.found[0].root, wheel);
    assert_eq!(fp.toolkits.active, Some(wheel));
}

#[test]
fn cuda_12_and_13_wheel_layouts_side_by_side() {
    let mut m = Machine::new();
    let venv = m.venv("venv", "3.12.4");
    let site = venv_site(&venv);
    // nvidia-cuda-nvcc-cu12 ships ptxas but no nvcc; nvidia-cuda-nvcc 13.x
    // installs under nvidia/cu13.
    m.dist(&site, "nvidia_cuda_nvcc_cu12-12.9.86.dist-info");
    m.dist(&site, "nvidia_cuda_nvcc-13.0.88.dist-info");
    m.dist(&site, "nvidia_cuda_nvrtc_cu12-12.9.86.dist-info");
    m.write(
        "venv/lib/python3.12/site-packages/nvidia/cuda_nvcc/bin/ptxas",
        "",
    );
    m.toolkit("venv/lib/python3.12/site-packages/nvidia/cu13", NVCC_13_0);
    m.write(
        "venv/lib/python3.12/site-packages/nvidia/cuda_nvrtc/lib/libnvrtc.so.12",
        "",
    );
    m.write(
        "venv/lib/python3.12/site-packages/nvidia/cublas/lib/libcublas.so.12",
        "",
    );
    m.set("VIRTUAL_ENV", venv.to_string_lossy());
    let (fp, _) = m.fingerprint(&[]);
    let found: Vec<_> = fp
        .toolkits
        .found
        .iter()
        .map(|t| {
            (
                t.root
                    .strip_prefix(&site)
                    .map(Path::to_path_buf)
                    .unwrap_or_default(),
                t.nvcc.is_some(),
                t.version.as_deref(),
                t.version_from,
            )
        })
        .collect();
    assert_eq!(
        found,
        [
            (
                "nvidia/cu13".into(),
                true,
                Some("13.0.88"),
                Some(VersionFrom::Nvcc)
            ),
            (
                "nvidia/cuda_nvcc".into(),
                false,
                Some("12.9.86"),
                Some(VersionFrom::DistInfo)
            ),
        ]
    );
    assert_eq!(fp.toolkits.active, Some(site.join("nvidia/cu13")));
    let nvrtc: Vec<_> = fp
        .toolkits
        .nvrtc
        .iter()
        .map(|l| l.version.as_str())
        .collect();
    assert_eq!(nvrtc, ["12.9.86"]);
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
            ("mlx", None),
            ("nvidia-cutlass-dsl", Some("4.2.1")),
            ("torch", Some("2.9.0+cu128")),
            ("triton", Some("3.5.0")),
        ]
    );
    let torch = p.torch.expect("torch build");
    assert_eq!(torch.cuda.as_deref(), Some("12.8"));
    assert_eq!(torch.hip, None);
    assert_eq!(torch.cxx11_abi, Some(true));

    // The digest of the installed names comes with the fingerprint, equal
    // to a listing of its own; an install changes it, not the hash.
    let (fp, hash) = m.fingerprint(&[]);
    let before = fp.python.expect("python").installed.expect("digest");
    assert_eq!(before, distributions_digest(std::slice::from_ref(&site)));
    m.dist(&site, "untracked_package-1.0.dist-info");
    let (fp, hash_after) = m.fingerprint(&[]);
    let after = fp.python.expect("python").installed.expect("digest");
    assert_ne!(after, before);
    assert_eq!(after, distributions_digest(std::slice::from_ref(&site)));
    assert_eq!(hash_after, hash);

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
fn toolkit_python_and_host_facts_can_be_overridden() {
    let mut m = Machine::new();
    let venv = m.venv("venv", "3.12.4");
    let site = venv_site(&venv);
    m.dist(&site, "torch-2.9.0+cu128.dist-info");
    m.write(
        "venv/lib/python3.12/site-packages/torch/version.py",
        "cuda: Optional[str] = '12.8'\nhip: Optional[str] = None\n",
    );
    let elsewhere = m.path("elsewhere");
    m.dist(&elsewhere, "triton-3.1.0.dist-info");
    let home = m.toolkit("cuda-12.8", NVCC_12_8);
    let forced = m.toolkit("cuda-13.0", NVCC_13_0);
    m.set("VIRTUAL_ENV", venv.to_string_lossy());
    m.set("CUDA_HOME", home.to_string_lossy());

    m.set("PREFLIGHT_NVCC", forced.join("bin/nvcc").to_string_lossy());
    let (fp, _) = m.fingerprint(&[]);
    assert_eq!(fp.toolkits.found[0].found_via, FoundVia::Override);
    assert_eq!(fp.toolkits.active, Some(forced.clone()));
    m.set("PREFLIGHT_CUDA_VERSION", "13.1");
    let t = m.fingerprint(&[]).0.toolkits.found.remove(0);
    assert_eq!(
        (t.version.as_deref(), t.version_from),
        (Some("13.1"), Some(VersionFrom::Override))
    );
    m.unset("PREFLIGHT_CUDA_VERSION")
        .set("PREFLIGHT_NVCC", "none");
    assert_eq!(m.fingerprint(&[]).0.toolkits.active, None);
    m.set("PREFLIGHT_CUDA_VERSION", "13.1");
    assert_eq!(
        m.run(&["--json"]).status.code(),
        Some(2),
        "no active toolkit"
    );
    m.unset("PREFLIGHT_CUDA_VERSION").unset("PREFLIGHT_NVCC");

    m.set("PREFLIGHT_NVRTC_VERSION", "12.6");
    m.set("PREFLIGHT_CUDART_VERSION", "none");
    let tk = m.fingerprint(&[]).0.toolkits;
    assert_eq!(tk.nvrtc.len(), 1);
    assert_eq!(tk.nvrtc[0].version, "12.6");
    assert!(tk.cudart.is_empty());

    m.set("PREFLIGHT_PYTHON_VERSION", "3.13.1");
    m.set("PREFLIGHT_PKG_TORCH", "2.10.0");
    m.set("PREFLIGHT_PKG_NVIDIA_CUTLASS_DSL", "4.3.0");
    m.set("PREFLIGHT_TORCH_CUDA", "13.0");
    m.set("PREFLIGHT_TORCH_CXX11_ABI", "false");
    let p = m.fingerprint(&[]).0.python.expect("python");
    assert_eq!(p.version.as_deref(), Some("3.13.1"));
    assert_eq!(p.packages["torch"].as_deref(), Some("2.10.0"));
    assert_eq!(p.packages["nvidia-cutlass-dsl"].as_deref(), Some("4.3.0"));
    let torch = p.torch.expect("torch");
    assert_eq!(
        (torch.cuda.as_deref(), torch.cxx11_abi),
        (Some("13.0"), Some(false))
    );

    m.set("PREFLIGHT_SITE_PACKAGES", elsewhere.to_string_lossy());
    m.set("PREFLIGHT_PKG_TORCH", "none");
    let p = m.fingerprint(&[]).0.python.expect("python");
    assert_eq!(p.site_packages, [elsewhere]);
    assert_eq!(p.packages["triton"].as_deref(), Some("3.1.0"));
    assert_eq!(p.packages["torch"], None);
    assert_eq!(p.torch, None);

    m.set("PREFLIGHT_PYTHON", "none");
    assert!(m.fingerprint(&[]).0.python.is_none());

    m.set("PREFLIGHT_OS", "darwin");
    m.set("PREFLIGHT_ARCH", "aarch64");
    m.set("PREFLIGHT_CPU_MODEL", "Apple M4");
    m.set("PREFLIGHT_CPU_FLAGS", "asimd,bf16 sve2 not_an_isa_flag");
    m.set("PREFLIGHT_GLIBC", "none");
    let h = m.fingerprint(&[]).0.host;
    assert_eq!((h.os.as_str(), h.arch.as_str()), ("darwin", "aarch64"));
    assert_eq!(h.cpu_model.as_deref(), Some("Apple M4"));
    assert_eq!(h.cpu_flags, ["asimd", "bf16", "sve2"]);
    assert_eq!(h.glibc, None);
}
