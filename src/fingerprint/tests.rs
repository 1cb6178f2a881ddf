use super::full::normalize_bus_id;
use super::gpu::{apply_visible, parse_proc_version};
use super::python::{normalize, parse_dist_dir, version_py_field};
use super::toolkit::parse_nvcc_version;
use super::*;
use proptest::prelude::*;

#[test]
fn proc_version_both_module_formats_never_the_gcc_line() {
    let proprietary = "NVRM version: NVIDIA UNIX x86_64 Kernel Module  535.146.02  Thu Dec 19 18:56:32 UTC 2023\nGCC version:  gcc version 12.3.0 (Ubuntu 12.3.0-1ubuntu1~22.04)\n";
    let open = "NVRM version: NVIDIA UNIX Open Kernel Module for x86_64  550.54.15  Release Build  (dvs-builder@U16-A24-23-2)  Tue Mar  5 22:15:33 UTC 2024\nGCC version:  gcc version 12.2.0 (Debian 12.2.0-14)\n";
    let two_parts =
        "NVRM version: NVIDIA UNIX aarch64 Kernel Module  560.35  Fri Aug 16 21:39:15 UTC 2024\n";
    assert_eq!(
        parse_proc_version(proprietary).as_deref(),
        Some("535.146.02")
    );
    assert_eq!(parse_proc_version(open).as_deref(), Some("550.54.15"));
    assert_eq!(parse_proc_version(two_parts).as_deref(), Some("560.35"));
    let gcc_only = "GCC version:  gcc version 12.3.0 (Ubuntu 12.3.0-1ubuntu1~22.04)\n";
    assert_eq!(parse_proc_version(gcc_only), None);
}

#[test]
fn nvcc_release_lines() {
    for (text, want) in [
        ("Cuda compilation tools, release 11.8, V11.8.89", "11.8.89"),
        ("Cuda compilation tools, release 12.4, V12.4.99", "12.4.99"),
        ("Cuda compilation tools, release 12.8, V12.8.93", "12.8.93"),
        ("Cuda compilation tools, release 13.0, V13.0.88", "13.0.88"),
        ("Cuda compilation tools, release 13.5, V13.5.37", "13.5.37"),
        ("Cuda compilation tools, release 10.0", "10.0"),
    ] {
        let full = format!(
            "nvcc: NVIDIA (R) Cuda compiler driver\nBuilt on Mon_Oct_12_07:25:48_PM_PDT_2026\n{text}\n"
        );
        assert_eq!(parse_nvcc_version(&full).as_deref(), Some(want), "{text}");
    }
    assert_eq!(parse_nvcc_version("nvcc fatal : Unknown option"), None);
    assert_eq!(parse_nvcc_version("release notes, Vfoo"), None);
}

#[test]
fn dist_info_and_egg_info_names() {
    assert_eq!(
        parse_dist_dir("torch-2.9.0+cu128.dist-info"),
        Some(("torch".into(), "2.9.0+cu128".into()))
    );
    assert_eq!(
        parse_dist_dir("nvidia_cutlass_dsl-4.2.1.dist-info"),
        Some(("nvidia-cutlass-dsl".into(), "4.2.1".into()))
    );
    assert_eq!(
        parse_dist_dir("Foo.Bar-1.2-py3.11.egg-info"),
        Some(("foo-bar".into(), "1.2".into()))
    );
    assert_eq!(parse_dist_dir("torch"), None);
    assert_eq!(parse_dist_dir("-1.0.dist-info"), None);
    assert_eq!(normalize("Apache_TVM..FFI"), "apache-tvm-ffi");
}

#[test]
fn torch_version_py_fields() {
    let text = "__version__ = '2.9.0+rocm6.4'\ndebug = False\ncuda: Optional[str] = None\ncuda_extra = '1'\nhip: Optional[str] = '6.4.43482'\nxpu = \"20250101\"\n";
    assert_eq!(version_py_field(text, "cuda"), None);
    assert_eq!(version_py_field(text, "hip").as_deref(), Some("6.4.43482"));
    assert_eq!(version_py_field(text, "xpu").as_deref(), Some("20250101"));
    assert_eq!(
        version_py_field(text, "__version__").as_deref(),
        Some("2.9.0+rocm6.4")
    );
}

#[test]
fn bus_ids_as_sysfs_spells_them() {
    assert_eq!(normalize_bus_id("00000000:3B:00.0"), "0000:3b:00.0");
    assert_eq!(normalize_bus_id("0000:c1:00.0"), "0000:c1:00.0");
    assert_eq!(normalize_bus_id("garbage"), "garbage");
}

fn gpu(bus: &str, uuid: Option<&str>) -> Gpu {
    Gpu {
        pci_bus_id: bus.into(),
        device_id: "0x2330".into(),
        model: None,
        cuda_index: None,
        compute_capability: None,
        uuid: uuid.map(str::to_string),
    }
}

#[test]
fn cuda_visible_devices_by_index_and_uuid_prefix_as_cuda_reads_it() {
    let mut gpus = vec![
        gpu("0000:01:00.0", Some("GPU-5c3a1e2b-aaaa")),
        gpu("0000:41:00.0", Some("GPU-5c3b0000-bbbb")),
        gpu("0000:81:00.0", None),
    ];
    let mut numbered = |spec: Option<&str>| {
        apply_visible(&mut gpus, spec);
        gpus.iter().map(|g| g.cuda_index).collect::<Vec<_>>()
    };
    assert_eq!(numbered(None), [Some(0), Some(1), Some(2)]);
    assert_eq!(numbered(Some("2, 0")), [Some(1), None, Some(0)]);
    assert_eq!(numbered(Some("gpu-5C3B,0")), [Some(1), Some(0), None]);
    // Ambiguous or unknown UUIDs, a repeat, an index past the end, an
    // empty list: the numbering stops there.
    assert_eq!(numbered(Some("1,GPU-5c3,0")), [None, Some(0), None]);
    assert_eq!(numbered(Some("GPU-ffff,0")), [None, None, None]);
    assert_eq!(numbered(Some("0,0,1")), [Some(0), None, None]);
    assert_eq!(numbered(Some("0,3,1")), [Some(0), None, None]);
    assert_eq!(numbered(Some("")), [None, None, None]);
}

#[test]
fn only_a_settled_cuda_state_is_kept() {
    assert!(Libcuda::Ok.is_settled());
    assert!(Libcuda::Missing.is_settled());
    assert!(Libcuda::InitFailed { code: 100 }.is_settled());
    assert!(!Libcuda::InitFailed { code: 46 }.is_settled());
    assert!(!Libcuda::InitFailed { code: 999 }.is_settled());
    assert!(
        !Libcuda::NotMeasured {
            reason: "timed out".into()
        }
        .is_settled()
    );
    let measured = |python| Measured {
        libcuda: Libcuda::Ok,
        cuda_driver_api: None,
        devices: Vec::new(),
        python,
    };
    assert!(measured(None).is_settled());
    assert!(
        measured(Some(PythonMeasured::Ok {
            version: "3.12.4".into(),
            torch_cxx11_abi: None
        }))
        .is_settled()
    );
    assert!(
        !measured(Some(PythonMeasured::NotMeasured {
            reason: "exited with code 3".into()
        }))
        .is_settled()
    );
}

#[test]
fn the_canonical_form_leaves_out_how_facts_were_found() {
    let src = Sources::from_vars([("PREFLIGHT_PYTHON".to_string(), "none".to_string())].into());
    let mut fp = Fingerprint::fast(&src, &crate::fingerprint::NoStore).unwrap();
    fp.python = Some(PythonEnv {
        interpreter: "/venv/bin/python".into(),
        found_via: PythonVia::VirtualEnv,
        real_path: "/usr/bin/python3.12".into(),
        version: Some("3.12.4".into()),
        site_packages: vec!["/venv/lib/python3.12/site-packages".into()],
        packages: Default::default(),
        torch: None,
        measured: None,
        installed: Some("digest-before".into()),
    });
    let hash = fp.hash();
    let canonical = String::from_utf8(fp.canonical()).unwrap();
    assert!(canonical.contains("/usr/bin/python3.12"), "{canonical}");
    assert!(!canonical.contains("/venv/bin/python"), "{canonical}");
    assert!(!canonical.contains("found_via"), "{canonical}");
    let p = fp.python.as_mut().unwrap();
    p.interpreter = "/elsewhere/python3".into();
    p.found_via = PythonVia::Flag;
    p.measured = Some(PythonMeasured::NotMeasured {
        reason: "timed out".into(),
    });
    p.installed = Some("digest-after-pip-install".into());
    assert_eq!(fp.hash(), hash);
    fp.python.as_mut().unwrap().real_path = "/opt/python3.12".into();
    assert_ne!(fp.hash(), hash);
    // The printed form keeps them.
    let printed = serde_json::to_string(&Hashed::from(&fp)).unwrap();
    assert!(printed.contains("\"found_via\":\"flag\""), "{printed}");
}

#[test]
fn compute_capability_is_a_string_in_json() {
    let cc: ComputeCapability = serde_json::from_str("\"12.1\"").unwrap();
    assert_eq!(cc, ComputeCapability::new(12, 1));
    assert_eq!(serde_json::to_string(&cc).unwrap(), "\"12.1\"");
    assert!(serde_json::from_str::<ComputeCapability>("\"sm9\"").is_err());
}

proptest! {
    #[test]
    fn nvcc_version_round_trip(major in 9u32..20, minor in 0u32..10, patch in 0u32..300) {
        let text = format!("Cuda compilation tools, release {major}.{minor}, V{major}.{minor}.{patch}\n");
        prop_assert_eq!(parse_nvcc_version(&text), Some(format!("{major}.{minor}.{patch}")));
    }

    #[test]
    fn proc_version_round_trip(a in 300u32..999, b in 0u32..200, c in proptest::option::of(0u32..100), open in any::<bool>()) {
        let v = match c { Some(c) => format!("{a}.{b}.{c:02}"), None => format!("{a}.{b}") };
        let module = if open { "Open Kernel Module for x86_64" } else { "Kernel Module" };
        let text = format!("NVRM version: NVIDIA UNIX x86_64 {module}  {v}  Release Build  Tue Mar  5 22:15:33 UTC 2024\n");
        prop_assert_eq!(parse_proc_version(&text), Some(v));
    }

    #[test]
    fn dist_dir_round_trip(name in "[A-Za-z][A-Za-z0-9_.]{0,15}[A-Za-z0-9]", version in "[0-9]{1,3}(\\.[0-9]{1,3}){0,2}(\\+[a-z0-9]{1,6})?") {
        let dir = format!("{}-{version}.dist-info", name.replace('-', "_"));
        prop_assert_eq!(parse_dist_dir(&dir), Some((normalize(&name), version)));
    }

    #[test]
    fn bus_id_round_trip(domain in 0u32..0x10000, bus in 0u32..0x100, dev in 0u32..0x20, func in 0u32..8) {
        let sysfs = format!("{domain:04x}:{bus:02x}:{dev:02x}.{func:x}");
        let cuda = format!("{domain:08X}:{bus:02X}:{dev:02X}.{func:X}");
        prop_assert_eq!(normalize_bus_id(&cuda), sysfs);
    }
}

#[test]
fn the_typed_identity_hashes_what_the_by_name_removal_hashed() {
    // The hash before `MachineIdentity`: the whole fingerprint as JSON,
    // with how-found fields removed by name. The same bytes keep every
    // key made before it.
    let src = Sources::from_process();
    let mut fp = Fingerprint::fast(&src, &crate::fingerprint::NoStore).unwrap();
    fp.toolkits.found.push(Toolkit {
        root: "/usr/local/cuda".into(),
        found_via: FoundVia::CudaHome,
        nvcc: Some("/usr/local/cuda/bin/nvcc".into()),
        ptxas: None,
        version: Some("12.8.93".into()),
        version_from: Some(VersionFrom::Nvcc),
        problem: None,
    });
    fp.python.get_or_insert(PythonEnv {
        interpreter: "/venv/bin/python".into(),
        found_via: PythonVia::VirtualEnv,
        real_path: "/usr/bin/python3.12".into(),
        version: Some("3.12.4".into()),
        site_packages: vec!["/venv/lib/python3.12/site-packages".into()],
        packages: Default::default(),
        torch: None,
        measured: None,
        installed: Some("digest".into()),
    });
    let mut value = serde_json::to_value(&fp).unwrap();
    let python = value
        .pointer_mut("/python")
        .unwrap()
        .as_object_mut()
        .unwrap();
    for field in ["interpreter", "found_via", "measured", "installed"] {
        python.remove(field).unwrap();
    }
    for toolkit in value
        .pointer_mut("/toolkits/found")
        .unwrap()
        .as_array_mut()
        .unwrap()
    {
        let toolkit = toolkit.as_object_mut().unwrap();
        for field in ["found_via", "version_from"] {
            toolkit.remove(field).unwrap();
        }
    }
    assert_eq!(
        String::from_utf8(fp.canonical()).unwrap(),
        serde_json::to_string(&value).unwrap()
    );
}
